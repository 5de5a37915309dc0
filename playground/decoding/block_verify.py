"""Block verification (Sun et al., "Block Verification Accelerates Speculative Decoding", ICLR 2025).

Token verification (``playground.rules``; Leviathan et al. 2023) judges a chain of
drafts one token at a time, left to right, and stops at the first rejection.  Block
verification judges the block *jointly*: every draft gets its own uniform η_i, and the
kept prefix is the LONGEST one whose last draft passed, so a draft can be kept although
its own η_i failed, because a later draft passed.  It is still lossless, and in
expectation it keeps at least as many drafts as token verification (the paper's
theorem), from the same verify pass and the same drafts.

Rows as in ``engine.verify``: q_i = draft_probs[i], the law d_{i+1} was drawn from
(i = 0..γ-1), and p_i = target_probs[i] (i = 0..γ).

  weight         w_0 = 1,  w_i = min(1, w_{i-1} · p_{i-1}(d_i) / q_{i-1}(d_i))
  residual mass  r_i = Σ_x max(0, w_i·p_i(x) − q_i(x))                       (i < γ)
  accept prob    h_i = r_i / (r_i + 1 − w_i)  (0 when that is 0/0),  h_γ = w_γ
  keep           τ = the largest i in 1..γ with η_i < h_i, else 0   (η_i ~ U[0, 1))
  one more token from p_γ if τ = γ (the bonus), else from norm(max(0, w_τ·p_τ − q_τ)).

The weight is the prefix's likelihood ratio p/q, capped at 1 after every token.  Token
verification keeps d_1..d_i with probability Π min(1, p/q), never more than w_i: a draft
the target likes more than the drafter did (p/q > 1) lends its surplus to the next one.
With w_0 = 1 the correction at τ = 0 is the usual residual norm(max(0, p − q)).  With
point masses (greedy rows) every h is 0 or 1 and the result is token verification's.

This module does NOT draw random numbers (η comes in), run models, verify trees (a tree's
siblings have their own multi-draft rule, ``playground.decoding.tree_step``) or build records:
the "block" rule (``playground.rules``) turns these pieces into a ``Verdict``.  Unlike token verification it
needs every η_1..η_γ and every residual mass before it can decide (all from the one
verify pass, which computes p_0..p_γ anyway).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from playground.decoding.acceptance import is_accepted, residual_distribution
from playground.decoding.point_mass import PointRows


@dataclass(frozen=True)
class BlockTerms:
    """What block verification compares η with, for a block of k drafts."""

    weights: tuple[float, ...]  # [k+1] w_0 = 1, w_1..w_k
    accept_probs: tuple[float, ...]  # [k] h_1..h_k (h_k = w_k)


def prefix_weights(drafts: list[int], draft_probs, target_probs) -> list[float]:
    """w_0..w_k [k+1]: w_i = min(1, w_{i-1} · p_{i-1}(d_i) / q_{i-1}(d_i)).

    A draft with q(d) = 0 (impossible under the law it claims) gets weight 0, as
    ``acceptance.acceptance_prob`` rejects it."""
    weights = [1.0]
    for i, tok in enumerate(drafts):
        p, q = float(target_probs[i, tok]), float(draft_probs[i, tok])
        weights.append(min(1.0, weights[-1] * p / q) if q > 0.0 else 0.0)
    return weights


def residual_mass(target_probs, draft_probs, i: int, weight: float) -> float:
    """r = Σ_x max(0, w·p_i(x) − q_i(x)) for row i (rows [*, V], tensors or ``PointRows``).

    Point masses need no pass over the vocabulary: if p_i is a point mass on a, only x = a
    can be positive; if q_i is one on b, every x ≠ b gives w·p(x) and b gives 0 (w·p ≤ 1)."""
    if isinstance(target_probs, PointRows):
        return max(0.0, weight - float(draft_probs[i, target_probs.ids[i]]))
    if isinstance(draft_probs, PointRows):
        return max(0.0, weight * (1.0 - float(target_probs[i, draft_probs.ids[i]])))
    p, q = _exact(target_probs[i]), _exact(draft_probs[i])  # [V]
    return float(torch.clamp(weight * p - q, min=0.0).sum())


def block_terms(drafts: list[int], draft_probs, target_probs) -> BlockTerms:
    """The weights w_0..w_k and the acceptance probabilities h_1..h_k of a block of k drafts."""
    k = len(drafts)
    weights = prefix_weights(drafts, draft_probs, target_probs)
    accept: list[float] = []
    for i in range(1, k):
        r = residual_mass(target_probs, draft_probs, i, weights[i])
        denom = r + 1.0 - weights[i]
        accept.append(r / denom if denom > 0.0 else 0.0)
    if k:
        accept.append(weights[k])
    return BlockTerms(tuple(weights), tuple(accept))


def kept_length(etas: list[float], accept_probs: tuple[float, ...]) -> int:
    """τ: the largest i (1-based) with η_i < h_i, else 0.  Every draft is looked at: a
    failed η_i does not end the scan, a later pass keeps the drafts before it too."""
    for i in range(len(etas), 0, -1):
        if is_accepted(etas[i - 1], accept_probs[i - 1]):
            return i
    return 0


def block_residual(target_probs: torch.Tensor, draft_probs: torch.Tensor, weight: float) -> torch.Tensor:
    """norm(max(0, w·p − q)) [V] for one row pair [V]: where the correction is drawn after τ < γ.

    ``acceptance.residual_distribution`` with the weight (its fallback to p when the mass
    underflows, its dtypes); a function of its own so the tests can swap in a mutant."""
    return residual_distribution(target_probs, draft_probs, weight)


def block_correction(target_probs, draft_probs, tau: int, weights: tuple[float, ...]):
    """(row, kind, distribution [V]) of the token added after keeping τ of k drafts:
    the bonus p_k when every draft was kept (a plain target token when k = 0), else the
    weighted residual at row τ."""
    k = len(weights) - 1
    if tau == k:
        return k, ("bonus" if k else "target"), target_probs[k]
    return tau, "resample", block_residual(target_probs[tau], draft_probs[tau], weights[tau])


def _exact(row: torch.Tensor) -> torch.Tensor:
    """float32 for the model's rows, float64 kept as is."""
    return row if row.dtype == torch.float64 else row.float()
