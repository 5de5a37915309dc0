"""The verification rules: one object per rule, in one table read by the engine, the validator,
the app and the lab.

A rule decides steps 3-4 of a speculative step for a chain of drafts: what it does to accept a
draft (``accept``), what it emits after a rejection (``correction``) and after all drafts (the
bonus, ``bonus_row``), and which q it verifies against (``verified_q``).  ``Rule`` itself is
token verification (Leviathan et al. 2023); each other rule changes one of those parts, except
block verification, which judges the block jointly (``playground.decoding.block_verify``).
Each rule also says what it is: lossless or not, its category, whether the Playground offers
it, whether it judges chains only (the tree verifier, ``playground.decoding.tree``, implements
token verification alone), whether its acceptance counts every draft of a block, whether its
lesson needs argmax drafts.  "lossless" and "block" are correct; the others exist so the lab
(and the tests, as mutants) can show what real implementations got wrong.

This module holds no words for the page (``visual.i18n`` names each rule by its key), draws no
randomness of its own (the loop hands in ``uniform`` and ``draw``) and does not check a user's
choice (``playground.validate``).  It imports only the arithmetic (``decoding.acceptance``,
``decoding.block_verify``), not the sampling code, which reads the settings that read this table.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from playground.decoding import block_verify as block
from playground.decoding.acceptance import acceptance_prob, is_accepted, residual_distribution
from playground.decoding.verdict import Verdict

TYPICAL_EPSILON = 0.09  # Medusa's posterior_threshold
TYPICAL_DELTA = 0.3  # Medusa's posterior_alpha

Uniform = Callable[[], float]
Draw = Callable[[torch.Tensor], int]


@dataclass(frozen=True)
class Judged:
    """One draft's verdict under a token rule."""

    ok: bool
    u: float | None  # the uniform it was compared with (None: the rule draws none)
    drawn: int | None = None  # a target sample the rule drew to judge it: emitted after a rejection


@dataclass(frozen=True)
class Rule:
    """Token verification: d_i survives iff u_i < min(1, p_i(d_i) / q_i(d_i)), left to right,
    stopping at the first rejection; then one token from norm(max(0, p_i − q_i)), or the bonus
    from p_{k+1} after k acceptances.  Subclasses change one part each."""

    key: str  # the engine's name (RunSettings.rule, traces, links, the catalogue's keys)
    category: str  # "correct" | "wrong" | "wasteful" | "lossy"
    lossless: bool  # the output law is the target's
    in_app: bool = False  # the Playground and /speculate offer it (the others: the lab only)
    chains_only: bool = True  # judges a chain of drafts: a tree is verified by token verification only
    judges_jointly: bool = False  # judges every draft of a block: its acceptance counts them all
    argmax_drafts: bool = False  # its lesson needs argmax drafts (q a point mass)

    def verify(
        self,
        drafts: list[int],
        draft_probs,  # [k, V] (tensor or PointRows) exactly what each draft was drawn from
        target_probs,  # [k+1, V] target distributions after the same processing
        eos: frozenset[int],
        uniform: Uniform,
        draw: Draw,
    ) -> Verdict:
        """Steps 3-4: ``accept`` left to right up to the first rejection (an accepted EOS ends
        the step), then ``correction`` at the rejected row or the bonus at ``bonus_row``."""
        k = len(drafts)
        accepted: list[bool] = []
        us: list[float | None] = []
        judged: Judged | None = None
        for i, tok in enumerate(drafts):
            judged = self.accept(target_probs, draft_probs, i, tok, uniform, draw)
            accepted.append(judged.ok)
            us.append(judged.u)
            if not judged.ok:
                dist, token = self.correction(target_probs, draft_probs, i, judged, draw)
                return Verdict(
                    n_accepted=i, accepted=tuple(accepted), us=tuple(us), rejected_at=i, eos_accepted=False,
                    correction_kind="resample", correction_row=i, correction_dist=dist, correction_token=int(token),
                )  # fmt: skip
            if tok in eos:
                return Verdict.eos_kept(len(accepted), tuple(accepted), tuple(us))
        row = self.bonus_row(k)
        dist = target_probs[row]  # [V]
        return Verdict(
            n_accepted=k, accepted=tuple(accepted), us=tuple(us), rejected_at=None, eos_accepted=False,
            correction_kind="bonus" if k else "target", correction_row=row, correction_dist=dist,
            correction_token=int(draw(dist)),
        )  # fmt: skip

    def accept(self, target_probs, draft_probs, i: int, tok: int, uniform: Uniform, draw: Draw) -> Judged:
        """Draft ``tok`` at row i: accepted iff u < min(1, p(tok) / q(tok))."""
        p, q = float(target_probs[i, tok]), float(draft_probs[i, tok])
        u = uniform()
        return Judged(is_accepted(u, acceptance_prob(p, q)), u)

    def correction(self, target_probs, draft_probs, row: int, judged: Judged, draw: Draw) -> tuple[torch.Tensor, int]:
        """(distribution [V], token) after a rejection at ``row``: the residual norm(max(0, p − q))."""
        dist = residual_distribution(target_probs[row], draft_probs[row])  # [V]
        return dist, draw(dist)

    def bonus_row(self, k: int) -> int:
        """The row of target_probs the token after k accepted drafts is drawn from: p_{k+1}."""
        return k

    def verified_q(self, soft_probs: torch.Tensor | None) -> torch.Tensor | None:
        """The q rows [k, V] verified instead of the laws the drafts were drawn from (None: those).

        ``soft_probs``: the drafter's softmax behind argmax drafts (``Draft.soft_probs``), or None."""
        return None


