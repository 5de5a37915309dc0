"""Rendering bench rows: markdown, CSV, JSON and an HTML page with plotly charts.

This module renders; it computes nothing new (``aggregate``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from playground.repetition import HIGH_SHARE
from playground.rules import DEFAULT_RULE
from tools.bench.options import ROW_FIELDS, BenchReport

TABLE_COLUMNS = (
    ("method", "method"),
    ("drafter", "drafter"),
    ("gamma", "block size γ"),
    ("tree_nodes", "tree nodes"),
    ("draft_stop", "stop below"),
    ("nodes_per_pass", "nodes / pass"),
    ("ms_per_token", "latency (ms/token)"),
    ("tokens_per_s", "throughput (tokens/s)"),
    ("ceiling_tokens_per_s", "ceiling (tokens/s)"),
    ("of_ceiling", "of ceiling"),
    ("speedup_vs_autoregressive", "speedup vs ours AR"),
    ("speedup_vs_hf_generate", "speedup vs HF generate"),
    ("speedup_vs_chain", "speedup vs chain"),
    ("acceptance_rate", "acceptance rate"),
    ("tokens_per_target_call", "tokens / target call"),
    ("c", "c"),
    ("v", "v_γ"),
    ("v_measured", "v in runs"),
    ("predicted_speedup", "predicted"),
    ("predicted_speedup_steps", "predicted (step mix)"),
    ("mean_accepted_length", "mean accepted"),
    ("repeated_4gram_share", "repeated 4-grams"),
    ("distinct_2", "distinct-2"),
    ("repetitive_runs", "repetitive runs"),
    ("speedup_non_repetitive", "speedup, non-repetitive"),
    ("speedup_repetitive", "speedup, repetitive"),
    ("quality", "quality"),
)


TREE_COLUMNS = ("tree_nodes", "nodes_per_pass", "speedup_vs_chain", "v_measured")


def table_columns(rows: list[dict[str, Any]]) -> tuple[tuple[str, str], ...]:
    """TABLE_COLUMNS, without the tree columns when every row drafts a chain and without
    the stop column when no chain stops early."""
    drop = set()
    if not any((r.get("tree_nodes") or 1) > 1 for r in rows):
        drop |= set(TREE_COLUMNS)
    if not any(r.get("draft_stop") for r in rows):
        drop.add("draft_stop")
    return tuple(c for c in TABLE_COLUMNS if c[0] not in drop)


def _fmt(v, key: str) -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if key in ("ms_per_token",):
            return f"{v:.1f}"
        if key == "draft_stop":
            return f"{v:g}"
        if key in ("tokens_per_s", "ceiling_tokens_per_s"):
            return f"{v:.2f}"
        if key == "of_ceiling":
            return f"{v:.2f}×"
        if (
            key.startswith("speedup")
            or key.startswith("predicted")
            or key
            in (
                "v",
                "v_measured",
                "tokens_per_target_call",
                "nodes_per_pass",
                "mean_accepted_length",
                "repeated_4gram_share",
                "distinct_2",
            )
        ):
            return f"{v:.2f}×" if key.startswith(("speedup", "predicted")) else f"{v:.2f}"
        return f"{v:.3f}"
    return str(v)


def markdown_table(rows: list[dict[str, Any]], meta: dict[str, Any] | None = None) -> str:
    """The familiar 'block size → latency, throughput, acceptance rate, quality' tables,
    one per (dtype, prompt kind, temperature, trace)."""
    out: list[str] = []
    if meta:
        m = meta.get("machine", {})
        out.append(
            f"Preset `{meta.get('preset')}` ({meta.get('target')}), {meta.get('max_new_tokens')} new tokens, "
            f"{meta.get('repeats')} interleaved repetitions; {m.get('cpu')}, {m.get('cores')} cores, "
            f"{'GPU' if m.get('gpu') else 'no GPU'}, torch {m.get('torch')}, transformers {m.get('transformers')}."
            + (f" Partial: {meta['partial']}; the rows use those rounds only." if meta.get("partial") else "")
        )
        out.append("")
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["dtype"], r["prompts"], r["temperature"], r["trace"]), []).append(r)
    for (dtype, kind, temp, trace), rs in groups.items():
        n = rs[0]["n_prompts"]
        out.append(f"### {kind} prompts ({n}), temperature {temp:g}, {dtype}{', tracing on' if trace else ''}")
        out.append("")
        columns = table_columns(rs)
        out.append("| " + " | ".join(h for _, h in columns) + " |")
        out.append("|" + "|".join("---" if k in ("method", "drafter", "quality") else "---:" for k, _ in columns) + "|")
        for r in rs:
            cells = {k: _fmt(r.get(k), k) for k, _ in columns}
            if r.get("rule") and r["rule"] != DEFAULT_RULE:
                cells["method"] += f" ({r['rule']})"
            out.append("| " + " | ".join(cells[k] for k, _ in columns) + " |")
        out.append("")
    out.append(
        "latency = wall time per new token, prefill included; acceptance rate = accepted / judged drafts; "
        "ceiling = this machine's plain decoding at its best, measured in the same benchmark: 1000 / ms of one "
        "pass of one row of one token (the shared-pass path, same cache length), and of ceiling = throughput / "
        "ceiling, so every throughput reads as a ratio on one machine; "
        "c = draft ms per drafted token / one single-token target pass; v_γ = target pass over γ+1 tokens / "
        "over 1 token (same cache length; for a tree, over 1 + nodes per pass tokens); "
        "predicted = E(α,γ)/(γc+v_γ) from the measured α (token-verified chains only); predicted (step mix) = tokens per target "
        "call / (k̄c + v(1+k̄)) with k̄ the mean drafted tokens per step. "
        "Repeated 4-grams = share of output tokens that complete a 4-gram already in the prompt or earlier "
        "in the output; distinct-2 = distinct bigrams / bigrams of the output; a run is repetitive when its "
        f"repeated share is at least {HIGH_SHARE:g} (playground/repetition.py), and speedup, (non-)repetitive = "
        "our autoregressive loop's ms/token on the same prompts / this row's, over its (non-)repetitive runs only "
        "(repetitive runs count n_runs of them): a speedup on looping output says more about the loop than about "
        "the drafter."
        + (
            " Tree rows: nodes / pass = drafted nodes per verify pass; speedup vs chain = the chain row of the same "
            "drafter, γ and stop threshold over this one; v in runs = mean verify pass of these runs (tree mask included) / one "
            "single-token pass."
            if any((r.get("tree_nodes") or 1) > 1 for r in rows)
            else ""
        )
        + (
            " Stop below = the chain stops once the drafter's path confidence (product of its top probability "
            "at each draft) is below this; those rows draft fewer than γ and get only the step-mix prediction."
            if any(r.get("draft_stop") for r in rows)
            else ""
        )
    )
    return "\n".join(out) + "\n"


def build_figures(rows: list[dict[str, Any]], template: str | None = None) -> dict[str, Any]:
    """Plotly figures from bench rows (plotly is imported here, never at import time).

    Keys: "throughput" (tokens/s vs γ, with the two baselines as lines), "speedup"
    (measured vs predicted speedup vs γ), "acceptance" (acceptance by draft position),
    "costs" (γ·c and v_γ vs γ)."""
    rows = [r for r in rows if not r["trace"]] or rows
    keys = sorted({(r["dtype"], r["prompts"], r["temperature"]) for r in rows})
    multi = len(keys) > 1
    figs = {
        "throughput": _throughput_figure(rows, keys, multi),
        "speedup": _speedup_figure(rows, keys, multi),
        "acceptance": _acceptance_figure(rows, keys, multi),
        "costs": _costs_figure(rows, keys, multi),
    }
    if template:
        for f in figs.values():
            f.update_layout(template=template)
    return figs


def _suffix(key: tuple, multi: bool) -> str:
    """A trace name's setting, needed only when the figure shows several settings."""
    return f" · {key[1]} · T={key[2]:g} · {key[0]}" if multi else ""


