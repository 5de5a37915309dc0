"""The benchmark: which runs, interleaved in what order, and the report they make.

This module schedules and collects; it does not time a run itself (``measure``) or render (``report``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import torch

from playground import repetition, validate
from playground.api import encode_prompt, make_drafter, resolve
from playground.config import load_config
from playground.models.loading import load_pair
from playground.rules import RULES as ALL_RULES
from playground.serving.pass_cost import pass_costs
from playground.settings import check as check_settings
from tools.bench.aggregate import aggregate, machine_info
from tools.bench.measure import (
    _drift,
    _hf_run,
    _hf_tokenizers,
    _our_run,
    _peak_rss_mb,
    _reset_peak_rss,
    measure_costs,
)
from tools.bench.options import (
    BRANCHING,
    METHODS,
    RULES,
    STOPPING,
    TRACE_MODES,
    BenchError,
    BenchOptions,
    BenchReport,
    Costs,
    Progress,
    Run,
    Spec,
    load_prompts,
)


def _specs(
    opts: BenchOptions,
    drafters: tuple[str, ...],
    hf_assistant: bool,
    hf_uag: bool = False,
    preset_stop: float = 0.0,
) -> list[Spec]:
    """hf_uag: transformers' universal assisted generation can run (both tokenizers are HF tokenizers);
    preset_stop: the preset's draft_stop, what a stopping drafter's chains use unless opts.draft_stops says."""
    traces = {"off": (False,), "on": (True,), "both": (False, True)}[opts.trace]
    fixed = dict(opts.fixed)  # --set: what every row runs with
    out: list[Spec] = []
    for tr in traces:
        if "hf_generate" in opts.methods and not tr:
            out.append(Spec.of("hf_generate", **fixed))
        if "autoregressive" in opts.methods:
            out.append(Spec.of("autoregressive", **fixed, trace=tr))
        if "speculative" in opts.methods:
            for kind in drafters:
                for g in opts.gammas:
                    for rule in opts.rules:
                        for n in opts.tree_nodes:
                            if n > 1 and (kind not in BRANCHING or ALL_RULES[rule].chains_only):
                                continue
                            for stop in _stops(opts, kind, preset_stop):
                                run = dict(drafter=kind, gamma=g, trace=tr, rule=rule, tree_nodes=n, draft_stop=stop)
                                out.append(Spec.of("speculative", **fixed, **run))
        if "hf_assisted" in opts.methods and not tr:
            for g in opts.gammas:
                if "prompt-lookup" in drafters:
                    out.append(Spec.of("hf_assisted", **fixed, drafter="prompt-lookup", gamma=g))
                if hf_assistant and "model" in drafters:
                    out.append(Spec.of("hf_assisted", **fixed, drafter="model", gamma=g))
                if "early-exit" in drafters:
                    out.append(Spec.of("hf_assisted", **fixed, drafter="early-exit", gamma=g))
                if hf_uag and "other-tokenizer" in drafters:
                    out.append(Spec.of("hf_assisted", **fixed, drafter="other-tokenizer", gamma=g))
    return out


def _stops(opts: BenchOptions, kind: str, preset_stop: float) -> tuple[float | None, ...]:
    """The stop thresholds one drafter's rows (chains and trees) run with: None for drafters that never stop."""
    if kind not in STOPPING:
        return (None,)
    return opts.draft_stops if opts.draft_stops is not None else (preset_stop,)


_FLAGS = {  # a RunSettings field -> the option that sets it
    "max_new_tokens": "--max-new-tokens",
    "gamma": "--gammas",
    "temperature": "--temperatures",
    "tree_nodes": "--tree-nodes",
    "draft_stop": "--draft-stop",
    "dtype": "--dtypes",
}


def _check(field: str, values, limits) -> None:
    """Each value of one option, checked as the run setting it becomes (``RunSettings``' own check)."""
    if values is not None and not values:
        raise BenchError(f"{_FLAGS[field]} needs at least one value")
    for v in values or ():
        try:
            check_settings({field: v}, limits)
        except validate.SettingsError as exc:
            raise BenchError(f"{_FLAGS[field]}: {exc}") from None


