"""Renderers for the classroom lab (``playground.lab`` computes; this module draws).

Also the link note (``visual.share``) and the classroom preset card (``visual.classroom``).

Plotly figures use ``visual.charts.style`` (transparent background, explicit
font colours, Okabe-Ito palette).  Every model or user text that reaches HTML
goes through ``visual.fmt`` (escaped, whitespace made visible).  Pure
functions: lab result objects in, HTML strings / figures / DataFrames out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go

from playground.decoding.records import GenerationResult
from playground.lab.distribution import DISPLAY_BINS, DistributionCheck, display_bins
from playground.lab.equality import EqualityCheck
from playground.lab.quiz import Question, RateScore, Reveal, Scoreboard, StepScore
from playground.lab.stats import format_p
from playground.lab.theory import MeasuredPoint, TheoryCurve
from playground.rules import DEFAULT_RULE, RULES
from visual import replay, tokens
from visual.charts import COLORS, FONT_COLOR, GRID_COLOR, empty_figure, style
from visual.classroom import ClassroomPreset
from visual.fmt import esc, num, pct, times, token_html
from visual.i18n import t
from visual.i18n.en import MESSAGES as EN
from visual.i18n.errors import engine_message
from visual.share import Prefill

CATEGORY_BADGE = {  # (the badge in English, its colour); _badge gives it in the current language
    "correct": (EN["vlab.badge.correct"], "#009E73"),
    "wrong": (EN["vlab.badge.wrong"], "#D55E00"),
    "wasteful": (EN["vlab.badge.wasteful"], "#E69F00"),
    "lossy": (EN["vlab.badge.lossy"], "#CC79A7"),
}


def _badge(category: str) -> str:
    return t(f"vlab.badge.{category}") if category in CATEGORY_BADGE else category


_BOX = (
    "border:1px solid var(--border-color-primary);border-radius:8px;padding:10px 14px;"
    "background:var(--block-background-fill);color:var(--body-text-color);"
)
_SUB = "color:var(--body-text-color-subdued);font-size:0.88em;"
_WARN = (
    "border-left:4px solid #E69F00;background:var(--background-fill-secondary);color:var(--body-text-color);"
    "padding:6px 10px;margin:6px 0;border-radius:4px;"
)

# Every ASCII punctuation character may be backslash-escaped in CommonMark, and escaped it is
# plain text: no link, image, emphasis, HTML tag, entity, or autolink ("https\:\/\/…" and
# "www\.…" no longer match GFM's autolink patterns).  Line breaks become spaces so the text
# cannot start a heading, list or block of its own.
_MD_SPECIAL = re.compile(r"([!-/:-@\[-`{-~])")


def md_escape(text: object) -> str:
    """Text that a gr.Markdown shows exactly as written (for messages quoting untrusted input)."""
    one_line = re.sub(r"[\r\n\u2028\u2029]+", " ", str(text))
    return _MD_SPECIAL.sub(r"\\\1", one_line)


def stopped_html(what: str) -> str:
    """What a panel shows when its action was stopped with the Stop button."""
    return f'<div style="{_BOX}">{esc(t("vlab.stopped", what=what))}</div>'


def _partial_banner(message: str) -> str:
    if not message:
        return ""
    return f'<div role="status" style="{_WARN}"><b>{esc(t("vlab.partial"))}</b> {esc(message)}</div>'


def _tile(value: str, name: str, hint: str = "") -> str:
    return (
        f'<div style="min-width:120px;padding:6px 10px;border-left:3px solid {COLORS["spec"]};'
        f'background:var(--background-fill-secondary);border-radius:4px">'
        f'<div style="font-size:1.35em;font-weight:700">{esc(value)}</div>'
        f'<div style="font-size:0.85em">{esc(name)}</div>'
        + (f'<div style="{_SUB}">{esc(hint)}</div>' if hint else "")
        + "</div>"
    )


def _tiles(items: Sequence[str]) -> str:
    return f'<div style="display:flex;flex-wrap:wrap;gap:8px;margin:8px 0">{"".join(items)}</div>'


# --------------------------------------------------------------------------- distribution check


def distribution_figure(check: DistributionCheck | None, max_bins: int = DISPLAY_BINS) -> go.Figure:
    """Overlaid histograms: speculative vs target-only frequencies, exact target probability as markers."""
    title = t("vlab.d.title")
    if check is None:
        return empty_figure(title, t("vlab.d.empty"))
    rows = display_bins(check, max_bins)
    labels = [r["label"] for r in rows]
    fig = go.Figure()
    fig.add_bar(
        x=labels,
        y=[r["target"] for r in rows],
        name=t("vlab.d.target", n=f"{check.target.n:,}"),
        marker=dict(color=COLORS["ar"]),
        opacity=0.75,
        hovertemplate=t("vlab.d.hover_target") + "<extra></extra>",
    )
    fig.add_bar(
        x=labels,
        y=[r["speculative"] for r in rows],
        name=t("vlab.d.spec", rule=check.settings.rule)
        + (t("vlab.d.spec_partial", n=f"{check.spec.n:,}") if check.partial else ""),
        marker=dict(color=COLORS["spec"]),
        opacity=0.75,
        hovertemplate=t("vlab.d.hover_spec") + "<extra></extra>",
    )
    if check.exact_probs is not None:
        fig.add_scatter(
            x=labels,
            y=[r["exact"] for r in rows],
            mode="markers",
            name=t("vlab.d.exact"),
            marker=dict(symbol="line-ew-open", size=22, line=dict(width=3, color=FONT_COLOR)),
            hovertemplate=t("vlab.d.hover_exact") + "<extra></extra>",
        )
    fig.update_layout(barmode="overlay", bargap=0.15)
    fig.update_xaxes(
        title_text=t("vlab.d.xn", n=check.n_tokens) if check.n_tokens > 1 else t("vlab.d.x1"),
        tickangle=-45,
        type="category",
    )
    fig.update_yaxes(title_text=t("vlab.d.y"), rangemode="tozero")
    if check.partial:
        title += t("vlab.d.partial_title")
    return style(fig, title, height=380)


def distribution_html(check: DistributionCheck | None) -> str:
    if check is None:
        return f'<div style="{_BOX}">{t("vlab.d.choose")}</div>'
    run = check.settings
    rule = run.rule
    info = RULES[rule]
    p_ex = check.chi2_exact.p_value if check.chi2_exact is not None else None
    tiles = [
        _tile(num(check.tv), t("vlab.d.tv"), t("vlab.d.noise", x=num(check.tv_noise))),
        _tile(format_p(check.p_value), t("vlab.d.p"), t("vlab.d.p_hint", bins=check.chi2.bins)),
    ]
    if p_ex is not None:
        tiles.append(_tile(format_p(p_ex), t("vlab.d.p_exact"), t("vlab.d.bins", bins=check.chi2_exact.bins)))
    tiles += [
        _tile(pct(check.spec.acceptance_rate), t("vlab.d.acceptance"), t("vlab.d.acceptance_hint")),
        _tile(num(check.spec.tokens_per_target_call, 2), t("vlab.d.tpp"), t("vlab.d.tpp_hint")),
        _tile(
            f"{check.spec.seconds + check.target.seconds:.1f} s",
            t("vlab.d.time"),
            t("vlab.d.time_hint", n=f"{check.n_samples:,}")
            if not check.partial
            else t(
                "vlab.d.time_partial", spec=f"{check.spec.n:,}", target=f"{check.target.n:,}", n=f"{check.n_samples:,}"
            ),
        ),
    ]
    notes = "".join(f'<p style="{_SUB}">{esc(t("vlab.d.note", note=n))}</p>' for n in check.notes)
    settings = esc(
        t(
            "vlab.d.settings",
            preset=run.preset,
            drafter=run.drafter,
            t=f"{run.temperature:g}",
            gamma=run.gamma,
            n=check.n_tokens,
            seed=run.seed,
        )
        + (t("vlab.d.argmax") if run.draft_argmax else "")
    )
    return (
        f'<div style="{_BOX}">'
        f'<div style="font-weight:700;color:{CATEGORY_BADGE.get(info.category, ("", FONT_COLOR))[1]}">'
        f"{esc(t(f'lab.d.rule.{rule}'))}</div>"
        f"{_partial_banner(check.stopped)}"
        f'<p style="{_SUB}">{esc(t(f"vlab.rule.{rule}.what"))}</p>'
        f"{_tiles(tiles)}"
        f'<p style="margin:6px 0"><b>{esc(t("vlab.d.reading"))}</b> {esc(check.reading)}</p>'
        f'<p style="{_SUB}">{esc(t("vlab.d.expected", expect=t(f"vlab.rule.{rule}.expect")))}</p>{notes}'
        f'<p style="{_SUB}">{settings}</p>'
        "</div>"
    )


RULES_COLUMNS = [
    "rule",
    "kind",
    "N",
    "TV",
    "noise TV",
    "p-value",
    "p vs exact",
    "acceptance",
    "tokens/pass",
    "vs correct",
    "verdict",
]


def _baseline(c: DistributionCheck, checks: Sequence[DistributionCheck]) -> DistributionCheck | None:
    """The correct rule's check on the same draw, if this session made one."""
    return next((b for b in checks if b.settings.rule == DEFAULT_RULE and b.same_draw(c)), None)