def _tree(r: dict[str, Any]) -> int:
    return int(r.get("tree_nodes") or 1)


def _shape(r: dict[str, Any]) -> tuple[int, float]:
    """What makes a drafter's rows separate lines: tree nodes and the early-stop threshold."""
    return _tree(r), float(r.get("draft_stop") or 0.0)


def _label(drafter, shape: tuple[int, float]) -> str:  # chain, tree and stopped rows are separate lines
    nodes, stop = shape
    return f"{drafter}" + (f" tree {nodes}" if nodes > 1 else "") + (f" stop<{stop:g}" if stop else "")


def _of(rows: list[dict[str, Any]], key: tuple) -> list[dict[str, Any]]:
    return [r for r in rows if (r["dtype"], r["prompts"], r["temperature"]) == key]


def _throughput_figure(rows: list[dict[str, Any]], keys: list[tuple], multi: bool):
    import plotly.graph_objects as go  # the renderers only: importing the bench loads no plotly (tested)

    fig = go.Figure()
    for key in keys:
        rs = _of(rows, key)
        lines: dict[tuple, list[dict]] = {}
        for r in rs:
            if r["method"] in ("speculative", "hf_assisted"):
                lines.setdefault((r["method"], r["drafter"], r["rule"], _shape(r)), []).append(r)
        gammas = sorted({r["gamma"] for r in rs if r["gamma"]}) or [1]
        for (method, drafter, rule, shape), pts in lines.items():
            pts.sort(key=lambda r: r["gamma"])
            name = ("ours " if method == "speculative" else "HF assisted ") + _label(drafter, shape)
            if rule != DEFAULT_RULE:
                name += f" ({rule})"
            fig.add_trace(
                go.Scatter(
                    x=[r["gamma"] for r in pts], y=[r["tokens_per_s"] for r in pts], mode="lines+markers",
                    name=name + _suffix(key, multi), line={"dash": "solid" if method == "speculative" else "dot"},
                )
            )  # fmt: skip
        for method, name, dash in (
            ("autoregressive", "ours autoregressive", "dash"),
            ("hf_generate", "HF generate()", "longdash"),
        ):
            ref = next((r for r in rs if r["method"] == method), None)
            if ref and ref["tokens_per_s"]:
                fig.add_trace(
                    go.Scatter(
                        x=[min(gammas), max(gammas)], y=[ref["tokens_per_s"]] * 2, mode="lines",
                        name=name + _suffix(key, multi), line={"dash": dash, "width": 1.5},
                    )
                )  # fmt: skip
    fig.update_layout(
        title="Throughput by block size γ", xaxis_title="block size γ (drafts per step)", yaxis_title="tokens / s"
    )
    return fig