def _validate(opts: BenchOptions) -> None:
    lim = load_config().limits
    _check("max_new_tokens", (opts.max_new_tokens,), lim)
    _check("gamma", opts.gammas, lim)
    _check("tree_nodes", opts.tree_nodes, lim)
    _check("temperature", opts.temperatures, lim)
    _check("draft_stop", opts.draft_stops, lim)
    _check("dtype", opts.dtypes, lim)
    if not opts.methods or any(m not in METHODS for m in opts.methods):
        raise BenchError(f"--methods must be a subset of {','.join(METHODS)}")
    if not 1 <= opts.repeats <= 100:
        raise BenchError(f"--repeats must be between 1 and 100, got {opts.repeats}")
    if opts.trace not in TRACE_MODES:
        raise BenchError(f"--trace must be one of {', '.join(TRACE_MODES)}")
    if not opts.rules or any(r not in RULES for r in opts.rules):
        raise BenchError(f"--rules must be a subset of {','.join(RULES)}")


def _build_drafters(pair, preset, kinds: Iterable[str], notes: list[str]) -> dict[str, Any]:

    out = {}
    for kind in kinds:
        try:
            out[kind] = make_drafter(kind, pair, preset)
        except Exception as exc:  # e.g. MTP weights not trained yet
            notes.append(f"drafter {kind!r} skipped: {type(exc).__name__}: {exc}".splitlines()[0])
    return out


def iter_bench(opts: BenchOptions, load_progress=None) -> Iterator[Progress | BenchReport]:
    """Run the benchmark; yield Progress events, then one BenchReport.

    Raises BenchError for bad options and ModelUnavailable when the preset cannot load.
    ``opts.threads`` sets torch's thread count for the run (a process-wide setting, for the
    command line: the app never sets it); it is restored afterwards."""
    before = torch.get_num_threads()
    try:
        yield from _iter_bench(opts, load_progress)
    finally:
        if opts.threads:
            torch.set_num_threads(before)


@dataclass(frozen=True)
class _Setup:
    """What every stage of one benchmark reads: the checked settings, the loaded pairs and drafters, the encoded prompts."""

    preset: Any
    prompts: tuple
    dtypes: tuple[str, ...]
    pairs: dict[str, Any]
    drafters: dict[str, dict[str, Any]]  # dtype -> drafter kind -> drafter
    encoded: dict[tuple[str, str], list[int]]  # (dtype, prompt id) -> token ids
    usable: tuple[str, ...]  # drafter kinds every dtype could build
    specs: list[Spec]
    threads: int  # torch's thread count for the timed runs
    notes: list[str]


def _iter_bench(opts: BenchOptions, load_progress=None) -> Iterator[Progress | BenchReport]:
    t_begin = time.perf_counter()
    _validate(opts)
    setup = _setup(opts, load_progress)
    total = len(setup.specs) * len(setup.prompts) * len(opts.temperatures) * len(setup.dtypes) * opts.repeats
    costs = yield from _measure_all_costs(opts, setup, total)
    if opts.warmup:
        yield from _warm_up(opts, setup, total)
    runs, partial = yield from _measured_runs(opts, setup, total, t_begin)
    yield Progress(len(runs), total, "done" if not partial else partial)
    rows = aggregate(runs, costs)
    yield BenchReport(rows=rows, meta=_meta(opts, setup, costs, partial), runs=runs)


def _setup(opts: BenchOptions, load_progress) -> _Setup:
    """Resolve the preset, load one pair per dtype with its drafters, encode the prompts, list the specs.

    Also applies ``opts.threads`` (after loading, as before any timing)."""

    try:
        preset, _ = resolve(opts.preset, None)
    except ValueError as exc:
        raise BenchError(str(exc)) from None
    if opts.exit_layer is not None or not opts.exit_kv_reuse or not opts.exit_trained:
        preset = replace(
            preset,
            exit_layer=opts.exit_layer or preset.exit_layer,
            exit_kv_reuse=opts.exit_kv_reuse,
            exit_adapter=preset.exit_adapter if opts.exit_trained else None,
        )
    kinds = opts.drafters if opts.drafters is not None else preset.drafters
    for k in kinds:
        if k not in preset.drafters:
            raise BenchError(f"preset {preset.name!r} has no {k!r} drafter; choose from: {', '.join(preset.drafters)}")
    prompts = opts.prompts if opts.prompts is not None else load_prompts()
    dtypes = opts.dtypes or (preset.dtype,)
    lim = load_config().limits
    notes: list[str] = []

    pairs, drafters, encoded = {}, {}, {}
    for dt in dtypes:
        pairs[dt] = pair = load_pair(preset, dt, progress=load_progress)
        drafters[dt] = _build_drafters(pair, preset, kinds, notes)
        for p in prompts:
            try:
                encoded[(dt, p.id)] = encode_prompt(p.text, pair.tokenizer, lim.max_prompt_chars, lim.max_prompt_tokens)
            except ValueError as exc:
                raise BenchError(f"prompt {p.id!r}: {exc}") from None
    if opts.threads:
        torch.set_num_threads(opts.threads)
    threads = torch.get_num_threads()
    usable = tuple(k for k in kinds if all(k in drafters[dt] for dt in dtypes))
    hf_assistant = all(pairs[dt].drafter_model is not None for dt in dtypes)
    hf_uag = hf_assistant and all(_hf_tokenizers(pairs[dt]) for dt in dtypes)
    specs = _specs(opts, usable, hf_assistant, hf_uag, preset.draft_stop)
    if not specs:
        raise BenchError("nothing to run: no method/drafter combination is available")
    return _Setup(
        preset=preset,
        prompts=tuple(prompts),
        dtypes=tuple(dtypes),
        pairs=pairs,
        drafters=drafters,
        encoded=encoded,
        usable=usable,
        specs=specs,
        threads=threads,
        notes=notes,
    )


