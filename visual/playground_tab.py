"""The Playground tab: controls, the animated step view, live charts, stats, exports, and `/speculate`.

Two kinds of events, kept apart so a slow animation never holds a model:

* **Generation** (Run): one event whose first yield resets the step view and whose
  generator handler (``visual.playground_run``) then streams the engine's StepRecords
  into the per-user ``trace`` state (charts and stats are drawn once it has finished).
  It shares the concurrency group ``"run"`` with the ``/speculate`` API endpoint; model
  work inside them takes one of the shared ``TraceCache``'s compute slots
  (``queue.compute_slots``), and an identical request (same preset, prompt, settings and
  seed) follows or replays the run already made instead of computing it again.
* **Replay** (timer ticks, Step, Play/Pause, Back, Reset): cheap handlers that
  only read the stored trace and render one frame (``visual.replay``).  They
  write only the ``view`` state, never the trace (``visual.playground_replay``).

This module lays out the tab and wires its events (``/speculate`` among them); it does not
check settings or stream a run (``visual.playground_run``), walk the replay
(``visual.playground_replay``) or run the endpoint itself (``visual.speculate``).
Per-user data lives in ``gr.State`` only; the module holds no mutable state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gradio as gr

from playground.config import AppConfig, load_config
from playground.models.device import gpu_entry
from playground.rules import APP_RULES
from playground.serving.trace_cache import TraceCache
from playground.validate import MAX_TREE_NODES
from visual import charts, page_js, provenance, replay, stats, tables, tokens
from visual.i18n import L, example_text, localized, t
from visual.playground_replay import (
    empty_view,
    on_back,
    on_play_pause,
    on_reset,
    on_step,
    on_tick,
    one_at_a_time,
    replay_outputs,
)
from visual.playground_run import (  # noqa: F401  (make_run_handler: tests use it from here)
    CALIBRATION_TOKENS,
    DTYPE_DEFAULT,
    FORM_FIELDS,
    MODES,
    VERIFICATION,
    RunOutputs,
    RunState,
    check_params,
    empty_trace,
    make_run_handler,
    make_shared,
    new_run_id,
)
from visual.presets import PresetChoice, default_preset, dtype_choices, preset_choices, preset_info  # noqa: F401  (tests use them from here)
from visual.share import LINK_SETTINGS, Prefill, prefill_updates
from visual.speculate import make_speculate
from visual.warmup import wire_status

# --------------------------------------------------------------------------- the tab


@dataclass
class PlaygroundTab:
    """Handles to the tab's components (for tests and for other tabs that want to link in)."""

    components: dict[str, Any] = field(default_factory=dict)
    by_name: dict[str, PresetChoice] = field(default_factory=dict)  # preset name -> its choice
    start: str = ""  # the preset selected when the page opens
    cfg: Any = None  # the app's config (its classroom examples)

    def link_updates(self, prefill: Prefill) -> list[Any]:
        """Updates for ``[components[k] for k in LINK_KEYS]`` from a shared link (the preset's
        description in the current language even when the link names no preset)."""
        ups = link_updates(prefill, self.by_name)
        if self.start in self.by_name and not prefill.get("preset"):
            ups[LINK_KEYS.index("preset_info")] = preset_info(self.by_name[self.start])
        return ups

    def localized_outputs(self) -> list[Any]:
        """The components whose first value is rendered on the server (``LOCALIZED_KEYS``), and the
        classroom examples' buttons (their labels are not a prop ``gr.I18n`` translates)."""
        examples = [self.components["examples"].dataset] if "examples" in self.components else []
        return [self.components[k] for k in LOCALIZED_KEYS] + examples

    def localized_values(self) -> list[Any]:
        """Their empty-state values in the current language (``visual.i18n``), for the page load."""
        values = initial_values(self.by_name[self.start].preset.gamma if self.start in self.by_name else 1)
        if "examples" in self.components:
            values.append(gr.Dataset(sample_labels=example_labels(self.cfg)))
        return values


@dataclass(frozen=True)
class _Parts:
    """The tab's components (keyed as in ``PlaygroundTab.components``) and its per-user states."""

    c: dict[str, Any]
    trace_state: Any
    view_state: Any
    timer: Any


