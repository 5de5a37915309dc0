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


def _cell(text: str | None, state: str, slot: str, tip: str) -> str:
    label = '<span class="kv__root">root</span>' if text is None else token_html(text)
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
    written = [_cell(None, "kept", f"pos {_at(base, 0)}", "root: the newest committed token, kept")]
    for i, d in enumerate(drafted):
        on_path = d.accepted
        state = "kept" if on_path else "dropped"
        pos = _at(base, d.position)
        why = "on the accepted path, kept" if on_path else "not on the accepted path, discarded"
        written.append(
            _cell(d.text, state, f"pos {pos}", f"node {i + 1} {token_plain(d.text)} at position {pos}: {why}")
        )
    compacted = [_cell(None, "kept", f"pos {_at(base, 0)}", "root, kept where it was")]
    for k, i in enumerate(path, start=1):
        d = drafted[i]
        compacted.append(
            _cell(
                d.text,
                "kept",
                f"pos {_at(base, k)}",
                f"accepted {token_plain(d.text)} (node {i + 1}) now at position {_at(base, k)}",
            )
        )
    n_written = len(drafted) + 1
    where = (
        f"positions {base}\u2013{base + kept - 1}"
        if base is not None and kept > 1
        else f"position {base}"
        if base is not None
        else "contiguous positions"
    )
    summary = (
        f"The verify pass wrote {n_written} cache entries (the root + {len(drafted)} "
        f"node{'s' if len(drafted) != 1 else ''}); kept {kept} (root + accepted path), compacted to {where}; "
        f"discarded {n_written - kept}."
    )
    return (
        f'<div class="kv" role="group" aria-label="Target KV cache, step {step.index + 1}">'
        f'<p class="kv__summary">{esc(summary)}</p>'
        f'<p class="kv__label">written by the verify pass (pass order; siblings share a position)</p>'
        f'<ol class="kv__row" role="list">{"".join(written)}</ol>'
        f'<p class="kv__label">after compaction</p>'
        f'<ol class="kv__row" role="list">{"".join(compacted)}</ol></div>'
    )
