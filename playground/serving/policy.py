"""How far a run may draft when other runs share its target passes.

A target pass over a few tokens is memory-bound on a CPU: reading the weights costs about
the same for 1 row of 1 token as for 8 rows of 2.  But each run also drafts on its own
(the drafter's steps are not shared), and once several runs share each pass, the passes
carry many rows whatever the runs draft: a rejected draft then costs real time, and so
does every draft step.  Alone, a run drafts its full γ; as more runs share the passes, a
budget of ``knee_tokens`` row-tokens per pass is split between them:

    draft cap per run = max(0, knee_tokens // runs - 1)

(each run's row is its newest token plus its drafts).  With a cap of 0 a run decodes
plainly (one token per pass, no drafting): the speculative loop with no drafts *is* the
autoregressive step.  At temperature 0 (float32) the output never changes, only the
speed; at T > 0 every output is still a sample of the target's distribution, but a
seed's tokens depend on the draft lengths, which each step's record keeps
(``StepRecord.gamma``).

The budget is measured, not assumed: ``python -m tools batch-sweep`` measures the
class throughput of speculative and plain decoding by the number of runs sharing the
passes (docs/concepts/serving.md; the data: docs/measurements/index.md).

This module runs nothing; ``ReplayedCaps`` holds one re-run's step counter.
"""

from __future__ import annotations

from contextlib import nullcontext

# Row-tokens of drafts a shared pass may carry.  Measured by `python -m tools batch-sweep`
# (default preset, bf16, T = 0.7, 2 vCPUs, playground/data/batch_sweep.json): uncapped speculation
# won at 2 runs (36 vs 30 tokens/s), plain decoding from 4 (48 vs 41; 158 vs 56 at 32).
# 6 gives a run alone its full γ, 2 runs 2 drafts each, 3 runs 1, and 4 or more plain decoding.
# On a 2-vCPU AVX2 CPU no other budget did better (mean of 3 classes each, tokens/s): 2 runs
# 23.1 / 24.3 / 26.4 / 21.8 / 23.3 for budgets 2 / 4 / 6 / 10 / 18; 4 runs 38.7 / 37.1 / 37.5
# for 6 / 8 / 12; 8 runs 57.8 / 42.5 / 34.9 for 6 / 16 / 24.  Nor on a 2-vCPU Xeon with AVX-512
# BF16 and AMX, where a pass of 8 rows of 3 tokens costs only 1.13 of one of 8 rows of 1 (each
# run drafts on its own, and that is not shared): medians of 2-3 interleaved classes, tokens/s,
# 2 runs 27.8 / 31.9 / 30.1 / 21.4 for budgets 4 / 6 / 10 / 18; 4 runs 42.8 / 44.2 / 42.4 / 32.5
# for 6 / 8 / 12 / 20; 8 runs 67.7 / 50.9 / 42.7 / 40.1 for 6 / 16 / 24 / 32.
KNEE_TOKENS = 6
NO_CAP = 1 << 30  # larger than any γ


def draft_cap(runs: int, knee_tokens: int = KNEE_TOKENS) -> int:
    """The most drafts a run may propose per step while ``runs`` runs share each pass."""
    if runs <= 1:
        return NO_CAP  # alone: the run's own γ decides
    return max(0, knee_tokens // runs - 1)


class ReplayedCaps:
    """Stands in for a scheduler to re-run a request alone with the draft lengths it had
    under load (its records' ``gamma``, step by step): at any temperature, the same seed then
    gives the same tokens (``python -m tools loadtest`` checks every answer this way)."""

    def __init__(self, caps: list[int]) -> None:
        self._caps = list(caps)
        self._step = 0

    def join(self, tokens: int = 0):
        return nullcontext(self)

    def shares_passes(self) -> bool:
        return False

    def draft_cap(self) -> int:
        cap = self._caps[self._step] if self._step < len(self._caps) else 0
        self._step += 1
        return cap
