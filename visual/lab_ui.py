"""The Classroom lab tabs: components and events for the seven lab features.

    with gr.Tab("Classroom lab"):
        lab_tabs = build_lab_tabs(cfg)          # inside the caller's gr.Blocks

Sub-tabs: Equality check (1) · Distribution check with the rule selector —
correct, wrong on purpose, lossy (2, 3, 4) · Theory bench (5) · Predict, then
reveal (6) · Replay & share: trace replay/import/export, classroom presets,
share links (7).  URL query parameters (``?preset=…&prompt=…&gamma=…&
temperature=…&seed=…`` or ``?classroom=<slug>``, validated by ``visual.share``)
prefill the lab's controls on page load.

Per-user data lives only in ``gr.State``; long work reports through
``gr.Progress`` and shares the ``"model"`` concurrency group with the
Playground tab.  The heavy actions (equality check, distribution check,
compare all rules, theory-bench measurement) stop after ``limits.lab_wall_s`` on
real models and report what they have, and each tab has a **Stop** button:
it cancels the event (``cancels=``) and, because gradio lets a function that is
already running finish, also tells the running loop through ``STOPS`` — the
loop checks between continuations and frees its slot.  All logic is in
``playground.lab`` (one module per feature) and ``playground.trace_io``; links in
``visual.share`` and ``visual.classroom``; rendering in ``visual.lab``.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, NamedTuple

import gradio as gr

from playground import trace_io
from playground.config import AppConfig, load_config
from playground.engine import MAX_GAMMA
from playground.lab.budget import Budget, LabCancelled
from playground.lab.distribution import (
    MAX_SAMPLES,
    MAX_SAMPLES_SLOW,
    DistributionCheck,
    DistributionSettings,
    distribution_check,
)
from playground.lab.equality import equality_check
from playground.lab.quiz import Scoreboard, question, question_steps, reveal
from playground.lab.rules import DEFAULT_RULE, RULE_INFO, rule_choices
from playground.lab.theory import measure_run, measured_point, theory_curve
from playground.models import ModelUnavailable
from playground.sampling import predicted_speedup
from visual import lab as vlab
from visual import replay
from visual.classroom import classroom_presets
from visual.fmt import pct, token_plain
from visual.presets import preset_choices
from visual.share import PREFILL_KEYS, Prefill, prefill_from_query, share_query, share_url

DTYPE_DEFAULT = "preset default"
MODEL_EVENT = dict(concurrency_id="model", concurrency_limit="default", api_visibility="private")
LIGHT_EVENT = dict(concurrency_limit=None, api_visibility="private", show_progress="hidden")
HISTORY = 12  # distribution checks kept per session for the comparison table


# --------------------------------------------------------------------------- Stop


class StopRequests:
    """Stop presses per browser session, so a running lab action can notice its own.

    ``watcher(session)`` is taken when an action starts and answers True once Stop was pressed
    in that session *after* that moment (a press left over from an earlier action does not
    stop the next one).  Bounded: the oldest sessions are forgotten beyond ``max_sessions``.
    """

    def __init__(self, max_sessions: int = 4096, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_sessions = max_sessions
        self.clock = clock
        self._pressed: "OrderedDict[str, float]" = OrderedDict()
        self._lock = threading.Lock()

    def press(self, session: str | None) -> bool:
        if not session:
            return False
        with self._lock:
            self._pressed[session] = self.clock()
            self._pressed.move_to_end(session)
            while len(self._pressed) > self.max_sessions:
                self._pressed.popitem(last=False)
        return True

    def watcher(self, session: str | None) -> Callable[[], bool]:
        if not session:
            return lambda: False
        started = self.clock()
        return lambda: self._pressed.get(session, -math.inf) >= started

    def __len__(self) -> int:
        return len(self._pressed)


STOPS = StopRequests()


def _session(request) -> str | None:
    return getattr(request, "session_hash", None) if request is not None else None


def _budget(preset, request) -> Budget:
    """The action's time limit (``limits.lab_wall_s`` on real models) and this session's Stop."""
    return Budget.for_preset(preset, STOPS.watcher(_session(request)))


def press_stop(request: gr.Request = None) -> str:
    """The Stop button: tell this session's running action (and say so where there is a status line)."""
    STOPS.press(_session(request))
    return "Stopping…"


def press_stop_quietly(request: gr.Request = None) -> None:
    STOPS.press(_session(request))


# --------------------------------------------------------------------------- presets


@dataclass(frozen=True)
class _Choice:
    name: str
    label: str
    available: bool
    reason: str
    gamma: int
    source: str


def _choices(cfg: AppConfig) -> list[_Choice]:
    return [
        _Choice(c.preset.name, c.preset.label if c.available else f"{c.preset.label} — unavailable",
                c.available, c.reason, c.preset.gamma, c.preset.source)
        for c in preset_choices(cfg)
    ]


def _pick(choices: list[_Choice], preferred: str) -> str:
    by = {c.name: c for c in choices}
    if preferred in by and by[preferred].available:
        return preferred
    return next((c.name for c in choices if c.available), preferred)


def _progress_adapter(progress):
    if progress is None:
        return None

    def report(fraction: float, message: str) -> None:
        try:
            progress(float(fraction), desc=str(message))
        except Exception:
            pass

    return report


