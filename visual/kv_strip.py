"""The target's KV cache around one tree step, as a strip of cells.

The verify pass writes one cache entry per input: the root (the newest committed token)
and then every drafted node, in pass order; a node's position id is the root's position
plus its depth, so siblings share a position.  After the walk the cache keeps the root
and the accepted path and drops the rest, moving the kept entries to contiguous
positions (``playground.decoding.tree_pass.compact_cache``).  This draws both rows.

Read from the ``StepRecord`` alone: the root's position is the cache length after the
step minus the kept entries.  It does not inspect a real cache, and says nothing about
chain steps.  HTML only; every token text is escaped.
"""

from __future__ import annotations

from playground.decoding.records import StepRecord
from visual.fmt import esc, token_html, token_plain
from visual.i18n import plural, t


def _cell(text: str | None, state: str, slot: str, tip: str) -> str:
    label = f'<span class="kv__root">{esc(t("kv.root_label"))}</span>' if text is None else token_html(text)
    return (
        f'<li class="kv__cell kv__cell--{state}" role="listitem" title="{esc(tip)}" aria-label="{esc(tip)}">'
        f'<span class="kv__tok">{label}</span><span class="kv__pos">{esc(slot)}</span></li>'
    )


def _at(base: int | None, offset: int) -> str:
    return f"{base + offset}" if base is not None else f"+{offset}"


def kv_strip(step: StepRecord) -> str:
    """The strip for a tree step after its verify pass ('' for a step without drafts)."""
    drafted = step.drafted
    if not drafted:
        return ""
    path = [i for i, d in enumerate(drafted) if d.accepted]  # topological order: root's child first
    kept = 1 + len(path)
    base = step.target_cache_len - kept  # the root's position
    base = base if base >= 0 else None  # a hand-made record without cache lengths: relative positions
    written = [_cell(None, "kept", t("kv.pos", pos=_at(base, 0)), t("kv.root"))]
    for i, d in enumerate(drafted):
        on_path = d.accepted
        state = "kept" if on_path else "dropped"
        pos = _at(base, d.position)
        why = t("kv.on_path") if on_path else t("kv.off_path")
        written.append(
            _cell(
                d.text, state, t("kv.pos", pos=pos), t("kv.node", i=i + 1, token=token_plain(d.text), pos=pos, why=why)
            )
        )
    compacted = [_cell(None, "kept", t("kv.pos", pos=_at(base, 0)), t("kv.root_kept"))]
    for k, i in enumerate(path, start=1):
        d = drafted[i]
        compacted.append(
            _cell(
                d.text,
                "kept",
                t("kv.pos", pos=_at(base, k)),
                t("kv.moved", token=token_plain(d.text), i=i + 1, pos=_at(base, k)),
            )
        )
    n_written = len(drafted) + 1
    where = (
        t("kv.positions", a=base, b=base + kept - 1)
        if base is not None and kept > 1
        else t("kv.position", a=base)
        if base is not None
        else t("kv.contiguous")
    )
    summary = t(
        "kv.summary", written=n_written, nodes=len(drafted), s=plural(len(drafted)), kept=kept, where=where,
        dropped=n_written - kept,
    )  # fmt: skip
    return (
        f'<div class="kv" role="group" aria-label="{esc(t("kv.aria", n=step.index + 1))}">'
        f'<p class="kv__summary">{esc(summary)}</p>'
        f'<p class="kv__label">{esc(t("kv.written"))}</p>'
        f'<ol class="kv__row" role="list">{"".join(written)}</ol>'
        f'<p class="kv__label">{esc(t("kv.compacted"))}</p>'
        f'<ol class="kv__row" role="list">{"".join(compacted)}</ol></div>'
    )
