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
        return f"q {num(d.draft_prob)}"
    if not d.judged:
        return "not judged"
    against = (
        "p" if tried_before == 0 else f"residual after {tried_before} rejected sibling{'s' if tried_before > 1 else ''}"
    )
    ratio = "\u2013" if d.ratio is None else num(d.ratio, 2)
    rel = "<" if d.accepted else "\u2265"
    return (
        f"q {num(d.draft_prob)} \u00b7 {against} {num(d.target_prob)} \u00b7 ratio {ratio} \u00b7 "
        f"u {num(d.u)} {rel} {num(d.accept_prob)}"
    )


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
    caption = (
        f"The drafter proposed a tree of {len(drafted)} node{'s' if len(drafted) != 1 else ''} "
        f"({roots} at the first position, {depth} deep); the target scores every node in one pass, each node "
        "seeing only its own ancestors."
    )
    if phase != DRAFT:
        caption += (
            " At each node its children are tried in order: a child is kept with probability min(1, r/q); after a "
            "rejection, r becomes the residual norm(max(0, r \u2212 q)) for the next sibling. The accepted path is "
            "highlighted; subtrees under rejected nodes are never judged."
        )
    return (
        f'<div class="sd-tree" role="group" tabindex="0" aria-label="Draft tree of step {step.index + 1}">'
        f'<p class="sd-tree__caption">{esc(caption)}</p>'
        f'<div class="tree__root"><span class="tree__rootlabel">last committed token</span>{branch(-1, False)}</div>'
        f"{'' if phase == DRAFT else kv_strip(step)}</div>"
    )


def tree_narration(step: StepRecord, phase: str) -> str:
    """One plain-words sentence about a tree step (plain text, not escaped)."""
    n, k = step.index + 1, len(step.drafted)
    if phase == DRAFT:
        roots = len(_children(step.drafted).get(-1, []))
        return (
            f"Step {n}: the drafter proposes a tree of {k} tokens with {roots} alternatives for the next position, "
            f"in {step.draft_ms:.1f} ms; the target has not looked yet."
        )
    path = [d for d in step.drafted if d.accepted]
    rejected = [d for d in step.drafted if d.judged and not d.accepted]
    c = step.correction
    parts = [f"Step {n}: one target pass checked all {k} nodes; "]
    if path:
        parts.append("the accepted path is " + " \u2192 ".join(quoted(d.text) for d in path))
    else:
        parts.append("no branch was accepted")
    if rejected:
        parts.append(f"; rejected: {', '.join(quoted(d.text) for d in rejected)}")
    if c is not None and c.kind == "bonus":
        parts.append(f"; then the target added the bonus token {quoted(c.text)} at the leaf")
    elif c is not None:
        parts.append(
            f"; no child of the last accepted node survived, so the target resampled {quoted(c.text)} from the residual"
        )
    emitted = len(step.emitted_ids)
    return "".join(parts) + f" \u2014 {emitted} token{'s' if emitted != 1 else ''} from one target pass."