class BlockVerification(Rule):
    """Block verification (Sun et al., ICLR 2025): every draft gets its own u, the longest
    prefix whose last u < h_i is kept, then one token (``playground.decoding.block_verify``)."""

    def verify(self, drafts, draft_probs, target_probs, eos, uniform, draw) -> Verdict:
        """The block ends at the first EOS draft (the drafter stops there too): drafts after it
        are not judged, and keeping it ends the step without a correction, as in token
        verification.  Cutting a block where the drafts themselves say so keeps it lossless:
        it is the same as padding it with drafts drawn from p, whose h are all 0."""
        cut = next((i + 1 for i, tok in enumerate(drafts) if tok in eos), len(drafts))
        drafts = drafts[:cut]
        terms = block.block_terms(drafts, draft_probs, target_probs)
        etas = [uniform() for _ in drafts]
        tau = block.kept_length(etas, terms.accept_probs)
        accepted = tuple(i < tau for i in range(cut))
        shown = dict(accept_probs=terms.accept_probs, weights=terms.weights[1:])
        if tau and drafts[tau - 1] in eos:
            return Verdict.eos_kept(tau, accepted, tuple(etas), **shown)
        row, kind, dist = block.block_correction(target_probs, draft_probs, tau, terms.weights)
        rejected_at = tau if tau < cut else None
        return Verdict(
            n_accepted=tau, accepted=accepted, us=tuple(etas), rejected_at=rejected_at, eos_accepted=False,
            correction_kind=kind, correction_row=row, correction_dist=dist, correction_token=int(draw(dist)),
            **shown,
        )  # fmt: skip


class SoftmaxQ(Rule):
    """WRONG (transformers #32867): argmax drafts (q a point mass) verified against the
    drafter's softmax, so a draft is accepted too often and the residual wrongly excludes it."""

    def verified_q(self, soft_probs: torch.Tensor | None) -> torch.Tensor | None:
        return soft_probs  # the bug: not what the drafts were drawn from


class ExactMatch(Rule):
    """Lossless but wasteful at T > 0: accept iff the draft equals a fresh target sample, else
    emit that sample; when p = q a draft survives with probability Σp² instead of 1."""

    def accept(self, target_probs, draft_probs, i, tok, uniform, draw) -> Judged:
        drawn = draw(target_probs[i])
        return Judged(drawn == tok, None, drawn)

    def correction(self, target_probs, draft_probs, row, judged, draw):
        # The target's own sample (it differs from the draft): lossless, as a plain target step.
        return target_probs[row], judged.drawn


class TargetSample(Rule):
    """WRONG: after a rejection, a plain target sample instead of the residual."""

    def correction(self, target_probs, draft_probs, row, judged, draw):
        dist = target_probs[row]  # WRONG (lossy): ignores that q already had its chance
        return dist, draw(dist)


class BonusWrongPosition(Rule):
    """WRONG: after every draft is accepted, the bonus comes from the last draft's row."""

    def bonus_row(self, k: int) -> int:
        return k - 1 if k else k  # WRONG: reuses the last draft's position


class Typical(TargetSample):
    """LOSSY (Medusa's typical acceptance): accept d iff p(d) > min(ε, δ·exp(−H(p))); after a
    rejection, a plain target sample."""

    def accept(self, target_probs, draft_probs, i, tok, uniform, draw) -> Judged:
        return Judged(float(target_probs[i, tok]) > typical_threshold(target_probs[i]), None)


def typical_threshold(target_probs: torch.Tensor) -> float:
    """Medusa's typical-acceptance threshold min(ε, δ·exp(−H(p))) for one [V] distribution."""
    p = target_probs.float()
    entropy = float(-(p[p > 0] * p[p > 0].log()).sum())
    return min(TYPICAL_EPSILON, TYPICAL_DELTA * math.exp(-entropy))


_RULES = (
    Rule("lossless", "correct", lossless=True, in_app=True, chains_only=False),
    BlockVerification("block", "correct", lossless=True, in_app=True, judges_jointly=True),
    SoftmaxQ("softmax-q", "wrong", lossless=False, argmax_drafts=True),
    ExactMatch("exact-match", "wasteful", lossless=True),
    TargetSample("target-sample", "wrong", lossless=False),
    BonusWrongPosition("bonus-wrong-position", "wrong", lossless=False),
    Typical("typical", "lossy", lossless=False),
)
RULES: dict[str, Rule] = {r.key: r for r in _RULES}  # the lab lists them in this order: the correct ones first
DEFAULT_RULE = "lossless"
APP_RULES = tuple(k for k, r in RULES.items() if r.in_app)  # what the Playground and /speculate offer
LOSSLESS_RULES = tuple(k for k, r in RULES.items() if r.lossless)
