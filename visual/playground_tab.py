"""The Playground tab: controls, the animated step view, live charts, stats, exports, and `/speculate`.

Two kinds of events, kept apart so a slow animation never holds a model:

* **Generation** (Run): a generator handler that streams the engine's
  StepRecords into the per-user ``trace`` state (and updates charts and stats
  as it goes).  It shares the concurrency group ``"run"`` with the
  ``/speculate`` API endpoint; model work inside them takes one of the shared
  ``TraceCache``'s compute slots (``queue.compute_slots``), and an identical
  request (same preset, prompt, settings and seed) follows or replays the
  run already made instead of computing it again.
* **Replay** (timer ticks, Step, Play/Pause, Back, Reset): cheap handlers that
  only read the stored trace and render one frame (``visual.replay``).  They
  write only the ``view`` state, never the trace, and have no concurrency limit.

Per-user data lives in ``gr.State`` only; the module holds no mutable state.
"""

from __future__ import annotations

import math
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

import gradio as gr

from playground.config import AppConfig, load_config
from playground.models import ModelUnavailable
from playground.device import gpu_entry, on_zero_gpu
from playground.engine import MAX_TREE_NODES
from playground.records import StepRecord
from playground.trace_cache import TraceCache, describe_replay
from playground.validate import temperature as check_temperature
from visual import charts, replay, stats, tables, tokens
from visual.fmt import esc
from visual.presets import PresetChoice, default_preset, preset_choices, preset_info  # noqa: F401  (tests use them from here)

MODES = {"Speculative": "speculative", "Race": "race"}
DTYPE_DEFAULT = "preset default"
CALIBRATION_TOKENS = 8
CHART_EVERY_S = 1.0  # throttle for live chart updates during generation
WAIT_POLL_S = 0.25  # replay timer interval while no step has arrived yet
YIELD_EVERY_S = 0.3  # throttle for streaming the trace: fast models would otherwise flood the page


# --------------------------------------------------------------------------- validation


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def check_params(cfg: AppConfig, choices: list[PresetChoice], prompt, preset, drafter, gamma, temperature, top_k, top_p,
                 seed, max_new_tokens) -> dict[str, str]:
    """Clear messages for bad inputs, keyed by parameter name (empty dict = all good)."""
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
        errs["drafter"] = f"Preset {preset!r} has no {drafter!r} drafter; choose one of: {', '.join(by_name[preset].preset.drafters)}."

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
    return errs


# --------------------------------------------------------------------------- trace & view state


def empty_trace() -> dict[str, Any]:
    return {
        "run_id": 0, "prompt": "", "gamma": 0, "mode": "speculative", "temperature": 0.0,
        "spec_steps": (), "spec": None, "ar_steps": (), "ar": None, "calibration": None,
        "done": True, "error": None, "phase": "idle",
    }


def empty_view() -> dict[str, Any]:
    return {"run_id": 0, "frame": 0, "playing": False, "shown": None}


def stagger_for(speed_s: float, gamma: int) -> float:
    """Delay between chips appearing in a draft frame, so the whole draft fits in ~60 % of a frame."""
    return max(0.0, min(0.25, 0.6 * float(speed_s or 1.0) / max(1, gamma)))


def render_view(trace: dict, view: dict, speed_s: float = 1.0) -> str:
    steps = trace.get("spec_steps", ())
    frame = replay.frame_at(steps, view.get("frame", 0))
    message = None
    if frame.phase == replay.START:
        if trace.get("error"):
            message = f"The run stopped: {trace['error']}"
        elif not trace.get("done"):
            message = "Generating\u2026 the first step appears as soon as the target has verified it."
    spec = trace.get("spec")
    return tokens.step_view(
        trace.get("prompt", ""), steps, frame, running=not trace.get("done", True),
        stagger_s=stagger_for(speed_s, trace.get("gamma", 1)), message=message,
        prompt_tokens=(len(spec.prompt_ids) or None) if spec is not None else None,
    )


def _view_key(trace: dict, view: dict) -> tuple:
    steps = trace.get("spec_steps", ())
    frame = replay.clamp(view.get("frame", 0), steps)
    waiting = frame == 0 and (not trace.get("done"), trace.get("error"))
    # total steps matter for the header ("Step 3 of 12"), but only re-render on a frame change while playing
    return (trace.get("run_id"), frame, waiting, bool(trace.get("done")))