def build_playground_tab(cfg: AppConfig | None = None, warmup=None) -> PlaygroundTab:
    """Build the Playground inside the current Blocks/Tab context and wire its events."""
    cfg = cfg or load_config()
    choices = preset_choices(cfg)
    by_name = {c.preset.name: c for c in choices}
    start = default_preset(cfg, choices)
    p0 = by_name[start].preset
    c: dict[str, Any] = {}
    parts = _Parts(c, gr.State(empty_trace()), gr.State(empty_view()), gr.Timer(value=1.0, active=False))

    # On a phone (style.css, below 700 px) the main column's prompt, examples and buttons come
    # first, then these settings (closed: visual.page_js), then the step view and the rest.
    with gr.Row(equal_height=False, elem_classes=["sd-layout"]):
        with gr.Column(scale=1, min_width=290, elem_classes=["sd-sidebar"]):
            with gr.Accordion(L("pg.settings"), open=True, elem_id="settings"):
                _controls(cfg, choices, by_name[start], c)
        with gr.Column(scale=3, min_width=420, elem_classes=["sd-main"]):
            _main_column(cfg, p0.gamma, c)

    _wire_preset(c, by_name)
    tick = _wire_replay(parts)
    shared, run_limit = _wire_run(cfg, choices, warmup, parts, tick)
    if warmup is not None:
        wire_status(c["status"], warmup)

    # ---- the public endpoint -----------------------------------------------------------
    gr.api(
        gpu_entry(make_speculate(cfg, shared)), api_name="speculate", concurrency_id="run", concurrency_limit=run_limit
    )
    c["shared"] = shared
    c["trace_state"], c["view_state"], c["timer"] = parts.trace_state, parts.view_state, parts.timer
    return PlaygroundTab(components=c, by_name=by_name, start=start, cfg=cfg)


def example_labels(cfg: AppConfig) -> list[str]:
    """The classroom examples' labels in the current language (the config's own in English)."""
    return [example_text(e.get("label", e["prompt"][:30])) for e in cfg.examples]


# Components whose first value is server-rendered text: the page load re-renders them in the visitor's language.
LOCALIZED_KEYS = (
    "view",
    "legend",
    "stats",
    "race_plot",
    "tpc_plot",
    "acc_plot",
    "len_plot",
    "time_plot",
    "table",
    "provenance",
)


def initial_values(gamma: int) -> list[Any]:
    """The ``LOCALIZED_KEYS`` components' values before any run, in the current language."""
    return [
        tokens.step_view("", (), replay.Frame(-1, replay.START)),
        tokens.legend_html(),
        stats.stats_card({}),
        charts.race_figure((), ()),
        charts.tokens_per_call_figure(()),
        charts.acceptance_by_position_figure((), gamma),
        charts.accepted_length_figure((), gamma),
        charts.timeline_figure(()),
        tables.display_table(tables.token_table(())),
        provenance.provenance_html("", ()),
    ]


def _controls(cfg: AppConfig, choices: list[PresetChoice], start: PresetChoice, c: dict[str, Any]) -> None:
    """The sidebar: preset, drafter, mode and every generation setting."""
    lim, p0 = cfg.limits, start.preset
    c["preset"] = gr.Dropdown(
        choices=[(L(ch.label_key), ch.preset.name) for ch in choices],
        value=p0.name,
        label=L("pg.preset"),
        elem_id="preset",
    )
    c["preset_info"] = gr.Markdown(preset_info(start), elem_classes=["sd-presetinfo"])
    c["drafter"] = gr.Dropdown(choices=list(p0.drafters), value=p0.drafter, label=L("pg.drafter"), elem_id="drafter")
    c["mode"] = gr.Radio(
        [(L(f"pg.mode.{value}"), name) for name, value in MODES.items()],
        value="Speculative",
        label=L("pg.mode"),
        info=L("pg.mode.info"),
    )
    c["gamma"] = gr.Slider(1, lim.max_gamma, value=p0.gamma, step=1, label=L("pg.gamma"))
    c["tree_nodes"] = gr.Slider(
        1,
        MAX_TREE_NODES,
        value=p0.tree_nodes,
        step=1,
        label=L("pg.tree_nodes"),
        info=L("pg.tree_nodes.info"),
        elem_id="tree-nodes",
    )
    c["draft_stop"] = gr.Slider(
        0,
        0.9,
        value=p0.draft_stop,
        step=0.05,
        label=L("pg.draft_stop"),
        info=L("pg.draft_stop.info"),
        elem_id="draft-stop",
    )
    c["verification"] = gr.Radio(
        [(L(f"pg.verification.{rule}"), rule) for rule in APP_RULES],
        value="lossless",
        label=L("pg.verification"),
        info=L("pg.verification.info"),
        elem_id="verification",
    )
    c["temperature"] = gr.Slider(
        0, lim.max_temperature, value=0.0, step=0.05, label=L("pg.temperature"), info=L("pg.temperature.info")
    )
    with gr.Row():
        c["top_k"] = gr.Number(value=0, precision=0, minimum=0, maximum=lim.max_top_k, label=L("pg.top_k"))
        c["seed"] = gr.Number(value=0, precision=0, minimum=0, label=L("pg.seed"))
    c["top_p"] = gr.Slider(0.01, 1.0, value=1.0, step=0.01, label=L("pg.top_p"))
    c["min_p"] = gr.Slider(0.0, 1.0, value=0.0, step=0.01, label=L("pg.min_p"), info=L("pg.min_p.info"))
    c["max_new_tokens"] = gr.Slider(
        1, lim.max_new_tokens, value=min(48, lim.max_new_tokens), step=1, label=L("pg.max_new_tokens")
    )
    c["dtype"] = gr.Dropdown(
        dtype_choices(),
        value=DTYPE_DEFAULT,
        label=L("pg.dtype"),
    )
    c["calibrate"] = gr.Checkbox(
        value=True,
        label=L("pg.calibrate"),  # says CALIBRATION_TOKENS (tests/visual/test_i18n.py)
        info=L("pg.calibrate.info"),
    )
    c["speed"] = gr.Slider(0.2, 3.0, value=0.8, step=0.1, label=L("pg.speed"))