def _speedup_figure(rows: list[dict[str, Any]], keys: list[tuple], multi: bool):
    import plotly.graph_objects as go  # the renderers only: importing the bench loads no plotly (tested)

    fig = go.Figure()
    for key in keys:
        sfx = _suffix(key, multi)
        rs = [r for r in _of(rows, key) if r["method"] == "speculative"]
        for drafter, shape in sorted({(r["drafter"], _shape(r)) for r in rs}):
            pts = sorted(
                (r for r in rs if r["drafter"] == drafter and _shape(r) == shape and r["rule"] == DEFAULT_RULE),
                key=lambda r: r["gamma"],
            )
            if not pts:
                continue
            name = _label(drafter, shape)
            xs = [r["gamma"] for r in pts]
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=[r["decode_speedup_vs_autoregressive"] for r in pts],
                    mode="lines+markers",
                    name=f"{name} measured{sfx}",
                )
            )
            if shape == (1, 0.0):  # the chain cost model; a tree or stopped row has no E(α, γ) prediction
                fig.add_trace(
                    go.Scatter(
                        x=xs,
                        y=[r["predicted_speedup"] for r in pts],
                        mode="lines",
                        line={"dash": "dot"},
                        name=f"{name} predicted E/(γc+v){sfx}",
                    )
                )
                fig.add_trace(
                    go.Scatter(
                        x=xs,
                        y=[r["predicted_speedup_steps"] for r in pts],
                        mode="lines",
                        line={"dash": "dash"},
                        name=f"{name} predicted from step mix{sfx}",
                    )
                )
    fig.add_hline(y=1.0, line={"dash": "dash", "width": 1}, annotation_text="autoregressive")
    fig.update_layout(
        title="Decode speedup over our autoregressive loop: measured vs predicted",
        xaxis_title="block size γ",
        yaxis_title="speedup (×)",
    )
    return fig


