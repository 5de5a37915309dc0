"""Stop drafting early when the drafter is unsure: a dynamic draft length.

A chain of γ drafts costs γ drafter steps, yet the target keeps draft j only if it kept
drafts 1..j-1 as well, so the drafter's late steps are mostly paid for nothing when its
early ones were shaky.  Like transformers' ``assistant_confidence_threshold`` and
EAGLE-2's use of the draft's own probabilities, the drafter watches its *path
confidence* — the product of how sure it was at each position it drafted — and stops
once that falls below a threshold τ:

    keep drafting after x_1..x_j  while  conf_1 · … · conf_j ≥ τ

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

conf_j is the largest probability of the row draft j came from: of q when sampled, of
the drafter's softmax when it drafts the argmax (then the argmax's own probability).  Not
q(x_j) of the drawn token: when sampling, a draw that lands on a less likely token is
kept with probability min(1, p(x)/q(x)), about as often as a likely one when the head is
calibrated, so q(x_j) measures the draw's luck and would cut chains short at random.  The
row's maximum says how sure the head is at that position (at temperature 0 it is the same
number).  On twelve training prompts at T = 1 (64 tokens, the default preset, γ 8, τ 0.15,
two draws of twelve) it carries 1.94 and 1.97 tokens per target call against 1.75 and
1.81 with q(x_j) (docs/concepts/draft-stop.md: the held-out bench).  This module does not
draft or verify (``drafters.mtp`` uses it) and does not check settings
(``playground.validate.draft_stop``).
"""

from __future__ import annotations

from typing import Any

import torch

from playground.decoding.confidence import row_confidence


def draft_confidence(logits: torch.Tensor, probs: torch.Tensor | None) -> float:
    """How sure the drafter is at one position: the largest probability of ``probs`` (the row
    its draft was drawn from, [C]; q when sampled), or of the softmax of ``logits`` [C] for a
    greedy argmax, which is then the argmax's own probability."""
    if probs is not None:
        return float(probs.max())
    return float(row_confidence(logits))


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