def _main_column(cfg: AppConfig, gamma: int, c: dict[str, Any]) -> None:
    """Prompt, examples, the buttons, status, the step view, legend and stats, then charts and exports."""
    c["prompt"] = gr.Textbox(
        label=L("pg.prompt"),
        lines=3,
        max_lines=12,
        value=cfg.examples[0]["prompt"] if cfg.examples else "",
        placeholder=L("pg.prompt.placeholder"),
        elem_id="prompt",
    )
    if cfg.examples:
        c["examples"] = gr.Examples(
            examples=[[e["prompt"]] for e in cfg.examples],
            inputs=[c["prompt"]],
            example_labels=example_labels(cfg),  # re-labelled in the visitor's language on load (gr.I18n can't)
            cache_examples=False,
            label=L("pg.examples"),
            elem_id="examples",
        )
    with gr.Row(elem_classes=["sd-buttons"]):
        c["run"] = gr.Button(L("pg.run"), variant="primary", elem_id="run-btn")
        c["step"] = gr.Button(L("pg.step"), elem_id="step-btn")
        c["play"] = gr.Button(L("pg.play"), elem_id="play-btn")
        c["back"] = gr.Button(L("pg.back"), elem_id="back-btn")
        c["reset"] = gr.Button(L("pg.reset"), elem_id="reset-btn")
    c["status"] = gr.Markdown("", elem_id="status", elem_classes=["sd-status"])
    c["view"] = gr.HTML(
        tokens.step_view("", (), replay.Frame(-1, replay.START)),
        elem_id="step-view",
        js_on_load=page_js.STEP_VIEW_JS,
        padding=False,
    )
    c["legend"] = gr.HTML(tokens.legend_html(), elem_id="legend", js_on_load=None)
    c["stats"] = gr.HTML(stats.stats_card({}), elem_id="stats", js_on_load=None)
    c["provenance"] = gr.HTML(provenance.provenance_html("", ()), elem_id="provenance", js_on_load=None)
    _plots(gamma, c)
    with gr.Accordion(L("pg.downloads"), open=False):
        c["table"] = gr.Dataframe(
            value=tables.display_table(tables.token_table(())),
            interactive=False,
            wrap=True,
            max_height=420,
            label=L("pg.table"),
        )
        with gr.Row():
            c["json_dl"] = gr.DownloadButton(L("pg.json"), interactive=False, size="sm")
            c["csv_dl"] = gr.DownloadButton(L("pg.csv"), interactive=False, size="sm")
            c["prov_dl"] = gr.DownloadButton(L("pg.prov_dl"), interactive=False, size="sm", elem_id="prov-dl")
        c["text"] = gr.Textbox(label=L("pg.text"), lines=4, interactive=False, buttons=["copy"])


def _plots(gamma: int, c: dict[str, Any]) -> None:
    """The five live charts, empty until a run streams into them."""
    with gr.Row(elem_classes=["sd-charts"]):
        c["race_plot"] = gr.Plot(
            charts.race_figure((), ()), label=L("pg.race_plot"), show_label=False, elem_id="race-plot"
        )
        c["tpc_plot"] = gr.Plot(charts.tokens_per_call_figure(()), show_label=False, elem_id="tpc-plot")
    with gr.Row(elem_classes=["sd-charts"]):
        c["acc_plot"] = gr.Plot(charts.acceptance_by_position_figure((), gamma), show_label=False, elem_id="acc-plot")
        c["len_plot"] = gr.Plot(charts.accepted_length_figure((), gamma), show_label=False, elem_id="len-plot")
    c["time_plot"] = gr.Plot(charts.timeline_figure(()), show_label=False, elem_id="time-plot")