def rules_table(checks: Sequence[DistributionCheck]) -> pd.DataFrame:
    """One row per rule checked in this session (latest first): drift vs acceptance, side by side."""
    rows = []
    for c in checks:
        base = _baseline(c, checks)
        ratio = None
        if base is not None and base.spec.tokens_per_target_call and c.spec.tokens_per_target_call:
            ratio = c.spec.tokens_per_target_call / base.spec.tokens_per_target_call
        verdict = t(
            "vlab.verdict.drift"
            if c.p_value < 0.001
            else ("vlab.verdict.unclear" if c.p_value < 0.05 else "vlab.verdict.none")
        )
        if c.partial:
            verdict += t("vlab.verdict.partial")
        rows.append(
            {
                "rule": c.settings.rule,
                "kind": _badge(c.category),
                "N": t("vlab.n_partial", n=f"{c.spec.n:,}", total=f"{c.n_samples:,}")
                if c.partial
                else f"{c.n_samples:,}",
                "TV": round(c.tv, 4),
                "noise TV": round(c.tv_noise, 4),
                "p-value": format_p(c.p_value),
                "p vs exact": format_p(c.chi2_exact.p_value) if c.chi2_exact is not None else "—",
                "acceptance": pct(c.spec.acceptance_rate),
                "tokens/pass": num(c.spec.tokens_per_target_call, 2),
                "vs correct": times(ratio),
                "verdict": verdict,
            }
        )
    heads = {k: t(f"vlab.col.{k}") for k in RULES_COLUMNS}
    return pd.DataFrame([{heads[k]: v for k, v in row.items()} for row in rows], columns=list(heads.values()))