def _int(x: Any, name: str) -> int:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        raise gr.Error(f"{name} must be a whole number.")
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise gr.Error(f"{name} must be a whole number, got {x!r}.") from None
    if not v.is_integer():
        raise gr.Error(f"{name} must be a whole number, got {x!r}.")
    return int(v)


class _Stopped(Exception):
    """The user pressed Stop; the handler returns without new results."""


def _run_errors(fn, *args, **kwargs):
    """Call fn, turning the engine's clear ValueErrors into gr.Error messages."""
    try:
        return fn(*args, **kwargs)
    except gr.Error:
        raise
    except LabCancelled:
        raise _Stopped() from None
    except (ValueError, ModelUnavailable) as exc:
        raise gr.Error(str(exc)) from None
    except Exception as exc:  # keep serving; say what happened
        raise gr.Error(f"The lab run failed: {type(exc).__name__}: {exc}") from None


# --------------------------------------------------------------------------- handlers (pure functions of inputs)


def run_equality(prompt, preset, gamma, max_new_tokens, dtype, request: gr.Request = None, progress=gr.Progress()):
    try:
        eq = _run_errors(
            equality_check, prompt, preset=preset, gamma=_int(gamma, "γ"),
            max_new_tokens=_int(max_new_tokens, "tokens"), dtype=None if dtype in (None, "", DTYPE_DEFAULT) else dtype,
            progress=_progress_adapter(progress), budget=_budget(preset, request),
        )
    except _Stopped:
        return vlab.stopped_html("the equality check")
    return vlab.equality_html(eq)


def _dist_outputs(check: DistributionCheck | None, history: list, status: str):
    return vlab.distribution_figure(check), vlab.distribution_html(check), vlab.rules_table(history), history, status


def _dist_settings(prompt, preset, n, n_tokens, temperature, gamma, seed, rule: str = DEFAULT_RULE):
    """The distribution tab's inputs as checked settings (gr.Error for a value that is not a whole number)."""
    return DistributionSettings(
        prompt, preset=preset, rule=rule, n_samples=_int(n, "N"), n_tokens=_int(n_tokens, "tokens per continuation"),
        temperature=float(temperature), gamma=_int(gamma, "γ"), seed=_int(seed, "seed"),
    )


def _reference(history: list) -> DistributionCheck | None:
    return history[0] if history else None


def _stopped_outputs(history):
    return gr.skip(), gr.skip(), gr.skip(), history, "Stopped: nothing new was computed."


def run_distribution(prompt, preset, rule, n, n_tokens, temperature, gamma, seed, history, request: gr.Request = None,
                     progress=gr.Progress()):
    history = list(history or [])
    settings = _dist_settings(prompt, preset, n, n_tokens, temperature, gamma, seed, rule=rule)
    try:
        check = _run_errors(
            distribution_check, settings, progress=_progress_adapter(progress), reference=_reference(history),
            budget=_budget(preset, request),
        )
    except _Stopped:
        return _stopped_outputs(history)
    history = [check] + [h for h in history if h.rule != check.rule or not _same_settings(h, check)]
    history = history[:HISTORY]
    status = f"Done in {check.spec.seconds + check.target.seconds:.1f} s."
    if check.partial:
        status = (f"Stopped at the time limit after {check.spec.seconds + check.target.seconds:.1f} s: "
                  f"{check.spec.n:,} of {check.n_samples:,} continuations — a partial result, labelled as such.")
    return _dist_outputs(check, history, status)


def _same_settings(a: DistributionCheck, b: DistributionCheck) -> bool:
    keys = ("prompt", "preset", "temperature", "gamma", "n_tokens", "n_samples", "seed")
    return all(getattr(a, k) == getattr(b, k) for k in keys)


def compare_all_rules(prompt, preset, n, n_tokens, temperature, gamma, seed, history, request: gr.Request = None,
                      progress=gr.Progress(), budget: Budget | None = None):
    """Every rule on the same settings, one after another, sharing one target-only sample.

    One time limit for the whole comparison: each rule gets an equal share of what is left
    when it starts, and rules not started when the time is up are skipped and named."""
    history = list(history or [])
    report = _progress_adapter(progress)
    budget = budget if budget is not None else _budget(preset, request)
    rules = list(RULE_INFO)
    done: list[DistributionCheck] = []
    ref = _reference(history)
    base = _dist_settings(prompt, preset, n, n_tokens, temperature, gamma, seed)
    last = None
    try:
        for i, rule in enumerate(rules):
            if done and budget.expired():
                break

            def sub(f, msg, i=i, rule=rule):
                if report:
                    report((i + f) / len(rules), f"rule {i + 1}/{len(rules)} ({rule}): {msg}")

            last = _run_errors(distribution_check, replace(base, rule=rule), progress=sub, reference=ref,
                               budget=budget.share(1.0 / (len(rules) - i)))
            ref = last if ref is None or not _same_settings(ref, last) else ref
            done.append(last)
    except (_Stopped, LabCancelled):
        if not done:
            return _stopped_outputs(history)
    history = list(reversed(done)) + [h for h in history if not any(_same_settings(h, d) and h.rule == d.rule for d in done)]
    history = history[: max(HISTORY, len(rules))]
    status = "All rules checked on the same settings: compare drift (p-value, TV) with acceptance in the table."
    skipped = rules[len(done):]
    if skipped or any(d.partial for d in done):
        status = (f"Stopped after {budget.elapsed():.0f} s (time limit {budget.describe()}): {len(done)} of "
                  f"{len(rules)} rules checked"
                  + (f", not checked: {', '.join(skipped)}" if skipped else "")
                  + "; rows marked partial are computed on fewer continuations than asked.")
    return _dist_outputs(done[0], history, status)