def _preset_reset(ch: PresetChoice) -> tuple:
    """A preset's description, its drafters (its own selected), its γ, tree size and stop threshold."""
    p = ch.preset
    return (
        preset_info(ch),
        gr.Dropdown(choices=list(p.drafters), value=p.drafter),
        gr.Slider(value=p.gamma),
        gr.Slider(value=p.tree_nodes),
        gr.Slider(value=p.draft_stop),
    )


def _wire_preset(c: dict[str, Any], by_name: dict[str, PresetChoice]) -> None:
    """Choosing a preset shows its description and resets drafter, γ, tree size and stop threshold to its own.
    On ``input`` (the visitor's choice) only: a shared link sets the preset and its own γ at
    once (``link_updates``), and a ``change`` listener would then overwrite the link's γ."""

    def on_preset(name):
        ch = by_name.get(name)
        return _preset_reset(ch) if ch is not None else (gr.skip(),) * 5

    c["preset"].input(
        localized(on_preset),
        c["preset"],
        [c["preset_info"], c["drafter"], c["gamma"], c["tree_nodes"], c["draft_stop"]],
        queue=False,
        api_visibility="private",
    )


_LINK_VALUES = ("prompt", *LINK_SETTINGS)  # the link's own values (validated in visual.share)
LINK_KEYS = (*_LINK_VALUES, "preset_info", "drafter")  # what a link's page load updates


def link_updates(prefill: Prefill, by_name: dict[str, PresetChoice]) -> list[Any]:
    """One update per ``LINK_KEYS`` component for a validated link: its values, and for a
    preset the preset's own description and drafters, and its γ, tree size and stop threshold
    where the link sets none.  A link's bad or missing verification leaves the control as it is
    (token verification); block verification with a preset that drafts a tree gets a chain
    (tree nodes 1), the only shape block verification judges."""
    ups = prefill_updates(prefill, _LINK_VALUES)
    ch = by_name.get(prefill.get("preset")) if prefill.get("preset") else None
    if ch is None:
        return [*ups, gr.skip(), gr.skip()]
    info, drafter, gamma, tree, stop = _preset_reset(ch)
    if prefill.get("verification") == "block":
        tree = gr.Slider(value=1)
    for key, own in (("gamma", gamma), ("tree_nodes", tree), ("draft_stop", stop)):
        if prefill.get(key) is None:
            ups[_LINK_VALUES.index(key)] = own
    return [*ups, info, drafter]


def _wire_replay(parts: _Parts):
    """The light replay events: timer ticks, Play/Pause, Step, Back, Reset and the speed slider.
    Returns the tick's event (Run cancels it too)."""
    c, timer = parts.c, parts.timer
    replay_io = dict(
        inputs=[parts.trace_state, parts.view_state, c["speed"]],
        outputs=[parts.view_state, c["view"], timer, c["play"]],
        concurrency_limit=None,
        show_progress="hidden",
        api_visibility="private",
    )
    tick = timer.tick(localized(one_at_a_time(on_tick)), **replay_io)
    # A click drops the visitor's tick on its way: the lock orders the view on the server, not
    # the responses the page gets, and a tick's frame landing after the click's would undo it
    # on screen.
    controls = dict(replay_io, cancels=[tick])
    c["play"].click(localized(one_at_a_time(on_play_pause)), **controls)
    c["step"].click(localized(one_at_a_time(on_step)), **controls)
    c["back"].click(localized(one_at_a_time(on_back)), **controls)
    c["reset"].click(localized(one_at_a_time(on_reset)), **controls)
    c["speed"].change(lambda s: gr.Timer(value=float(s)), c["speed"], timer, queue=False, api_visibility="private")
    return tick


def _by_name(handler: Callable, names: dict[Any, str]) -> Callable:
    """``handler(form, progress, request)`` as a gradio generator handler whose inputs are a set of
    components: gradio passes a dict keyed by component, the handler gets one keyed by name."""

    def by_name(data: dict, progress=gr.Progress(), request: gr.Request = None):
        yield from handler({names[comp]: value for comp, value in data.items()}, progress, request)

    return by_name