def _new_run_id() -> str:
    return uuid.uuid4().hex[:12]


def play_label(playing: bool) -> str:
    return "\u275a\u275a Pause" if playing else "\u25b6 Play"


# --------------------------------------------------------------------------- replay handlers (light)


def _replay_outputs(trace: dict, view: dict, speed_s: float, force: bool = False):
    key = _view_key(trace, view)
    html = gr.skip()
    if force or key != view.get("shown"):
        html = render_view(trace, view, speed_s)
        view = {**view, "shown": key}
    # While waiting for the first step, poll quickly so it shows as soon as it exists; then pace by the speed slider.
    waiting = view["playing"] and view.get("frame", 0) == 0 and not trace.get("done")
    interval = WAIT_POLL_S if waiting else max(0.1, float(speed_s or 1.0))
    return (view, html, gr.Timer(value=interval, active=bool(view["playing"])),
            gr.Button(value=play_label(view["playing"])))


def on_tick(trace: dict, view: dict, speed_s: float):
    trace = trace or empty_trace()
    view = view or empty_view()
    if view.get("run_id") != trace.get("run_id"):
        view = {**empty_view(), "run_id": trace.get("run_id"), "playing": view.get("playing", False)}
    steps = trace.get("spec_steps", ())
    last = replay.frame_count(steps) - 1
    frame = min(view.get("frame", 0), last)
    playing = bool(view.get("playing"))
    if playing:
        if frame < last:
            frame += 1
        elif trace.get("done"):
            playing = False
    return _replay_outputs(trace, {**view, "frame": frame, "playing": playing}, speed_s)


def on_play_pause(trace: dict, view: dict, speed_s: float):
    trace = trace or empty_trace()
    view = view or empty_view()
    if not trace.get("run_id"):
        gr.Info("Nothing to play yet: press Run first.")
        return _replay_outputs(trace, {**view, "playing": False}, speed_s)
    steps = trace.get("spec_steps", ())
    last = replay.frame_count(steps) - 1
    playing = not view.get("playing")
    frame = view.get("frame", 0)
    if playing and frame >= last and trace.get("done"):
        frame = 0  # at the end: play again from the start
    return _replay_outputs(trace, {**view, "run_id": trace["run_id"], "frame": frame, "playing": playing}, speed_s)


def _move(trace: dict, view: dict, speed_s: float, delta: int | None):
    trace = trace or empty_trace()
    view = view or empty_view()
    steps = trace.get("spec_steps", ())
    frame = 0 if delta is None else replay.clamp(view.get("frame", 0) + delta, steps)
    if delta is not None and frame == view.get("frame", 0) and delta > 0 and trace.get("run_id"):
        if trace.get("done"):
            gr.Info("That was the last step.")
        else:
            gr.Info("The next step is still being generated.")
    return _replay_outputs(trace, {**view, "run_id": trace.get("run_id"), "frame": frame, "playing": False}, speed_s,
                           force=True)


def on_step(trace, view, speed_s):
    return _move(trace, view, speed_s, +1)


def on_back(trace, view, speed_s):
    return _move(trace, view, speed_s, -1)


def on_reset(trace, view, speed_s):
    return _move(trace, view, speed_s, None)


# --------------------------------------------------------------------------- generation (heavy)


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
    m = stats.compute_metrics(trace["spec_steps"], trace["gamma"], result=trace["spec"], ar_result=trace["ar"],
                              calibration=trace["calibration"])
    return stats.stats_card(m, race=trace["mode"] == "race", running=not trace["done"],
                            temperature=trace["temperature"])


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
        return (f"**Done.** Speculative: {s.new_tokens} tokens in {s.steps} target passes, {s.wall_ms / 1000:.2f} s "
                f"(stopped: {s.stopped}).{extra}" + (f"\n\n\u21bb {esc(replay)}" if replay else ""))
    return ""


def make_shared(cfg: AppConfig) -> TraceCache | None:
    """The app's trace cache and compute slots (one per Blocks; shared by every visitor).

    None on a ZeroGPU Space: each GPU call runs in a worker process there, so a run computed
    in one call cannot be followed or cached by another; runs are computed per request."""
    if on_zero_gpu():
        return None
    q, lim = cfg.queue, cfg.limits
    return TraceCache(max_entries=lim.trace_cache_entries, max_bytes=lim.trace_cache_bytes,
                      slots=q.get("compute_slots", 2), wait_s=q.get("busy_wait_s", 120))


