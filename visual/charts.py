"""Plotly figures of a run, computed from the StepRecords seen so far (so they update live).

All figures have transparent backgrounds and an explicit mid-grey font colour
(readable on light and dark pages; ``style.css`` sharpens text colours per
theme), and use the Okabe-Ito colour-blind-safe palette.  Functions take plain
sequences of ``StepRecord`` and return ``plotly.graph_objects.Figure``.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from playground.decoding.records import StepRecord
from playground.decoding.sampling import accepted_length_pmf
from playground.decoding.tally import Tally
from visual.i18n import plural, t

FONT_COLOR = "#6b7280"  # mid grey: readable on white and on Gradio's dark background
GRID_COLOR = "rgba(128, 128, 128, 0.28)"
TRANSPARENT = "rgba(0, 0, 0, 0)"
COLORS = {
    "spec": "#0072B2",  # blue
    "ar": "#E69F00",  # orange
    "speedup": "#009E73",  # bluish green
    "draft": "#CC79A7",  # reddish purple
    "verify": "#56B4E9",  # sky blue
    "other": "#999999",
    "predicted": "#D55E00",  # vermillion
}


def style(fig: go.Figure, title: str, height: int = 300) -> go.Figure:
    fig.update_layout(
        title=dict(
            text=title,
            x=0.01,
            xanchor="left",
            y=0.98,
            yanchor="top",
            yref="container",
            font=dict(size=14, color=FONT_COLOR),
        ),
        paper_bgcolor=TRANSPARENT,
        plot_bgcolor=TRANSPARENT,
        font=dict(color=FONT_COLOR, size=12),
        height=height,
        margin=dict(l=55, r=20, t=64, b=45),
        legend=dict(
            orientation="h",
            yanchor="bottom",
            y=1.01,
            xanchor="left",
            x=0.0,
            bgcolor=TRANSPARENT,
            font=dict(color=FONT_COLOR, size=11),
        ),
        hoverlabel=dict(font=dict(color="#111111"), bgcolor="#ffffff"),
        bargap=0.2,
    )
    fig.update_xaxes(gridcolor=GRID_COLOR, zerolinecolor=GRID_COLOR, linecolor=GRID_COLOR, color=FONT_COLOR)
    fig.update_yaxes(gridcolor=GRID_COLOR, zerolinecolor=GRID_COLOR, linecolor=GRID_COLOR, color=FONT_COLOR)
    return fig


def empty_figure(title: str, message: str | None = None) -> go.Figure:
    message = t("ch.press_run") if message is None else message
    fig = go.Figure()
    fig.add_annotation(
        text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper", font=dict(color=FONT_COLOR, size=13)
    )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return style(fig, title)


# --------------------------------------------------------------------------- race


def _curve(steps: Sequence[StepRecord]) -> tuple[list[float], list[int]]:
    xs = [0.0] + [s.elapsed_ms / 1000.0 for s in steps]
    ys = [0] + [s.committed_tokens for s in steps]
    return xs, ys


def _tokens_at(steps: Sequence[StepRecord], t_ms: float) -> int:
    n = 0
    for s in steps:
        if s.elapsed_ms <= t_ms:
            n = s.committed_tokens
        else:
            break
    return n


def running_speedup(spec: Sequence[StepRecord], ar: Sequence[StepRecord]) -> list[tuple[float, float]]:
    """(t in s, speculative tokens / autoregressive tokens committed by t) while both runs were going."""
    if not spec or not ar:
        return []
    lo = max(spec[0].elapsed_ms, ar[0].elapsed_ms)
    hi = min(spec[-1].elapsed_ms, ar[-1].elapsed_ms)
    times = sorted({s.elapsed_ms for s in spec} | {s.elapsed_ms for s in ar})
    out = []
    for at in times:
        if lo <= at <= hi:
            a = _tokens_at(ar, at)
            if a > 0:
                out.append((at / 1000.0, _tokens_at(spec, at) / a))
    return out


def race_figure(spec: Sequence[StepRecord], ar: Sequence[StepRecord] = (), ar_pending: bool = False) -> go.Figure:
    """Tokens committed vs wall time for both runs, with the running speedup on a second axis."""
    title = t("ch.race")
    if not spec and not ar:
        return empty_figure(title)
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    if spec:
        xs, ys = _curve(spec)
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines+markers",
                line_shape="hv",
                name=t("ch.speculative"),
                line=dict(color=COLORS["spec"], width=3),
                marker=dict(size=5, symbol="circle"),
                hovertemplate=f"{t('ch.tokens_hover')}<extra>{t('ch.speculative')}</extra>",
            ),
            secondary_y=False,
        )
    if ar:
        xs, ys = _curve(ar)
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines+markers",
                line_shape="hv",
                name=t("ch.autoregressive"),
                line=dict(color=COLORS["ar"], width=3, dash="dash"),
                marker=dict(size=5, symbol="square"),
                hovertemplate=f"{t('ch.tokens_hover')}<extra>{t('ch.autoregressive')}</extra>",
            ),
            secondary_y=False,
        )
    sp = running_speedup(spec, ar)
    if sp:
        fig.add_trace(
            go.Scatter(
                x=[t for t, _ in sp],
                y=[r for _, r in sp],
                mode="lines",
                name=t("ch.running_speedup"),
                line=dict(color=COLORS["speedup"], width=2, dash="dot"),
                hovertemplate=f"{t('ch.speedup_hover')}<extra>{t('ch.speedup_so_far')}</extra>",
            ),
            secondary_y=True,
        )
        fig.update_yaxes(title_text=t("ch.speedup_axis"), secondary_y=True, rangemode="tozero", showgrid=False)
    note = t("ch.race_note")
    if ar_pending:
        note = t("ch.ar_pending") + note
    elif not ar:
        note = t("ch.solo")
    fig.add_annotation(
        text=note,
        showarrow=False,
        x=0,
        y=-0.25,
        xref="paper",
        yref="paper",
        xanchor="left",
        yanchor="top",
        align="left",
        font=dict(size=10, color=FONT_COLOR),
    )
    fig.update_xaxes(title_text=t("ch.wall_time"), rangemode="tozero")
    fig.update_yaxes(title_text=t("ch.tokens_committed"), rangemode="tozero", secondary_y=False)
    style(fig, title, height=360)
    fig.update_layout(margin=dict(b=90))
    return fig


# --------------------------------------------------------------------------- acceptance


def acceptance_counts(steps: Sequence[StepRecord], gamma: int) -> tuple[list[int], list[int]]:
    """(judged, accepted) counts by draft position 1..γ (``Tally``: the one count)."""
    tally = Tally.of_records(steps, gamma)
    return tally.judged_at, tally.accepted_at


def measured_alpha(steps: Sequence[StepRecord]) -> float | None:
    return Tally.of_records(steps, 0).alpha


def acceptance_by_position_figure(steps: Sequence[StepRecord], gamma: int) -> go.Figure:
    title = t("ch.acc")
    judged, accepted = acceptance_counts(steps, gamma)
    if not any(judged):
        return empty_figure(title, t("ch.no_judged"))
    xs = list(range(1, gamma + 1))
    rates = [(a / j) if j else None for a, j in zip(accepted, judged)]
    fig = go.Figure(
        go.Bar(
            x=xs,
            y=rates,
            name=t("ch.p_accept"),
            marker_color=COLORS["spec"],
            text=[f"n={j}" for j in judged],
            textposition="outside",
            textfont=dict(color=FONT_COLOR),
            hovertemplate=t("ch.position_hover") + "<extra></extra>",
        )
    )
    alpha = measured_alpha(steps)
    if alpha is not None:
        fig.add_hline(
            y=alpha,
            line=dict(color=COLORS["predicted"], dash="dash"),
            annotation_text=t("ch.overall_alpha", alpha=f"{alpha:.2f}"),
            annotation_position="bottom right",
            annotation_font_color=FONT_COLOR,
        )
    fig.update_xaxes(title_text=t("ch.draft_position"), dtick=1)
    fig.update_yaxes(title_text=t("ch.accepted_judged"), range=[0, 1.15])
    return style(fig, title)


def accepted_length_figure(steps: Sequence[StepRecord], gamma: int) -> go.Figure:
    """Histogram of drafts accepted per step (steps with all γ drafts) vs the i.i.d. prediction from α."""
    title = t("ch.len")
    full = [s for s in steps if len(s.drafted) == gamma and gamma > 0]
    if not full:
        return empty_figure(title, t("ch.no_full", gamma=gamma))
    counts = Tally.of_records(full, gamma).hist  # steps by drafts accepted (a full step accepts <= γ)
    n = len(full)
    xs = list(range(gamma + 1))
    fig = go.Figure(
        go.Bar(
            x=xs,
            y=[c / n for c in counts],
            name=t("ch.measured_steps", n=n),
            marker_color=COLORS["spec"],
            customdata=counts,
            hovertemplate=t("ch.len_hover") + "<extra></extra>",
        )
    )
    alpha = measured_alpha(steps)
    if alpha is not None:
        pmf = accepted_length_pmf(alpha, gamma)
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=pmf,
                mode="lines+markers",
                name=t("ch.predicted_from", alpha=f"{alpha:.2f}"),
                line=dict(color=COLORS["predicted"], dash="dash"),
                marker=dict(symbol="diamond", size=8),
                hovertemplate=f"{t('ch.len_pred_hover')}<extra>{t('ch.iid')}</extra>",
            )
        )
    excluded = len(steps) - n
    note = t("ch.left_out", n=excluded, s=plural(excluded)) if excluded else ""
    fig.update_xaxes(title_text=t("ch.len_axis", note=note), dtick=1)
    fig.update_yaxes(title_text=t("ch.fraction"), rangemode="tozero")
    return style(fig, title)


# --------------------------------------------------------------------------- time


def timeline_figure(steps: Sequence[StepRecord]) -> go.Figure:
    """Per step: drafting time, the target's verify pass, and everything else (sampling, trace bookkeeping)."""
    title = t("ch.time")
    if not steps:
        return empty_figure(title)
    xs = [s.index + 1 for s in steps]
    draft = [s.draft_ms for s in steps]
    verify = [s.verify_ms for s in steps]
    other = [max(0.0, s.step_ms - s.draft_ms - s.verify_ms) for s in steps]
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            x=xs,
            y=draft,
            name=t("ch.draft"),
            marker_color=COLORS["draft"],
            marker_pattern_shape="/",
            hovertemplate=f"{t('ch.step_ms_hover')}<extra>{t('ch.draft')}</extra>",
        )
    )
    fig.add_trace(
        go.Bar(
            x=xs,
            y=verify,
            name=t("ch.verify"),
            marker_color=COLORS["verify"],
            hovertemplate=f"{t('ch.step_ms_hover')}<extra>{t('ch.verify_short')}</extra>",
        )
    )
    fig.add_trace(
        go.Bar(
            x=xs,
            y=other,
            name=t("ch.other"),
            marker_color=COLORS["other"],
            marker_pattern_shape=".",
            hovertemplate=f"{t('ch.step_ms_hover')}<extra>{t('ch.other_short')}</extra>",
        )
    )
    fig.update_layout(barmode="stack")
    fig.update_xaxes(title_text=t("ch.step"))
    fig.update_yaxes(title_text=t("ch.ms"), rangemode="tozero")
    return style(fig, title)


def tokens_per_call_figure(steps: Sequence[StepRecord]) -> go.Figure:
    title = t("ch.tpc")
    if not steps:
        return empty_figure(title)
    xs = [s.index + 1 for s in steps]
    emitted = [len(s.emitted_ids) for s in steps]
    running = []
    total = 0
    for i, e in enumerate(emitted, 1):
        total += e
        running.append(total / i)
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            x=xs,
            y=emitted,
            name=t("ch.tokens_this_step"),
            marker_color=COLORS["spec"],
            hovertemplate=t("ch.tpc_hover") + "<extra></extra>",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=running,
            mode="lines",
            name=t("ch.running_mean"),
            line=dict(color=COLORS["speedup"], width=3),
            hovertemplate=f"{t('ch.mean_hover')}<extra>{t('ch.mean')}</extra>",
        )
    )
    fig.add_hline(
        y=1,
        line=dict(color=COLORS["ar"], dash="dash"),
        annotation_text=t("ch.ar_one"),
        annotation_position="bottom right",
        annotation_font_color=FONT_COLOR,
    )
    fig.update_xaxes(title_text=t("ch.step_axis"))
    fig.update_yaxes(title_text=t("ch.tokens"), rangemode="tozero", dtick=1)
    return style(fig, title)