def _wire_run(
    cfg: AppConfig, choices: list[PresetChoice], warmup, parts: _Parts, tick
) -> tuple[TraceCache | None, int]:
    """Run: one event that validates, resets the view and then streams the run.  Returns the
    shared trace cache and the concurrency limit of the ``"run"`` group (the /speculate endpoint
    joins it).  ``tick``: the replay timer's event, which Run cancels as the replay's controls do
    (a tick of the last run on its way would draw that run's frame over the new run's view).

    The view's reset is the event's first yield, not an event of its own: a second event would
    cost the page a round trip to the server before the run could start."""
    c, trace_state, view_state = parts.c, parts.trace_state, parts.view_state
    checked = {c[n]: n for n in FORM_FIELDS}  # the form's controls, named by RunSettings' schema
    inputs = checked | {trace_state: "trace", c["mode"]: "mode", c["calibrate"]: "calibrate", c["speed"]: "speed"}

    def validator(data: dict) -> dict:
        """The event's inputs by component -> a ``gr.validate`` for each (the form's messages)."""
        errs = check_params(cfg, choices, {checked[comp]: value for comp, value in data.items() if comp in checked})
        return {comp: gr.validate(inputs[comp] not in errs, errs.get(inputs[comp], "")) for comp in data}

    def reset(form: dict) -> tuple[dict, tuple]:
        """(the new run's trace, the first yield: ``RunOutputs``, then the view's state, its HTML
        and the Play button)."""
        run_id = new_run_id()
        tr = RunState(
            run_id=run_id, prompt=form["prompt"], gamma=int(form["gamma"] or 1), done=False, phase="starting"
        ).to_trace()
        view = {**empty_view(), "run_id": run_id, "playing": True}
        view, html, _, btn = replay_outputs(tr, view, form["speed"], force=True)
        out = RunOutputs(*(gr.skip(),) * len(RunOutputs._fields))._replace(
            trace=tr,
            status=t("pg.starting"),
            json_dl=gr.DownloadButton(interactive=False),
            csv_dl=gr.DownloadButton(interactive=False),
            timer=gr.Timer(active=False),  # started by the run's first step
        )
        return tr, (*out, view, html, btn)

    shared = make_shared(cfg)
    run_handler = gpu_entry(make_run_handler(cfg, choices, warmup, shared))
    # Run and /speculate wait for the shared compute slots inside the handler, so replays and
    # followers of an identical run never queue behind other visitors' runs.
    run_limit = int(cfg.queue.get("run_concurrency_limit", 16))
    own = {"trace": trace_state, "timer": parts.timer}  # the outputs that are the tab's states and timer
    outputs = [own[name] if name in own else c[name] for name in RunOutputs._fields]
    outputs += [view_state, c["view"], c["play"]]  # only the first yield writes these
    unchanged = (gr.skip(),) * 3

    def run(form: dict, progress=gr.Progress(), request: gr.Request = None):
        trace, first = reset(form)
        yield first
        for out in run_handler({**form, "trace": trace}, progress, request):
            yield (*out, *unchanged)

    run_event = c["run"].click(
        localized(_by_name(run, inputs)),
        set(inputs),
        outputs,
        validator=localized(validator),
        cancels=[tick],
        concurrency_id="run",
        concurrency_limit=run_limit,
        show_progress="minimal",
        # gradio's page re-reads the value of every component that ever showed progress on
        # each status change of any event: the figures and the table would be read again on
        # every replay tick.
        show_progress_on=[c["status"]],
        api_visibility="private",
    )
    _wire_provenance(c, trace_state, run_event)
    return shared, run_limit


def on_provenance(trace: dict) -> tuple[str, Any]:
    """The finished run's text coloured by source, and its HTML file for the download button."""
    trace = trace or empty_trace()
    spec = trace.get("spec")
    if spec is None:
        return provenance.provenance_html("", ()), gr.DownloadButton(interactive=False)
    path = tables.new_export_dir(prefix="provenance-") / "speculative_text_by_source.html"
    path.write_text(provenance.provenance_document(spec.prompt, spec.steps), encoding="utf-8")
    return provenance.provenance_html(spec.prompt, spec.steps), gr.DownloadButton(value=str(path), interactive=True)


def _wire_provenance(c: dict[str, Any], trace_state, run_event) -> None:
    """Run clears the coloured text; it comes back once the run has finished (one render, not per step)."""
    outputs = [c["provenance"], c["prov_dl"]]
    c["run"].click(
        localized(lambda: (provenance.provenance_html("", ()), gr.DownloadButton(interactive=False))),
        None,
        outputs,
        queue=False,
        show_progress="hidden",
        api_visibility="private",
    )
    run_event.then(localized(on_provenance), trace_state, outputs, show_progress="hidden", api_visibility="private")
