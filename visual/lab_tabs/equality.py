"""Lab tab 1, Equality check (greedy): speculative vs the target's own greedy output, token for token.

The check itself is ``playground.lab.equality``; its rendering is ``visual.lab``.  This
module holds the tab's components, its handler and its events (Run, Stop).
"""

from __future__ import annotations

from typing import Any

import gradio as gr

from playground.api import run_settings
from playground.lab.equality import equality_check
from visual import lab as vlab
from visual.i18n import L, localized, t
from visual.lab_tabs.common import (
    LIGHT_EVENT,
    MODEL_EVENT,
    Setup,
    Stopped,
    as_int,
    progress_adapter,
    run_errors,
)
from visual.lab_tabs.stop import press_stop_quietly, session_budget
from visual.presets import DTYPE_DEFAULT, dtype_choices


def run_equality(prompt, preset, gamma, max_new_tokens, dtype, request: gr.Request = None, progress=gr.Progress()):
    try:
        settings = run_errors(
            run_settings,
            preset=preset,
            gamma=as_int(gamma, "γ"),
            max_new_tokens=as_int(max_new_tokens, t("lab.name.tokens")),
            dtype=None if dtype in (None, "", DTYPE_DEFAULT) else dtype,
        )
        eq = run_errors(
            equality_check,
            prompt,
            settings,
            progress=progress_adapter(progress),
            budget=session_budget(preset, request),
        )
    except Stopped:
        return vlab.stopped_html(t("vlab.what.equality"))
    return vlab.equality_html(eq)


def build_tab(c: dict[str, Any], s: Setup) -> None:
    """1. Speculative vs the target's own greedy output, token for token."""
    with gr.Tab(L("lab.eq.tab")):
        gr.Markdown(L("lab.eq.intro"))
        with gr.Row():
            c["eq_preset"] = gr.Dropdown(s.preset_opts, value=s.start, label=L("lab.preset"))
            c["eq_dtype"] = gr.Dropdown(
                dtype_choices(),
                value=DTYPE_DEFAULT,
                label="dtype",
            )
            c["eq_gamma"] = gr.Slider(1, s.lim.max_gamma, value=s.gamma0, step=1, label="γ")
            c["eq_tokens"] = gr.Slider(4, min(128, s.lim.max_new_tokens), value=32, step=1, label=L("lab.new_tokens"))
        c["eq_prompt"] = gr.Textbox(value=s.ex_prompt, label=L("lab.prompt"), lines=2)
        with gr.Row():
            c["eq_run"] = gr.Button(L("lab.eq.run"), variant="primary")
            c["eq_stop"] = gr.Button(L("lab.stop"), variant="stop")
        c["eq_out"] = gr.HTML(vlab.equality_html(None))


def wire_events(c: dict[str, Any], states: dict[str, Any]) -> dict[str, list]:
    """Run and Stop; returns the heavy event under its Stop button's key."""
    heavy = {
        "eq_stop": [
            c["eq_run"].click(
                localized(run_equality),
                [c["eq_prompt"], c["eq_preset"], c["eq_gamma"], c["eq_tokens"], c["eq_dtype"]],
                c["eq_out"],
                **MODEL_EVENT,
            )
        ]
    }
    c["eq_stop"].click(press_stop_quietly, None, None, cancels=heavy["eq_stop"], **LIGHT_EVENT)
    return heavy