def render_theory(alpha, gamma, c, v, point):
    try:
        curve = theory_curve(float(alpha), float(c), float(v))
    except (TypeError, ValueError) as exc:
        raise gr.Error(str(exc)) from None
    return vlab.theory_figure(curve, point), vlab.theory_html(curve, _int(gamma, "γ"), point)


def _clamp(x: float | None, lo: float, hi: float, default: float) -> float:
    if x is None or not math.isfinite(x):
        return default
    return max(lo, min(hi, float(x)))


def measure_for_theory(prompt, preset, gamma, temperature, seed, alpha, c, v, request: gr.Request = None,
                       progress=gr.Progress()):
    try:
        spec, base, point = _run_errors(
            measure_run, prompt, preset=preset, gamma=_int(gamma, "γ"), temperature=float(temperature),
            seed=_int(seed, "seed"), progress=_progress_adapter(progress), budget=_budget(preset, request),
        )
    except _Stopped:
        return (gr.skip(),) * 6
    a2 = _clamp(point.alpha, 0.0, 1.0, float(alpha))
    c2 = _clamp(point.c, 0.0, 2.0, float(c))
    v2 = _clamp(point.v, 0.5, 4.0, float(v))
    fig, html = render_theory(a2, gamma, c2, v2, point)
    return point, gr.update(value=round(a2, 3)), gr.update(value=round(c2, 3)), gr.update(value=round(v2, 3)), fig, html


def theory_from_trace(trace, alpha, gamma, c, v):
    if trace is None:
        raise gr.Error("No trace yet: run or import one in the Replay & share tab.")
    point = measured_point(trace.stats)
    a2 = _clamp(point.alpha, 0.0, 1.0, float(alpha))
    c2 = _clamp(point.c, 0.0, 2.0, float(c))
    v2 = _clamp(point.v, 0.5, 4.0, float(v))
    g = point.gamma or _int(gamma, "γ")
    if point.predicted is None and point.alpha is not None and g:  # no 1-token timing: α measured, c and v from sliders
        point = replace(point, predicted=predicted_speedup(point.alpha, g, c2, v2))
    fig, html = render_theory(a2, g, c2, v2, point)
    return point, gr.update(value=round(a2, 3)), gr.update(value=g), gr.update(value=round(c2, 3)), \
        gr.update(value=round(v2, 3)), fig, html


def _empty_round() -> dict[str, Any]:
    return {"result": None, "order": [], "pos": 0, "revealed": False, "rate_guess": None, "rate_scored": False}


def _question_outputs(state: dict):
    res, order, pos = state["result"], state["order"], state["pos"]
    if res is None:
        return vlab.question_html(None), gr.update(choices=[], value=[])
    if pos >= len(order):
        msg = ("This run is over. Press <b>Reveal the run's acceptance rate</b> to score your guess, or start a "
               "<b>New round</b>.")
        return f'<div style="{vlab._BOX}">{msg}</div>', gr.update(choices=[], value=[])
    q = question(res, order[pos])
    choices = [(f"{i + 1}: \u201c{token_plain(t)}\u201d", str(i)) for i, t in enumerate(q.drafts)]
    return vlab.question_html(q, len(order) - pos - 1), gr.update(choices=choices, value=[])


def new_round(preset, prompt, gamma, temperature, seed, max_new_tokens, rate_guess, progress=gr.Progress()):
    from playground.api import generate

    res = _run_errors(
        generate, prompt, preset=preset, gamma=_int(gamma, "γ"), temperature=float(temperature), seed=_int(seed, "seed"),
        max_new_tokens=_int(max_new_tokens, "tokens"), progress=_progress_adapter(progress),
    )
    order = question_steps(res)
    state = {**_empty_round(), "result": res, "order": order, "rate_guess": float(rate_guess) / 100.0}
    note = (f"New run: {len(order)} step(s) with drafts out of {len(res.steps)}. Your acceptance-rate guess "
            f"({float(rate_guess):.0f}%) is locked in.")
    if not order:
        note = "This run drafted nothing (prompt lookup found no match?): try another prompt or preset."
    qh, cb = _question_outputs(state)
    return state, qh, cb, "", note


def do_reveal(selected, state, board):
    state = dict(state or _empty_round())
    if state["result"] is None or state["pos"] >= len(state["order"]):
        return state, gr.skip(), board, vlab.score_card(board)
    if state["revealed"]:
        raise gr.Error("Already revealed: press Next step.")
    res, idx = state["result"], state["order"][state["pos"]]
    k = len(res.steps[idx].drafted)
    picked = {int(s) for s in (selected or []) if str(s).isdigit()}
    r = reveal(res, idx, [i in picked for i in range(k)])
    board = board.add_step(r)
    state["revealed"] = True
    return state, vlab.reveal_html(r, question(res, idx)), board, vlab.score_card(board)


