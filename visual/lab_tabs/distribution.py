"""Lab tabs 2-4, Distribution check & wrong rules: histograms of speculative vs target-only sampling.

One rule (Run check) or all of them on the same settings (Compare all rules, sharing one
target-only sample); the session's checks, newest first, are kept in ``gr.State`` for the
comparison table.  The sampling and statistics are ``playground.lab.distribution``; the
figure, card and table are ``visual.lab``.  This module holds the tab's components,
handlers and events.
"""

from __future__ import annotations

from typing import Any

import gradio as gr

from playground.lab.budget import Budget, LabCancelled
from playground.lab.distribution import (
    MAX_SAMPLES,
    MAX_SAMPLES_SLOW,
    DistributionCheck,
    DistributionSettings,
    distribution_check,
    sample_cap,
)
from playground.rules import DEFAULT_RULE, RULES
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
    takes_settings,
)
from visual.lab_tabs.stop import press_stop, session_budget

HISTORY = 12  # distribution checks kept per session for the comparison table
DEFAULT_N = 5000  # the N slider's starting value (tiny-random: seconds)


def _dist_outputs(check: DistributionCheck | None, history: list, status: str):
    return vlab.distribution_figure(check), vlab.distribution_html(check), vlab.rules_table(history), history, status


# the tab's controls of run settings (RunSettings' fields -> component keys), in the events' input order;
# Compare all rules reads them all but the rule
RUN_CONTROLS = {"preset": "d_preset", "rule": "d_rule", "temperature": "d_temp", "gamma": "d_gamma", "seed": "d_seed"}
_ALL_RULES_CONTROLS = tuple(k for k in RUN_CONTROLS if k != "rule")


def _dist_settings(values: dict[str, Any], prompt, n, n_tokens) -> DistributionSettings:
    """The tab's inputs as ``DistributionSettings`` (a gr.Error for a value that is not a whole
    number or settings ``api.run_settings`` refuses)."""
    return run_errors(
        DistributionSettings.of,
        prompt,
        n_samples=as_int(n, t("lab.name.n")),
        n_tokens=as_int(n_tokens, t("lab.name.tokens_per")),
        **values,
    )


def n_for_preset(preset, n):
    """The N slider on a preset change: its range up to the preset's cap, and N within it (a
    real model's cap is far below tiny-random's default N, which would otherwise be refused)."""
    cap = sample_cap(preset)
    try:
        value = min(int(n), cap)
    except (TypeError, ValueError):
        value = min(DEFAULT_N, cap)
    return gr.update(maximum=cap, value=value)


def _reference(history: list) -> DistributionCheck | None:
    return history[0] if history else None


def _stopped_outputs(history):
    return gr.skip(), gr.skip(), gr.skip(), history, t("lab.d.stopped")


def run_distribution(
    values: dict[str, Any], prompt, n, n_tokens, history, request: gr.Request = None, progress=gr.Progress()
):
    """Run check: ``values`` are the run settings of ``RUN_CONTROLS`` (``takes_settings``)."""
    history = list(history or [])
    settings = _dist_settings(values, prompt, n, n_tokens)
    try:
        check = run_errors(
            distribution_check,
            settings,
            progress=progress_adapter(progress),
            reference=_reference(history),
            budget=session_budget(settings.run.preset, request),
        )
    except Stopped:
        return _stopped_outputs(history)
    history = [check] + [h for h in history if h.settings.rule != check.settings.rule or not h.same_draw(check)]
    history = history[:HISTORY]
    seconds = f"{check.spec.seconds + check.target.seconds:.1f}"
    status = t("lab.d.done", seconds=seconds)
    if check.partial:
        status = t("lab.d.partial", seconds=seconds, done=f"{check.spec.n:,}", total=f"{check.n_samples:,}")
    return _dist_outputs(check, history, status)


def compare_all_rules(
    values: dict[str, Any],
    prompt,
    n,
    n_tokens,
    history,
    request: gr.Request = None,
    progress=gr.Progress(),
    budget: Budget | None = None,
):
    """Every rule on the same settings (``values``: the run settings of ``RUN_CONTROLS`` but the
    rule), one after another, sharing one target-only sample.

    One time limit for the whole comparison: each rule gets an equal share of what is left
    when it starts, and rules not started when the time is up are skipped and named."""
    history = list(history or [])
    report = progress_adapter(progress)
    settings = {rule: _dist_settings({**values, "rule": rule}, prompt, n, n_tokens) for rule in RULES}
    budget = budget if budget is not None else session_budget(settings[DEFAULT_RULE].run.preset, request)
    rules = list(RULES)
    done: list[DistributionCheck] = []
    ref = _reference(history)
    last = None
    try:
        for i, rule in enumerate(rules):
            if done and budget.expired():
                break

            def sub(f, msg, i=i, rule=rule):
                if report:
                    report((i + f) / len(rules), t("lab.d.progress", i=i + 1, n=len(rules), rule=rule, message=msg))

            last = run_errors(
                distribution_check,
                settings[rule],
                progress=sub,
                reference=ref,
                budget=budget.share(1.0 / (len(rules) - i)),
            )
            ref = last if ref is None or not ref.same_draw(last) else ref
            done.append(last)
    except (Stopped, LabCancelled):
        if not done:
            return _stopped_outputs(history)
    history = list(reversed(done)) + [
        h for h in history if not any(h.same_draw(d) and h.settings.rule == d.settings.rule for d in done)
    ]
    history = history[: max(HISTORY, len(rules))]
    status = t("lab.d.all_done")
    skipped = rules[len(done) :]
    if skipped or any(d.partial for d in done):
        status = (
            t(
                "lab.d.all_stopped",
                seconds=f"{budget.elapsed():.0f}",
                limit=budget.describe(),
                done=len(done),
                total=len(rules),
            )
            + (t("lab.d.not_checked", rules=", ".join(skipped)) if skipped else "")
            + t("lab.d.partial_rows")
        )
    return _dist_outputs(done[0], history, status)


