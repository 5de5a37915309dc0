"""Rows from runs: speedups against both baselines, acceptance, costs, predictions, quality,
and how much the outputs repeat (``playground.repetition``), with the speedup over our
autoregressive loop split into repetitive and non-repetitive outputs.

An output is *repetitive* when at least ``repetition.HIGH_SHARE`` (0.5) of its tokens
complete a 4-gram already in the prompt or earlier in the output (DESIGN §8: Gemma 3 270M
loops when greedy, and prompt lookup copies loops for free).  Each run is classed by its
own output; ``speedup_repetitive`` / ``speedup_non_repetitive`` = the mean, over the runs of
that class, of our autoregressive loop's ms/token on the same prompt (its median over
repetitions) ÷ the mean of those runs' ms/token: the same prompts on both sides.

This module computes; it does not run models (``run``) or render (``report``).
"""

from __future__ import annotations

import math
import os
import platform
import statistics
from dataclasses import dataclass
from typing import Any

import torch
import transformers

from playground.decoding.sampling import predicted_speedup
from playground.errors import Message
from playground.repetition import HIGH_SHARE
from playground.rules import LOSSLESS_RULES, RULES
from tools.bench.options import METHODS, ROW_FIELDS, Costs, Run, Spec


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def _ratio(a, b):
    return (a / b) if (a is not None and b) else None


def aggregate(runs: list[Run], costs: dict[str, Costs]) -> list[dict[str, Any]]:
    """Turn runs into rows (see ROW_FIELDS)."""
    groups: dict[tuple, list[Run]] = {}
    for r in runs:
        groups.setdefault((r.dtype, r.kind, r.temperature, r.spec), []).append(r)
    refs = _references(runs)
    ar_ms = _autoregressive_ms(runs)
    rows: list[dict[str, Any]] = []
    base: dict[tuple, dict[str, Any]] = {}
    for (dtype, kind, temperature, spec), rs in groups.items():
        row = _group_row(dtype, kind, temperature, spec, rs, refs)
        row.update(repetition_columns(rs, ar_ms))
        rows.append(row)
        if spec.method == "autoregressive":
            base[(dtype, kind, temperature, spec.run.trace)] = row
        if spec.method == "hf_generate":
            base[(dtype, kind, temperature, "hf")] = row
    chains = {
        (
            r["dtype"],
            r["prompts"],
            r["temperature"],
            r["trace"],
            r["drafter"],
            r["gamma"],
            r["rule"],
            r["draft_stop"],
        ): r
        for r in rows
        if r["method"] == "speculative" and r["tree_nodes"] == 1
    }
    for row in rows:
        ar = _add_speedups(row, base, chains)
        _add_predictions(row, ar, costs.get(row["dtype"]))
        _add_ceiling(row, costs.get(row["dtype"]))
        row["loop_overhead"] = row.pop("_loop")
        row["quality"] = _quality(row)
    for row in rows:
        del row["_steps"], row["_drafted"], row["_t1"], row["_verify"]
    rows.sort(key=_sort_key)
    return [{k: _clean(row.get(k)) for k in ROW_FIELDS} for row in rows]


def _ms_per_token(r: Run) -> float:
    return r.wall_ms / max(r.new_tokens, 1)


def _autoregressive_ms(runs: list[Run]) -> dict[tuple, float]:
    """Our autoregressive loop's ms/token per (dtype, temperature, trace, prompt id): the
    median over repetitions (an untraced run stands in when no traced one exists)."""
    per: dict[tuple, list[float]] = {}
    for r in runs:
        if r.spec.method == "autoregressive":
            per.setdefault((r.dtype, r.temperature, r.spec.run.trace, r.prompt_id), []).append(_ms_per_token(r))
    return {k: statistics.median(v) for k, v in per.items()}


def is_repetitive(r: Run) -> bool | None:
    """The run's output is mostly repetition (None: not measured)."""
    rep = r.repetition
    return None if rep is None else (rep.tokens > 0 and rep.share >= HIGH_SHARE)


def repetition_columns(rs: list[Run], ar_ms: dict[tuple, float]) -> dict[str, Any]:
    """The repetition columns of one row: token-weighted repeated-4-gram share, mean distinct-2,
    how many runs were repetitive, and the speedup over our autoregressive loop on each class."""
    measured = [r for r in rs if r.repetition is not None]
    tokens = sum(r.repetition.tokens for r in measured)
    out: dict[str, Any] = {
        "repeated_4gram_share": (sum(r.repetition.repeated for r in measured) / tokens) if tokens else None,
        "distinct_2": _mean([r.repetition.distinct2 for r in measured if r.repetition.tokens]),
        "repetitive_runs": sum(bool(is_repetitive(r)) for r in measured) if measured else None,
    }
    for name, cls in (("speedup_non_repetitive", False), ("speedup_repetitive", True)):
        pairs = [
            (ar_ms.get((r.dtype, r.temperature, r.spec.run.trace, r.prompt_id))
             or ar_ms.get((r.dtype, r.temperature, False, r.prompt_id)), _ms_per_token(r))
            for r in measured
            if is_repetitive(r) is cls
        ]  # fmt: skip
        pairs = [(a, m) for a, m in pairs if a is not None]
        out[name] = _ratio(_mean([a for a, _ in pairs]), _mean([m for _, m in pairs])) if pairs else None
    return out