def next_step(state):
    state = dict(state or _empty_round())
    if state["result"] is not None and state["pos"] < len(state["order"]):
        state["pos"] += 1
        state["revealed"] = False
    qh, cb = _question_outputs(state)
    return state, qh, cb, ""


def reveal_rate(state, board):
    state = dict(state or _empty_round())
    if state["result"] is None:
        raise gr.Error("Start a round first.")
    actual = state["result"].stats.acceptance_rate
    if state["rate_scored"]:
        return state, board, vlab.score_card(board), f"Acceptance rate of this run: {pct(actual)} (already scored)."
    board = board.add_rate(state["rate_guess"] or 0.0, actual)
    state["rate_scored"] = True
    return state, board, vlab.score_card(board), (
        f"Acceptance rate of this run: {pct(actual)} (you guessed {pct(state['rate_guess'])}); "
        f"it drafted {state['result'].stats.drafted_tokens} tokens in {state['result'].stats.steps} steps."
    )


def _replay_outputs(trace, frame: int, source: str = ""):
    n = replay.frame_count(trace.steps) if trace is not None else 1
    frame = max(0, min(int(frame or 0), n - 1))
    return (
        gr.update(maximum=max(1, n - 1), value=frame),
        vlab.replay_html(trace, frame),
        vlab.trace_summary_html(trace, source),
    )


def run_for_replay(preset, prompt, gamma, temperature, seed, max_new_tokens, progress=gr.Progress()):
    from playground.api import generate

    res = _run_errors(
        generate, prompt, preset=preset, gamma=_int(gamma, "γ"), temperature=float(temperature), seed=_int(seed, "seed"),
        max_new_tokens=_int(max_new_tokens, "tokens"), progress=_progress_adapter(progress),
    )
    s, h, summ = _replay_outputs(res, 1, "Fresh run:")
    return res, s, h, summ, "Generated. Step through it with ◀ ▶ or the slider."


def upload_too_large(path, limit: int | None = None) -> str | None:
    """Why an uploaded file is refused before anything reads it (its size on disk), or None.

    Gradio has already stored the upload; ``os.stat`` tells its size without opening it, so a
    multi-gigabyte file costs nothing more here.  The message says the size and the limit."""
    limit = load_config().limits.max_upload_bytes if limit is None else limit
    try:
        size = os.stat(path).st_size
    except OSError:
        return "the uploaded file could not be found; upload it again"
    if size > limit:
        return f"the file is {trace_io.size_text(size)}; uploads are limited to {trace_io.size_text(limit)}, so it was not read"
    return None


def import_trace(path, current):
    if not path:
        return current, gr.skip(), gr.skip(), gr.skip(), ""
    refused = upload_too_large(path)
    if refused:
        return current, gr.skip(), gr.skip(), gr.skip(), f"⛔ Could not import this file: {vlab.md_escape(refused)}."
    try:
        res = trace_io.load_trace_file(path)
    except trace_io.TraceImportError as exc:
        return current, gr.skip(), gr.skip(), gr.skip(), f"⛔ Could not import this file: {vlab.md_escape(exc)}."
    except Exception as exc:  # anything unexpected is still a clear refusal
        return current, gr.skip(), gr.skip(), gr.skip(), f"⛔ Could not import this file ({type(exc).__name__})."
    s, h, summ = _replay_outputs(res, 0, f"Imported {Path(str(path)).name}:")
    return res, s, h, summ, f"Imported a trace with {len(res.steps)} steps."


def move(trace, frame, delta):
    if trace is None:
        return gr.skip(), gr.skip()
    n = replay.frame_count(trace.steps)
    f = max(0, min(int(frame or 0) + delta, n - 1))
    return gr.update(value=f), vlab.replay_html(trace, f)


def export_trace(trace):
    if trace is None:
        raise gr.Error("Nothing to export yet.")
    from visual.tables import clean_json, new_export_dir

    d = new_export_dir(prefix="lab-")  # bounded: only the newest exports are kept
    p = d / "speculative_trace.json"

    p.write_text(json.dumps(clean_json(trace.to_dict()), ensure_ascii=False, allow_nan=False), encoding="utf-8")
    return str(p)


def share_link(preset, prompt, gamma, temperature, seed, request: gr.Request = None):
    q = share_query(preset=preset, prompt=prompt, gamma=_int(gamma, "γ"), temperature=float(temperature),
                    seed=_int(seed, "seed"))
    return share_url(request, q)


# --------------------------------------------------------------------------- the tabs


@dataclass
class LabTabs:
    """Handles to the lab's components (for app.py wiring and tests)."""

    components: dict[str, Any] = field(default_factory=dict)
    load_outputs: list[Any] = field(default_factory=list)
    on_load: Any = None


class _Setup(NamedTuple):
    """What every lab tab starts from: the limits, the preset choices and the defaults."""

    lim: Any
    preset_opts: list
    start: str
    fast: str
    gamma0: int
    ex_prompt: str
    classroom: list


