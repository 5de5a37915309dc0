"""Settings that arrive from outside the lab: URL query parameters and classroom presets.

``?preset=…&prompt=…&gamma=…&temperature=…&seed=…`` or ``?classroom=<slug>`` (validated by
``visual.share``) prefill the Equality, Theory, Predict and Replay tabs on page load; the
Replay tab's classroom dropdown applies a preset to the same controls.  The note about a
link is HTML built by ``visual.lab.prefill_note_html``, which escapes everything.

This module does not register the load event (``visual.lab_tab.LabTabs.wire`` does) or
parse the query (``visual.share`` does).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gradio as gr

from playground.config import AppConfig
from visual import lab as vlab
from visual.i18n import localized, t
from visual.lab_tabs.common import LIGHT_EVENT
from visual.share import PREFILL_KEYS, prefill_from_query


def wire_prefill(c: dict[str, Any], cfg: AppConfig, choices, classroom) -> tuple[list[Any], Callable]:
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
                raise gr.Error(t("lab.r.unknown_classroom"))
            vals = dict(preset=cp.preset, prompt=cp.prompt, gamma=cp.gamma, temperature=cp.temperature, seed=cp.seed)
            return [vlab.classroom_md(cp), *_fill(vals)]

        c["r_class"].change(
            localized(lambda s: vlab.classroom_md(by_classroom.get(s))), c["r_class"], c["r_class_md"], **LIGHT_EVENT
        )
        c["r_apply"].click(localized(apply_classroom), c["r_class"], [c["r_class_md"], *load_outputs], **LIGHT_EVENT)

    def on_load(request: gr.Request):
        pf = prefill_from_query(request, cfg)
        vals = pf.values()
        if "preset" in vals:
            ch = next((x for x in choices if x.name == vals["preset"]), None)
            if ch is not None and not ch.available:
                vals.pop("preset")
                pf = pf.without("preset", f"preset {ch.name!r} is unavailable here")
        out = [vlab.prefill_note_html(pf), *_fill(vals)]
        if classroom:
            out.append(gr.update(value=pf.classroom) if pf.classroom in by_classroom else gr.skip())
        return out

    return load_outputs, on_load