def _by_prompt(rs: list[Run], fn) -> list[float]:
    """Median over repetitions of fn(run), per prompt."""
    per: dict[str, list[float]] = {}
    for r in rs:
        val = fn(r)
        if val is not None:
            per.setdefault(r.prompt_id, []).append(val)
    return [statistics.median(v) for v in per.values()]


@dataclass(frozen=True)
class _References:
    """Greedy reference tokens per (dtype, prompt id): hf_generate's and our autoregressive loop's."""

    hf: dict[tuple[str, str], tuple[int, ...]]
    ar: dict[tuple[str, str], tuple[int, ...]]


def _references(runs: list[Run]) -> _References:
    def tokens_of(method: str) -> dict[tuple[str, str], tuple[int, ...]]:
        return {(r.dtype, r.prompt_id): r.token_ids for r in runs if r.spec.method == method and r.temperature == 0}

    return _References(hf=tokens_of("hf_generate"), ar=tokens_of("autoregressive"))


def _group_row(
    dtype: str, kind: str, temperature: float, spec: Spec, rs: list[Run], refs: _References
) -> dict[str, Any]:
    """The measured part of one row: timings, acceptance and identity, summed over its runs."""
    ms = _mean(_by_prompt(rs, lambda r: r.wall_ms / max(r.new_tokens, 1)))
    decode = _mean(
        _by_prompt(
            rs,
            lambda r: (
                (r.wall_ms - r.prefill_ms) / max(r.new_tokens - r.prefill_emits, 1)
                if r.prefill_ms is not None
                else None
            ),
        )
    )
    judged = sum(r.judged for r in rs)
    accepted = sum(r.accepted for r in rs)
    drafted = sum(r.drafted for r in rs)
    steps = sum(r.steps for r in rs)
    calls = sum(r.decode_calls for r in rs)
    tokens = sum(r.new_tokens for r in rs)
    decode_tokens = sum(r.new_tokens - r.prefill_emits for r in rs)  # made by decode-phase passes
    by_pos, hist_mean = _acceptance_shape(spec, rs, calls, decode_tokens)
    identical, first_div, identical_ar = _identity(temperature, spec, rs, refs)
    drift = None
    if spec.method == "speculative":
        sums = [r.drift_sum for r in rs]
        drift = (sum(sums) / max(tokens, 1)) if all(s is not None for s in sums) else None
    return {
        "method": spec.method,
        "drafter": spec.run.drafter,
        "gamma": spec.gamma,
        "tree_nodes": spec.run.tree_nodes,
        "draft_stop": spec.run.draft_stop,
        "nodes_per_pass": (drafted / steps) if (steps and spec.method == "speculative") else None,
        "temperature": temperature,
        "prompts": kind,
        "n_prompts": len({r.prompt_id for r in rs}),
        "n_runs": len(rs),
        "dtype": dtype,
        "trace": spec.run.trace,
        "rule": spec.run.rule,
        "new_tokens": tokens / len(rs),
        "ms_per_token": ms,
        "tokens_per_s": (1000.0 / ms) if ms else None,
        "decode_ms_per_token": decode,
        "acceptance_rate": (accepted / judged) if judged else None,
        "acceptance_by_position": by_pos,
        "mean_accepted_length": hist_mean,
        "tokens_per_target_call": (decode_tokens / calls) if calls else None,
        "target_calls": calls / len(rs),
        "draft_ms_per_token": (sum(r.draft_ms for r in rs) / drafted) if drafted else None,
        "identical_to_hf": identical,
        "identical_to_autoregressive": identical_ar,
        "first_divergence": first_div,
        "drift_tv": drift,
        "peak_rss_mb": max((r.peak_rss_mb for r in rs if r.peak_rss_mb is not None), default=None),
        "_steps": steps,
        "_drafted": drafted,
        "_loop": _loop_overhead(rs),
        "_t1": (sum(r.verify_ms for r in rs) / calls) if (spec.method == "autoregressive" and calls) else None,
        "_verify": (sum(r.verify_ms for r in rs) / calls) if calls else None,  # ms per decode target pass
    }


