"""The acceptance test and the residual: the arithmetic every verification rule is built from.

Accept a draft x with probability min(1, p(x) / q(x)); after a rejection draw from
norm(max(0, p − q)) (Leviathan et al. 2023, Alg. 1).  Block verification reuses both with a
weight (``playground.decoding.block_verify``).  Functions of their own, importing only torch,
so the rules (``playground.rules``) can be read by the validator and the settings without the
sampling code.  This module does not draw: randomness comes from the caller.
"""

from __future__ import annotations

import torch


def acceptance_prob(target_prob: float, draft_prob: float) -> float:
    """min(1, p(x) / q(x)) for a drafted token x (Leviathan et al., Alg. 1).

    draft_prob is q(x) of the token that *was* drafted, so it is > 0 for any
    honest drafter; q(x) == 0 would mean the draft was impossible under q and
    we return 0 (reject) rather than divide by zero.
    """
    if draft_prob <= 0.0:
        return 0.0
    return min(1.0, target_prob / draft_prob)


def is_accepted(u: float, accept_prob: float) -> bool:
    """Accept iff u < min(1, p/q), with u ~ U[0, 1): P(accept) == accept_prob exactly."""
    return u < accept_prob


def residual_distribution(target_probs: torch.Tensor, draft_probs: torch.Tensor, weight: float = 1.0) -> torch.Tensor:
    """norm(max(0, p - q)): where the output is resampled after a rejection.

    target_probs, draft_probs: [V] -> [V].  If the residual's mass underflows
    (p == q up to rounding, which only happens when rejection had ~zero
    probability), fall back to the target distribution: no NaN, still lossless.
    Rows come back as float32, float64 ones as float64 (the exact-enumeration tests).
    ``weight`` w scales p, norm(max(0, w·p - q)): block verification's residual
    (``playground.decoding.block_verify``); w = 1 is token verification's.
    """
    p = target_probs if target_probs.dtype == torch.float64 else target_probs.float()
    q = draft_probs if draft_probs.dtype == torch.float64 else draft_probs.float()
    residual = torch.clamp(weight * p - q, min=0.0)  # 1.0 * p is p exactly
    mass = float(residual.sum())
    if mass <= 1e-12:
        return p / p.sum()
    return residual / mass