# --------------------------------------------------------------------------- equality check


def equality_html(eq: EqualityCheck | None) -> str:
    if eq is None:
        return f'<div style="{_BOX}">{t("vlab.eq.empty")}</div>'
    colour = COLORS["speedup"] if eq.identical else COLORS["predicted"]
    head = (
        f'<p style="font-weight:700;color:{colour};margin:0 0 6px 0">{esc(t("vlab.eq.identical" if eq.identical else "vlab.eq.diverged"))}'
        f"</p>{_partial_banner(eq.stopped)}<p>{esc(eq.summary)}</p>"
    )
    cells = []
    for r in eq.rows:
        if r.status == "same":
            cells.append(
                tokens.chip(
                    r.ar_text, "accepted", (f"{t('vlab.eq.token', i=r.position)}: id {r.ar_id}", t("vlab.eq.same"))
                )
            )
        else:
            st = "rejected" if r.status == "diverged" else "discarded"
            tip_a = t("vlab.eq.tip_ar", text=repr(r.ar_text), id=r.ar_id)
            tip_s = t("vlab.eq.tip_spec", text=repr(r.spec_text), id=r.spec_id)
            cells.append(
                '<span style="display:inline-flex;flex-direction:column;gap:2px;vertical-align:top">'
                + tokens.chip(r.ar_text, st, (t("vlab.eq.token", i=r.position), tip_a))
                + tokens.chip(
                    r.spec_text,
                    "resampled" if r.status == "diverged" else "discarded",
                    (t("vlab.eq.token", i=r.position), tip_s),
                )
                + "</span>"
            )
    legend = f'<p style="{_SUB}">{esc(t("vlab.eq.legend"))}</p>'
    body = f'<div class="sd-text" role="list" aria-label="{esc(t("vlab.eq.aria"))}">{"".join(cells)}</div>'
    div = ""
    if eq.divergence is not None:
        d = eq.divergence
        a_tok, s_tok = d.ar[0], d.ar[1]

        def row(path: str, pair) -> str:
            return (
                f"<tr><td>{esc(path)}</td><td>{num(pair[0].logit, 4)}</td><td>{num(pair[1].logit, 4)}</td>"
                f"<td><b>{pair[0].logit - pair[1].logit:+.4f}</b></td><td>{num(pair[0].prob)}</td><td>{num(pair[1].prob)}</td></tr>"
            )

        div = (
            f'<h4 style="margin:10px 0 4px 0">{esc(t("vlab.eq.first", i=d.position))}</h4>'
            '<table style="border-collapse:collapse;font-variant-numeric:tabular-nums" cellpadding="4">'
            f"<tr><th>{esc(t('vlab.eq.by'))}</th><th>{token_html(a_tok.text)} {esc(t('vlab.eq.alone'))}</th>"
            f"<th>{token_html(s_tok.text)} {esc(t('vlab.eq.spec'))}</th><th>{esc(t('vlab.eq.gap'))}</th>"
            f"<th>p({token_html(a_tok.text)})</th>"
            f"<th>p({token_html(s_tok.text)})</th></tr>"
            + row(t("vlab.eq.row_ar"), d.ar)
            + row(t("vlab.eq.row_spec", rows=d.spec_rows), d.spec)
            + f"</table><p>{esc(d.explanation)}</p>"
        )
    stats = t(
        "vlab.eq.stats",
        preset=eq.preset,
        drafter=eq.drafter,
        dtype=eq.dtype,
        gamma=eq.gamma,
        ar=eq.ar.stats.target_calls,
        spec=eq.spec.stats.target_calls,
        rate=pct(eq.spec.stats.acceptance_rate),
    )
    stats_line = f'<p style="{_SUB}">{esc(stats)}</p>'
    return f'<div style="{_BOX}">{head}{body}{legend}{div}{stats_line}</div>'