def _equality_tab(c: dict[str, Any], s: _Setup) -> None:
    """1. Speculative vs the target's own greedy output, token for token."""
    with gr.Tab("Equality check (greedy)"):
        gr.Markdown(
            "At temperature 0 speculative decoding must reproduce the target's own greedy output **token for "
            "token**. Run both and compare. In float32 they are identical; in bfloat16 a 1-token pass and a "
            "multi-token verify pass can round a near-tie differently, and the first such flip is shown with "
            "both tokens' logits."
        )
        with gr.Row():
            c["eq_preset"] = gr.Dropdown(s.preset_opts, value=s.start, label="Preset")
            c["eq_dtype"] = gr.Dropdown([DTYPE_DEFAULT, "float32", "bfloat16"], value=DTYPE_DEFAULT, label="dtype")
            c["eq_gamma"] = gr.Slider(1, s.lim.max_gamma, value=s.gamma0, step=1, label="γ")
            c["eq_tokens"] = gr.Slider(4, min(128, s.lim.max_new_tokens), value=32, step=1, label="New tokens")
        c["eq_prompt"] = gr.Textbox(value=s.ex_prompt, label="Prompt", lines=2)
        with gr.Row():
            c["eq_run"] = gr.Button("Run both ▸", variant="primary")
            c["eq_stop"] = gr.Button("■ Stop", variant="stop")
        c["eq_out"] = gr.HTML(vlab.equality_html(None))


def _distribution_tab(c: dict[str, Any], s: _Setup) -> None:
    """2-4. Histograms of speculative vs target-only sampling, under each verification rule."""
    with gr.Tab("Distribution check & wrong rules"):
        gr.Markdown(
            "Draw **N** short continuations with speculative sampling and with the target alone, and compare "
            "the histograms. The correct rule matches the target up to noise; the rules marked ✗ WRONG are bugs "
            "real implementations shipped — watch them drift. ~ LOSSY trades drift for acceptance (its edge "
            "shows best with 3 tokens per continuation: compare *tokens/pass* with the correct rule's). "
            "Use **tiny-random** for large N (5,000 takes seconds); real models cost a second or more per "
            f"continuation on a CPU and allow N ≤ {MAX_SAMPLES_SLOW:,}; on them a check stops after "
            f"{s.lim.lab_wall_s:g} s and shows what it collected, marked partial (**■ Stop** ends it sooner)."
        )
        with gr.Row():
            with gr.Column(scale=1, min_width=300):
                c["d_rule"] = gr.Radio(rule_choices(), value=DEFAULT_RULE, label="Verification rule",
                                       info="The correct rule is the default; the others are labelled.")
                c["d_preset"] = gr.Dropdown(s.preset_opts, value=s.fast, label="Preset")
                c["d_n"] = gr.Slider(100, MAX_SAMPLES, value=5000, step=100, label="N continuations per side")
                c["d_tokens"] = gr.Radio([1, 2, 3], value=2, label="Tokens per continuation")
                c["d_temp"] = gr.Slider(0.05, s.lim.max_temperature, value=1.0, step=0.05, label="Temperature")
                with gr.Row():
                    c["d_gamma"] = gr.Slider(1, s.lim.max_gamma, value=4, step=1, label="γ")
                    c["d_seed"] = gr.Number(value=0, precision=0, minimum=0, label="Seed")
            with gr.Column(scale=3):
                c["d_prompt"] = gr.Textbox(value="Once upon a time", label="Prompt", lines=1)
                with gr.Row():
                    c["d_run"] = gr.Button("Run check ▸", variant="primary")
                    c["d_all"] = gr.Button("Compare all rules")
                    c["d_stop"] = gr.Button("■ Stop", variant="stop")
                c["d_status"] = gr.Markdown("")
                c["d_plot"] = gr.Plot(vlab.distribution_figure(None), show_label=False)
                c["d_html"] = gr.HTML(vlab.distribution_html(None))
                c["d_table"] = gr.Dataframe(vlab.rules_table([]), interactive=False, wrap=True,
                                            label="Rules checked this session (newest first)")
        gr.Markdown(
            "**TV distance** = ½ Σ |f_spec(x) − f_target(x)|: 0 = identical histograms, 1 = no overlap; two "
            "samples of the same distribution still differ by about the *noise level* shown. **p-value**: how "
            "often a difference at least this large would appear if both came from the same distribution "
            "(chi-square test, rare outcomes pooled). **p vs exact**: the speculative sample against the "
            "target's exact probabilities (computed from its logits). **Acceptance** = accepted ÷ judged drafts."
        )