def make_run_handler(cfg: AppConfig, choices: list[PresetChoice], warmup=None, shared: TraceCache | None = None
                     ) -> Callable:
    """The heavy Run handler (a generator)."""
    from playground.api import generate, stream_generate

    def run_generation(trace, prompt, preset, drafter, gamma, temperature, top_k, top_p, seed, max_new_tokens, dtype,
                       mode, calibrate, tree_nodes=1, progress=gr.Progress()):
        errs = check_params(cfg, choices, prompt, preset, drafter, gamma, temperature, top_k, top_p, seed, max_new_tokens)
        if errs:
            raise gr.Error(" ".join(errs.values()))
        mode_key = MODES.get(mode, mode)
        p = next(c.preset for c in choices if c.preset.name == preset)
        gamma = int(gamma) if gamma is not None else p.gamma
        dtype = None if dtype in (None, "", DTYPE_DEFAULT) else dtype
        kwargs = dict(preset=preset, drafter=drafter or None, gamma=gamma, temperature=float(temperature), top_k=int(top_k),
                      top_p=float(top_p), seed=int(seed), max_new_tokens=int(max_new_tokens), dtype=dtype)
        spec_kwargs = dict(kwargs, tree_nodes=int(tree_nodes or 1))
        tr = {**empty_trace(), "run_id": (trace or {}).get("run_id") or _new_run_id(), "prompt": prompt,
              "gamma": gamma, "mode": mode_key, "temperature": float(temperature), "done": False, "phase": "loading"}
        last_chart = [0.0]
        last_yield = [0.0]

        def due() -> bool:
            now = time.perf_counter()
            if now - last_yield[0] >= YIELD_EVERY_S:
                last_yield[0] = now
                return True
            return False

        def out(final: bool = False, charts_now: bool = False):
            now = time.perf_counter()
            figs = (gr.skip(),) * 5
            if final or charts_now or now - last_chart[0] >= CHART_EVERY_S:
                figs = _figures(tr)
                last_chart[0] = now
            table = csv_dl = json_dl = text = gr.skip()
            if final and tr["spec"] is not None:
                df = tables.token_table(tr["spec_steps"], tr["ar_steps"])
                payload = tables.trace_payload(tr["spec"], tr["ar"],
                                               tr["calibration"].to_dict() if tr["calibration"] else None)
                json_path, csv_path = tables.write_exports(df, payload)
                table = tables.display_table(df)
                json_dl = gr.DownloadButton(value=json_path, interactive=True)
                csv_dl = gr.DownloadButton(value=csv_path, interactive=True)
                text = tr["spec"].text if tr["ar"] is None else (
                    f"[speculative]\n{tr['spec'].text}\n\n[autoregressive]\n{tr['ar'].text}")
            return (dict(tr), _status(tr), *figs, _stats_html(tr), table, json_dl, csv_dl, text)

        def report(frac, msg):
            try:
                progress(float(frac), desc=str(msg))
            except Exception:
                pass

        try:
            if warmup is not None:
                for msg, frac in warmup.wait(preset):
                    report(frac, msg)
            last_chart[0] = time.perf_counter()  # first steps go out fast; charts follow within CHART_EVERY_S
            yield out()
            tr["phase"] = "speculative"
            steps: list[StepRecord] = []
            for item in stream_generate(prompt, mode="speculative", progress=report, shared=shared, **spec_kwargs):
                if isinstance(item, StepRecord):
                    steps.append(item)
                    tr["spec_steps"] = tuple(steps)
                    if len(steps) == 1 or due():
                        yield out()
                else:
                    tr["spec"] = item
            if mode_key == "race":
                tr["phase"] = "autoregressive"
                yield out(charts_now=True)
                ar_steps: list[StepRecord] = []
                for item in stream_generate(prompt, mode="autoregressive", shared=shared, **kwargs):
                    if isinstance(item, StepRecord):
                        ar_steps.append(item)
                        tr["ar_steps"] = tuple(ar_steps)
                        if due():
                            yield out()
                    else:
                        tr["ar"] = item
            elif calibrate:
                tr["phase"] = "calibrating"
                yield out()
                cal = generate(prompt, mode="autoregressive", trace=False, shared=shared,
                               **{**kwargs, "max_new_tokens": min(CALIBRATION_TOKENS, int(max_new_tokens))})
                tr["calibration"] = cal.stats
            tr["phase"] = "done"
            tr["done"] = True
            yield out(final=True)
        except (ValueError, ModelUnavailable) as exc:
            tr.update(error=str(exc), done=True, phase="error")
            yield out(final=True)
            raise gr.Error(str(exc)) from None
        except Exception as exc:  # keep serving; tell the user what happened
            tr.update(error=f"{type(exc).__name__}: {exc}", done=True, phase="error")
            yield out(final=True)
            raise gr.Error(f"The run failed: {type(exc).__name__}: {exc}") from None

    return run_generation