# --------------------------------------------------------------------------- theory bench


_E_TEX = r"E = \frac{1 - \alpha^{\gamma+1}}{1 - \alpha}"
_S_TEX = r"S = \frac{E}{\gamma\, c + v_\gamma}"
FORMULAS_MD = EN["vlab.t.formulas"].format(e_tex=_E_TEX, s_tex=_S_TEX)  # in English


def formulas_md() -> str:
    """The theory bench's formulas and their reading, in the current language (LaTeX between $$)."""
    return t("vlab.t.formulas", e_tex=_E_TEX, s_tex=_S_TEX)


def theory_figure(curve: TheoryCurve, point: MeasuredPoint | None = None) -> go.Figure:
    g = [p.gamma for p in curve.points]
    fig = go.Figure()
    fig.add_scatter(
        x=g,
        y=[p.speedup for p in curve.points],
        mode="lines+markers",
        name=t("vlab.t.S"),
        line=dict(color=COLORS["speedup"], width=3),
        hovertemplate="γ = %{x}<br>S = %{y:.2f}×<extra></extra>",
    )
    fig.add_scatter(
        x=g,
        y=[p.expected_tokens for p in curve.points],
        mode="lines",
        name=t("vlab.t.E"),
        line=dict(color=COLORS["other"], dash="dot"),
        yaxis="y2",
        hovertemplate="γ = %{x}<br>E = %{y:.2f}<extra></extra>",
    )
    fig.add_scatter(
        x=[curve.best_gamma],
        y=[curve.best_speedup],
        mode="markers+text",
        name=t("vlab.t.best", gamma=curve.best_gamma),
        marker=dict(size=13, color=COLORS["speedup"], symbol="diamond"),
        text=[t("vlab.t.best_text", gamma=curve.best_gamma, speedup=f"{curve.best_speedup:.2f}")],
        textposition="top center",
        textfont=dict(color=FONT_COLOR),
    )
    fig.add_hline(
        y=1.0,
        line=dict(color=GRID_COLOR, dash="dash"),
        annotation_text=t("vlab.t.break_even"),
        annotation_font_color=FONT_COLOR,
    )
    if point is not None and point.gamma:
        y = point.measured if point.measured is not None else point.predicted
        if y is not None and math.isfinite(y):
            if point.measured is not None:
                how = t("vlab.t.how.measured")
            elif point.c is None or point.v is None:
                how = t("vlab.t.how.sliders")
            else:
                how = t("vlab.t.how.predicted")
            fig.add_scatter(
                x=[point.gamma],
                y=[y],
                mode="markers+text",
                name=t("vlab.t.here_how", how=how),
                marker=dict(size=16, color=COLORS["predicted"], symbol="star", line=dict(width=1, color=FONT_COLOR)),
                text=[t("vlab.t.here")],
                textposition="bottom center",
                textfont=dict(color=FONT_COLOR),
                hovertemplate=(
                    f"γ = %{{x}}<br>{how}: %{{y:.2f}}×<br>α = {num(point.alpha)}, "
                    f"c = {num(point.c)}, v = {num(point.v)}<extra></extra>"
                ),
            )
    fig.update_layout(
        yaxis2=dict(
            overlaying="y",
            side="right",
            title=t("vlab.t.y2"),
            showgrid=False,
            color=FONT_COLOR,
            rangemode="tozero",
        )
    )
    fig.update_xaxes(title_text=t("vlab.t.x"), dtick=1)
    fig.update_layout(yaxis=dict(title=dict(text=t("vlab.t.y")), rangemode="tozero"))
    title = f"α = {curve.alpha:.2f}, c = {curve.c:.2f}, v_γ = {curve.v:.2f}"
    fig = style(fig, title, height=380)
    fig.update_layout(yaxis2=dict(title=dict(text=t("vlab.t.y2"), font=dict(color=FONT_COLOR)), showgrid=False))
    return fig


