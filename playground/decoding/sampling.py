"""Sampling and verification math for lossless speculative decoding.

Naming. Papers disagree on letters: Leviathan et al. (2023) call the target
``p`` and the drafter ``q``; Chen et al. (2023) call them ``q`` and ``p``.
In code we never use bare letters: ``target_probs`` is the target model's
distribution at a position (Leviathan's p) and ``draft_probs`` is the exact
distribution the drafted token was sampled from (Leviathan's q).  The UI
shows them as p (target) and q (drafter).

Every function here is pure: tensors in, tensors/floats out, randomness only
through an explicit ``torch.Generator``.  This module does *not* run models,
manage caches, or record traces (see ``playground.decoding.engine``).  The acceptance test and
the residual live in ``playground.decoding.acceptance``, point masses in
``playground.decoding.point_mass`` (both read here too).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import torch

from playground.decoding.acceptance import (  # noqa: F401  (re-exported: the arithmetic verification builds on)
    acceptance_prob,
    is_accepted,
    residual_distribution,
)
from playground.decoding.point_mass import one_hot
from playground.settings import check as check_settings


@dataclass(frozen=True)
class SamplingParams:
    """How logits become a distribution, identically for target and drafter.

    temperature == 0 means greedy: the distribution is a point mass on the
    argmax (ties broken towards the lowest id, like ``torch.argmax``).
    top_k == 0, top_p == 1.0 and min_p == 0.0 disable those filters.  Each filter only
    removes tokens, and the same filters make p and q, so the verifier's output law is the
    filtered target's, whichever filters are on.
    """

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0

    def __post_init__(self) -> None:
        # the same checks (and messages) as a run's settings: drafters and the lab build these too
        check_settings({f.name: getattr(self, f.name) for f in fields(self)})

    @classmethod
    def of(cls, settings) -> SamplingParams:
        """A run's sampling, from its ``RunSettings``."""
        return cls(settings.temperature, settings.top_k, settings.top_p, settings.min_p)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    # One predicate per filter: ``logits_to_probs`` applies a filter exactly where its predicate
    # holds, and ``plain_softmax`` asks the same predicates.
    def cuts_top_k(self, vocab: int) -> bool:
        return 0 < self.top_k < vocab  # top-k at or past the vocabulary keeps every token

    @property
    def cuts_top_p(self) -> bool:
        return self.top_p < 1.0

    @property
    def cuts_min_p(self) -> bool:
        return self.min_p > 0.0


def plain_softmax(params: SamplingParams, vocab: int) -> bool:
    """Whether ``logits_to_probs`` at ``params`` over ``vocab`` tokens is exactly the softmax
    of the logits in float32: temperature 1 (x / 1 is x) and every filter below off."""
    return params.temperature == 1.0 and not (params.cuts_top_k(vocab) or params.cuts_top_p or params.cuts_min_p)


def logits_to_probs(logits: torch.Tensor, params: SamplingParams, scratch: bool = False) -> torch.Tensor:
    """Apply temperature, top-k, top-p and min-p, in that order, and return probabilities.

    min-p keeps the tokens whose probability (after temperature, top-k and top-p) is at
    least ``min_p`` times the most likely one's, as transformers' ``MinPLogitsWarper``, llama.cpp
    and vLLM do; the most likely token always stays.

    logits: [..., V] (any float dtype) -> probs: [..., V] float32, rows sum to 1.
    Greedy (temperature 0) returns a one-hot row at the argmax; we never divide
    by a zero temperature.  scratch=True: the caller no longer needs ``logits`` (float32), so
    they are divided in place (a fresh [30, V] quotient costs several times the in-place division).
    """
    own = scratch or logits.dtype != torch.float32  # .float() makes a copy, which may be divided in place
    logits = logits.float()
    if params.greedy:
        return one_hot(logits.argmax(dim=-1), logits.shape[-1])
    if params.temperature != 1.0:  # x / 1 is x: no pass over the row (a copy, when not our own) at T = 1
        logits = logits.div_(params.temperature) if own else logits / params.temperature
    vocab = logits.shape[-1]
    if params.cuts_top_k(vocab):
        kth = torch.topk(logits, params.top_k, dim=-1).values[..., -1:]  # [..., 1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if params.cuts_top_p:
        sorted_logits, sorted_idx = torch.sort(logits, dim=-1, descending=True)
        sorted_probs = torch.softmax(sorted_logits, dim=-1)
        # Mass strictly before each token; keep tokens until that mass reaches top_p.
        mass_before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs
        remove_sorted = mass_before >= params.top_p
        remove_sorted[..., 0] = False  # always keep the most likely token
        remove = torch.zeros_like(remove_sorted).scatter(-1, sorted_idx, remove_sorted)
        logits = logits.masked_fill(remove, float("-inf"))
    if params.cuts_min_p:
        # p >= min_p * p_max  <=>  logit >= max logit + log(min_p): no softmax needed to filter
        top = logits.max(dim=-1, keepdim=True).values  # [..., 1]
        logits = logits.masked_fill(logits < top + math.log(params.min_p), float("-inf"))
    return torch.softmax(logits, dim=-1)