# --------------------------------------------------------------------------- the /speculate endpoint


def make_speculate(cfg: AppConfig, shared: TraceCache | None = None) -> Callable:
    from playground.api import generate

    def speculate(
        prompt: str,
        preset: str | None = None,
        drafter: str | None = None,
        gamma: int | None = None,
        temperature: float = 0.0,
        top_k: int = 0,
        top_p: float = 1.0,
        seed: int = 0,
        max_new_tokens: int = 64,
        tree_nodes: int | None = None,
    ) -> dict:
        """Run lossless speculative decoding and return the trace as JSON.

        Returns {"text", "token_ids", "steps", "stats", "prompt", "prompt_ids", "config"}: the generated text,
        the new token ids, one record per target verification pass (drafts with q, p, u and verdict; the
        resampled/bonus token) and the run's statistics.  tree_nodes > 1 drafts a tree (each draft then has
        a ``parent`` index).  Bad input raises an error with a clear message.
        """
        if not isinstance(prompt, str):
            raise gr.Error("prompt must be text")
        try:
            result = generate(
                prompt, preset=preset or None, drafter=drafter or None, gamma=gamma, temperature=temperature,
                top_k=top_k, top_p=top_p, seed=seed, max_new_tokens=max_new_tokens, tree_nodes=tree_nodes,
                shared=shared,
            )
        except (ValueError, TypeError, ModelUnavailable) as exc:
            raise gr.Error(str(exc)) from None
        data = tables.clean_json(result.to_dict())
        import json

        size = len(json.dumps(data))
        if size > cfg.limits.max_trace_bytes:
            raise gr.Error(f"the trace is too large ({size} bytes, limit {cfg.limits.max_trace_bytes}); ask for fewer tokens")
        return data

    return speculate


# --------------------------------------------------------------------------- the tab


@dataclass
class PlaygroundTab:
    """Handles to the tab's components (for tests and for other tabs that want to link in)."""

    components: dict[str, Any] = field(default_factory=dict)


