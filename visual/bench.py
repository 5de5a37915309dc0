"""Benchmark charts and tables for the app: pure functions of bench rows.

``rows`` are the dicts ``tools.bench`` produces (``BenchReport.rows``, or the
``"rows"`` list of ``python -m tools bench --json``).  The figures are the
CLI's own (``tools.bench.build_figures``), restyled for ``gr.Plot``
(transparent background, explicit font colour: readable in dark mode).
Nothing here runs a model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from playground.repetition import HIGH_SHARE
from tools.bench import build_figures, table_columns
from tools.bench.aggregate import Quality
from visual.charts import style
from visual.i18n import t
from visual.i18n.en import MESSAGES as EN

TITLES = {k: EN[f"bench.fig.{k}"] for k in ("throughput", "speedup", "acceptance", "costs")}  # in English

METRIC_HELP = EN["bench.metric_help"]  # in English; the tab shows L("bench.metric_help")
assert f"{HIGH_SHARE:.0%}" in METRIC_HELP  # the catalogue states the threshold: keep it in step with the code

# The CLI's figure text (tools.bench.build_figures) -> catalogue keys, for the app's language.
_AXES = {
    EN[f"bench.axis.{k}"]: f"bench.axis.{k}"
    for k in ("gamma_drafts", "tps", "gamma", "speedup", "position", "acceptance", "cost", "ar")
}
_TRACE_WORDS = [  # (pattern in a series name, catalogue key), the longest first
    (r"predicted from step mix", "bench.trace.step_mix"),
    (r"v_γ \(target pass over γ\+1 tokens\)", "bench.trace.v"),
    (r"\bHF assisted\b", "bench.trace.hf_assisted"),
    (r"\bours\b", "bench.trace.ours"),
    (r"\bmeasured\b", "bench.trace.measured"),
    (r"\bpredicted\b", "bench.trace.predicted"),
    (r"\btree\b", "bench.trace.tree"),
]


def _series_name(name: str) -> str:
    """A series name of the CLI's figures in the current language (drafter names and numbers kept)."""
    for pattern, key in _TRACE_WORDS:
        name = re.sub(pattern, lambda _m, key=key: t(key), name)
    return name


def _localize(fig: go.Figure) -> go.Figure:
    """The CLI figure's axis titles, annotations and series names in the current language."""
    for axis in (fig.layout.xaxis, fig.layout.yaxis):
        text = axis.title.text if axis.title else None
        if text in _AXES:
            axis.title.text = t(_AXES[text])
    for ann in fig.layout.annotations or ():
        if ann.text in _AXES:
            ann.text = t(_AXES[ann.text])
    for tr in fig.data:
        if getattr(tr, "name", None):
            tr.name = _series_name(tr.name)
    return fig


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
        style(_localize(fig), t(f"bench.fig.{key}") if key in TITLES else key, height=340)
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
    heads = [t(f"bench.col.{k}") if f"bench.col.{k}" in EN else h for k, h in cols]
    data = []
    for r in rows:
        rec = {}
        for (k, _), head in zip(cols, heads):
            v = r.get(k)
            if isinstance(v, float):
                v = round(v, 3 if k in ("acceptance_rate", "c") else 2)
            if k == "quality":
                v = quality_text(v)
            if k == "method" and f"bench.method.{v}" in EN:
                v = t(f"bench.method.{v}")
            if k == "method" and r.get("rule") not in (None, "lossless"):
                v = f"{v} ({r['rule']})"
            rec[head] = v
        data.append(rec)
    return pd.DataFrame(data, columns=heads)


def quality_text(value: Any) -> Any:
    """The quality column's note (``tools.bench.aggregate.Quality``: a code) in the current language;
    anything else as it is."""
    if isinstance(value, Quality):
        return t(f"bench.q.{value.code}", **value.params)
    return value


def _prompts(kind: Any) -> str:
    return t(f"bench.prompts.{kind}") if f"bench.prompts.{kind}" in EN else str(kind)


def summary_markdown(rows: Sequence[dict[str, Any]], meta: dict[str, Any] | None = None) -> str:
    """A few sentences: best configuration, speedups over both baselines, costs measured."""
    rows = [r for r in rows if not r.get("trace")]
    if not rows:
        return t("bench.sum.none")
    lines = [_fastest(rows), _fastest_plain(rows), *_ar_lines(rows), _costs(rows), _trees(rows), _machine(meta)]
    return "\n\n".join(line for line in lines if line)