def _acceptance_shape(
    spec: Spec, rs: list[Run], calls: int, decode_tokens: int
) -> tuple[list[float | None] | None, float | None]:
    """Acceptance by draft position and the mean accepted length (None where the method has none)."""
    g = spec.gamma
    if spec.method == "speculative":
        ja = [sum(r.judged_at[i] for r in rs) for i in range(g)]
        aa = [sum(r.accepted_at[i] for r in rs) for i in range(g)]
        by_pos = [(a / j) if j else None for a, j in zip(aa, ja)]
        hist = [sum(r.hist[i] for r in rs if i < len(r.hist)) for i in range(g + 1)]
        hist_mean = (sum(n * c for n, c in enumerate(hist)) / sum(hist)) if sum(hist) else None
        return by_pos, hist_mean
    if spec.method == "hf_assisted" and calls:
        return None, decode_tokens / calls - 1.0  # tokens per target call - the one the target adds
    return None, None


def _identity(
    temperature: float, spec: Spec, rs: list[Run], refs: _References
) -> tuple[bool | None, int | None, bool | None]:
    """(identical to hf_generate, first divergence from it, identical to our autoregressive), greedy rows only."""
    identical = first_div = identical_ar = None
    if temperature == 0 and spec.method != "hf_generate":
        divs = [_first_divergence(r.token_ids, refs.hf.get((r.dtype, r.prompt_id))) for r in rs]
        if all(d != "missing" for d in divs):
            identical = all(d is None for d in divs)
            hits = [d for d in divs if d is not None]
            first_div = min(hits) if hits else None
        divs_ar = [_first_divergence(r.token_ids, refs.ar.get((r.dtype, r.prompt_id))) for r in rs]
        if all(d != "missing" for d in divs_ar):
            identical_ar = all(d is None for d in divs_ar)
    elif temperature == 0:
        identical = True
    return identical, first_div, identical_ar


def _add_speedups(
    row: dict[str, Any], base: dict[tuple, dict[str, Any]], chains: dict[tuple, dict[str, Any]]
) -> dict[str, Any] | None:
    """Set the speedup columns against the baselines (and the chain, for a tree row); return the AR baseline row."""
    key = (row["dtype"], row["prompts"], row["temperature"])
    ar = base.get(key + (row["trace"],)) or base.get(key + (False,))
    chain = chains.get(key + (row["trace"], row["drafter"], row["gamma"], row["rule"], row["draft_stop"]))
    row["speedup_vs_chain"] = (
        _ratio(chain and chain["ms_per_token"], row["ms_per_token"])
        if row["method"] == "speculative" and row["tree_nodes"] > 1
        else None
    )
    hf = base.get(key + ("hf",))
    row["speedup_vs_autoregressive"] = _ratio(ar and ar["ms_per_token"], row["ms_per_token"])
    row["speedup_vs_hf_generate"] = _ratio(hf and hf["ms_per_token"], row["ms_per_token"])
    row["decode_speedup_vs_autoregressive"] = _ratio(ar and ar["decode_ms_per_token"], row["decode_ms_per_token"])
    row["decode_speedup_vs_hf_generate"] = _ratio(hf and hf["decode_ms_per_token"], row["decode_ms_per_token"])
    return ar


def _add_predictions(row: dict[str, Any], ar: dict[str, Any] | None, cst: Costs | None) -> None:
    """Set t1, c, v and the cost model's predicted speedups (and measured over predicted)."""

    # t1: one single-token target pass, from the interleaved autoregressive runs
    # (every decode pass there is one token); the microbenchmark otherwise.
    t1 = (ar and ar["_t1"]) or (cst.ms_by_tokens.get(1) if cst else None)
    row["t1_ms"] = t1
    g = row["gamma"]
    c = v = pred = pred_steps = None
    if row["method"] == "speculative" and cst:
        c = _ratio(row["draft_ms_per_token"] or 0.0, t1) if row["_drafted"] else 0.0
        tree = row["tree_nodes"] > 1
        v = cst.v(1 + (row["nodes_per_pass"] or 0)) if tree else cst.v(g + 1)
        alpha = row["acceptance_rate"]
        # E(α, γ) is token verification's law for a chain of γ drafts; a block row's α counts
        # every draft as judged and a chain that stops early drafts fewer than γ, so those get
        # only the step-mix prediction (from the measured tokens per call)
        fixed = not tree and not RULES[row["rule"]].judges_jointly and not row["draft_stop"]
        if alpha is not None and c is not None and v is not None and fixed:
            pred = predicted_speedup(alpha, g, c, v)
        if row["_steps"] and c is not None and row["tokens_per_target_call"]:
            k_mean = row["_drafted"] / row["_steps"]
            vk = cst.v(1 + k_mean)
            if vk:
                pred_steps = row["tokens_per_target_call"] / (k_mean * c + vk)
    elif row["method"] == "autoregressive":
        v, pred, pred_steps = 1.0, 1.0, 1.0
    row["c"] = c
    row["v"] = v
    row["v_measured"] = _ratio(row["_verify"], t1) if row["method"] == "speculative" else None
    row["predicted_speedup"] = pred
    row["predicted_speedup_steps"] = pred_steps
    row["measured_over_predicted"] = _ratio(row["decode_speedup_vs_autoregressive"], pred)
    row["measured_over_predicted_steps"] = _ratio(row["decode_speedup_vs_autoregressive"], pred_steps)


