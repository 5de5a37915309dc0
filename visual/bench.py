"""Benchmark charts and tables for the app: pure functions of bench rows.

``rows`` are the dicts ``playground.bench`` produces (``BenchReport.rows``, or the
``"rows"`` list of ``python -m playground bench --json``).  The figures are the
CLI's own (``playground.bench.build_figures``), restyled for ``gr.Plot``
(transparent background, explicit font colour: readable in dark mode).
Nothing here runs a model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from playground.bench import build_figures, table_columns
from playground.repetition import HIGH_SHARE
from visual.charts import style

TITLES = {
    "throughput": "Throughput by block size γ (tokens/s)",
    "speedup": "Decode speedup vs our autoregressive loop: measured vs predicted",
    "acceptance": "Acceptance by draft position",
    "costs": "Cost of one step, in single-token target passes (γ·c + v_γ)",
}

METRIC_HELP = (
    "**latency** = wall time per new token, prefill included · **throughput** = tokens/s · "
    "**acceptance rate** = accepted drafts / drafts the target judged (drafts after the first rejection are "
    "never judged) · **tokens / target call** = new tokens per decode-phase target pass · "
    "**c** = drafter ms per drafted token ÷ one single-token target pass · "
    "**v_γ** = one target pass over γ+1 tokens ÷ one over 1 token, timed back to back at the same cache length · "
    "**predicted** = E(α, γ) / (γ·c + v_γ) with E = (1 − α^(γ+1)) / (1 − α) and the measured α · "
    "**quality** = token-identical to `transformers` `generate()` for greedy rows · "
    "**repeated 4-grams** = share of output tokens that complete a 4-gram already in the prompt or earlier in the "
    "output · **distinct-2** = distinct bigrams / bigrams of the output · a run is **repetitive** when at least "
    f"{HIGH_SHARE:.0%} of its tokens repeat · **speedup, non-repetitive / repetitive** = our autoregressive loop's "
    "ms/token on the same prompts ÷ this row's, over those runs only (a base model loops when greedy, and copying "
    "a loop is nearly free, so judge a drafter on the non-repetitive column)."
)


def _is_tree(r: dict[str, Any]) -> bool:
    return (r.get("tree_nodes") or 1) > 1


def _figure_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows for the CLI's figures, a tree row named as its own series ("prompt-lookup · tree 8"),
    so a drafter's chain and tree rows at the same γ are not joined into one line."""
    return [{**r, "drafter": f"{r['drafter']} · tree {r['tree_nodes']}"} if _is_tree(r) else r for r in rows]


def bench_figures(rows: Sequence[dict[str, Any]]) -> dict[str, go.Figure]:
    """{"throughput", "speedup", "acceptance", "costs"} -> styled plotly figures (empty rows: empty figures).

    The costs figure (γ·c + v_γ, a chain's cost model) is drawn from the chain rows only."""
    rows = list(rows)
    figs = build_figures(_figure_rows(rows))
    if any(_is_tree(r) for r in rows):
        figs["costs"] = build_figures([r for r in rows if not _is_tree(r)])["costs"]
    for key, fig in figs.items():
        style(fig, TITLES.get(key, key), height=340)
    return figs


def bench_table(rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str]] | None = None) -> pd.DataFrame:
    """The 'block size → latency, throughput, acceptance rate, quality' table as a DataFrame
    (human column names, rounded numbers; prompt kind / temperature / dtype columns added
    when the rows mix several)."""
    rows = list(rows)
    columns = table_columns(rows) if columns is None else columns
    extra = [
        (k, h)
        for k, h in (("prompts", "prompts"), ("temperature", "T"), ("dtype", "dtype"), ("trace", "trace"))
        if len({r.get(k) for r in rows}) > 1
    ]
    cols = extra + list(columns)
    data = []
    for r in rows:
        rec = {}
        for k, h in cols:
            v = r.get(k)
            if isinstance(v, float):
                v = round(v, 3 if k in ("acceptance_rate", "c") else 2)
            if k == "method" and r.get("rule") not in (None, "lossless"):
                v = f"{v} ({r['rule']})"
            rec[h] = v
        data.append(rec)
    return pd.DataFrame(data, columns=[h for _, h in cols])