def _fastest(rows: Sequence[dict[str, Any]]) -> str:
    """The fastest speculative configuration, against both baselines ("" if none was timed)."""
    spec = [r for r in rows if r["method"] == "speculative" and r.get("speedup_vs_autoregressive")]
    if not spec:
        return ""
    best = max(spec, key=lambda r: r["speedup_vs_autoregressive"])
    hf = best.get("speedup_vs_hf_generate")
    tree = t("bench.sum.tree", n=best["tree_nodes"]) if _is_tree(best) else ""
    return (
        t(
            "bench.sum.fastest",
            drafter=best["drafter"],
            gamma=best["gamma"],
            tree=tree,
            prompts=_prompts(best["prompts"]),
            tps=f"{best['tokens_per_s']:.1f}",
            speedup=f"{best['speedup_vs_autoregressive']:.2f}",
        )
        + (t("bench.sum.vs_hf", x=f"{hf:.2f}") if hf else "")
        + (
            t("bench.sum.acceptance", rate=f"{best['acceptance_rate']:.0%}")
            if best.get("acceptance_rate") is not None
            else ""
        )
        + (t("bench.sum.predicted", x=f"{best['predicted_speedup']:.2f}") if best.get("predicted_speedup") else "")
        + t("bench.sum.end")
    )


def _fastest_plain(rows: Sequence[dict[str, Any]]) -> str:
    """The best speedup on runs that do not repeat themselves, against the repetitive ones."""
    plain = [r for r in rows if r["method"] == "speculative" and r.get("speedup_non_repetitive")]
    if not plain:
        return ""
    best = max(plain, key=lambda r: r["speedup_non_repetitive"])
    rep = best.get("speedup_repetitive")
    return (
        t(
            "bench.sum.plain",
            drafter=best["drafter"],
            gamma=best["gamma"],
            temperature=f"{best['temperature']:g}",
            speedup=f"{best['speedup_non_repetitive']:.2f}",
        )
        + (t("bench.sum.against_rep", x=f"{rep:.2f}") if rep else "")
        + t("bench.sum.rep_runs", k=best["repetitive_runs"], n=best["n_runs"])
    )


def _ar_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Our autoregressive loop against transformers' generate, per prompt set and temperature."""
    return [
        t(
            "bench.sum.ar",
            x=f"{r['speedup_vs_hf_generate']:.2f}",
            prompts=_prompts(r["prompts"]),
            temperature=f"{r['temperature']:g}",
        )
        for r in rows
        if r["method"] == "autoregressive" and r.get("speedup_vs_hf_generate")
    ]


def _costs(rows: Sequence[dict[str, Any]]) -> str:
    """The measured cost v_γ of a chain's verify pass, per γ."""
    vs = sorted({(r["gamma"], r["v"]) for r in rows if r["method"] == "speculative" and r.get("v") and not _is_tree(r)})
    return t("bench.sum.v", values=", ".join(f"γ={g}: {v:.2f}" for g, v in vs)) if vs else ""


def _trees(rows: Sequence[dict[str, Any]]) -> str:
    """What the tree drafts verified per pass, and how they did against chains."""
    trees = sorted(
        (r for r in rows if r["method"] == "speculative" and _is_tree(r) and r.get("nodes_per_pass")),
        key=lambda r: (r["tree_nodes"], r["drafter"] or "", r["gamma"]),
    )
    if not trees:
        return ""
    items = "; ".join(
        t(
            "bench.sum.tree_item",
            drafter=r["drafter"],
            gamma=r["gamma"],
            nodes=r["tree_nodes"],
            per_pass=f"{r['nodes_per_pass']:.1f}",
        )
        + (f", v = {r['v']:.2f}" if r.get("v") else "")
        + (t("bench.sum.tree_vs_chain", x=f"{r['speedup_vs_chain']:.2f}") if r.get("speedup_vs_chain") else "")
        for r in trees
    )
    return t("bench.sum.trees", items=items)


def _machine(meta: dict[str, Any] | None) -> str:
    """The machine the numbers come from."""
    if not (meta and meta.get("machine")):
        return ""
    m = meta["machine"]
    return t("bench.sum.machine", cpu=m.get("cpu"), threads=m.get("threads"), load=f"{m.get('load_avg_1m') or 0:.1f}")
