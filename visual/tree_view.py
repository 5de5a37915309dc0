"""A tree step drawn as a tree: every drafted node with its q, the p it was judged against,
p/q, u and verdict; the accepted path highlighted, the subtrees under rejected nodes greyed;
after the verify pass, the residual bars at each branching point (``visual.tree_residuals``)
and the KV-cache strip (``visual.kv_strip``).

Reads ``StepRecord.drafted`` of a tree step (``DraftDecision.parent`` set).  In a tree
step, ``target_prob`` is what the node was judged against: the target's p for the first
sibling tried, the residual norm(max(0, r - q)) after each rejected sibling.  This module
renders HTML only; everything user-supplied goes through ``esc`` / ``token_html``.
"""

from __future__ import annotations

from collections.abc import Sequence

from playground.decoding.records import Correction, DraftDecision, StepRecord
from visual.fmt import esc, num, quoted, token_html
from visual.i18n import plural, t
from visual.kv_strip import kv_strip
from visual.replay import DRAFT
from visual.tree_residuals import sibling_residuals


def is_tree_step(step: StepRecord) -> bool:
    return any(d.parent is not None for d in step.drafted)


def _children(drafted: Sequence[DraftDecision]) -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for i, d in enumerate(drafted):
        parent = d.parent if d.parent is not None else i - 1
        kids.setdefault(int(parent), []).append(i)
    return kids


def _state(d: DraftDecision, phase: str) -> str:
    if phase == DRAFT:
        return "drafted"
    return "accepted" if d.accepted else ("rejected" if d.judged else "discarded")


def _facts(d: DraftDecision, phase: str, tried_before: int) -> str:
    if phase == DRAFT:
        return t("tree.q", q=num(d.draft_prob))
    if not d.judged:
        return t("tree.not_judged")
    against = (
        t("tree.against_p") if tried_before == 0 else t("tree.against_residual", n=tried_before, s=plural(tried_before))
    )
    ratio = "\u2013" if d.ratio is None else num(d.ratio, 2)
    rel = "<" if d.accepted else "\u2265"
    return t(
        "tree.facts", q=num(d.draft_prob), against=against, p=num(d.target_prob), ratio=ratio, u=num(d.u), rel=rel,
        a=num(d.accept_prob),
    )  # fmt: skip


def _resample_node(step: StepRecord) -> tuple[int | None, Correction | None]:
    """The node whose children were all rejected before the resample (-1: the root) and
    the resample; (None, None) when the step ended on a bonus, an EOS or the budget."""
    c = step.correction
    if c is None or c.kind != "resample":
        return None, None
    path = [i for i, d in enumerate(step.drafted) if d.accepted]
    return (path[-1] if path else -1), c


def _sure_bar(d: DraftDecision) -> str:
    """The target's confidence bar under a judged node (as under the text's chips)."""
    if d.target_conf is None:
        return ""
    width = 100 * max(0.0, min(1.0, d.target_conf))
    return f'<span class="chip__sure" style="width:{width:.0f}%" aria-hidden="true"></span>'


def tree_panel(step: StepRecord, phase: str) -> str:
    drafted = step.drafted
    kids = _children(drafted)
    at, resample = _resample_node(step)

    def branch(node: int, greyed: bool) -> str:
        items = []
        tried = 0
        for i in kids.get(node, []):
            d = drafted[i]
            state = _state(d, phase)
            on_path = phase != DRAFT and d.accepted
            cls = f"chip chip--{state} tree__node" + (" tree__node--path" if on_path else "")
            sub = branch(i, greyed or (phase != DRAFT and not d.accepted))
            items.append(
                f'<li class="{"tree__item--grey" if greyed else ""}">'
                f'<span class="{cls}" tabindex="0"><span class="chip__text">{token_html(d.text)}</span>'
                f"{_sure_bar(d) if phase != DRAFT else ''}</span> "
                f'<small class="tree__facts">{esc(_facts(d, phase, tried))}</small>{sub}</li>'
            )
            if d.judged:
                tried += 1
        cls = "tree tree--branching" if len(items) > 1 else "tree"
        residuals = (
            "" if phase == DRAFT else sibling_residuals(drafted, kids.get(node, []), resample if node == at else None)
        )
        return f'{residuals}<ul class="{cls}">{"".join(items)}</ul>' if items else ""

    depth = max((d.position for d in drafted), default=0)
    roots = len(kids.get(-1, []))
    caption = t("tree.caption", n=len(drafted), s=plural(len(drafted)), roots=roots, depth=depth)
    if phase != DRAFT:
        caption += t("tree.caption_verified")
    return (
        f'<div class="sd-tree" role="group" tabindex="0" aria-label="{esc(t("tree.aria", n=step.index + 1))}">'
        f'<p class="sd-tree__caption">{esc(caption)}</p>'
        f'<div class="tree__root"><span class="tree__rootlabel">{esc(t("tree.root"))}</span>{branch(-1, False)}</div>'
        f"{'' if phase == DRAFT else kv_strip(step)}</div>"
    )


def tree_narration(step: StepRecord, phase: str) -> str:
    """One plain-words sentence about a tree step (plain text, not escaped)."""
    n, k = step.index + 1, len(step.drafted)
    if phase == DRAFT:
        roots = len(_children(step.drafted).get(-1, []))
        return t("tree.narr.draft", n=n, k=k, roots=roots, ms=f"{step.draft_ms:.1f}")
    path = [d for d in step.drafted if d.accepted]
    rejected = [d for d in step.drafted if d.judged and not d.accepted]
    c = step.correction
    parts = [t("tree.narr.checked", n=n, k=k)]
    if path:
        parts.append(t("tree.narr.path", path=" \u2192 ".join(quoted(d.text) for d in path)))
    else:
        parts.append(t("tree.narr.no_branch"))
    if rejected:
        parts.append(t("tree.narr.rejected", tokens=t("list.sep").join(quoted(d.text) for d in rejected)))
    if c is not None and c.kind == "bonus":
        parts.append(t("tree.narr.bonus", token=quoted(c.text)))
    elif c is not None:
        parts.append(t("tree.narr.resampled", token=quoted(c.text)))
    emitted = len(step.emitted_ids)
    return "".join(parts) + t("tree.narr.tail", n=emitted, s=plural(emitted))
