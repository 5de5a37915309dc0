"""Distribution bars: the top of one distribution (p, q or a residual) as labelled bars.

Shared by the chain step view (``visual.tokens.distribution_panel``: p, q and the residual
after a rejection) and the tree view (``visual.tree_residuals``: the residual after each
rejected sibling).  It draws the candidates it is given; it does not compute any
distribution, and every title and token text is escaped here.
"""

from __future__ import annotations

from collections.abc import Sequence

from playground.decoding.records import Candidate
from visual.fmt import esc, num, token_html, token_plain
from visual.i18n import CATALOGUE, t


def bars(
    title: str,
    cands: Sequence[Candidate],
    pick: int | None,
    pick_label: str,
    struck: int | None = None,
    extra: tuple[int, str, float] | None = None,
) -> str:
    """One bar per candidate.  ``pick``: the token drawn or kept (marked ◀ pick_label);
    ``struck``: a rejected draft (struck through); ``extra``: (id, text, prob) of the pick,
    added when it is outside the top list."""
    rows = []
    ids = {c.token_id for c in cands}
    items = list(cands)
    if extra is not None and extra[0] not in ids:  # the picked token was outside the top list
        items.append(Candidate(token_id=extra[0], text=extra[1], prob=extra[2]))
    for c in items:
        cls = ["bar-row"]
        mark = ""
        if pick is not None and c.token_id == pick:
            cls.extend(["is-pick", f"is-pick--{esc(pick_label)}"])
            mark = f'<span class="bar-mark">\u25c0 {esc(t(f"pick.{pick_label}") if f"pick.{pick_label}" in CATALOGUE["en"] else pick_label)}</span>'
        if struck is not None and c.token_id == struck:
            cls.append("is-struck")
            mark += f'<span class="bar-mark bar-mark--rej">{esc(t("bars.rejected_draft"))}</span>'
        w = max(0.0, min(1.0, c.prob)) * 100
        rows.append(
            f'<li class="{" ".join(cls)}"><code class="tok bar-label">{token_html(c.text)}</code>'
            f'<span class="bar" role="img" aria-label="{esc(token_plain(c.text))}: {num(c.prob)}">'
            f'<span class="bar__fill" style="width:{w:.1f}%"></span></span>'
            f'<span class="bar-val">{num(c.prob)}</span>{mark}</li>'
        )
    if not rows:
        rows.append(f'<li class="bar-row bar-row--empty">{esc(t("bars.no_mass"))}</li>')
    return f'<div class="dist"><h4>{esc(title)}</h4><ol class="bars">{"".join(rows)}</ol></div>'
