"""The Playground's Run: checking its settings, the per-run trace it streams, and the heavy handler.

``make_run_handler`` builds the generator Gradio calls when Run is pressed: it turns the form's
values into one ``RunSettings`` (``form_settings``, through ``api.run_settings``: the form
re-implements no check; ``check_params`` is the same for the form's validator), streams the
engine's StepRecords for those settings into a ``RunState`` and yields
the tab's outputs (a ``RunOutputs``): while a run computes only the trace and the status line,
throttled so a fast model does not flood the page, and with the first step the step view's
replay timer; the figures, stats, table and exports once, at the end, so the page's drawing is
not in the times it shows.  The trace it stores in
``gr.State`` is ``RunState.to_trace()``, a plain dict the replay handlers read.

This module does not lay out the tab, wire its events or replay frames (``playground_tab``),
and does not run models itself: generation goes through ``playground.api``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

import gradio as gr

from playground import api, validate
from playground.config import AppConfig
from playground.decoding.records import GenerationResult, StepRecord
from playground.models.device import on_zero_gpu
from playground.models.loading import ModelUnavailable
from playground.rules import APP_RULES
from playground.serving.trace_cache import TraceCache, Visitor, describe_replay
from playground.settings import FORM, RunSettings, offered, public_name
from visual import charts, stats, tables
from visual.fmt import esc
from visual.i18n import t
from visual.i18n.errors import engine_message, stop_reason
from visual.presets import DTYPE_DEFAULT, PresetChoice
from visual.visitor import visitor_of

MODES = {"Speculative": "speculative", "Race": "race"}
VERIFICATION = APP_RULES  # the Verification control's values; the page words each as pg.verification.<rule>
CALIBRATION_TOKENS = 8
YIELD_EVERY_S = 1.0  # the trace and status while a run computes: each message costs the server and the page work
FIRST_FRAME_S = 0.1  # the replay timer's first tick after a run's first step has arrived


# --------------------------------------------------------------------------- the form's settings

_NAMES = {f.name for f in fields(RunSettings)} | {"verification"}  # messages that begin with a setting's name


def _for_page(message: str) -> str:
    """A validator message as a sentence on the page: a capital (unless it begins with a setting's
    name, which is written as the code spells it) and a full stop."""
    first = message.split(" ", 1)[0]
    if first not in _NAMES:
        message = message[:1].upper() + message[1:]
    return message if message.endswith((".", "!", "?", "。")) else message + t("eng.full_stop")


FORM_FIELDS = ("prompt", *(public_name(n) for n in offered(FORM)))  # the form's values, by control name
_BLANK = (None, "", DTYPE_DEFAULT)  # a control left at "the preset's own"


def form_settings(cfg: AppConfig, choices: list[PresetChoice], form: Mapping[str, Any]) -> RunSettings:
    """The form's values (control name -> value, ``FORM_FIELDS``) as the run's ``RunSettings``
    (built by ``api.run_settings``, the one check), or a ``validate.SettingsError`` with every
    mistake keyed by the form's field names.  A blank value is the preset's own
    (``drafter``, ``gamma``, ``tree_nodes``, ``draft_stop``, ``dtype``) or the setting's default."""
    errors: dict[str, Any] = {}
    prompt, preset = form.get("prompt"), form.get("preset")
    try:
        validate.prompt(prompt, cfg.limits.max_prompt_chars)
    except ValueError as exc:
        errors["prompt"] = exc
    chosen = next((c for c in choices if c.preset.name == preset), None)
    if chosen is not None and not chosen.available:
        errors["preset"] = validate.Invalid("preset_unavailable", preset=repr(preset), reason=chosen.reason)
    values = {k: None if v in _BLANK else v for k, v in form.items() if k != "prompt"}
    try:
        settings = api.run_settings(cfg=cfg, **values)
    except validate.SettingsError as exc:
        errors.update({k: m for k, m in exc.errors.items() if k not in errors})
    if errors:
        raise validate.SettingsError(errors)
    return settings


