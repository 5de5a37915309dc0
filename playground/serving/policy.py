"""How far a run may draft when other runs share its target passes.

A target pass over a few tokens is memory-bound on a CPU: reading the weights costs the
same for 1 row of 1 token as for 8 rows of 4.  Past a knee of about ``knee_tokens``
row-tokens per pass it turns compute-bound and every extra token costs real time, and a
rejected draft is then pure waste.  Alone, a run drafts its full γ (the pass is far
below the knee); as more runs share the passes, the knee's budget is split between them:

    draft cap per run = max(0, knee_tokens // runs - 1)

(each run's row is its newest token plus its drafts).  With a cap of 0 a run decodes
plainly (one token per pass, no drafting): the speculative loop with no drafts *is* the
autoregressive step.  At temperature 0 the output never changes, only the speed; at
T > 0 every output is still a sample of the target's distribution, but a seed's tokens
depend on the draft lengths, which each step's record keeps (``StepRecord.gamma``).

The knee is measured, not assumed: ``python -m playground batch-sweep`` measures the
pass cost by rows × tokens and the throughput of speculative and plain decoding by batch
size on the machine it runs on (README, "A class at once").

This module runs nothing; ``ReplayedCaps`` holds one re-run's step counter.
"""

from __future__ import annotations

from contextlib import nullcontext

# Row-tokens one Gemma 3 270M pass carries before its cost grows with them (bf16, 2 vCPUs):
# measured by `python -m playground batch-sweep` (README, "A class at once").
KNEE_TOKENS = 36


def draft_cap(runs: int, knee_tokens: int = KNEE_TOKENS) -> int:
    """The most drafts a run may propose per step while ``runs`` runs share each pass."""
    if runs <= 1:
        return knee_tokens  # alone: the run's own γ decides
    return max(0, knee_tokens // runs - 1)


class ReplayedCaps:
    """Stands in for a scheduler to re-run a request alone with the draft lengths it had
    under load (its records' ``gamma``, step by step): at any temperature, the same seed then
    gives the same tokens (``python -m playground loadtest`` checks every answer this way)."""

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