def build_playground_tab(cfg: AppConfig | None = None, warmup=None) -> PlaygroundTab:
    """Build the Playground inside the current Blocks/Tab context and wire its events."""
    cfg = cfg or load_config()
    lim = cfg.limits
    choices = preset_choices(cfg)
    by_name = {c.preset.name: c for c in choices}
    start = default_preset(cfg, choices)
    p0 = by_name[start].preset
    c: dict[str, Any] = {}

    trace_state = gr.State(empty_trace())
    view_state = gr.State(empty_view())
    timer = gr.Timer(value=1.0, active=False)

    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=290, elem_classes=["sd-sidebar"]):
            c["preset"] = gr.Dropdown(choices=[(ch.label, ch.preset.name) for ch in choices], value=start,
                                      label="Preset (model pair + drafter)", elem_id="preset")
            c["preset_info"] = gr.Markdown(preset_info(by_name[start]), elem_classes=["sd-presetinfo"])
            c["drafter"] = gr.Dropdown(choices=list(p0.drafters), value=p0.drafter, label="Drafter", elem_id="drafter")
            c["mode"] = gr.Radio(list(MODES), value="Speculative", label="Mode",
                                 info="Race: speculative, then autoregressive on the same prompt and models, each timed.")
            c["gamma"] = gr.Slider(1, lim.max_gamma, value=p0.gamma, step=1, label="\u03b3: drafts per step")
            c["tree_nodes"] = gr.Slider(1, MAX_TREE_NODES, value=p0.tree_nodes, step=1, label="Draft tree nodes",
                                        info="1 = one chain of \u03b3 drafts; more = a tree of alternatives (up to \u03b3 deep), "
                                             "all checked in one target pass", elem_id="tree-nodes")
            c["temperature"] = gr.Slider(0, lim.max_temperature, value=0.0, step=0.05, label="Temperature",
                                         info="0 = greedy (exact argmax path)")
            with gr.Row():
                c["top_k"] = gr.Number(value=0, precision=0, minimum=0, maximum=lim.max_top_k, label="top-k (0 = off)")
                c["seed"] = gr.Number(value=0, precision=0, minimum=0, label="Seed")
            c["top_p"] = gr.Slider(0.01, 1.0, value=1.0, step=0.01, label="top-p")
            c["max_new_tokens"] = gr.Slider(1, lim.max_new_tokens, value=min(48, lim.max_new_tokens), step=1,
                                            label="Max new tokens")
            c["dtype"] = gr.Dropdown([DTYPE_DEFAULT, "float32", "bfloat16"], value=DTYPE_DEFAULT, label="dtype")
            c["calibrate"] = gr.Checkbox(value=True, label=f"Measure t\u2081 ({CALIBRATION_TOKENS}-token autoregressive "
                                         "calibration) in Speculative mode",
                                         info="Needed for the predicted speedup; Race mode measures it anyway.")
            c["speed"] = gr.Slider(0.2, 3.0, value=0.8, step=0.1, label="Animation: seconds per frame")
        with gr.Column(scale=3, min_width=420):
            c["prompt"] = gr.Textbox(label="Prompt", lines=3, max_lines=12, value=cfg.examples[0]["prompt"] if cfg.examples else "",
                                     placeholder="Type a prompt, or pick an example below", elem_id="prompt")
            if cfg.examples:
                gr.Examples(examples=[[e["prompt"]] for e in cfg.examples], inputs=[c["prompt"]],
                            example_labels=[e.get("label", e["prompt"][:30]) for e in cfg.examples],
                            cache_examples=False, label="Classroom examples")
            with gr.Row(elem_classes=["sd-buttons"]):
                c["run"] = gr.Button("Run \u25b8", variant="primary", elem_id="run-btn")
                c["step"] = gr.Button("Step \u203a", elem_id="step-btn")
                c["play"] = gr.Button(play_label(False), elem_id="play-btn")
                c["back"] = gr.Button("\u2039 Back", elem_id="back-btn")
                c["reset"] = gr.Button("\u21ba Reset", elem_id="reset-btn")
            c["status"] = gr.Markdown("", elem_id="status", elem_classes=["sd-status"])
            c["view"] = gr.HTML(tokens.step_view("", (), replay.Frame(-1, replay.START)), elem_id="step-view",
                                js_on_load=None, padding=False)
            c["legend"] = gr.HTML(tokens.legend_html(), elem_id="legend", js_on_load=None)
            c["stats"] = gr.HTML(stats.stats_card({}), elem_id="stats", js_on_load=None)
            with gr.Row():
                c["race_plot"] = gr.Plot(charts.race_figure((), ()), label="Race", show_label=False, elem_id="race-plot")
                c["tpc_plot"] = gr.Plot(charts.tokens_per_call_figure(()), show_label=False, elem_id="tpc-plot")
            with gr.Row():
                c["acc_plot"] = gr.Plot(charts.acceptance_by_position_figure((), p0.gamma), show_label=False,
                                        elem_id="acc-plot")
                c["len_plot"] = gr.Plot(charts.accepted_length_figure((), p0.gamma), show_label=False, elem_id="len-plot")
            c["time_plot"] = gr.Plot(charts.timeline_figure(()), show_label=False, elem_id="time-plot")
            with gr.Accordion("Per-token table, text and downloads", open=False):
                c["table"] = gr.Dataframe(value=tables.display_table(tables.token_table(())), interactive=False,
                                          wrap=True, max_height=420, label="Every token the run looked at")
                with gr.Row():
                    c["json_dl"] = gr.DownloadButton("\u2b07 Trace (JSON)", interactive=False, size="sm")
                    c["csv_dl"] = gr.DownloadButton("\u2b07 Token table (CSV)", interactive=False, size="sm")
                c["text"] = gr.Textbox(label="Generated text", lines=4, interactive=False, buttons=["copy"])

    # ---- preset changes ------------------------------------------------------------------
    def on_preset(name):
        ch = by_name.get(name)
        if ch is None:
            return gr.skip(), gr.skip(), gr.skip(), gr.skip()
        p = ch.preset
        return (preset_info(ch), gr.Dropdown(choices=list(p.drafters), value=p.drafter), gr.Slider(value=p.gamma),
                gr.Slider(value=p.tree_nodes))

    c["preset"].change(on_preset, c["preset"], [c["preset_info"], c["drafter"], c["gamma"], c["tree_nodes"]], queue=False,
                       api_visibility="private")

    # ---- replay (light) ------------------------------------------------------------------
    replay_io = dict(inputs=[trace_state, view_state, c["speed"]], outputs=[view_state, c["view"], timer, c["play"]],
                     concurrency_limit=None, show_progress="hidden", api_visibility="private")
    timer.tick(on_tick, **replay_io)
    c["play"].click(on_play_pause, **replay_io)
    c["step"].click(on_step, **replay_io)
    c["back"].click(on_back, **replay_io)
    c["reset"].click(on_reset, **replay_io)
    c["speed"].change(lambda s: gr.Timer(value=float(s)), c["speed"], timer, queue=False, api_visibility="private")

    # ---- run (validate, reset the view, then the heavy generation) ---------------------------
    params = [c["prompt"], c["preset"], c["drafter"], c["gamma"], c["temperature"], c["top_k"], c["top_p"], c["seed"],
              c["max_new_tokens"]]
    names = ["prompt", "preset", "drafter", "gamma", "temperature", "top_k", "top_p", "seed", "max_new_tokens"]

    def validator(*values):
        errs = check_params(cfg, choices, *values[: len(names)])
        return [gr.validate(n not in errs, errs.get(n, "")) for n in names] + [gr.validate(True, "")] * (len(values) - len(names))

    def prepare(*values):
        run_id = _new_run_id()
        tr = {**empty_trace(), "run_id": run_id, "prompt": values[0], "done": False, "phase": "loading",
              "gamma": int(values[3] or 1)}
        view = {**empty_view(), "run_id": run_id, "playing": True}
        view, html, _, btn = _replay_outputs(tr, view, values[-1], force=True)
        return (tr, view, html, gr.Timer(value=WAIT_POLL_S, active=True), btn, "Starting\u2026", gr.DownloadButton(interactive=False),
                gr.DownloadButton(interactive=False))

    shared = make_shared(cfg)
    run_handler = gpu_entry(make_run_handler(cfg, choices, warmup, shared))
    # Run and /speculate wait for the shared compute slots inside the handler, so replays and
    # followers of an identical run never queue behind other visitors' runs.
    run_limit = int(cfg.queue.get("run_concurrency_limit", 16))
    heavy_inputs = [trace_state, *params, c["dtype"], c["mode"], c["calibrate"], c["tree_nodes"]]
    heavy_outputs = [trace_state, c["status"], c["race_plot"], c["tpc_plot"], c["acc_plot"], c["len_plot"], c["time_plot"],
                     c["stats"], c["table"], c["json_dl"], c["csv_dl"], c["text"]]
    c["run"].click(
        prepare, [*params, c["speed"]],
        [trace_state, view_state, c["view"], timer, c["play"], c["status"], c["json_dl"], c["csv_dl"]],
        validator=validator, show_progress="hidden", api_visibility="private",
    ).success(
        run_handler, heavy_inputs, heavy_outputs, concurrency_id="run", concurrency_limit=run_limit,
        show_progress="minimal", api_visibility="private",
    )

    # ---- start-up: show the background model loading until it is done ----------------------
    if warmup is not None:
        warm_timer = gr.Timer(value=1.0, active=True)

        def on_warm_tick():
            if warmup.done:
                msg = (f"Models for **{warmup.preset}** ready (loaded in {warmup.seconds:.1f} s)." if not warmup.error
                       else f"**Could not load {warmup.preset}:** {esc(warmup.error)}")
                return msg, gr.Timer(active=False)
            return f"Loading models for **{warmup.preset}** at start-up: {esc(warmup.message)} ({warmup.fraction:.0%})", gr.skip()

        warm_timer.tick(on_warm_tick, None, [c["status"], warm_timer], concurrency_limit=None, show_progress="hidden",
                        api_visibility="private")

    # ---- the public endpoint -----------------------------------------------------------
    gr.api(gpu_entry(make_speculate(cfg, shared)), api_name="speculate", concurrency_id="run", concurrency_limit=run_limit)
    c["shared"] = shared
    c["trace_state"], c["view_state"], c["timer"] = trace_state, view_state, timer
    return PlaygroundTab(components=c)
