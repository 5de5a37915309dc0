"""The target's exact outcome probabilities for the distribution check.

``TargetDistributions`` computes p(· | prompt, prefix) for many prefixes (batched forwards,
cached): the probability of one outcome, or every outcome above a floor (the chi-square bins).
``exact_probabilities`` decides whether that is cheap enough for a check and computes both.

This module does not sample, compare samples or read the statistics
(``playground.lab.distribution`` and ``playground.lab.stats`` do).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch

from playground.decoding.hf_calls import logits_to_keep_arg
from playground.decoding.sampling import SamplingParams, logits_to_probs
from playground.errors import Message
from playground.lab.budget import Progress
from playground.lab.context import LabContext

MAX_PREFIXES = 20_000  # beyond this many prefixes the exact computation is not attempted


class TargetDistributions:
    """p(· | prompt, prefix) for many prefixes, computed in batches and cached.

    Uses the engine's logits processing (``logits_to_probs``), one batched forward per group of
    same-length prefixes (no padding needed), no KV cache.
    """

    def __init__(self, ctx: LabContext, prompt_ids: Sequence[int], params: SamplingParams, batch: int = 128) -> None:
        self.model = ctx.pair.target
        self.prompt_ids = list(prompt_ids)
        self.params = params
        self.batch = batch
        self.eos = frozenset(ctx.pair.eos_token_ids)
        self._rows: dict[tuple[int, ...], torch.Tensor] = {}

    @torch.inference_mode()
    def ensure(self, prefixes: Iterable[tuple[int, ...]]) -> None:
        todo = sorted({tuple(p) for p in prefixes if tuple(p) not in self._rows}, key=len)
        by_len: dict[int, list[tuple[int, ...]]] = {}
        for pre in todo:
            by_len.setdefault(len(pre), []).append(pre)
        for _, group in sorted(by_len.items()):
            for s in range(0, len(group), self.batch):
                chunk = group[s : s + self.batch]
                ids = torch.tensor([self.prompt_ids + list(pre) for pre in chunk], device=self.model.device)
                out = self.model(
                    input_ids=ids, use_cache=False, logits_to_keep=logits_to_keep_arg(ids.shape[-1], 1, ids.device)
                )
                probs = logits_to_probs(out.logits[:, -1], self.params)  # [B, V]
                for pre, row in zip(chunk, probs):
                    self._rows[pre] = row

    def __getitem__(self, prefix: tuple[int, ...]) -> torch.Tensor:
        self.ensure([prefix])
        return self._rows[prefix]

    def prob(self, outcome: tuple[int, ...]) -> float:
        """Probability that target-only decoding emits exactly ``outcome`` first."""
        self.ensure(outcome[:j] for j in range(len(outcome)))
        p = 1.0
        for j, tok in enumerate(outcome):
            p *= float(self._rows[outcome[:j]][tok])
        return p

    def table(
        self, n_tokens: int, min_prob: float, max_prefixes: int = MAX_PREFIXES
    ) -> dict[tuple[int, ...], float] | None:
        """Every outcome (n_tokens tokens, or fewer ending in EOS) with probability >= min_prob.

        Independent of any sample (a prefix is expanded only if its own probability reaches
        min_prob), so its outcomes can serve as chi-square bins.  None if too many prefixes.
        """
        frontier: dict[tuple[int, ...], float] = {(): 1.0}
        table: dict[tuple[int, ...], float] = {}
        expanded = 0
        for depth in range(n_tokens):
            expanded += len(frontier)
            if expanded > max_prefixes:
                return None
            self.ensure(frontier)
            nxt: dict[tuple[int, ...], float] = {}
            for pre, pp in frontier.items():
                row = self._rows[pre] * pp
                for t in torch.nonzero(row >= min_prob).flatten().tolist():
                    o = pre + (int(t),)
                    if int(t) in self.eos or depth == n_tokens - 1:
                        table[o] = float(row[t])
                    else:
                        nxt[o] = float(row[t])
            frontier = nxt
        return table


def exact_probabilities(
    ctx: LabContext,
    prompt_ids: Sequence[int],
    params: SamplingParams,
    outcomes: list[tuple[int, ...]],
    *,
    exact: bool | None,
    n_tokens: int,
    n_spec: int,
    progress: Progress,
) -> tuple[dict[tuple[int, ...], float] | None, dict[tuple[int, ...], float] | None]:
    """(p(outcome) for every outcome seen, every outcome with p >= 5/n_spec) or Nones where not computed.

    ``exact=None`` computes them only where cheap: fast (tiny) models, or few prefixes."""
    n_prefixes = len({o[:j] for o in outcomes for j in range(len(o))})
    if exact is None:
        exact = ctx.fast or n_prefixes <= 32
    if not exact or n_prefixes > MAX_PREFIXES:
        return None, None
    dists = TargetDistributions(ctx, prompt_ids, params)
    if progress is not None:
        progress(0.97, Message("progress.exact"))
    dists.ensure(o[:j] for o in outcomes for j in range(len(o)))  # batched
    probs = {o: dists.prob(o) for o in outcomes}
    return probs, dists.table(n_tokens, 5.0 / max(n_spec, 1))