def check_params(cfg: AppConfig, choices: list[PresetChoice], form: Mapping[str, Any]) -> dict[str, str]:
    """``form_settings``' messages keyed by field (empty dict = all good): what the form's validator shows."""
    try:
        form_settings(cfg, choices, form)
    except validate.SettingsError as exc:
        return {k: _for_page(engine_message(m)) for k, m in exc.errors.items()}  # in the visitor's language
    return {}


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
    rule: str = "lossless"  # the speculative run's verification rule (one of VERIFICATION)
    spec_steps: tuple[StepRecord, ...] = ()
    spec: Any = None  # GenerationResult of the speculative run
    ar_steps: tuple[StepRecord, ...] = ()
    ar: Any = None  # GenerationResult of the race's autoregressive run
    calibration: Any = None  # RunStats of the t1 calibration run
    done: bool = True
    error: str | None = None
    phase: str = "idle"  # idle, starting, speculative, autoregressive, calibrating, done, error

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
    timer: Any  # the step view's replay timer: started when the first step exists (nothing polls before)


NOTHING_NEW = tuple(gr.skip() for _ in RunOutputs._fields)  # a yield that changes nothing on the page


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


def _shared_note(steps) -> str:
    """What sharing target passes with other visitors' runs did to this run (``playground.serving``)."""
    shared = [st.shared_rows for st in steps if st.shared_rows > 1]
    if not shared:
        return ""
    capped = sum(1 for st in steps if st.mode == "speculative" and st.gamma == 0)
    note = t("run.shared", shared=len(shared), steps=len(steps), mean=f"{sum(shared) / len(shared):.1f}")
    if capped:
        note += t("run.shared_capped", capped=capped)
    return note


def _status(trace: dict) -> str:
    ph = trace["phase"]
    n = len(trace["spec_steps"])
    if trace.get("error"):
        return t("run.status.error", error=esc(engine_message(trace["error"])))
    if ph == "starting":  # until the first step (loading models shows as the event's progress)
        return t("pg.starting")
    if ph == "speculative":
        return t("run.status.speculative", steps=n, tokens=trace["spec_steps"][-1].committed_tokens if n else 0)
    if ph == "autoregressive":
        k = len(trace["ar_steps"])
        return t("run.status.autoregressive", tokens=k)
    if ph == "calibrating":
        return t("run.status.calibrating", n=CALIBRATION_TOKENS)
    if ph == "done" and trace["spec"] is not None:
        s = trace["spec"].stats
        extra = ""
        if trace["ar"] is not None:
            a = trace["ar"].stats
            extra = t("run.status.done_ar", tokens=a.new_tokens, seconds=f"{a.wall_ms / 1000:.2f}")
        replay = engine_message(describe_replay(trace["spec"].config.get("replay")))
        done = t(
            "run.status.done",
            tokens=s.new_tokens,
            steps=s.steps,
            seconds=f"{s.wall_ms / 1000:.2f}",
            stopped=stop_reason(s.stopped),
            extra=extra,
        )
        return done + (f"\n\n\u21bb {esc(replay)}" if replay else "") + _shared_note(trace["spec"].steps)
    return ""


def _finished(state: RunState) -> tuple[Any, Any, Any, Any]:
    """(table, json download, csv download, text) once a run has a result; skips otherwise."""
    if state.spec is None:
        return gr.skip(), gr.skip(), gr.skip(), gr.skip()
    df = tables.token_table(state.spec_steps, state.ar_steps)
    payload = tables.trace_payload(state.spec, state.ar, state.calibration.to_dict() if state.calibration else None)
    json_path, csv_path = tables.write_exports(df, payload)
    return (
        tables.display_table(df),
        gr.DownloadButton(value=json_path, interactive=True),
        gr.DownloadButton(value=csv_path, interactive=True),
        _result_text(state),
    )