def theory_html(curve: TheoryCurve, gamma: int, point: MeasuredPoint | None = None) -> str:
    here = next((p for p in curve.points if p.gamma == gamma), None)
    tiles = []
    if here is not None:
        tiles += [
            _tile(num(here.expected_tokens, 2), t("vlab.t.E_at", gamma=gamma), t("vlab.t.tps")),
            _tile(times(here.speedup), t("vlab.t.S_at", gamma=gamma), t("vlab.t.predicted")),
        ]
    tiles.append(_tile(f"γ = {curve.best_gamma}", t("vlab.t.best_tile"), f"S = {times(curve.best_speedup)}"))
    verdict = (
        t("vlab.t.pays", gamma=curve.best_gamma, speedup=times(curve.best_speedup))
        if curve.pays_off
        else t("vlab.t.slower")
    )
    meas = ""
    if point is not None:
        meas = (
            "<p>"
            + t(
                "vlab.t.measured",
                alpha=num(point.alpha),
                c=num(point.c),
                v=num(point.v),
                gamma=point.gamma,
                mean=num(point.mean_accepted_length, 2),
                predicted=times(point.predicted),
                measured=times(point.measured),
            )
            + "</p>"
            + (f'<p style="{_SUB}">{t("vlab.t.no_single")}</p>' if point.c is None or point.v is None else "")
            + (_partial_banner(point.note) if point.note else "")
            + f'<p style="{_SUB}">{esc(t("vlab.t.alpha_note"))}</p>'
        )
    return f'<div style="{_BOX}">{_tiles(tiles)}<p>{esc(verdict)}</p>{meas}</div>'


