"""The lesson "Serving a class": why servers turn speculation down under load, with the
curves measured by ``python -m playground batch-sweep`` (``playground/data/batch_sweep.json``)
or live on this server.

Figures: the class's throughput by runs at once for speculative (capped / uncapped) and
plain decoding, and the cost of one shared pass by the row-tokens it carries.  This
module renders a measurement; it does not measure (``playground.batch_sweep``).
"""

from __future__ import annotations

import plotly.graph_objects as go

from visual.charts import COLORS, GRID_COLOR, style
from visual.fmt import esc

LESSON_MD = """### Serving a class: batching and speculation

A target pass over a few tokens is **memory-bound** on this CPU: reading 270 M weights costs
about the same whether the pass carries one token or a few dozen.  So when thirty students
press Run, the server does not run thirty decoding loops one after another: every run keeps
its own cache, drafts and random stream, but their next target passes are **one forward
pass** (continuous batching, as vLLM, SGLang and TGI do).  Each row sees only its own keys.

Past the knee, the pass is **compute-bound**: every extra token costs real time, and a
rejected draft is pure waste.  Alone, speculation turns idle compute into tokens; under
load there is no idle compute left, and plain decoding of many rows wins.  That is why
servers turn speculation **down** as load grows: this one shares a budget of row-tokens per
pass between the runs (draft cap = knee ÷ runs − 1), so at full load a run decodes plainly.
At temperature 0 the output never changes, only the speed."""


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
                name=variant,
                line=dict(color=color, width=3 if "capped" in variant else 2),
                hovertemplate="%{x} runs at once<br>%{y:.1f} tokens/s for the class<extra>" + variant + "</extra>",
            )
    fig.update_xaxes(title="runs at once", type="log", gridcolor=GRID_COLOR, tickvals=[1, 2, 4, 8, 16, 32])
    fig.update_yaxes(title="tokens/s for the class", gridcolor=GRID_COLOR, rangemode="tozero")
    return style(fig, "A class at once: throughput by runs sharing each pass", height=340)


def pass_cost_figure(data: dict) -> go.Figure:
    """One shared pass's cost (in single 1-token passes) by the row-tokens it carries."""
    costs = sorted(data.get("pass_costs", []), key=lambda c: c["rows"] * c["tokens"])
    fig = go.Figure()
    fig.add_scatter(
        x=[c["rows"] * c["tokens"] for c in costs],
        y=[c["relative"] for c in costs],
        mode="markers+lines",
        name="one shared pass",
        line=dict(color=COLORS["verify"]),
        text=[f"{c['rows']} rows × {c['tokens']} tokens" for c in costs],
        hovertemplate="%{text}<br>%{y:.2f} × a 1-token pass<extra></extra>",
    )
    fig.update_xaxes(title="row-tokens in the pass (rows × tokens each)", type="log", gridcolor=GRID_COLOR)
    fig.update_yaxes(title="cost ÷ one 1-token pass", gridcolor=GRID_COLOR, rangemode="tozero")
    return style(fig, "What one shared target pass costs", height=320)


def provenance_html(data: dict, live: bool = False) -> str:
    """Where the numbers come from, escaped."""
    about = data.get("about") or {}
    if not about:
        return "<p>No measurement yet.</p>"
    what = "Measured just now on this server" if live else "Measured"
    parts = [f"{k}: {about[k]}" for k in ("preset", "dtype", "drafter", "gamma", "temperature", "tokens") if k in about]
    return (
        f"<p class='serving-provenance'>{esc(what)} ({esc(about.get('date', ''))}, {esc(about.get('machine', ''))}; "
        f"{esc(', '.join(parts))}).  Reproduce: <code>{esc(about.get('command', ''))}</code></p>"
    )


def class_rows(data: dict) -> list[list]:
    """The class table: runs, variant, tokens/s, p50, p95, runs per pass."""
    return [
        [r["runs"], r["variant"], round(r["tokens_per_s"], 1), round(r["p50_s"], 2), round(r["p95_s"], 2),
         round(r["mean_shared_rows"], 1)]
        for r in sorted(data.get("class", []), key=lambda r: (r["runs"], r["variant"]))
    ]  # fmt: skip


CLASS_HEADERS = ["runs at once", "variant", "class tokens/s", "p50 s", "p95 s", "runs per pass"]