def _result_text(state: RunState) -> str:
    """The generated text (a race's two texts, labelled); the run has a result."""
    if state.ar is None:
        return state.spec.text
    return f"{t('run.text.speculative')}\n{state.spec.text}\n\n{t('run.text.autoregressive')}\n{state.ar.text}"


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
        per_session=q.get("runs_per_session"),
        per_address=q.get("runs_per_address"),
        run_wall_s=lim.run_wall_s,
    )


@dataclass
class _Generation:
    """One Run as it happens: streams into ``state`` and yields the outputs tuple Gradio needs.

    ``settings`` are the speculative run's; the race's baseline and the calibration run are its
    ``autoregressive()`` twin (``race`` and ``calibrate`` are the page's, not the engine's).

    While a run computes, a yield carries only the trace (the step view's own timer draws its
    steps from it; the yield with the first step starts that timer) and the status line: the
    figures, the stats card, the table and the exports are drawn once, after the last run, so
    drawing them never shares the machine with the passes whose times they show (and both sides
    of a race, and the calibration, are timed alike)."""

    prompt: str
    settings: RunSettings
    race: bool
    calibrate: bool
    state: RunState
    shared: TraceCache | None
    report: Callable[[float, str], None]
    visitor: Visitor | None = None  # who pressed Run (their runs count against their caps)
    yields: _Clock = field(default_factory=lambda: _Clock(YIELD_EVERY_S), init=False)

    def outputs(self, final: bool = False, first_step: bool = False, kick: bool = True) -> tuple:
        """The outputs of one yield, as the plain tuple Gradio takes (the one place it is made):
        the trace and the status line, and once ``final`` everything else.  ``first_step``: the
        trace has its first step, so the step view's timer starts (its ticks draw the frames).
        The final yield starts it too (unless ``kick`` is False: ``result_first`` did): one tick
        draws how the run ended even where no step came (an error) or the view is paused, and a
        view whose start was lost catches up."""
        trace = self.state.to_trace()
        if first_step:
            timer = gr.Timer(value=FIRST_FRAME_S, active=True)
        elif final and kick:  # the final kick keeps the pace the view ticks at (a frame never flashes by)
            timer = gr.Timer(active=True)
        else:
            timer = gr.skip()
        if not final:
            return tuple(RunOutputs(*NOTHING_NEW)._replace(trace=trace, status=_status(trace), timer=timer))
        table, json_dl, csv_dl, text = _finished(self.state)
        out = RunOutputs(
            trace, _status(trace), *_figures(trace), _stats_html(trace), table, json_dl, csv_dl, text, timer
        )
        return tuple(out)

    def result_first(self) -> tuple:
        """A finished run's status line and text, with the final kick of the step view's timer,
        yielded before the figures, the card, the table and the exports: the page draws five
        plotly figures for a few tenths of a second, and the result need not wait for them."""
        trace = self.state.to_trace()
        result = RunOutputs(*NOTHING_NEW)._replace(
            trace=trace, status=_status(trace), text=_result_text(self.state), timer=gr.Timer(active=True)
        )
        return tuple(result)

    def cleared(self) -> tuple:
        """The first yield, before anything computes: the last run's figures and card give way
        (empty plots, a card that says when its numbers come), so no stale numbers show."""
        trace = self.state.to_trace()
        return tuple(RunOutputs(trace, _status(trace), *(None,) * 5, stats.pending_card(), *(gr.skip(),) * 5))

    def run(self, warmup) -> Iterator[tuple]:
        state = self.state
        try:
            if warmup is not None:
                for msg, frac in warmup.wait(self.settings.preset):
                    self.report(frac, msg)
            yield self.cleared()
            yield from self._speculative()
            if self.race:
                yield from self._autoregressive()
            elif self.calibrate:
                yield from self._calibrate()
            state.phase = "done"
            state.done = True
            if state.spec is not None:
                yield self.result_first()
            yield self.outputs(final=True, kick=state.spec is None)
        except (ValueError, ModelUnavailable) as exc:
            state.error, state.done, state.phase = str(exc), True, "error"
            yield self.outputs(final=True)
            raise gr.Error(engine_message(exc)) from None
        except Exception as exc:  # keep serving; tell the user what happened
            state.error, state.done, state.phase = f"{type(exc).__name__}: {exc}", True, "error"
            yield self.outputs(final=True)
            raise gr.Error(t("run.failed", error=f"{type(exc).__name__}: {exc}")) from None

    def _speculative(self) -> Iterator[tuple]:
        state = self.state
        state.phase = "speculative"
        steps: list[StepRecord] = []
        for item in api.stream_run(
            self.prompt, self.settings, progress=self.report, shared=self.shared, visitor=self.visitor
        ):
            if isinstance(item, StepRecord):
                steps.append(item)
                state.spec_steps = tuple(steps)
                if len(steps) == 1 or self.yields.due():
                    yield self.outputs(first_step=len(steps) == 1)
            elif isinstance(item, GenerationResult):
                state.spec = item
            else:  # WAITING: nothing new; a yield lets gradio close the stream of a visitor who left
                yield NOTHING_NEW

    def _autoregressive(self) -> Iterator[tuple]:
        """The race's second run: our loop without a drafter, same prompt and models."""
        state = self.state
        state.phase = "autoregressive"
        yield self.outputs()
        steps: list[StepRecord] = []
        for item in api.stream_run(
            self.prompt, self.settings.autoregressive(), shared=self.shared, visitor=self.visitor
        ):
            if isinstance(item, StepRecord):
                steps.append(item)
                state.ar_steps = tuple(steps)
                if self.yields.due():
                    yield self.outputs()
            elif isinstance(item, GenerationResult):
                state.ar = item
            else:
                yield NOTHING_NEW

    def _calibrate(self) -> Iterator[tuple]:
        """A short autoregressive run that measures t1 (the race's own run measures it anyway)."""
        state = self.state
        state.phase = "calibrating"
        yield self.outputs()
        short = min(CALIBRATION_TOKENS, self.settings.max_new_tokens)
        quick = self.settings.autoregressive(max_new_tokens=short, trace=False)
        cal = api.run(self.prompt, quick, shared=self.shared, visitor=self.visitor)
        state.calibration = cal.stats