def _measure_all_costs(opts: BenchOptions, setup: _Setup, total: int) -> Generator[Progress, None, dict[str, Costs]]:
    """v_gamma directly, at the same cache length, and the ceiling (``Costs.ceiling_ms``), for every dtype."""
    needs_hidden = any(
        getattr(d, "needs_target_hidden", False) for dt in setup.dtypes for d in setup.drafters[dt].values()
    )
    sizes = {1, 2} | {g + 1 for g in opts.gammas} | {n + 1 for n in opts.tree_nodes if n > 1}
    prompts, encoded = setup.prompts, setup.encoded
    costs: dict[str, Costs] = {}
    for dt in setup.dtypes:
        yield Progress(0, total, f"measuring target pass cost ({dt})")
        base = list(encoded[(dt, prompts[0].id)])
        lens = sorted(len(encoded[(dt, p.id)]) for p in prompts)
        want = lens[len(lens) // 2] + opts.max_new_tokens // 2 + max(sizes)
        ids = (base * (want // len(base) + 1))[:want]
        costs[dt] = measure_costs(setup.pairs[dt].target, ids, sizes, reps=opts.cost_reps, hidden=needs_hidden)
        yield Progress(0, total, f"measuring the ceiling: plain decoding, one row per pass ({dt})")
        ceiling = pass_costs(setup.pairs[dt].target, [(1, 1)], ctx=costs[dt].cache_len, repeats=opts.cost_reps)
        costs[dt].ceiling_ms = ceiling[0].ms
    return costs


def _warm_up(opts: BenchOptions, setup: _Setup, total: int) -> Iterator[Progress]:
    """One short unrecorded run per spec and dtype."""
    for dt in setup.dtypes:
        yield Progress(0, total, f"warming up ({dt})")
        ids = setup.encoded[(dt, setup.prompts[0].id)]
        for spec in setup.specs:
            _run_one(
                setup.pairs[dt],
                setup.drafters[dt],
                spec,
                ids,
                min(8, opts.max_new_tokens),
                opts.temperatures[0],
                opts.seed,
            )


def _measured_runs(
    opts: BenchOptions, setup: _Setup, total: int, t_begin: float
) -> Generator[Progress, None, tuple[list[Run], str | None]]:
    """The interleaved measured runs; return them and, when the wall-time budget cut them short, why.

    A round is every spec once on one prompt/temperature/dtype, in an order rotated between
    prompts; the budget is checked only between rounds, so every spec has the same rounds."""
    specs = setup.specs
    runs: list[Run] = []
    for rep in range(opts.repeats):
        for pi, p in enumerate(setup.prompts):
            for temperature in opts.temperatures:
                for dt in setup.dtypes:
                    if opts.wall_s is not None and runs and time.perf_counter() - t_begin > opts.wall_s:
                        partial = (
                            f"stopped after {opts.wall_s:g} s of wall time: {len(runs)} of {total} runs "
                            f"({len(runs) // len(specs)} complete round(s) of every method)"
                        )
                        return runs, partial
                    shift = (rep * len(setup.prompts) + pi) % len(specs)
                    for spec in specs[shift:] + specs[:shift]:
                        yield Progress(len(runs), total, f"{spec.label} · {p.id} · T={temperature:g} · {dt}")
                        run = _run_one(
                            setup.pairs[dt],
                            setup.drafters[dt],
                            spec,
                            setup.encoded[(dt, p.id)],
                            opts.max_new_tokens,
                            temperature,
                            opts.seed + rep,
                        )
                        ids = setup.encoded[(dt, p.id)]
                        runs.append(
                            replace(
                                run,
                                dtype=dt,
                                prompt_id=p.id,
                                kind=p.kind,
                                temperature=temperature,
                                rep=rep,
                                repetition=repetition.measure(ids, run.token_ids),
                            )
                        )
    return runs, None


def _meta(opts: BenchOptions, setup: _Setup, costs: dict[str, Costs], partial: str | None) -> dict[str, Any]:
    dtypes = setup.dtypes
    return {
        "preset": setup.preset.name,
        "target": setup.preset.target,
        "dtypes": list(dtypes),
        "drafters": list(setup.usable),
        "gammas": list(opts.gammas),
        "tree_nodes": list(opts.tree_nodes),
        "partial": partial,
        "temperatures": list(opts.temperatures),
        "max_new_tokens": opts.max_new_tokens,
        "repeats": opts.repeats,
        "prompts": [
            {"id": p.id, "kind": p.kind, "tokens": len(setup.encoded[(dtypes[0], p.id)])} for p in setup.prompts
        ],
        "costs": {
            dt: {
                "cache_len": c.cache_len,
                "ms_by_tokens": {str(k): v for k, v in c.ms_by_tokens.items()},
                "ceiling_ms": c.ceiling_ms,
            }
            for dt, c in costs.items()
        },
        "machine": machine_info(setup.threads),
        "notes": setup.notes,
        **(
            {
                "exit_layer": getattr(setup.drafters[dtypes[0]].get("early-exit"), "exit_layer", None),
                "exit_kv_reuse": setup.preset.exit_kv_reuse,
                "exit_trained": bool(getattr(setup.drafters[dtypes[0]].get("early-exit"), "trained", False)),
            }
            if "early-exit" in setup.usable
            else {}
        ),
    }


def run_bench(opts: BenchOptions, on_progress: Callable[[Progress], None] | None = None) -> BenchReport:
    report = None
    for item in iter_bench(opts):
        if isinstance(item, Progress):
            if on_progress:
                on_progress(item)
        else:
            report = item
    assert report is not None
    return report


def _run_one(pair, drafters: dict, spec: Spec, ids: list[int], max_new: int, temperature: float, seed: int) -> Run:
    _reset_peak_rss()
    if spec.method in ("hf_generate", "hf_assisted"):
        exit_layer = getattr(drafters.get("early-exit"), "exit_layer", None)
        tokens, wall, calls, prefill = _hf_run(pair, ids, max_new, temperature, seed, spec, exit_layer)
        return Run(
            spec=spec, dtype="", prompt_id="", kind="", temperature=temperature, rep=0, token_ids=tokens,
            wall_ms=wall, prefill_ms=prefill, prefill_emits=1 if prefill is not None else 0,
            decode_calls=max(calls - 1, 0), peak_rss_mb=_peak_rss_mb(),
        )  # fmt: skip
    drafter = drafters.get(spec.run.drafter) if spec.method == "speculative" else None
    result, wall, prefill = _our_run(pair, drafter, ids, spec.settings(temperature, seed, max_new))
    s = result.stats
    judged_at = [0] * spec.gamma
    accepted_at = [0] * spec.gamma
    for step in result.steps:
        for d in step.drafted:
            if d.judged:
                judged_at[d.position - 1] += 1
                accepted_at[d.position - 1] += int(d.accepted)
    return Run(
        spec=spec,
        dtype="",
        prompt_id="",
        kind="",
        temperature=temperature,
        rep=0,
        token_ids=tuple(result.token_ids),
        wall_ms=wall,
        prefill_ms=prefill,
        draft_ms=s.draft_ms,
        verify_ms=s.verify_ms,
        decode_calls=s.target_calls - (1 if s.prefill_ms else 0),
        steps=s.steps,
        drafted=s.drafted_tokens,
        judged=s.judged_tokens,
        accepted=s.accepted_tokens,
        judged_at=judged_at,
        accepted_at=accepted_at,
        hist=list(s.accepted_length_hist),
        drift_sum=_drift(result) if spec.method == "speculative" else 0.0,
        peak_rss_mb=_peak_rss_mb(),
    )
