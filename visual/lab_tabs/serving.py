"""Lab tab 6, Serving a class: the speculation-vs-batching curve and why servers turn
speculation down under load.

The curves are ``playground/data/batch_sweep.json`` (``python -m tools batch-sweep``);
"Measure here" times the pass-cost table on this server now (``tools.batch_sweep``).
The figures are ``visual.serving``.  This module holds the tab's components and events.
"""

from __future__ import annotations

from typing import Any

import gradio as gr

from playground.serving.pass_cost import measure_pass_costs, measured
from visual import serving as vserving
from visual.i18n import L, localized
from visual.lab_tabs.common import MODEL_EVENT, Setup, run_errors


def measure_here(preset):
    data = run_errors(measure_pass_costs, preset)
    return vserving.pass_cost_figure(data), vserving.provenance_html(data, live=True)


def build_tab(c: dict[str, Any], s: Setup) -> None:
    """6. The measured curves, the lesson, and a live pass-cost measurement."""
    data = measured()
    with gr.Tab(L("lab.sv.tab")):
        gr.Markdown(L("sv.lesson"))
        c["sv_throughput"] = gr.Plot(vserving.throughput_figure(data), show_label=False)
        c["sv_table"] = gr.Dataframe(
            value=vserving.class_rows(data), headers=vserving.class_headers(data), interactive=False, wrap=True
        )
        c["sv_costs"] = gr.Plot(vserving.pass_cost_figure(data), show_label=False)
        c["sv_about"] = gr.HTML(vserving.provenance_html(data))
        with gr.Row():
            c["sv_preset"] = gr.Dropdown(s.preset_opts, value=s.start, label=L("lab.preset"))
            c["sv_measure"] = gr.Button(L("lab.sv.measure"), variant="primary")


def wire_events(c: dict[str, Any], states: dict[str, Any]) -> dict[str, list]:
    c["sv_measure"].click(localized(measure_here), [c["sv_preset"]], [c["sv_costs"], c["sv_about"]], **MODEL_EVENT)
    return {}