def make_run_handler(
    cfg: AppConfig, choices: list[PresetChoice], warmup=None, shared: TraceCache | None = None
) -> Callable:
    """The heavy Run handler (a generator): the form's values become one ``RunSettings`` (``form_settings``)."""

    def run_generation(form: dict, progress=gr.Progress(), request: gr.Request = None):
        """``form``: the event's inputs by control name (``FORM_FIELDS`` plus ``trace``, ``mode``
        and ``calibrate``)."""
        trace, mode, calibrate, prompt = form.get("trace"), form.get("mode"), form.get("calibrate"), form.get("prompt")
        try:
            settings = form_settings(cfg, choices, {k: form.get(k) for k in FORM_FIELDS})
        except validate.SettingsError as exc:
            raise gr.Error(" ".join(_for_page(engine_message(m)) for m in exc.errors.values())) from None
        race = MODES.get(mode, mode) == "race"
        state = RunState(
            run_id=(trace or {}).get("run_id") or new_run_id(),
            prompt=prompt,
            gamma=settings.gamma,
            mode="race" if race else "speculative",
            temperature=settings.temperature,
            rule=settings.rule,
            done=False,
            phase="starting",
        )

        def report(frac, msg):
            try:
                progress(float(frac), desc=str(msg))
            except Exception:
                pass

        run = _Generation(prompt, settings, race, bool(calibrate), state, shared, report, visitor_of(request))
        yield from run.run(warmup)

    return run_generation