# --------------------------------------------------------------------------- predict, then reveal


def question_html(q: Question | None, n_left: int = 0) -> str:
    if q is None:
        return f'<div style="{_BOX}">{t("vlab.q.empty")}</div>'
    chips = "".join(
        tokens.chip(text, "drafted", (t("vlab.q.draft", i=i + 1), t("vlab.q.q", q=num(p))))
        for i, (text, p) in enumerate(zip(q.drafts, q.draft_probs))
    )
    qs = " · ".join(f"{i + 1}: q = {num(p)}" for i, p in enumerate(q.draft_probs))
    hint = t("vlab.q.det") if q.deterministic else t("vlab.q.prob")
    return (
        f'<div style="{_BOX}"><div>{t("vlab.q.step", i=q.step_index + 1, left=n_left)}</div>'
        f'<div class="sd-text">{token_html(q.context)}{chips}</div>'
        f'<p style="{_SUB}">{esc(t("vlab.q.hint", qs=qs, hint=hint))}</p></div>'
    )


_CORRECTION_STATE = {"resample": "state.resampled", "bonus": "state.bonus", "target": "state.target"}


def _added(r: Reveal) -> str:
    """ "The target then added <kind>: <token>." in the visitor's language."""
    if r.correction_kind is None:
        return ""
    kind = _CORRECTION_STATE.get(r.correction_kind)
    return t("vlab.rv.added", token=f"{t(kind) if kind else r.correction_kind}: {r.correction}")


def reveal_html(r: Reveal | None, q: Question | None = None) -> str:
    if r is None or q is None:
        return ""
    rows = []
    for i, (text, out) in enumerate(zip(q.drafts, r.outcome)):
        state = {"accepted": "accepted", "rejected": "rejected", "not judged": "discarded"}[out]
        ok = r.guess[i] == (out == "accepted")
        u = "—" if r.us[i] is None else num(r.us[i])
        rows.append(
            f"<tr><td>{i + 1}</td><td>{tokens.chip(text, state)}</td><td>{esc(t('vlab.rv.accept' if r.guess[i] else 'vlab.rv.reject'))}</td>"
            f"<td>{esc(t(f'vlab.rv.out.{out}'))}</td><td>{num(q.draft_probs[i])}</td><td>{num(r.target_probs[i])}</td>"
            f"<td>{num(r.accept_probs[i])}</td><td>{u}</td><td>{'✓' if ok else '✗'}</td></tr>"
        )
    return (
        f'<div style="{_BOX}"><p>{t("vlab.rv.right", points=r.points, max=r.max_points)}'
        f"{esc(t('vlab.rv.perfect')) if r.exact else ''} {esc(_added(r))}</p>"
        '<table cellpadding="4" style="border-collapse:collapse;font-variant-numeric:tabular-nums">'
        f"<tr><th>#</th><th>{esc(t('vlab.rv.h.draft'))}</th><th>{esc(t('vlab.rv.h.guess'))}</th>"
        f"<th>{esc(t('vlab.rv.h.outcome'))}</th><th>q</th><th>p</th><th>min(1, p/q)</th>"
        "<th>u</th><th></th></tr>" + "".join(rows) + "</table>"
        f'<p style="{_SUB}">{t("vlab.rv.note")}</p></div>'
    )


def _history_line(entry: StepScore | RateScore) -> str:
    """One line of the score's history, in the visitor's language."""
    if isinstance(entry, StepScore):
        key = "vlab.sc.step_exact" if entry.exact else "vlab.sc.step"
        return t(key, step=entry.step, points=entry.points, max=entry.max_points)
    actual = t("vlab.sc.none") if entry.actual is None else f"{entry.actual:.0%}"
    return t("vlab.sc.rate", guess=f"{entry.guess:.0%}", actual=actual, points=entry.points)