def intro_md(lim) -> str:
    """The tab's introduction in the current language (its numbers are the limits'; re-rendered on page load)."""
    return t("lab.d.intro", n_slow=f"{MAX_SAMPLES_SLOW:,}", wall=f"{lim.lab_wall_s:g}")


def build_tab(c: dict[str, Any], s: Setup) -> None:
    """2-4. Histograms of speculative vs target-only sampling, under each verification rule."""
    with gr.Tab(L("lab.d.tab")):
        c["d_intro"] = gr.Markdown(intro_md(s.lim))
        with gr.Row():
            with gr.Column(scale=1, min_width=300):
                c["d_rule"] = gr.Radio(
                    [(L(f"lab.d.rule.{key}"), key) for key in RULES],  # the table's order: the correct rules first
                    value=DEFAULT_RULE,
                    label=L("lab.d.rule"),
                    info=L("lab.d.rule.info"),
                )
                c["d_preset"] = gr.Dropdown(s.preset_opts, value=s.fast, label=L("lab.preset"))
                c["d_n"] = gr.Slider(100, MAX_SAMPLES, value=DEFAULT_N, step=100, label=L("lab.d.n"))
                c["d_tokens"] = gr.Radio([1, 2, 3], value=2, label=L("lab.d.tokens"))
                c["d_temp"] = gr.Slider(0.05, s.lim.max_temperature, value=1.0, step=0.05, label=L("lab.temperature"))
                with gr.Row():
                    c["d_gamma"] = gr.Slider(1, s.lim.max_gamma, value=4, step=1, label="γ")
                    c["d_seed"] = gr.Number(value=0, precision=0, minimum=0, label=L("lab.seed"))
            with gr.Column(scale=3):
                c["d_prompt"] = gr.Textbox(value="Once upon a time", label=L("lab.prompt"), lines=1)
                with gr.Row():
                    c["d_run"] = gr.Button(L("lab.d.run"), variant="primary")
                    c["d_all"] = gr.Button(L("lab.d.all"))
                    c["d_stop"] = gr.Button(L("lab.stop"), variant="stop")
                c["d_status"] = gr.Markdown("")
                c["d_plot"] = gr.Plot(vlab.distribution_figure(None), show_label=False)
                c["d_html"] = gr.HTML(vlab.distribution_html(None))
                c["d_table"] = gr.Dataframe(
                    vlab.rules_table([]),
                    interactive=False,
                    wrap=True,
                    label=L("lab.d.table"),
                )
        gr.Markdown(L("lab.d.help"))


def wire_events(c: dict[str, Any], states: dict[str, Any]) -> dict[str, list]:
    """Run check, Compare all rules and Stop (which also says "Stopping…" in the status line)."""
    dist_state = states["dist_state"]
    dist_out = [c["d_plot"], c["d_html"], c["d_table"], dist_state, c["d_status"]]
    lab_inputs = [c["d_prompt"], c["d_n"], c["d_tokens"]]
    heavy = {
        "d_stop": [
            c["d_run"].click(
                localized(takes_settings(run_distribution, RUN_CONTROLS)),
                [c[k] for k in RUN_CONTROLS.values()] + [*lab_inputs, dist_state],
                dist_out,
                **MODEL_EVENT,
            ),
            c["d_all"].click(
                localized(takes_settings(compare_all_rules, _ALL_RULES_CONTROLS)),
                [c[RUN_CONTROLS[k]] for k in _ALL_RULES_CONTROLS] + [*lab_inputs, dist_state],
                dist_out,
                **MODEL_EVENT,
            ),
        ]
    }
    c["d_stop"].click(localized(press_stop), None, c["d_status"], cancels=heavy["d_stop"], **LIGHT_EVENT)
    c["d_preset"].change(n_for_preset, [c["d_preset"], c["d_n"]], c["d_n"], **LIGHT_EVENT)
    return heavy
