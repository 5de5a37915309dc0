"""Small formatting helpers shared by the renderers: escaping, visible whitespace, numbers.

Every piece of model or user text that ends up in HTML goes through
``token_html`` (or ``esc``).  Whitespace is made visible: a space is a
middle dot, a newline a return arrow, a tab an arrow; the empty string is an
empty-set sign.  ``token_plain`` gives the same visible form as plain text
(tables, CSV, aria labels).
"""

from __future__ import annotations

import html
import math

# Visible stand-ins for invisible characters.
_VISIBLE = {
    " ": "\u00b7",  # ·
    "\n": "\u21b5",  # ↵
    "\t": "\u2192",  # →
    "\r": "\u240d",  # ␍
    "\u00a0": "\u237d",  # ⍽ no-break space
}
EMPTY = "\u2205"  # ∅


def esc(text: object) -> str:
    """HTML-escape anything (quotes too, so it is safe inside attributes)."""
    return html.escape(str(text), quote=True)


def token_plain(text: str) -> str:
    """The token's text with whitespace replaced by visible marks (no HTML)."""
    if text == "":
        return EMPTY
    return "".join(_VISIBLE.get(ch, ch) for ch in text)


def token_html(text: str) -> str:
    """Escaped HTML for a token's text, whitespace marks wrapped in ``<span class="ws">``."""
    if text == "":
        return f'<span class="ws">{EMPTY}</span>'
    out: list[str] = []
    run: list[str] = []
    for ch in text:
        mark = _VISIBLE.get(ch)
        if mark is None:
            run.append(ch)
            continue
        if run:
            out.append(html.escape("".join(run), quote=True))
            run = []
        out.append(f'<span class="ws">{mark}</span>')
    if run:
        out.append(html.escape("".join(run), quote=True))
    return "".join(out)


def quoted(text: str) -> str:
    """Plain-text quotation of a token for sentences: “·Paris”."""
    return f"\u201c{token_plain(text)}\u201d"


def num(x: float | None, digits: int = 3) -> str:
    """A probability-like number: 0.412, 1, 1e-05; an em dash for missing."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "\u2014"
    if x == 0:
        return "0"
    if abs(x) < 10 ** (-digits):
        return f"{x:.1e}"
    s = f"{x:.{digits}f}".rstrip("0").rstrip(".")
    return s or "0"


def pct(x: float | None, digits: int = 0) -> str:
    if x is None or not math.isfinite(x):
        return "\u2014"
    return f"{100 * x:.{digits}f}%"


def ms(x: float | None) -> str:
    if x is None or not math.isfinite(x):
        return "\u2014"
    if x >= 1000:
        return f"{x / 1000:.2f} s"
    if x >= 10:
        return f"{x:.0f} ms"
    return f"{x:.1f} ms"


def times(x: float | None, digits: int = 2) -> str:
    """A ratio shown as 1.23×."""
    if x is None or not math.isfinite(x):
        return "\u2014"
    return f"{x:.{digits}f}\u00d7"


def count(n: int | None) -> str:
    """A whole number with thousands separators: 262,144; an em dash for missing."""
    if n is None or isinstance(n, bool) or not isinstance(n, (int, float)) or not math.isfinite(n):
        return "\u2014"
    return f"{int(n):,}"