def sample(probs: torch.Tensor, generator: torch.Generator | None) -> int:
    """Draw one token id from a 1-D distribution [V].

    A point mass returns its token without consuming randomness, so greedy
    runs do not depend on the generator at all.  Otherwise ``draw_index``.
    """
    if float(probs.amax()) >= 1.0:  # amax() without indices: 20x faster than max(dim) over 262k here
        return int(probs.argmax())
    return draw_index(probs, generator)


def draw_index(weights: torch.Tensor, generator: torch.Generator | None) -> int:
    """Draw index i with probability weights[i] / sum(weights), for 1-D non-negative weights [V]:
    ``index_at`` one uniform from ``generator``.

    Exactly one uniform per draw, and some 50x faster than ``torch.multinomial`` over a 262k
    row on a CPU (about 0.1 vs 5.6 ms): with a class sharing the target's passes, the
    multinomial was most of each run's own work per token.
    """
    return index_at(weights, float(torch.rand((), generator=generator, dtype=torch.float64)))


CDF_BLOCK = 1024  # index_at's block: one sum per block, then a cumulative sum inside one block


def index_at(weights: torch.Tensor, u: float) -> int:
    """Inverse transform sampling: the first i whose cumulative weight exceeds u * total, u in [0, 1).

    Index i is returned exactly for u in [cdf[i-1], cdf[i]) / total, an interval as wide as
    its weight, so a uniform u draws i with probability weights[i] / total, and a zero
    weight (an empty interval) is never drawn.  The cumulative sum is found in two levels
    (the block holding u * total among per-block sums, then the index inside that block),
    in float64 so that u * total stays inside the last bin over a 262k vocabulary: one
    pass over the row instead of a full cumulative sum, 5x faster on a 262k row.
    """
    w = weights.detach().to("cpu").reshape(-1)  # [V]
    vocab = w.shape[0]
    pad = -vocab % CDF_BLOCK
    blocks = (torch.nn.functional.pad(w, (0, pad)) if pad else w).view(-1, CDF_BLOCK)  # [V / B, B]
    block_sums = blocks.sum(dim=1, dtype=torch.float64)  # [V / B]
    block_cdf = block_sums.cumsum(0)
    total = float(block_cdf[-1])
    if not total > 0.0:
        raise ValueError("cannot sample from a distribution with no mass")
    x = torch.tensor([u * total], dtype=torch.float64)
    j = int(torch.searchsorted(block_cdf, x, right=True))
    if j >= block_cdf.shape[0]:  # u * total rounded up to the total: the last block with weight
        j = int(torch.nonzero(block_sums).max())
    base = float(block_cdf[j - 1]) if j else 0.0
    inside = blocks[j].cumsum(0, dtype=torch.float64) + base  # [B] the cumulative sum within block j
    i = int(torch.searchsorted(inside, x, right=True))
    if i >= CDF_BLOCK:  # x rounded past the block's end: its last index with weight
        i = int(torch.nonzero(blocks[j]).max())
    return j * CDF_BLOCK + i


def draw_draft_token(
    logits: torch.Tensor, params: SamplingParams, argmax: bool, generator: torch.Generator | None
) -> tuple[int, torch.Tensor | None]:
    """One draft token from a drafter's logits [N]: (index into the N rows, its row).

    Sampled drafts (T > 0, ``argmax`` False): the row is q, exactly the distribution
    the index was drawn from.  Deterministic drafts (T = 0, or ``argmax`` True): the
    index is the argmax, so q is a point mass; the row is then the drafter's softmax
    (when sampling) — NOT q, only what the "softmax-q" lesson verifies against — or
    None at T = 0.
    """
    if params.greedy or argmax:
        return int(torch.argmax(logits)), None if params.greedy else logits_to_probs(logits, params)
    probs = logits_to_probs(logits, params)
    return sample(probs, generator), probs


def expected_tokens_per_step(alpha: float, gamma: int) -> float:
    """E = (1 - α^(γ+1)) / (1 - α): mean tokens emitted per step with i.i.d. acceptance α."""
    if gamma <= 0:
        return 1.0
    if alpha >= 1.0:
        return float(gamma + 1)
    return (1.0 - alpha ** (gamma + 1)) / (1.0 - alpha)


def predicted_speedup(alpha: float, gamma: int, c: float, v: float) -> float:
    """S = E / (γ·c + v_γ): tokens per unit of one single-token target step."""
    denom = gamma * c + v
    if denom <= 0:
        return float("nan")
    return expected_tokens_per_step(alpha, gamma) / denom


def accepted_length_pmf(alpha: float, gamma: int) -> list[float]:
    """P(n drafts accepted), n = 0..γ, under i.i.d. acceptance α (truncated geometric)."""
    pmf = [(alpha**n) * (1.0 - alpha) for n in range(gamma)]
    pmf.append(alpha**gamma)
    return pmf
