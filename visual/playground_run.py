"""The Playground's Run: checking its settings, the per-run trace it streams, and the heavy handler.

``make_run_handler`` builds the generator Gradio calls when Run is pressed: it checks the
settings (``check_params``), streams the engine's StepRecords into a ``RunState`` and yields
the tab's outputs (a ``RunOutputs``) as they change, throttled so a fast model does not flood
the page.  The trace it stores in ``gr.State`` is ``RunState.to_trace()``, a plain dict the
replay handlers read.

This module does not lay out the tab, wire its events or replay frames (``playground_tab``),
and does not run models itself: generation goes through ``playground.api``.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

import gradio as gr

from playground.config import AppConfig
from playground.decoding.engine import MAX_TREE_NODES
from playground.decoding.records import StepRecord
from playground.models.device import on_zero_gpu
from playground.models.loading import ModelUnavailable
from playground.serving.trace_cache import TraceCache, describe_replay
from playground.validate import VERIFICATION_RULES
from playground.validate import draft_stop as check_stop_below
from playground.validate import temperature as check_temperature
from playground.validate import verification as check_verification
from visual import charts, stats, tables
from visual.fmt import esc
from visual.presets import PresetChoice

MODES = {"Speculative": "speculative", "Race": "race"}
# The Verification control's choices: engine rule -> label (the control's values are the rules)
VERIFICATION = {
    "lossless": "Token verification (Leviathan et al.)",
    "block": "Block verification (Sun et al. 2025)",
}
assert tuple(VERIFICATION) == VERIFICATION_RULES
DTYPE_DEFAULT = "preset default"
CALIBRATION_TOKENS = 8
CHART_EVERY_S = 1.0  # throttle for live chart updates during generation
YIELD_EVERY_S = 0.3  # throttle for streaming the trace: fast models would otherwise flood the page


# --------------------------------------------------------------------------- validation


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def check_params(
    cfg: AppConfig,
    choices: list[PresetChoice],
    prompt,
    preset,
    drafter,
    gamma,
    temperature,
    top_k,
    top_p,
    seed,
    max_new_tokens,
    tree_nodes=None,
    verification="lossless",
    draft_stop=None,
) -> dict[str, str]:
    """Clear messages for bad inputs, keyed by parameter name (empty dict = all good).

    ``tree_nodes`` None: not checked (the preset's own); ``verification`` is an engine rule of
    ``VERIFICATION`` (block verification judges a chain: it refuses tree_nodes > 1);
    ``draft_stop`` None: the preset's own."""
    lim = cfg.limits
    errs: dict[str, str] = {}
    if not isinstance(prompt, str) or not prompt.strip():
        errs["prompt"] = "The prompt is empty: type at least one word."
    elif len(prompt) > lim.max_prompt_chars:
        errs["prompt"] = f"The prompt is too long: {len(prompt)} characters (limit {lim.max_prompt_chars})."
    by_name = {c.preset.name: c for c in choices}
    if preset not in by_name:
        errs["preset"] = f"Unknown preset {preset!r}; choose one of: {', '.join(by_name)}."
    elif not by_name[preset].available:
        errs["preset"] = f"Preset {preset!r} is unavailable here: {by_name[preset].reason}"
    elif drafter not in (None, "") and drafter not in by_name[preset].preset.drafters:
        errs["drafter"] = (
            f"Preset {preset!r} has no {drafter!r} drafter; choose one of: {', '.join(by_name[preset].preset.drafters)}."
        )

    def integer(name, v, lo, hi, what=""):
        if not _finite(v) or float(v) != int(v):
            errs[name] = f"{name} must be a whole number, got {v!r}."
        elif not lo <= v <= hi:
            errs[name] = f"{name} must be between {lo} and {hi}{what}, got {int(v)}."

    if gamma is not None:
        integer("gamma", gamma, 1, lim.max_gamma)
    try:
        check_temperature(temperature, lim.max_temperature)
    except ValueError as exc:
        errs["temperature"] = f"{exc}."
    integer("top_k", top_k, 0, lim.max_top_k, " (0 = off)")
    if not _finite(top_p):
        errs["top_p"] = f"top_p must be a finite number, got {top_p!r}."
    elif not 0 < top_p <= 1:
        errs["top_p"] = f"top_p must be in (0, 1], got {top_p}."
    integer("seed", seed, 0, 2**63 - 1)
    integer("max_new_tokens", max_new_tokens, 1, lim.max_new_tokens)
    if tree_nodes is not None:
        integer("tree_nodes", tree_nodes, 1, MAX_TREE_NODES, " (1 = a chain)")
    try:
        check_verification(verification, tree_nodes if "tree_nodes" not in errs and tree_nodes is not None else 1)
    except ValueError as exc:
        msg = str(exc)
        errs["verification"] = msg[0].upper() + msg[1:] + "."
    if draft_stop is not None:
        try:
            check_stop_below(draft_stop)
        except ValueError as exc:
            errs["draft_stop"] = f"{exc}."
    return errs


# --------------------------------------------------------------------------- records


@dataclass
class RunState:
    """One run's state while it streams; mutable on purpose: the handler fills it in as steps arrive.

    The defaults are the idle trace before any run.  It reaches ``gr.State`` only as ``to_trace()``."""

    run_id: str | int = 0
    prompt: str = ""
    gamma: int = 0
    mode: str = "speculative"
    temperature: float = 0.0
    rule: str = "lossless"  # the speculative run's verification rule (an engine rule of VERIFICATION)
    spec_steps: tuple[StepRecord, ...] = ()
    spec: Any = None  # GenerationResult of the speculative run
    ar_steps: tuple[StepRecord, ...] = ()
    ar: Any = None  # GenerationResult of the race's autoregressive run
    calibration: Any = None  # RunStats of the t1 calibration run
    done: bool = True
    error: str | None = None
    phase: str = "idle"  # idle, loading, speculative, autoregressive, calibrating, done, error

    def to_trace(self) -> dict[str, Any]:
        """The per-user trace dict (a shallow copy: later changes to this state do not reach it)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def empty_trace() -> dict[str, Any]:
    return RunState().to_trace()


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


class RunOutputs(NamedTuple):
    """What one yield of the Run handler updates.  Field names are the tab's component keys
    (``trace`` is the trace state), and their order is the order of the event's outputs."""

    trace: dict[str, Any]
    status: str
    race_plot: Any
    tpc_plot: Any
    acc_plot: Any
    len_plot: Any
    time_plot: Any
    stats: str
    table: Any
    json_dl: Any
    csv_dl: Any
    text: Any


@dataclass(frozen=True)
class _RunRequest:
    """One press of Run, checked and normalised: what the engine is asked for."""

    prompt: str
    mode: str  # a MODES value
    calibrate: bool
    preset: str
    drafter: str | None
    gamma: int
    temperature: float
    top_k: int
    top_p: float
    seed: int
    max_new_tokens: int
    dtype: str | None
    tree_nodes: int
    rule: str = "lossless"  # verification of the speculative run (the autoregressive runs verify nothing)
    draft_stop: float | None = None  # the MTP drafter's stop threshold (None: the preset's)

    def engine_kwargs(self, **overrides) -> dict[str, Any]:
        """``playground.api`` keyword arguments shared by the speculative, race and calibration runs
        (the speculative run adds its ``tree_nodes``, ``rule`` and ``draft_stop``: the autoregressive runs have none,
        and leaving them out keeps their trace-cache key the same whatever the rule)."""
        kwargs = dict(
            preset=self.preset,
            drafter=self.drafter,
            gamma=self.gamma,
            temperature=self.temperature,
            top_k=self.top_k,
            top_p=self.top_p,
            seed=self.seed,
            max_new_tokens=self.max_new_tokens,
            dtype=self.dtype,
        )
        return {**kwargs, **overrides}


@dataclass
class _Clock:
    """When something was last sent, so it goes out at most every ``every_s`` seconds."""

    every_s: float
    last: float = 0.0

    def due(self, force: bool = False) -> bool:
        now = time.perf_counter()
        if force or now - self.last >= self.every_s:
            self.last = now
            return True
        return False


# --------------------------------------------------------------------------- what the outputs show


def _figures(trace: dict) -> tuple:
    spec, ar, g = trace["spec_steps"], trace["ar_steps"], trace["gamma"]
    pending = trace["mode"] == "race" and trace["ar"] is None and not trace.get("error")
    return (
        charts.race_figure(spec, ar, ar_pending=pending and bool(spec)),
        charts.tokens_per_call_figure(spec),
        charts.acceptance_by_position_figure(spec, g),
        charts.accepted_length_figure(spec, g),
        charts.timeline_figure(spec),
    )


def _stats_html(trace: dict) -> str:
    m = stats.compute_metrics(
        trace["spec_steps"],
        trace["gamma"],
        result=trace["spec"],
        ar_result=trace["ar"],
        calibration=trace["calibration"],
    )
    return stats.stats_card(
        m,
        race=trace["mode"] == "race",
        running=not trace["done"],
        temperature=trace["temperature"],
        rule=trace.get("rule", "lossless"),
    )


def _status(trace: dict) -> str:
    ph = trace["phase"]
    n = len(trace["spec_steps"])
    if trace.get("error"):
        return f"**Error:** {esc(trace['error'])}"
    if ph == "loading":
        return "Loading the models (once per process)\u2026"
    if ph == "speculative":
        return f"Speculative run: {n} step(s), {trace['spec_steps'][-1].committed_tokens if n else 0} token(s) so far\u2026"
    if ph == "autoregressive":
        k = len(trace["ar_steps"])
        return f"Race: speculative done; autoregressive run on the same prompt and models, {k} token(s) so far\u2026"
    if ph == "calibrating":
        return f"Measuring t\u2081: a {CALIBRATION_TOKENS}-token autoregressive calibration run\u2026"
    if ph == "done" and trace["spec"] is not None:
        s = trace["spec"].stats
        extra = ""
        if trace["ar"] is not None:
            a = trace["ar"].stats
            extra = f" Autoregressive: {a.new_tokens} tokens in {a.wall_ms / 1000:.2f} s."
        replay = describe_replay(trace["spec"].config.get("replay"))
        return (
            f"**Done.** Speculative: {s.new_tokens} tokens in {s.steps} target passes, {s.wall_ms / 1000:.2f} s "
            f"(stopped: {s.stopped}).{extra}" + (f"\n\n\u21bb {esc(replay)}" if replay else "")
        )
    return ""


def _finished(state: RunState) -> tuple[Any, Any, Any, Any]:
    """(table, json download, csv download, text) once a run has a result; skips otherwise."""
    if state.spec is None:
        return gr.skip(), gr.skip(), gr.skip(), gr.skip()
    df = tables.token_table(state.spec_steps, state.ar_steps)
    payload = tables.trace_payload(state.spec, state.ar, state.calibration.to_dict() if state.calibration else None)
    json_path, csv_path = tables.write_exports(df, payload)
    text = (
        state.spec.text
        if state.ar is None
        else (f"[speculative]\n{state.spec.text}\n\n[autoregressive]\n{state.ar.text}")
    )
    return (
        tables.display_table(df),
        gr.DownloadButton(value=json_path, interactive=True),
        gr.DownloadButton(value=csv_path, interactive=True),
        text,
    )


# --------------------------------------------------------------------------- the handler


def make_shared(cfg: AppConfig) -> TraceCache | None:
    """The app's trace cache and compute slots (one per Blocks; shared by every visitor).

    None on a ZeroGPU Space: each GPU call runs in a worker process there, so a run computed
    in one call cannot be followed or cached by another; runs are computed per request."""
    if on_zero_gpu():
        return None
    q, lim = cfg.queue, cfg.limits
    return TraceCache(
        max_entries=lim.trace_cache_entries,
        max_bytes=lim.trace_cache_bytes,
        slots=q.get("compute_slots", 2),
        wait_s=q.get("busy_wait_s", 120),
    )


@dataclass
class _Generation:
    """One Run as it happens: streams into ``state`` and yields the outputs tuple Gradio needs."""

    request: _RunRequest
    state: RunState
    generate: Callable
    stream_generate: Callable
    shared: TraceCache | None
    report: Callable[[float, str], None]
    charts: _Clock = field(default_factory=lambda: _Clock(CHART_EVERY_S), init=False)
    yields: _Clock = field(default_factory=lambda: _Clock(YIELD_EVERY_S), init=False)

    def outputs(self, final: bool = False, charts_now: bool = False) -> tuple:
        """The outputs of one yield, as the plain tuple Gradio takes (the one place it is made)."""
        trace = self.state.to_trace()
        figs = _figures(trace) if self.charts.due(force=final or charts_now) else (gr.skip(),) * 5
        table, json_dl, csv_dl, text = _finished(self.state) if final else (gr.skip(),) * 4
        out = RunOutputs(trace, _status(trace), *figs, _stats_html(trace), table, json_dl, csv_dl, text)
        return tuple(out)

    def run(self, warmup) -> Iterator[tuple]:
        state = self.state
        try:
            if warmup is not None:
                for msg, frac in warmup.wait(self.request.preset):
                    self.report(frac, msg)
            self.charts.last = time.perf_counter()  # first steps go out fast; charts follow within CHART_EVERY_S
            yield self.outputs()
            yield from self._speculative()
            if self.request.mode == "race":
                yield from self._autoregressive()
            elif self.request.calibrate:
                yield from self._calibrate()
            state.phase = "done"
            state.done = True
            yield self.outputs(final=True)
        except (ValueError, ModelUnavailable) as exc:
            state.error, state.done, state.phase = str(exc), True, "error"
            yield self.outputs(final=True)
            raise gr.Error(str(exc)) from None
        except Exception as exc:  # keep serving; tell the user what happened
            state.error, state.done, state.phase = f"{type(exc).__name__}: {exc}", True, "error"
            yield self.outputs(final=True)
            raise gr.Error(f"The run failed: {type(exc).__name__}: {exc}") from None

    def _speculative(self) -> Iterator[tuple]:
        req, state = self.request, self.state
        state.phase = "speculative"
        steps: list[StepRecord] = []
        for item in self.stream_generate(
            req.prompt,
            mode="speculative",
            progress=self.report,
            shared=self.shared,
            **req.engine_kwargs(tree_nodes=req.tree_nodes, rule=req.rule, draft_stop=req.draft_stop),
        ):
            if isinstance(item, StepRecord):
                steps.append(item)
                state.spec_steps = tuple(steps)
                if len(steps) == 1 or self.yields.due():
                    yield self.outputs()
            else:
                state.spec = item

    def _autoregressive(self) -> Iterator[tuple]:
        """The race's second run: our loop without a drafter, same prompt and models."""
        req, state = self.request, self.state
        state.phase = "autoregressive"
        yield self.outputs(charts_now=True)
        steps: list[StepRecord] = []
        for item in self.stream_generate(req.prompt, mode="autoregressive", shared=self.shared, **req.engine_kwargs()):
            if isinstance(item, StepRecord):
                steps.append(item)
                state.ar_steps = tuple(steps)
                if self.yields.due():
                    yield self.outputs()
            else:
                state.ar = item

    def _calibrate(self) -> Iterator[tuple]:
        """A short autoregressive run that measures t1 (the race's own run measures it anyway)."""
        req, state = self.request, self.state
        state.phase = "calibrating"
        yield self.outputs()
        cal = self.generate(
            req.prompt,
            mode="autoregressive",
            trace=False,
            shared=self.shared,
            **req.engine_kwargs(max_new_tokens=min(CALIBRATION_TOKENS, req.max_new_tokens)),
        )
        state.calibration = cal.stats


def _request(
    cfg: AppConfig,
    choices: list[PresetChoice],
    prompt,
    preset,
    drafter,
    gamma,
    temperature,
    top_k,
    top_p,
    seed,
    max_new_tokens,
    dtype,
    mode,
    calibrate,
    tree_nodes,
    verification="lossless",
    draft_stop=None,
) -> _RunRequest:
    """Check the settings (a gr.Error with every message) and normalise them."""
    tree_nodes = 1 if tree_nodes in (None, "") else tree_nodes
    verification = verification or "lossless"
    errs = check_params(
        cfg,
        choices,
        prompt,
        preset,
        drafter,
        gamma,
        temperature,
        top_k,
        top_p,
        seed,
        max_new_tokens,
        tree_nodes,
        verification,
        draft_stop,
    )
    if errs:
        raise gr.Error(" ".join(errs.values()))
    p = next(c.preset for c in choices if c.preset.name == preset)
    return _RunRequest(
        prompt=prompt,
        mode=MODES.get(mode, mode),
        calibrate=calibrate,
        preset=preset,
        drafter=drafter or None,
        gamma=int(gamma) if gamma is not None else p.gamma,
        temperature=float(temperature),
        top_k=int(top_k),
        top_p=float(top_p),
        seed=int(seed),
        max_new_tokens=int(max_new_tokens),
        dtype=None if dtype in (None, "", DTYPE_DEFAULT) else dtype,
        tree_nodes=int(tree_nodes),
        rule=verification,
        draft_stop=None if draft_stop in (None, "") else float(draft_stop),
    )


def make_run_handler(
    cfg: AppConfig, choices: list[PresetChoice], warmup=None, shared: TraceCache | None = None
) -> Callable:
    """The heavy Run handler (a generator)."""
    from playground.api import generate, stream_generate

    def run_generation(
        trace,
        prompt,
        preset,
        drafter,
        gamma,
        temperature,
        top_k,
        top_p,
        seed,
        max_new_tokens,
        dtype,
        mode,
        calibrate,
        tree_nodes=1,
        verification="lossless",
        draft_stop=None,
        progress=gr.Progress(),
    ):
        req = _request(
            cfg,
            choices,
            prompt,
            preset,
            drafter,
            gamma,
            temperature,
            top_k,
            top_p,
            seed,
            max_new_tokens,
            dtype,
            mode,
            calibrate,
            tree_nodes,
            verification,
            draft_stop,
        )
        state = RunState(
            run_id=(trace or {}).get("run_id") or new_run_id(),
            prompt=prompt,
            gamma=req.gamma,
            mode=req.mode,
            temperature=req.temperature,
            rule=req.rule,
            done=False,
            phase="loading",
        )

        def report(frac, msg):
            try:
                progress(float(frac), desc=str(msg))
            except Exception:
                pass

        yield from _Generation(req, state, generate, stream_generate, shared, report).run(warmup)

    return run_generation
