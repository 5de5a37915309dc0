"""Residual bars at a branching point of a draft tree: how r changed from sibling to sibling.

At a node whose children were tried in order, r starts as the target's p there; every
rejected child turns it into norm(max(0, r − q)), the distribution the next sibling (or
the final resample) is judged against.  This draws p, then the residual after each
rejected sibling, with the chain view's bars (``visual.bars``).

It reads only what the records carry: the first child's ``target_top`` (p at the node)
and each rejected child's ``residual_top``.  It computes no distribution; traces recorded
before ``residual_top`` existed get p and a note.  HTML only, every text escaped.
"""

from __future__ import annotations

from collections.abc import Sequence

from playground.decoding.records import Correction, DraftDecision
from visual.bars import bars
from visual.fmt import esc, quoted
from visual.i18n import t


def is_branching(drafted: Sequence[DraftDecision], kids: Sequence[int]) -> bool:
    """Children tried in order: at least two, and at least one of them rejected."""
    return len(kids) >= 2 and any(drafted[i].judged and not drafted[i].accepted for i in kids)


def _next_judged(drafted: Sequence[DraftDecision], kids: Sequence[int], k: int) -> DraftDecision | None:
    later = [drafted[i] for i in kids[k + 1 :] if drafted[i].judged]
    return later[0] if later else None


def _panel(title: str, cands, after: DraftDecision | None, correction: Correction | None) -> str:
    """Bars of one r, marking what was judged against it next: a sibling, or the resample."""
    if after is not None and after.accepted:
        return bars(title, cands, after.token_id, "accepted")
    if after is not None:
        return bars(title, cands, None, "", after.token_id)
    if correction is not None:
        c = correction
        return bars(title, cands, c.token_id, "resampled", None, (c.token_id, c.text, c.prob))
    return bars(title, cands, None, "")


def sibling_residuals(drafted: Sequence[DraftDecision], kids: Sequence[int], correction: Correction | None) -> str:
    """The block for one branching node ('' elsewhere).  ``kids``: its children in the
    order they were tried; ``correction``: the resample, when it was drawn at this node."""
    if not is_branching(drafted, kids):
        return ""
    first = drafted[kids[0]]
    if not first.target_top:
        return ""  # a trace without top lists (trace off): nothing to draw
    panels = [_panel(t("res.p_at_node"), first.target_top, first, None)]
    missing = False
    for k, i in enumerate(kids):
        d = drafted[i]
        if not d.judged or d.accepted:
            continue
        if not d.residual_top:
            missing = True
            continue
        after = _next_judged(drafted, kids, k)
        panels.append(
            _panel(
                t("res.after", token=quoted(d.text)),
                d.residual_top,
                after,
                correction if after is None else None,
            )
        )
    note = t("res.note")
    if correction is not None:
        note += t("res.note_all")
    if missing:
        note += t("res.note_missing")
    return (
        f'<div class="tree__residuals" role="group" aria-label="{esc(t("res.aria"))}">'
        f'<p class="tree__residuals-note">{esc(note)}</p>'
        f'<div class="dists tree__dists">{"".join(panels)}</div></div>'
    )
