"""The Classroom lab tabs: assembles the seven lab features from ``visual.lab_tabs``.

    with gr.Tab("Classroom lab"):
        lab_tabs = build_lab_tabs(cfg)          # inside the caller's gr.Blocks
    lab_tabs.wire(demo)                         # once the Blocks exist: the URL prefill on page load

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
loop checks between continuations and frees its slot.

This module only assembles: each tab's components, handlers and events are in its
module under ``visual.lab_tabs``, re-exported below for ``app.py`` and the tests.  All
logic is in ``playground.lab`` (one module per feature) and ``playground.trace_io``;
links in ``visual.share`` and ``visual.classroom``; rendering in ``visual.lab``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gradio as gr

from playground.config import AppConfig, load_config
from playground.lab.quiz import Scoreboard
from visual.classroom import classroom_presets
from visual.i18n import L, localized, preset_key
from visual.lab_tabs import distribution, equality, predict, replay_share, serving, theory
from visual.lab_tabs.common import LIGHT_EVENT, MODEL_EVENT, Setup, lab_choices, pick
from visual.lab_tabs.distribution import HISTORY, compare_all_rules, run_distribution
from visual.lab_tabs.equality import DTYPE_DEFAULT, run_equality
from visual.lab_tabs.predict import do_reveal, empty_round, new_round, next_step, reveal_rate
from visual.lab_tabs.prefill import wire_prefill
from visual.lab_tabs.replay_share import (
    export_trace,
    import_trace,
    move,
    run_for_replay,
    share_link,
    upload_too_large,
)
from visual.lab_tabs.stop import STOPS, StopRequests, press_stop, press_stop_quietly
from visual.lab_tabs.theory import measure_for_theory, render_theory, theory_from_trace

__all__ = [
    "DTYPE_DEFAULT",
    "HISTORY",
    "LIGHT_EVENT",
    "MODEL_EVENT",
    "STOPS",
    "LabTabs",
    "StopRequests",
    "build_lab_tabs",
    "compare_all_rules",
    "do_reveal",
    "export_trace",
    "import_trace",
    "measure_for_theory",
    "move",
    "new_round",
    "next_step",
    "press_stop",
    "press_stop_quietly",
    "render_theory",
    "reveal_rate",
    "run_distribution",
    "run_equality",
    "run_for_replay",
    "share_link",
    "theory_from_trace",
    "upload_too_large",
]

TABS = (equality, distribution, theory, predict, replay_share, serving)  # in the order they appear


@dataclass
class LabTabs:
    """Handles to the lab's components (for app.py wiring and tests)."""

    components: dict[str, Any] = field(default_factory=dict)
    load_outputs: list[Any] = field(default_factory=list)
    on_load: Any = None
    localized_outputs: list[Any] = field(default_factory=list)
    localized_values: Any = None  # () -> the values of localized_outputs in the current language

    def wire(self, demo: gr.Blocks) -> None:
        """Fill the lab from the page's URL on load (``demo``: the Blocks the tabs were built in), and
        render its server-side text (intro with numbers, empty panels, figures) in the visitor's language."""
        # Progress on one output each: gradio's page re-reads the value of every component that ever
        # showed progress on each status change of any event (the lab's figures on every replay tick).
        demo.load(
            localized(self.on_load), None, self.load_outputs, show_progress_on=self.load_outputs[:1], **LIGHT_EVENT
        )
        if self.localized_outputs:
            outs = self.localized_outputs
            demo.load(localized(self.localized_values), None, outs, show_progress_on=outs[:1], **LIGHT_EVENT)


def build_lab_tabs(cfg: AppConfig | None = None, warmup=None) -> LabTabs:
    """Build the lab's sub-tabs inside the current Blocks context (e.g. inside ``gr.Tab("Classroom lab")``).

    The URL prefill needs the page's load event, which belongs to the enclosing Blocks: call
    ``tabs.wire(demo)`` once they exist (``app.py`` does, through its ``wire(demo)`` hook).
    """
    cfg = cfg or load_config()
    choices = lab_choices(cfg)
    start = pick(choices, cfg.default_preset)
    try:
        classroom = classroom_presets(cfg)
    except ValueError:
        classroom = []
    setup = Setup(
        cfg.limits,
        [(L(preset_key(c.name, not c.available)), c.name) for c in choices],
        start,
        pick(choices, "tiny-random"),
        next((c.gamma for c in choices if c.name == start), 4),
        cfg.examples[0]["prompt"] if cfg.examples else "The capital of France is",
        classroom,
    )
    c: dict[str, Any] = {}
    states = dict(
        # GenerationResult shown in Replay (and usable by the theory bench); an import's lifetime: replay_share
        trace_state=gr.State(None, time_to_live=replay_share.TRACE_TTL_S),
        dist_state=gr.State([]),  # this session's distribution checks, newest first
        point_state=gr.State(None),  # MeasuredPoint for "you are here"
        round_state=gr.State(empty_round()),
        board_state=gr.State(Scoreboard()),
    )
    # HTML, not Markdown: the note is about a link someone else wrote, and Markdown would turn
    # "[sign in](https://…)" in it into a real link.  vlab.prefill_note_html escapes everything.
    c["prefill_note"] = gr.HTML("", elem_id="lab-prefill-note")
    with gr.Tabs():
        for tab in TABS:
            tab.build_tab(c, setup)
    heavy: dict[str, list] = {}  # a Stop button's key -> the events it cancels
    for tab in TABS:
        heavy.update(tab.wire_events(c, states))
    c.update(heavy_events=heavy)
    load_outputs, on_load = wire_prefill(c, cfg, choices, classroom)
    extra = [c["r_class"]] if classroom else []
    loc_outputs, loc_values = _localized_panels(c, setup)
    tabs = LabTabs(
        components=c,
        load_outputs=[c["prefill_note"], *load_outputs, *extra],
        on_load=on_load,
        localized_outputs=loc_outputs,
        localized_values=loc_values,
    )
    c.update(states)
    return tabs


def _localized_panels(c: dict[str, Any], s: Setup) -> tuple[list[Any], Any]:
    """The lab's server-rendered starting text, re-rendered on page load in the visitor's language
    (props that are plain catalogue keys are translated by gradio; these are built on the server)."""
    import pandas as pd

    from playground.lab.theory import theory_curve
    from playground.serving.pass_cost import measured
    from visual import lab as vlab
    from visual import serving as vserving
    from visual.lab_tabs.distribution import intro_md
    from visual.lab_tabs.replay_share import file_label

    def values() -> list[Any]:
        curve = theory_curve(0.7, 0.1, 1.3)  # the sliders' starting values (visual.lab_tabs.theory)
        data = measured()
        return [
            intro_md(s.lim),
            vlab.formulas_md(),
            gr.update(label=file_label(s.lim)),
            vlab.equality_html(None),
            vlab.distribution_figure(None),
            vlab.distribution_html(None),
            vlab.rules_table([]),
            vlab.theory_figure(curve),
            vlab.theory_html(curve, 4),
            vlab.question_html(None),
            vlab.score_card(Scoreboard()),
            vlab.replay_html(None, 0),
            vserving.throughput_figure(data),
            pd.DataFrame(vserving.class_rows(data), columns=vserving.class_headers(data)),
            vserving.pass_cost_figure(data),
            vserving.provenance_html(data),
        ]

    keys = ["d_intro", "t_formulas", "r_file", "eq_out", "d_plot", "d_html", "d_table", "t_plot", "t_html", "p_question",
            "p_score", "r_view", "sv_throughput", "sv_table", "sv_costs", "sv_about"]  # fmt: skip
    return [c[k] for k in keys], values
