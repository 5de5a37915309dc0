"""``Verdict``: what a verification rule decided for one verify pass of a chain of drafts.

Steps 3-4 of a speculative step end here: how many drafts were kept, the uniform each was
judged with, and the one token added after them (its kind, row and distribution).  Rules
(``playground.rules``) make verdicts; the loop (``playground.decoding.engine``) turns them into
the trace's records.  This module decides nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Verdict:
    """The outcome of steps 3-4 for one verify pass (0-based positions)."""

    n_accepted: int
    accepted: tuple[bool, ...]  # one per judged draft (token rules stop at the first rejection; "block" judges all)
    us: tuple[float | None, ...]  # the uniform draw per judged draft (None for rules that use none)
    rejected_at: int | None  # the first draft not kept
    eos_accepted: bool  # an accepted draft was EOS: the step ends without a correction
    correction_kind: str | None  # "resample" | "bonus" | "target" | None
    correction_row: int | None  # row of target_probs the correction belongs to
    correction_dist: torch.Tensor | None  # [V] the distribution it was drawn from
    correction_token: int | None
    # "block" only, one per judged draft: h_i, what its u was compared with (None: min(1, p/q)),
    # and the weight w_i carried along the block.
    accept_probs: tuple[float, ...] | None = None
    weights: tuple[float, ...] | None = None

    @classmethod
    def eos_kept(cls, n: int, accepted: tuple[bool, ...], us: tuple, **shown) -> Verdict:
        """An accepted EOS draft ended the step: nothing is added after it."""
        return cls(
            n_accepted=n, accepted=accepted, us=us, rejected_at=None, eos_accepted=True, correction_kind=None,
            correction_row=None, correction_dist=None, correction_token=None, **shown,
        )  # fmt: skip