def _theory_tab(c: dict[str, Any], s: _Setup) -> None:
    """5. The cost model as sliders, and a measured point on it."""
    with gr.Tab("Theory bench"):
        gr.Markdown(vlab.FORMULAS_MD, latex_delimiters=[{"left": "$$", "right": "$$", "display": True}])
        with gr.Row():
            c["t_alpha"] = gr.Slider(0.0, 1.0, value=0.7, step=0.01, label="α: acceptance probability")
            c["t_gamma"] = gr.Slider(1, MAX_GAMMA, value=4, step=1, label="γ: drafts per step")
            c["t_c"] = gr.Slider(0.0, 2.0, value=0.1, step=0.01, label="c: draft cost ÷ target cost")
            c["t_v"] = gr.Slider(0.5, 4.0, value=1.3, step=0.05, label="v_γ: verify-pass cost ÷ 1-token cost")
        curve0 = theory_curve(0.7, 0.1, 1.3)
        c["t_plot"] = gr.Plot(vlab.theory_figure(curve0), show_label=False)
        c["t_html"] = gr.HTML(vlab.theory_html(curve0, 4))
        with gr.Accordion("You are here: measure a real run", open=True):
            with gr.Row():
                c["t_preset"] = gr.Dropdown(s.preset_opts, value=s.start, label="Preset")
                c["t_temp"] = gr.Slider(0, s.lim.max_temperature, value=0.0, step=0.05, label="Temperature")
                c["t_seed"] = gr.Number(value=0, precision=0, minimum=0, label="Seed")
            c["t_prompt"] = gr.Textbox(value=s.ex_prompt, label="Prompt", lines=2)
            with gr.Row():
                c["t_measure"] = gr.Button("Measure (target alone + speculative, γ from the slider) ▸",
                                           variant="primary")
                c["t_stop"] = gr.Button("■ Stop", variant="stop")
                c["t_from_trace"] = gr.Button("Use the trace from Replay & share")


def _predict_tab(c: dict[str, Any], s: _Setup) -> None:
    """6. Guess which drafts the target accepts, then reveal."""
    with gr.Tab("Predict, then reveal"):
        gr.Markdown(
            "Guess before you look. **Before the run**, guess its acceptance rate. **At each step**, the drafts "
            "are shown with the drafter's confidence q: tick the ones the target will accept, then reveal p, "
            "min(1, p/q), the random u and the verdict. Your score is kept for this session."
        )
        with gr.Row():
            c["p_preset"] = gr.Dropdown(s.preset_opts, value=s.start, label="Preset")
            c["p_gamma"] = gr.Slider(1, s.lim.max_gamma, value=s.gamma0, step=1, label="γ")
            c["p_temp"] = gr.Slider(0, s.lim.max_temperature, value=0.0, step=0.05, label="Temperature")
            c["p_seed"] = gr.Number(value=0, precision=0, minimum=0, label="Seed")
            c["p_tokens"] = gr.Slider(8, min(96, s.lim.max_new_tokens), value=32, step=1, label="New tokens")
        c["p_prompt"] = gr.Textbox(value=s.ex_prompt, label="Prompt", lines=2)
        with gr.Row():
            c["p_rate"] = gr.Slider(0, 100, value=50, step=1, label="Your guess: acceptance rate of the run (%)")
            c["p_new"] = gr.Button("New round ▸", variant="primary")
        c["p_note"] = gr.Markdown("")
        c["p_question"] = gr.HTML(vlab.question_html(None))
        c["p_guess"] = gr.CheckboxGroup(choices=[], value=[], label="Which drafts will the target accept?")
        with gr.Row():
            c["p_reveal"] = gr.Button("Reveal", variant="primary")
            c["p_next"] = gr.Button("Next step ›")
            c["p_rate_reveal"] = gr.Button("Reveal the run's acceptance rate")
        c["p_answer"] = gr.HTML("")
        c["p_score"] = gr.HTML(vlab.score_card(Scoreboard()))


def _replay_tab(c: dict[str, Any], s: _Setup) -> None:
    """7. Step through a recorded or imported run; share links and classroom presets."""
    with gr.Tab("Replay & share"):
        gr.Markdown(
            "Step backwards and forwards through a recorded run, import a trace JSON exported earlier "
            "(checked: size, JSON, schema, values — nothing in it is executed), and hand out a link that "
            "pre-fills the settings."
        )
        if s.classroom:
            with gr.Row():
                c["r_class"] = gr.Dropdown([(cp.label, cp.slug) for cp in s.classroom], value=s.classroom[0].slug,
                                           label="Classroom presets")
                c["r_apply"] = gr.Button("Apply preset")
            c["r_class_md"] = gr.Markdown(vlab.classroom_md(s.classroom[0]))
        with gr.Row():
            c["r_preset"] = gr.Dropdown(s.preset_opts, value=s.start, label="Preset")
            c["r_gamma"] = gr.Slider(1, s.lim.max_gamma, value=s.gamma0, step=1, label="γ")
            c["r_temp"] = gr.Slider(0, s.lim.max_temperature, value=0.0, step=0.05, label="Temperature")
            c["r_seed"] = gr.Number(value=0, precision=0, minimum=0, label="Seed")
            c["r_tokens"] = gr.Slider(4, min(128, s.lim.max_new_tokens), value=32, step=1, label="New tokens")
        c["r_prompt"] = gr.Textbox(value=s.ex_prompt, label="Prompt", lines=2)
        with gr.Row():
            c["r_run"] = gr.Button("Run ▸", variant="primary")
            c["r_file"] = gr.File(label=f"Import a trace JSON (≤ {s.lim.max_trace_bytes // 1_000_000} MB)",
                                  file_types=[".json"], type="filepath", file_count="single")
        c["r_status"] = gr.Markdown("")
        with gr.Row():
            c["r_back"] = gr.Button("◀ Back")
            c["r_frame"] = gr.Slider(0, 1, value=0, step=1, label="Frame")
            c["r_fwd"] = gr.Button("Step ▶")
        c["r_view"] = gr.HTML(vlab.replay_html(None, 0))
        c["r_summary"] = gr.HTML("")
        with gr.Row():
            c["r_export"] = gr.DownloadButton("⬇ Export this trace (JSON)")
            c["r_share_btn"] = gr.Button("Make a share link")
        c["r_share"] = gr.Textbox(label="Share link (settings above)", interactive=False, buttons=["copy"])


