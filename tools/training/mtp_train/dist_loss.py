"""Loss terms on the target's whole distribution, and the ``--loss`` mix that selects them.

At temperature T > 0 a draft is accepted with probability sum_x min(p(x), q(x)) (DESIGN §2),
so a drafter is judged on its whole distribution q, not on its argmax.  The features cache
the target's top-k probabilities p at each training temperature (``features``); the mass
outside them, 1 - sum(top-k), is one "rest" bucket.  Per position, with ``inc`` the top-k
entries the drafter can draft (its candidates) and q the drafter's softmax at the same
temperature:

* ``kl-topk``: forward KL(p || q) over the buckets {each drafted top-k token} ∪ {rest}, the
  rest holding the target's mass outside those tokens (its top-k tokens the drafter cannot
  draft included) and the drafter's mass outside them.  Exact KL of the bucketed laws.
* ``tv``: 1 - sum_{x in inc} min(p(x), q(x)): an upper bound on 1 - acceptance, exact when
  the drafter puts no mass on the target's rest (the rest's overlap is not known from the
  top-k alone; at most min(p_rest, q_rest)).
* ``kl`` and ``ce`` are the older terms (``loss``): KL on the top-k renormalised over the
  candidates, and cross-entropy on the target's argmax.

This module computes per-position values; it does not pick positions, weight draft steps or
step an optimiser (``loss``, ``train``).
"""

from __future__ import annotations

import torch

TERMS = ("kl", "ce", "kl-topk", "tv")
DEFAULT_LOSS = "kl,ce"  # what trained the shipped head
Q_REST_FLOOR = 1e-6  # the drafter's rest mass is clamped here before its log


def parse_loss(spec: str) -> dict[str, float]:
    """``"kl-topk:1,tv:0.5,ce"`` -> {"kl-topk": 1.0, "tv": 0.5, "ce": 1.0} (weight 1 when omitted)."""
    out: dict[str, float] = {}
    for part in spec.split(","):
        name, _, w = part.strip().partition(":")
        if name not in TERMS:
            raise ValueError(f"unknown loss term {name!r} (choose from {', '.join(TERMS)})")
        if name in out:
            raise ValueError(f"loss term {name!r} given twice")
        try:
            weight = float(w) if w else 1.0
        except ValueError:
            raise ValueError(f"loss term {name!r}: weight {w!r} is not a number") from None
        if not weight >= 0.0:
            raise ValueError(f"loss term {name!r}: weight must be >= 0, got {w}")
        out[name] = weight
    return out


def kl_topk_rest(target_probs: torch.Tensor, draft_logq: torch.Tensor, inc: torch.Tensor) -> torch.Tensor:
    """Forward KL(target || draft) over the drafted top-k tokens plus one rest bucket.

    target_probs: [..., k] the target's top-k probabilities (of its full distribution, at the
    sampling temperature); draft_logq: [..., k] the drafter's log-probabilities of those
    tokens (anything where ``inc`` is False); inc: [..., k] bool, the token is draftable.
    Returns [...]: sum_inc p log(p / q) + p_rest log(p_rest / q_rest)."""
    p = target_probs * inc
    q = torch.exp(draft_logq).masked_fill(~inc, 0.0)
    p_rest = (1.0 - p.sum(-1)).clamp_min(0.0)
    q_rest = (1.0 - q.sum(-1)).clamp_min(Q_REST_FLOOR)
    lq = draft_logq.masked_fill(~inc, 0.0)
    top = (torch.xlogy(p, p) - p * lq).sum(-1)
    return top + torch.xlogy(p_rest, p_rest) - p_rest * torch.log(q_rest)


def tv_topk(target_probs: torch.Tensor, draft_probs: torch.Tensor, inc: torch.Tensor) -> torch.Tensor:
    """1 - sum over the drafted top-k tokens of min(p, q).

    target_probs, draft_probs: [..., k]; inc: [..., k] bool.  Returns [...]."""
    return 1.0 - (torch.minimum(target_probs, draft_probs) * inc).sum(-1)