def summary_markdown(rows: Sequence[dict[str, Any]], meta: dict[str, Any] | None = None) -> str:
    """A few sentences: best configuration, speedups over both baselines, costs measured."""
    rows = [r for r in rows if not r.get("trace")]
    if not rows:
        return "No results yet."
    lines = []
    spec = [r for r in rows if r["method"] == "speculative" and r.get("speedup_vs_autoregressive")]
    if spec:
        best = max(spec, key=lambda r: r["speedup_vs_autoregressive"])
        hf = best.get("speedup_vs_hf_generate")
        tree = f", tree of {best['tree_nodes']} nodes" if _is_tree(best) else ""
        lines.append(
            f"Fastest: **{best['drafter']} at γ={best['gamma']}{tree}** on {best['prompts']} prompts — "
            f"{best['tokens_per_s']:.1f} tokens/s, **{best['speedup_vs_autoregressive']:.2f}×** our autoregressive loop"
            + (f", {hf:.2f}× `transformers` `generate()`" if hf else "")
            + (f"; acceptance {best['acceptance_rate']:.0%}" if best.get("acceptance_rate") is not None else "")
            + (f"; predicted {best['predicted_speedup']:.2f}×" if best.get("predicted_speedup") else "")
            + "."
        )
    plain = [r for r in rows if r["method"] == "speculative" and r.get("speedup_non_repetitive")]
    if plain:
        best = max(plain, key=lambda r: r["speedup_non_repetitive"])
        rep = best.get("speedup_repetitive")
        lines.append(
            f"On non-repetitive outputs the fastest is **{best['drafter']} at γ={best['gamma']}** "
            f"(T={best['temperature']:g}): **{best['speedup_non_repetitive']:.2f}×** our autoregressive loop"
            + (f", against {rep:.2f}× on its repetitive outputs" if rep else "")
            + f" ({best['repetitive_runs']} of {best['n_runs']} runs repetitive)."
        )
    ar = [r for r in rows if r["method"] == "autoregressive" and r.get("speedup_vs_hf_generate")]
    for r in ar:
        lines.append(
            f"Our autoregressive loop runs at {r['speedup_vs_hf_generate']:.2f}× `generate()`'s speed "
            f"({r['prompts']} prompts, T={r['temperature']:g})."
        )
    vs = sorted({(r["gamma"], r["v"]) for r in rows if r["method"] == "speculative" and r.get("v") and not _is_tree(r)})
    if vs:
        lines.append("Measured v_γ: " + ", ".join(f"γ={g}: {v:.2f}" for g, v in vs) + ".")
    trees = sorted(
        (r for r in rows if r["method"] == "speculative" and _is_tree(r) and r.get("nodes_per_pass")),
        key=lambda r: (r["tree_nodes"], r["drafter"] or "", r["gamma"]),
    )
    if trees:
        lines.append(
            "Draft trees: "
            + "; ".join(
                f"{r['drafter']} γ={r['gamma']} tree {r['tree_nodes']}: {r['nodes_per_pass']:.1f} nodes per pass"
                + (f", v = {r['v']:.2f}" if r.get("v") else "")
                + (f", {r['speedup_vs_chain']:.2f}× the chain" if r.get("speedup_vs_chain") else "")
                for r in trees
            )
            + " (v: one target pass over the root and the nodes ÷ one single-token pass)."
        )
    if meta and meta.get("machine"):
        m = meta["machine"]
        lines.append(
            f"Machine: {m.get('cpu')}, {m.get('threads')} torch threads, load {m.get('load_avg_1m') or 0:.1f}; "
            "timings on a shared CPU are noisy — methods were interleaved so drift hits them alike."
        )
    return "\n\n".join(lines)