def _wire_events(c: dict[str, Any], states: dict[str, Any]) -> None:
    """The lab's events.  Heavy events and their Stop buttons: Stop cancels the event (gradio) and
    tells the running loop (STOPS), which gradio cannot interrupt by itself."""
    trace_state, dist_state, point_state, round_state, board_state = (
        states[k] for k in ("trace_state", "dist_state", "point_state", "round_state", "board_state"))
    heavy: dict[str, list] = {}
    heavy["eq_stop"] = [c["eq_run"].click(
        run_equality, [c["eq_prompt"], c["eq_preset"], c["eq_gamma"], c["eq_tokens"], c["eq_dtype"]], c["eq_out"],
        **MODEL_EVENT)]

    dist_out = [c["d_plot"], c["d_html"], c["d_table"], dist_state, c["d_status"]]
    heavy["d_stop"] = [
        c["d_run"].click(run_distribution,
                         [c["d_prompt"], c["d_preset"], c["d_rule"], c["d_n"], c["d_tokens"], c["d_temp"],
                          c["d_gamma"], c["d_seed"], dist_state], dist_out, **MODEL_EVENT),
        c["d_all"].click(compare_all_rules,
                         [c["d_prompt"], c["d_preset"], c["d_n"], c["d_tokens"], c["d_temp"], c["d_gamma"],
                          c["d_seed"], dist_state], dist_out, **MODEL_EVENT),
    ]

    theory_in = [c["t_alpha"], c["t_gamma"], c["t_c"], c["t_v"], point_state]
    for s in ("t_alpha", "t_gamma", "t_c", "t_v"):
        c[s].change(render_theory, theory_in, [c["t_plot"], c["t_html"]], trigger_mode="always_last", **LIGHT_EVENT)
    heavy["t_stop"] = [c["t_measure"].click(
        measure_for_theory,
        [c["t_prompt"], c["t_preset"], c["t_gamma"], c["t_temp"], c["t_seed"], c["t_alpha"], c["t_c"], c["t_v"]],
        [point_state, c["t_alpha"], c["t_c"], c["t_v"], c["t_plot"], c["t_html"]], **MODEL_EVENT)]
    c["d_stop"].click(press_stop, None, c["d_status"], cancels=heavy["d_stop"], **LIGHT_EVENT)
    for key in ("eq_stop", "t_stop"):
        c[key].click(press_stop_quietly, None, None, cancels=heavy[key], **LIGHT_EVENT)
    c.update(heavy_events=heavy)
    c["t_from_trace"].click(theory_from_trace, [trace_state, c["t_alpha"], c["t_gamma"], c["t_c"], c["t_v"]],
                            [point_state, c["t_alpha"], c["t_gamma"], c["t_c"], c["t_v"], c["t_plot"], c["t_html"]],
                            **LIGHT_EVENT)

    c["p_new"].click(new_round,
                     [c["p_preset"], c["p_prompt"], c["p_gamma"], c["p_temp"], c["p_seed"], c["p_tokens"], c["p_rate"]],
                     [round_state, c["p_question"], c["p_guess"], c["p_answer"], c["p_note"]], **MODEL_EVENT)
    c["p_reveal"].click(do_reveal, [c["p_guess"], round_state, board_state],
                        [round_state, c["p_answer"], board_state, c["p_score"]], **LIGHT_EVENT)
    c["p_next"].click(next_step, round_state, [round_state, c["p_question"], c["p_guess"], c["p_answer"]], **LIGHT_EVENT)
    c["p_rate_reveal"].click(reveal_rate, [round_state, board_state], [round_state, board_state, c["p_score"], c["p_note"]],
                             **LIGHT_EVENT)

    replay_out = [trace_state, c["r_frame"], c["r_view"], c["r_summary"], c["r_status"]]
    c["r_run"].click(run_for_replay,
                     [c["r_preset"], c["r_prompt"], c["r_gamma"], c["r_temp"], c["r_seed"], c["r_tokens"]], replay_out,
                     **MODEL_EVENT)
    c["r_file"].upload(import_trace, [c["r_file"], trace_state], replay_out, **LIGHT_EVENT)
    c["r_frame"].release(lambda t, f: vlab.replay_html(t, int(f or 0)), [trace_state, c["r_frame"]], c["r_view"],
                         **LIGHT_EVENT)
    c["r_back"].click(lambda t, f: move(t, f, -1), [trace_state, c["r_frame"]], [c["r_frame"], c["r_view"]], **LIGHT_EVENT)
    c["r_fwd"].click(lambda t, f: move(t, f, +1), [trace_state, c["r_frame"]], [c["r_frame"], c["r_view"]], **LIGHT_EVENT)
    c["r_export"].click(export_trace, trace_state, c["r_export"], **LIGHT_EVENT)
    c["r_share_btn"].click(share_link, [c["r_preset"], c["r_prompt"], c["r_gamma"], c["r_temp"], c["r_seed"]],
                           c["r_share"], **LIGHT_EVENT)


