"""Where each output token came from: the final text coloured by source, on the page and as an HTML file.

Sources, decided from the step records alone:

==========  ====================================================================
mtp         a chain draft of the MTP head (or the Gemma 4 assistant) the target accepted
lookup      a chain draft copied from earlier text by prompt lookup and accepted
tree        an accepted node of a draft tree (any drafter)
drafter     a chain draft of any other drafter (draft model, early exit, ...) accepted
target      the target's own token: a resample after a rejection, or a step without drafts
bonus       drawn from p after every draft of the step was accepted
==========  ====================================================================

The hybrid ``mtp+lookup`` drafter names per step which of the two drafted it
(``StepRecord.drafter_info["source"]``); a step is drafted by one source, so each of its
accepted drafts carries that source.  Each source differs by colour *and* underline
style (solid, dotted, dashed, wavy, double, none), so the view reads without colour.

This module does not decide anything about decoding and keeps no state; every token text
is escaped (``visual.fmt.esc``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from playground.decoding.records import StepRecord
from visual.fmt import esc, pct
from visual.i18n import CATALOGUE, current, t
from visual.tree_view import is_tree_step

# (key, name, what it means); the order of the legend
SOURCES = (
    ("mtp", "MTP head", "drafted by the MTP head, accepted by the target"),
    ("lookup", "prompt-lookup copy", "copied from earlier text by prompt lookup, accepted"),
    ("tree", "tree branch", "an accepted node of a draft tree"),
    ("drafter", "other drafter", "drafted by another drafter, accepted"),
    ("target", "target correction", "the target's own token: a resample after a rejection, or no draft"),
    ("bonus", "bonus", "all drafts accepted: one more token from the target's p"),
)
NAMES = {k: n for k, n, _ in SOURCES}  # English; the page shows the catalogue's prov.<key> (visual.i18n)
TITLE = "Where each token came from"
_MTP = ("mtp", "gemma4-assistant")

# Colours for the downloaded file (the page uses style.css; these are the same light-mode values).
_FILE_CSS = """
body { font: 15px/1.6 system-ui, sans-serif; max-width: 52rem; margin: 2rem auto; padding: 0 1rem; color: #1f2937; }
.prov__legend { display: flex; flex-wrap: wrap; gap: 4px 14px; list-style: none; padding: 0; font-size: 13px; }
.prov__text { white-space: pre-wrap; word-break: break-word; font-family: ui-monospace, monospace; font-size: 14px; }
.prov__prompt { color: #4b5563; }
.src { --c: #6b7280; background: color-mix(in srgb, var(--c) 16%, transparent); text-decoration: underline 2px var(--c);
  text-underline-offset: 3px; border-radius: 2px; }
.src--mtp { --c: #0072B2; }
.src--lookup { --c: #009E73; text-decoration-style: dotted; }
.src--tree { --c: #56B4E9; text-decoration-style: dashed; }
.src--drafter { --c: #7a7a7a; }
.src--target { --c: #D55E00; text-decoration-style: wavy; }
.src--bonus { --c: #E69F00; text-decoration-style: double; }
"""


@dataclass(frozen=True)
class Piece:
    """One committed token: its text, its source key, the 0-based step that committed it, and why."""

    text: str
    source: str
    step: int
    detail: str


def _chain_source(step: StepRecord) -> tuple[str, str]:
    """(source key, drafter name) of a chain step's accepted drafts."""
    name = str((step.drafter_info or {}).get("source") or step.drafter or "")
    if name == "prompt-lookup":
        return "lookup", name
    if name in _MTP:
        return "mtp", name
    return "drafter", name or "drafter"


def pieces(steps: Sequence[StepRecord]) -> list[Piece]:
    """Every committed token of these steps, in order, with its source."""
    out: list[Piece] = []
    for s in steps:
        tree = is_tree_step(s)
        key, name = ("tree", str((s.drafter_info or {}).get("source") or s.drafter or "")) if tree else _chain_source(s)
        for d in s.drafted:
            if d.accepted:
                out.append(
                    Piece(
                        d.text,
                        key,
                        s.index,
                        t("prov.detail_from", name=t(f"prov.{key}"), who=_who(name), n=s.index + 1),
                    )
                )
        c = s.correction
        if c is not None:
            src = "bonus" if c.kind == "bonus" else "target"
            out.append(Piece(c.text, src, s.index, t("prov.detail", name=t(f"prov.{src}"), n=s.index + 1)))
    return out


def counts(ps: Sequence[Piece]) -> dict[str, int]:
    out = {k: 0 for k, _, _ in SOURCES}
    for p in ps:
        out[p.source] += 1
    return out


def _who(drafter: str) -> str:
    """A drafter kind in words (``drafter.<kind>`` in the catalogue), else its name."""
    return t(f"drafter.{drafter}") if f"drafter.{drafter}" in CATALOGUE["en"] else drafter


def _legend(ps: Sequence[Piece]) -> str:
    n = counts(ps)
    total = max(1, len(ps))
    items = "".join(
        f'<li class="prov__item" title="{esc(t(f"prov.{k}.desc"))}"><span class="src src--{k}">{esc(t(f"prov.{k}"))}</span> '
        f"{n[k]} ({pct(n[k] / total)})</li>"
        for k, _, _ in SOURCES
        if n[k] or k in ("target", "bonus")
    )
    return f'<ul class="prov__legend" aria-label="{esc(t("prov.legend_aria"))}">{items}</ul>'


def _text(prompt: str, ps: Sequence[Piece]) -> str:
    body = "".join(f'<span class="src src--{p.source}" title="{esc(p.detail)}">{esc(p.text)}</span>' for p in ps)
    return f'<p class="prov__text"><span class="prov__prompt">{esc(prompt)}</span>{body}</p>'


def provenance_html(prompt: str, steps: Sequence[StepRecord]) -> str:
    """The page's view: a legend with the count per source, then prompt + output coloured by source."""
    ps = pieces(steps)
    if not ps:
        return f'<div class="prov prov--empty">{esc(t("prov.empty"))}</div>'
    title = t("prov.title")
    return (
        f'<div class="prov" role="group" aria-label="{esc(title)}"><h3 class="prov__title">{esc(title)}</h3>'
        f"{_legend(ps)}{_text(prompt, ps)}</div>"
    )


def provenance_document(prompt: str, steps: Sequence[StepRecord], title: str | None = None) -> str:
    """A standalone HTML file of the same view (inline CSS, no script, every text escaped), in the current language."""
    ps = pieces(steps)
    title = t("prov.title") if title is None else title
    return (
        f'<!DOCTYPE html>\n<html lang="{"zh-CN" if current() == "zh" else "en"}"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{_FILE_CSS}</style></head><body>"
        f"<h1>{esc(title)}</h1>{_legend(ps)}{_text(prompt, ps)}</body></html>\n"
    )