def _acceptance_figure(rows: list[dict[str, Any]], keys: list[tuple], multi: bool):
    import plotly.graph_objects as go  # the renderers only: importing the bench loads no plotly (tested)

    fig = go.Figure()
    for key in keys:
        for r in _of(rows, key):
            if r["method"] != "speculative" or not r["acceptance_by_position"]:
                continue
            ys = r["acceptance_by_position"]
            fig.add_trace(
                go.Scatter(
                    x=list(range(1, len(ys) + 1)),
                    y=ys,
                    mode="lines+markers",
                    name=f"{_label(r['drafter'], _shape(r))} γ={r['gamma']}{_suffix(key, multi)}",
                )
            )
    fig.update_layout(
        title="Acceptance by draft position (P(accept | judged))",
        xaxis_title="draft position",
        yaxis_title="acceptance",
        yaxis_range=[0, 1.02],
    )
    return fig


def _costs_figure(rows: list[dict[str, Any]], keys: list[tuple], multi: bool):
    import plotly.graph_objects as go  # the renderers only: importing the bench loads no plotly (tested)

    fig = go.Figure()
    for key in keys:
        sfx = _suffix(key, multi)
        rs = [
            r
            for r in _of(rows, key)
            if r["method"] == "speculative" and r["rule"] == DEFAULT_RULE and _shape(r) == (1, 0.0)
        ]  # chain costs: a tree pass is v(nodes), not v_γ
        vs = sorted({(r["gamma"], r["v"]) for r in rs if r["v"] is not None})
        if vs:
            fig.add_trace(
                go.Scatter(
                    x=[g for g, _ in vs],
                    y=[v for _, v in vs],
                    mode="lines+markers",
                    name=f"v_γ (target pass over γ+1 tokens){sfx}",
                )
            )
        for drafter in sorted({r["drafter"] for r in rs}):
            pts = sorted((r for r in rs if r["drafter"] == drafter and r["c"] is not None), key=lambda r: r["gamma"])
            if pts:
                fig.add_trace(
                    go.Bar(
                        x=[r["gamma"] for r in pts],
                        y=[r["gamma"] * r["c"] for r in pts],
                        name=f"γ·c {drafter}{sfx}",
                        opacity=0.6,
                    )
                )
    fig.update_layout(
        title="Cost of one step in single-token target passes: γ·c + v_γ",
        xaxis_title="block size γ",
        yaxis_title="× one single-token target pass",
        barmode="group",
    )
    return fig


def write_outputs(report: BenchReport, out_dir: str | os.PathLike) -> dict[str, str]:
    """Write bench.json, bench.csv (pandas), bench.md and bench.html (plotly); return the paths."""
    import pandas as pd  # the CSV writer only: importing the bench loads no pandas (tested)

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {k: str(out / f"bench.{k}") for k in ("json", "csv", "md", "html")}
    Path(paths["json"]).write_text(json.dumps(report.to_json(), indent=2, ensure_ascii=False), encoding="utf-8")
    df = pd.DataFrame(report.rows, columns=list(ROW_FIELDS))
    df["acceptance_by_position"] = df["acceptance_by_position"].map(lambda v: json.dumps(v) if v is not None else "")
    df.to_csv(paths["csv"], index=False)
    Path(paths["md"]).write_text(markdown_table(report.rows, report.meta), encoding="utf-8")
    figs = build_figures(report.rows)
    parts = ["<html><head><meta charset='utf-8'><title>Speculative decoding benchmark</title></head><body>"]
    parts.append(
        "<h1>Speculative decoding benchmark</h1><pre>"
        + _html_escape(json.dumps(report.meta.get("machine", {})))
        + "</pre>"
    )
    for i, fig in enumerate(figs.values()):
        parts.append(fig.to_html(full_html=False, include_plotlyjs="inline" if i == 0 else False))
    parts.append("</body></html>")
    Path(paths["html"]).write_text("\n".join(parts), encoding="utf-8")
    return paths


def _html_escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
