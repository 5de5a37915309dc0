"""Stop drafting early when the drafter is unsure: a dynamic draft length.

A chain of γ drafts costs γ drafter steps, yet the target keeps draft j only if it kept
drafts 1..j-1 as well, so the drafter's late steps are mostly paid for nothing when its
early ones were shaky.  Like transformers' ``assistant_confidence_threshold`` and
EAGLE-2's use of the draft's own probabilities, the drafter watches its *path
confidence* — the product of the probability it gave each token it drafted — and stops
once that falls below a threshold τ:

    keep drafting after x_1..x_j  while  conf(x_1) · … · conf(x_j) ≥ τ

Why it is still lossless.  Whether draft j+1 is drawn depends only on drafts 1..j,
which are already drawn; draft j+1 itself is never drawn and then thrown away.  So at
every position the output comes either from a draft judged against the target (the
usual rule: the target's distribution) or, past the last draft, from the target's own
bonus distribution — the target's law either way.  (Drawing x_{j+1} and dropping it
when its own q is small would bias the output: the kept drafts would no longer follow
the q the verifier is told about.)

Why cumulative.  The target's expected gain from draft j+1 is P(drafts 1..j+1 are all
kept), which the path confidence estimates, while its cost is one more drafter step
(c of a target pass); a threshold near c / (the head's acceptance) balances the two.
τ = 0 turns the rule off (always γ drafts).

conf(x) is the probability of x under the distribution the drafter drew it from (q), or
under its softmax when it drafts the argmax (q is then a point mass, useless as a
confidence).  This module does not draft or verify (``drafters.mtp`` uses it) and does
not check settings (``playground.validate.draft_stop``).
"""

from __future__ import annotations

from typing import Any

import torch


def draft_confidence(logits: torch.Tensor, index: int, probs: torch.Tensor | None) -> float:
    """The drafter's probability of the token it drafted (column ``index`` of ``logits`` [C]).

    probs: the row the token was drawn from ([C]; q when sampled) or None for a greedy
    argmax, whose confidence is then the softmax of the logits."""
    if probs is not None:
        return float(probs[index])
    return float(torch.softmax(logits.float(), dim=-1)[index])


class ChainStop:
    """The running path confidence of one chain and the decision to stop it."""

    def __init__(self, threshold: float) -> None:
        self.threshold = float(threshold)
        self.path = 1.0
        self.stopped = False

    @property
    def active(self) -> bool:
        """False when the rule is off (τ = 0): no confidence needs computing."""
        return self.threshold > 0.0

    def after(self, confidence: float) -> bool:
        """Fold in the newest draft's confidence; True: draw no further draft.

        Only asked while another draft could follow, so ``stopped`` means the chain is shorter than γ."""
        self.path *= max(0.0, min(1.0, confidence))  # a NaN confidence counts as 1 (min returns 1.0)
        self.stopped = self.active and self.path < self.threshold
        return self.stopped

    def info(self) -> dict[str, Any]:
        """What the step view shows (nothing when the rule is off)."""
        if not self.active:
            return {}
        return {"draft_stop": self.threshold, "path_confidence": round(self.path, 4), "stopped_early": self.stopped}