def score_card(board: Scoreboard) -> str:
    pct_right = (board.step_points / board.step_max) if board.step_max else None
    tiles = [
        _tile(f"{board.total} / {board.total_max}", t("vlab.sc.score")),
        _tile(pct(pct_right), t("vlab.sc.drafts"), t("vlab.sc.steps", steps=board.steps, perfect=board.exact_steps)),
        _tile(
            f"{board.rate_points} / {10 * board.rate_rounds}",
            t("vlab.sc.rates"),
            t("vlab.sc.runs", n=board.rate_rounds),
        ),
    ]
    hist = "".join(f"<li>{esc(_history_line(h))}</li>" for h in reversed(board.history[-8:]))
    return f'<div style="{_BOX}"><b>{esc(t("vlab.sc.title"))}</b>{_tiles(tiles)}<ul style="{_SUB}">{hist}</ul></div>'


# --------------------------------------------------------------------------- replay & share


def replay_html(result: GenerationResult | None, frame_index: int) -> str:
    if result is None:
        return tokens.step_view("", (), replay.Frame(-1, replay.START), message=t("vlab.r.empty"))
    frame = replay.frame_at(result.steps, int(frame_index))
    return tokens.step_view(
        result.prompt, result.steps, frame, stagger_s=0.05, prompt_tokens=len(result.prompt_ids) or None
    )


def trace_summary_html(result: GenerationResult | None, source: str = "") -> str:
    if result is None:
        return ""
    st = result.stats
    cfg = result.config or {}
    bits = [
        t("vlab.r.steps", n=st.steps),
        t("vlab.r.tokens", n=st.new_tokens),
        t("vlab.r.acceptance", rate=pct(st.acceptance_rate)),
        f"γ = {st.gamma}",
        t("vlab.r.drafter", name=st.drafter or "—"),
    ]
    for key in ("preset", "temperature", "seed", "rule"):
        if key in cfg:
            bits.append(t(f"vlab.r.{key}", v=cfg[key]))
    return f'<p style="{_SUB}">{esc(source)} {esc(" · ".join(str(b) for b in bits))}</p>'


def prefill_note(prefill: Prefill) -> str:
    """What the link set and what it ignored, as plain text (escape it for any markup).

    The values named are validated ones (a preset from the config, numbers); the reasons in
    ``errors`` quote at most a short excerpt of what the link said
    (``playground.validate.excerpt``).  The prompt itself is never repeated here: it goes
    into the prompt box, where it is only text."""
    parts = []
    vals = prefill.values()
    if prefill.classroom:
        parts.append(t("vlab.link.classroom", name=prefill.classroom))
    elif vals:
        settings = ", ".join(f"{k} = {v!r}" if k != "prompt" else t("vlab.link.prompt") for k, v in vals.items())
        parts.append(t("vlab.link.settings", settings=settings))
    if prefill.errors:
        parts.append(t("vlab.link.ignored", errors="; ".join(engine_message(e) for e in prefill.errors)))
    return " ".join(parts)


def prefill_note_html(prefill: Prefill) -> str:
    """The link note for the page (a gr.HTML): every character of it escaped, so nothing a link
    says can become a link, image or tag; empty when the URL had no parameters."""
    note = prefill_note(prefill)
    if not note:
        return ""
    return f'<p class="lab-link-note" style="{_SUB}"><b>{esc(t("vlab.link"))}</b> {esc(note)}</p>'


def classroom_md(cp: ClassroomPreset | None) -> str:
    if cp is None:
        return ""
    return f"**{cp.label}** — {cp.explanation}\n\n" + t(
        "vlab.cls.line", preset=cp.preset, gamma=cp.gamma, t=f"{cp.temperature:g}", seed=cp.seed, query=cp.query()
    )
