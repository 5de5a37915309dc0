"""The lesson "Serving a class": why servers turn speculation down under load, with the
curves measured by ``python -m tools batch-sweep`` (``playground/data/batch_sweep.json``)
or live on this server.

Figures: the class's throughput by runs at once for speculative (capped / uncapped) and
plain decoding, beside the machine's ceiling measured in the same run (plain decoding
through passes of that many rows alone), and the cost of one shared pass by the row-tokens
it carries.  This module renders a measurement; it does not measure (``tools.batch_sweep``).
"""

from __future__ import annotations

import plotly.graph_objects as go

from visual.charts import COLORS, GRID_COLOR, style
from visual.fmt import esc
from visual.i18n import t
from visual.i18n.en import MESSAGES as EN

LESSON_MD = EN["sv.lesson"]  # the lesson in English (the tab shows it through L("sv.lesson"))


def throughput_figure(data: dict) -> go.Figure:
    """Class tokens/s by runs at once, one line per variant."""
    fig = go.Figure()
    colors = {"speculative, capped": COLORS["speedup"], "speculative": COLORS["spec"], "autoregressive": COLORS["ar"]}
    for variant, color in colors.items():
        rows = sorted((r for r in data.get("class", []) if r["variant"] == variant), key=lambda r: r["runs"])
        if rows:
            fig.add_scatter(
                x=[r["runs"] for r in rows],
                y=[r["tokens_per_s"] for r in rows],
                mode="lines+markers",
                name=_variant(variant),
                line=dict(color=color, width=3 if "capped" in variant else 2),
                hovertemplate=t("sv.hover.class") + "<extra>" + _variant(variant) + "</extra>",
            )
    ceiling = _ceilings(data)
    if ceiling:
        fig.add_scatter(
            x=list(ceiling),
            y=list(ceiling.values()),
            mode="lines+markers",
            name=t("sv.ceiling"),
            line=dict(color=COLORS["other"], dash="dash", width=2),
            hovertemplate=t("sv.hover.ceiling") + "<extra></extra>",
        )
    fig.update_xaxes(title=t("sv.runs"), type="log", gridcolor=GRID_COLOR, tickvals=[1, 2, 4, 8, 16, 32])
    fig.update_yaxes(title=t("sv.class_tps"), gridcolor=GRID_COLOR, rangemode="tozero")
    fig = style(fig, t("sv.throughput.title"), height=400)
    # four legend entries take a line each on a phone: below the axis, where they cannot cover the title
    return fig.update_layout(
        margin=dict(b=130), legend=dict(yref="container", y=0.0, yanchor="bottom", orientation="h")
    )


def pass_cost_figure(data: dict) -> go.Figure:
    """One shared pass's cost (in single 1-token passes) by the row-tokens it carries."""
    costs = sorted(data.get("pass_costs", []), key=lambda c: c["rows"] * c["tokens"])
    fig = go.Figure()
    fig.add_scatter(
        x=[c["rows"] * c["tokens"] for c in costs],
        y=[c["relative"] for c in costs],
        mode="markers+lines",
        name=t("sv.one_pass"),
        line=dict(color=COLORS["verify"]),
        text=[t("sv.rows_tokens", rows=c["rows"], tokens=c["tokens"]) for c in costs],
        hovertemplate=t("sv.hover.cost") + "<extra></extra>",
    )
    fig.update_xaxes(title=t("sv.cost.x"), type="log", gridcolor=GRID_COLOR)
    fig.update_yaxes(title=t("sv.cost.y"), gridcolor=GRID_COLOR, rangemode="tozero")
    return style(fig, t("sv.cost.title"), height=320)


def provenance_html(data: dict, live: bool = False) -> str:
    """Where the numbers come from, escaped."""
    about = data.get("about") or {}
    if not about:
        return f"<p>{esc(t('sv.none'))}</p>"
    what = t("sv.measured_now") if live else t("sv.measured")
    keys = ("preset", "dtype", "drafter", "gamma", "temperature", "tokens")
    parts = t("sv.sep").join(f"{t(f'sv.about.{k}')}: {about[k]}" for k in keys if k in about)
    said = t("sv.provenance", what=what, date=about.get("date", ""), machine=about.get("machine", ""), parts=parts)
    return (
        f"<p class='serving-provenance'>{esc(said)} {esc(t('sv.reproduce'))} "
        f"<code>{esc(about.get('command', ''))}</code></p>"
    )


def _variant(name: str) -> str:
    """A variant's name in the current language (an unknown one as measured)."""
    return t(f"sv.variant.{name}") if f"sv.variant.{name}" in EN else name


def _ceilings(data: dict) -> dict[int, float]:
    """Class size -> the ceiling measured for it (tokens/s), where the measurement has one."""
    rows = sorted(data.get("class", []), key=lambda r: r["runs"])
    return {r["runs"]: r["ceiling_tokens_per_s"] for r in rows if r.get("ceiling_tokens_per_s")}


def class_rows(data: dict) -> list[list]:
    """The class table (``class_headers``' columns): runs, variant, tokens/s, its share of the
    ceiling, p50, p95, runs per pass, and where a shared pass's time went."""
    cells = {
        "runs": lambda r: r["runs"],
        "variant": lambda r: _variant(r["variant"]),
        "tps": lambda r: round(r["tokens_per_s"], 1),
        "of_ceiling": _share,
        "p50": lambda r: round(r["p50_s"], 2),
        "p95": lambda r: round(r["p95_s"], 2),
        "per_pass": lambda r: round(r["mean_shared_rows"], 1),
        "split": lambda r: _split(r.get("per_pass")),
    }
    rows = sorted(data.get("class", []), key=lambda r: (r["runs"], r["variant"]))
    return [[cells[c](r) for c in _columns(data)] for r in rows]


def _split(per_pass: dict | None) -> str:
    """Mean ms per shared pass: the model, the scheduler's own work (gathering the pass,
    extending the rows' caches, reading the logits) and its wait for stragglers; "–" without
    shared passes."""
    if not per_pass:
        return "–"
    own = per_pass["gather_ms"] + per_pass["write_ms"] + per_pass["read_ms"]
    return t("sv.split", model=f"{per_pass['model_ms']:.0f}", own=f"{own:.0f}", wait=f"{per_pass['wait_ms']:.0f}")


def _share(row: dict) -> str:
    """The class's throughput as a share of the ceiling ("0.62 of 240"), or "–" when not measured."""
    ceiling = row.get("ceiling_tokens_per_s")
    if not ceiling:
        return "–"
    return t("sv.share", share=f"{row['tokens_per_s'] / ceiling:.2f}", ceiling=f"{ceiling:.0f}")


CLASS_COLUMNS = ("runs", "variant", "tps", "of_ceiling", "p50", "p95", "per_pass", "split")
_MEASURED_BY = {"of_ceiling": "ceiling_tokens_per_s", "split": "per_pass"}  # columns older files lack


def _columns(data: dict) -> list[str]:
    """The columns the measurement fills: a file written before the ceiling or the pass split
    were measured shows neither column rather than a column of dashes."""
    rows = data.get("class", [])
    return [c for c in CLASS_COLUMNS if c not in _MEASURED_BY or any(r.get(_MEASURED_BY[c]) for r in rows)]


def class_headers(data: dict) -> list[str]:
    """The class table's headers in the current language (``class_rows``' columns)."""
    return [t(f"sv.col.{k}") for k in _columns(data)]
