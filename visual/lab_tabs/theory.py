"""Lab tab 5, Theory bench: the cost model as sliders, and a measured point on it.

The point comes from a fresh measurement (Measure, with Stop) or from the trace in the
Replay & share tab.  The curve and the measurement are ``playground.lab.theory``; the
figure and card are ``visual.lab``.  This module holds the tab's components, handlers
and events.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import gradio as gr

from playground.api import run_settings
from playground.decoding.sampling import predicted_speedup
from playground.lab.theory import MEASURE_TOKENS, measure_run, measured_point, theory_curve
from playground.validate import MAX_GAMMA
from visual import lab as vlab
from visual.i18n import L, localized, t
from visual.i18n.errors import engine_message
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


def render_theory(alpha, gamma, c, v, point):
    try:
        curve = theory_curve(float(alpha), float(c), float(v))
    except (TypeError, ValueError) as exc:
        raise gr.Error(engine_message(exc)) from None
    return vlab.theory_figure(curve, point), vlab.theory_html(curve, as_int(gamma, "γ"), point)


def _clamp(x: float | None, lo: float, hi: float, default: float) -> float:
    if x is None or not math.isfinite(x):
        return default
    return max(lo, min(hi, float(x)))


def measure_for_theory(
    prompt, preset, gamma, temperature, seed, alpha, c, v, request: gr.Request = None, progress=gr.Progress()
):
    try:
        settings = run_errors(
            run_settings,
            preset=preset,
            gamma=as_int(gamma, "γ"),
            temperature=float(temperature),
            seed=as_int(seed, t("lab.name.seed")),
            max_new_tokens=MEASURE_TOKENS,
        )
        spec, base, point = run_errors(
            measure_run,
            prompt,
            settings,
            progress=progress_adapter(progress),
            budget=session_budget(preset, request),
        )
    except Stopped:
        return (gr.skip(),) * 6
    a2 = _clamp(point.alpha, 0.0, 1.0, float(alpha))
    c2 = _clamp(point.c, 0.0, 2.0, float(c))
    v2 = _clamp(point.v, 0.5, 4.0, float(v))
    fig, html = render_theory(a2, gamma, c2, v2, point)
    return point, gr.update(value=round(a2, 3)), gr.update(value=round(c2, 3)), gr.update(value=round(v2, 3)), fig, html


def theory_from_trace(trace, alpha, gamma, c, v):
    if trace is None:
        raise gr.Error(t("lab.t.no_trace"))
    point = measured_point(trace.stats)
    a2 = _clamp(point.alpha, 0.0, 1.0, float(alpha))
    c2 = _clamp(point.c, 0.0, 2.0, float(c))
    v2 = _clamp(point.v, 0.5, 4.0, float(v))
    g = point.gamma or as_int(gamma, "γ")
    if point.predicted is None and point.alpha is not None and g:  # no 1-token timing: α measured, c and v from sliders
        point = replace(point, predicted=predicted_speedup(point.alpha, g, c2, v2))
    fig, html = render_theory(a2, g, c2, v2, point)
    return (
        point,
        gr.update(value=round(a2, 3)),
        gr.update(value=g),
        gr.update(value=round(c2, 3)),
        gr.update(value=round(v2, 3)),
        fig,
        html,
    )


def build_tab(c: dict[str, Any], s: Setup) -> None:
    """5. The cost model as sliders, and a measured point on it."""
    with gr.Tab(L("lab.t.tab")):
        c["t_formulas"] = gr.Markdown(
            vlab.formulas_md(), latex_delimiters=[{"left": "$$", "right": "$$", "display": True}]
        )
        with gr.Row():
            c["t_alpha"] = gr.Slider(0.0, 1.0, value=0.7, step=0.01, label=L("lab.t.alpha"))
            c["t_gamma"] = gr.Slider(1, MAX_GAMMA, value=4, step=1, label=L("lab.t.gamma"))
            c["t_c"] = gr.Slider(0.0, 2.0, value=0.1, step=0.01, label=L("lab.t.c"))
            c["t_v"] = gr.Slider(0.5, 4.0, value=1.3, step=0.05, label=L("lab.t.v"))
        curve0 = theory_curve(0.7, 0.1, 1.3)
        c["t_plot"] = gr.Plot(vlab.theory_figure(curve0), show_label=False)
        c["t_html"] = gr.HTML(vlab.theory_html(curve0, 4))
        with gr.Accordion(L("lab.t.here"), open=True):
            with gr.Row():
                c["t_preset"] = gr.Dropdown(s.preset_opts, value=s.start, label=L("lab.preset"))
                c["t_temp"] = gr.Slider(0, s.lim.max_temperature, value=0.0, step=0.05, label=L("lab.temperature"))
                c["t_seed"] = gr.Number(value=0, precision=0, minimum=0, label=L("lab.seed"))
            c["t_prompt"] = gr.Textbox(value=s.ex_prompt, label=L("lab.prompt"), lines=2)
            with gr.Row():
                c["t_measure"] = gr.Button(L("lab.t.measure"), variant="primary")
                c["t_stop"] = gr.Button(L("lab.stop"), variant="stop")
                c["t_from_trace"] = gr.Button(L("lab.t.from_trace"))


def wire_events(c: dict[str, Any], states: dict[str, Any]) -> dict[str, list]:
    """Sliders redraw the curve; Measure (heavy) and its Stop; the point from Replay's trace."""
    trace_state, point_state = states["trace_state"], states["point_state"]
    theory_in = [c["t_alpha"], c["t_gamma"], c["t_c"], c["t_v"], point_state]
    for s in ("t_alpha", "t_gamma", "t_c", "t_v"):
        c[s].change(
            localized(render_theory), theory_in, [c["t_plot"], c["t_html"]], trigger_mode="always_last", **LIGHT_EVENT
        )
    heavy = {
        "t_stop": [
            c["t_measure"].click(
                localized(measure_for_theory),
                [
                    c["t_prompt"],
                    c["t_preset"],
                    c["t_gamma"],
                    c["t_temp"],
                    c["t_seed"],
                    c["t_alpha"],
                    c["t_c"],
                    c["t_v"],
                ],
                [point_state, c["t_alpha"], c["t_c"], c["t_v"], c["t_plot"], c["t_html"]],
                **MODEL_EVENT,
            )
        ]
    }
    c["t_stop"].click(press_stop_quietly, None, None, cancels=heavy["t_stop"], **LIGHT_EVENT)
    c["t_from_trace"].click(
        localized(theory_from_trace),
        [trace_state, c["t_alpha"], c["t_gamma"], c["t_c"], c["t_v"]],
        [point_state, c["t_alpha"], c["t_gamma"], c["t_c"], c["t_v"], c["t_plot"], c["t_html"]],
        **LIGHT_EVENT,
    )
    return heavy