def _prefill(c: dict[str, Any], cfg: AppConfig, choices, classroom) -> tuple[list[Any], Callable]:
    """URL prefill and classroom presets: (the components they set, on_load(request))."""
    run_targets = [  # (preset, prompt, gamma, temperature, seed) per tab; None = not applied there
        (c["r_preset"], c["r_prompt"], c["r_gamma"], c["r_temp"], c["r_seed"]),
        (c["p_preset"], c["p_prompt"], c["p_gamma"], c["p_temp"], c["p_seed"]),
        (c["eq_preset"], c["eq_prompt"], c["eq_gamma"], None, None),
        (c["t_preset"], c["t_prompt"], c["t_gamma"], c["t_temp"], c["t_seed"]),
    ]
    load_outputs = [comp for group in run_targets for comp in group if comp is not None]
    by_classroom = {cp.slug: cp for cp in classroom}

    def _fill(values: dict[str, Any]) -> list[Any]:
        out = []
        for group in run_targets:
            for key, comp in zip(PREFILL_KEYS, group):
                if comp is not None:
                    out.append(gr.update(value=values[key]) if key in values else gr.skip())
        return out

    if classroom:
        def apply_classroom(slug):
            cp = by_classroom.get(slug)
            if cp is None:
                raise gr.Error("Unknown classroom preset.")
            vals = dict(preset=cp.preset, prompt=cp.prompt, gamma=cp.gamma, temperature=cp.temperature, seed=cp.seed)
            return [vlab.classroom_md(cp), *_fill(vals)]

        c["r_class"].change(lambda s: vlab.classroom_md(by_classroom.get(s)), c["r_class"], c["r_class_md"], **LIGHT_EVENT)
        c["r_apply"].click(apply_classroom, c["r_class"], [c["r_class_md"], *load_outputs], **LIGHT_EVENT)

    def on_load(request: gr.Request):
        pf = prefill_from_query(request, cfg)
        vals = pf.values()
        if "preset" in vals:
            ch = next((x for x in choices if x.name == vals["preset"]), None)
            if ch is not None and not ch.available:
                vals.pop("preset")
                pf = Prefill(**{**{k: getattr(pf, k) for k in ("prompt", "gamma", "temperature", "seed",
                                                               "classroom")},
                                "errors": pf.errors + (f"preset {ch.name!r} is unavailable here",)})
        out = [vlab.prefill_note_html(pf), *_fill(vals)]
        if classroom:
            out.append(gr.update(value=pf.classroom) if pf.classroom in by_classroom else gr.skip())
        return out

    return load_outputs, on_load


def build_lab_tabs(cfg: AppConfig | None = None, warmup=None, wire_query: bool = True) -> LabTabs:
    """Build the lab's sub-tabs inside the current Blocks context (e.g. inside ``gr.Tab("Classroom lab")``).

    With ``wire_query`` (default) the URL prefill is registered on the enclosing Blocks' load
    event; otherwise wire ``tabs.on_load`` yourself: ``demo.load(tabs.on_load, None, tabs.load_outputs)``.
    """
    cfg = cfg or load_config()
    choices = _choices(cfg)
    start = _pick(choices, cfg.default_preset)
    try:
        classroom = classroom_presets(cfg)
    except ValueError:
        classroom = []
    setup = _Setup(
        cfg.limits, [(c.label, c.name) for c in choices], start, _pick(choices, "tiny-random"),
        next((c.gamma for c in choices if c.name == start), 4),
        cfg.examples[0]["prompt"] if cfg.examples else "The capital of France is", classroom,
    )
    c: dict[str, Any] = {}
    states = dict(
        trace_state=gr.State(None),  # GenerationResult shown in Replay (and usable by the theory bench)
        dist_state=gr.State([]),  # this session's distribution checks, newest first
        point_state=gr.State(None),  # MeasuredPoint for "you are here"
        round_state=gr.State(_empty_round()),
        board_state=gr.State(Scoreboard()),
    )
    # HTML, not Markdown: the note is about a link someone else wrote, and Markdown would turn
    # "[sign in](https://…)" in it into a real link.  vlab.prefill_note_html escapes everything.
    c["prefill_note"] = gr.HTML("", elem_id="lab-prefill-note")
    with gr.Tabs():
        for build_tab in (_equality_tab, _distribution_tab, _theory_tab, _predict_tab, _replay_tab):
            build_tab(c, setup)
    _wire_events(c, states)
    load_outputs, on_load = _prefill(c, cfg, choices, classroom)
    extra = [c["r_class"]] if classroom else []
    tabs = LabTabs(components=c, load_outputs=[c["prefill_note"], *load_outputs, *extra], on_load=on_load)
    root = getattr(gr.context.Context, "root_block", None)
    if wire_query and root is not None:
        root.load(on_load, None, tabs.load_outputs, **LIGHT_EVENT)
    c.update(states)
    return tabs