def _add_ceiling(row: dict[str, Any], cst: Costs | None) -> None:
    """The machine's ceiling beside the row's throughput: plain decoding, one run at a time, through
    passes of one row of one token measured in the same benchmark (``Costs.ceiling_ms``), and the
    row's tokens/s as a share of it (above 1: the method beats plain decoding's best case here)."""
    ceiling = (1000.0 / cst.ceiling_ms) if (cst and cst.ceiling_ms) else None
    row["ceiling_tokens_per_s"] = ceiling
    row["of_ceiling"] = _ratio(row["tokens_per_s"], ceiling)


_METHOD_ORDER = {m: i for i, m in enumerate(METHODS)}


def _sort_key(r: dict[str, Any]) -> tuple:
    return (
        r["dtype"], r["prompts"], r["temperature"], r["trace"], _METHOD_ORDER[r["method"]],
        r["drafter"] or "", r["gamma"], r["tree_nodes"], r["rule"], r["draft_stop"] or 0.0,
    )  # fmt: skip


def _loop_overhead(rs: list[Run]) -> float | None:
    """Share of decode time spent outside draft and verify passes (our loop only)."""
    vals = []
    for r in rs:
        if r.prefill_ms is None or r.spec.method not in ("autoregressive", "speculative"):
            return None
        decode = r.wall_ms - r.prefill_ms
        if decode > 0:
            vals.append((decode - r.draft_ms - r.verify_ms) / decode)
    return _mean(vals)


def _first_divergence(a: tuple[int, ...], b: tuple[int, ...] | None):
    if b is None:
        return "missing"
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


# The quality column: code -> its English (the app words each code as ``bench.q.<code>``)
QUALITY = {
    "reference": "reference",
    "reference_sampled": "reference (sampled)",
    "identical": "identical to target",
    "identical_ar": "identical to our autoregressive",
    "differs_ar": "differs from our autoregressive",
    "differs_ar_bf16": "differs from our autoregressive (bfloat16 rounding)",
    "not_compared": "not compared",
    "differs_bf16": "differs from token {fd} (bfloat16 rounding of the multi-token pass; exact in float32)",
    "differs_hf": "differs from hf_generate from token {fd}",
    "lossless": "lossless (exact sampling)",
    "lossy_drift": "lossy: drift {tv} TV/token",
    "lossy": "lossy",
}


class Quality(Message):
    """A row's quality note: the English text (JSON, the markdown table) that keeps its code."""

    TEMPLATES = QUALITY


def _quality(row: dict[str, Any]) -> Quality:
    lossless = row["rule"] in LOSSLESS_RULES
    if row["method"] == "hf_generate":
        return Quality("reference" if row["temperature"] == 0 else "reference_sampled")
    if row["temperature"] == 0:
        if row["identical_to_hf"]:
            return Quality("identical")
        if row["identical_to_hf"] is None:
            if row.get("identical_to_autoregressive"):
                return Quality("identical_ar")
            if row.get("identical_to_autoregressive") is False:
                return Quality("differs_ar_bf16" if row["dtype"] == "bfloat16" else "differs_ar")
            return Quality("not_compared")
        fd = row["first_divergence"]
        if row["dtype"] == "bfloat16":
            # A (γ+1)-token pass rounds differently from 1-token passes in bfloat16, which can
            # flip a near-tie argmax (docs/concepts/numerics.md); transformers' assisted generation does too.
            return Quality("differs_bf16", fd=fd)
        return Quality("differs_hf", fd=fd)
    if lossless:
        return Quality("lossless")
    if row.get("drift_tv") is not None:
        return Quality("lossy_drift", tv=f"{row['drift_tv']:.3f}")
    return Quality("lossy")


def _clean(v):
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return None
        return round(v, 6)
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v


def machine_info(threads: int | None = None) -> dict[str, Any]:

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        load = os.getloadavg()[0]
    except OSError:  # pragma: no cover
        load = None
    return {
        "cpu": cpu,
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "threads": threads or torch.get_num_threads(),
        "gpu": bool(torch.cuda.is_available()),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "load_avg_1m": load,
        "env": {
            k: os.environ[k] for k in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS", "SPECPLAY_THREADS") if k in os.environ
        },
    }
