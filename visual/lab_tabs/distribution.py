"""Lab tabs 2-4, Distribution check & wrong rules: histograms of speculative vs target-only sampling.

One rule (Run check) or all of them on the same settings (Compare all rules, sharing one
target-only sample); the session's checks, newest first, are kept in ``gr.State`` for the
comparison table.  The sampling and statistics are ``playground.lab.distribution``; the
figure, card and table are ``visual.lab``.  This module holds the tab's components,
handlers and events.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import gradio as gr

from playground.lab.budget import Budget, LabCancelled
from playground.lab.distribution import (
    MAX_SAMPLES,
    MAX_SAMPLES_SLOW,
    DistributionCheck,
    DistributionSettings,
    distribution_check,
)
from playground.rules import DEFAULT_RULE, RULES, lab_choices
from visual import lab as vlab
from visual.lab_tabs.common import (
    LIGHT_EVENT,
    MODEL_EVENT,
    Setup,
    Stopped,
    as_int,
    progress_adapter,
    run_errors,
)
from visual.lab_tabs.stop import press_stop, session_budget

HISTORY = 12  # distribution checks kept per session for the comparison table


def _dist_outputs(check: DistributionCheck | None, history: list, status: str):
    return vlab.distribution_figure(check), vlab.distribution_html(check), vlab.rules_table(history), history, status


def _dist_settings(prompt, preset, n, n_tokens, temperature, gamma, seed, rule: str = DEFAULT_RULE):
    """The tab's inputs as ``DistributionSettings`` (a gr.Error for a value that is not a whole number)."""
    return DistributionSettings(
        prompt,
        preset=preset,
        rule=rule,
        n_samples=as_int(n, "N"),
        n_tokens=as_int(n_tokens, "tokens per continuation"),
        temperature=float(temperature),
        gamma=as_int(gamma, "γ"),
        seed=as_int(seed, "seed"),
    )


def _reference(history: list) -> DistributionCheck | None:
    return history[0] if history else None


def _stopped_outputs(history):
    return gr.skip(), gr.skip(), gr.skip(), history, "Stopped: nothing new was computed."


def run_distribution(
    prompt,
    preset,
    rule,
    n,
    n_tokens,
    temperature,
    gamma,
    seed,
    history,
    request: gr.Request = None,
    progress=gr.Progress(),
):
    history = list(history or [])
    settings = _dist_settings(prompt, preset, n, n_tokens, temperature, gamma, seed, rule=rule)
    try:
        check = run_errors(
            distribution_check,
            settings,
            progress=progress_adapter(progress),
            reference=_reference(history),
            budget=session_budget(preset, request),
        )
    except Stopped:
        return _stopped_outputs(history)
    history = [check] + [h for h in history if h.rule != check.rule or not _same_settings(h, check)]
    history = history[:HISTORY]
    status = f"Done in {check.spec.seconds + check.target.seconds:.1f} s."
    if check.partial:
        status = (
            f"Stopped at the time limit after {check.spec.seconds + check.target.seconds:.1f} s: "
            f"{check.spec.n:,} of {check.n_samples:,} continuations — a partial result, labelled as such."
        )
    return _dist_outputs(check, history, status)


def _same_settings(a: DistributionCheck, b: DistributionCheck) -> bool:
    keys = ("prompt", "preset", "temperature", "gamma", "n_tokens", "n_samples", "seed")
    return all(getattr(a, k) == getattr(b, k) for k in keys)


def compare_all_rules(
    prompt,
    preset,
    n,
    n_tokens,
    temperature,
    gamma,
    seed,
    history,
    request: gr.Request = None,
    progress=gr.Progress(),
    budget: Budget | None = None,
):
    """Every rule on the same settings, one after another, sharing one target-only sample.

    One time limit for the whole comparison: each rule gets an equal share of what is left
    when it starts, and rules not started when the time is up are skipped and named."""
    history = list(history or [])
    report = progress_adapter(progress)
    budget = budget if budget is not None else session_budget(preset, request)
    rules = list(RULES)
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

            last = run_errors(
                distribution_check,
                replace(base, rule=rule),
                progress=sub,
                reference=ref,
                budget=budget.share(1.0 / (len(rules) - i)),
            )
            ref = last if ref is None or not _same_settings(ref, last) else ref
            done.append(last)
    except (Stopped, LabCancelled):
        if not done:
            return _stopped_outputs(history)
    history = list(reversed(done)) + [
        h for h in history if not any(_same_settings(h, d) and h.rule == d.rule for d in done)
    ]
    history = history[: max(HISTORY, len(rules))]
    status = "All rules checked on the same settings: compare drift (p-value, TV) with acceptance in the table."
    skipped = rules[len(done) :]
    if skipped or any(d.partial for d in done):
        status = (
            f"Stopped after {budget.elapsed():.0f} s (time limit {budget.describe()}): {len(done)} of "
            f"{len(rules)} rules checked"
            + (f", not checked: {', '.join(skipped)}" if skipped else "")
            + "; rows marked partial are computed on fewer continuations than asked."
        )
    return _dist_outputs(done[0], history, status)


def build_tab(c: dict[str, Any], s: Setup) -> None:
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
                c["d_rule"] = gr.Radio(
                    lab_choices(),
                    value=DEFAULT_RULE,
                    label="Verification rule",
                    info="The correct rule is the default; the others are labelled.",
                )
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
                c["d_table"] = gr.Dataframe(
                    vlab.rules_table([]),
                    interactive=False,
                    wrap=True,
                    label="Rules checked this session (newest first)",
                )
        gr.Markdown(
            "**TV distance** = ½ Σ |f_spec(x) − f_target(x)|: 0 = identical histograms, 1 = no overlap; two "
            "samples of the same distribution still differ by about the *noise level* shown. **p-value**: how "
            "often a difference at least this large would appear if both came from the same distribution "
            "(chi-square test, rare outcomes pooled). **p vs exact**: the speculative sample against the "
            "target's exact probabilities (computed from its logits). **Acceptance** = accepted ÷ judged drafts."
        )


def wire_events(c: dict[str, Any], states: dict[str, Any]) -> dict[str, list]:
    """Run check, Compare all rules and Stop (which also says "Stopping…" in the status line)."""
    dist_state = states["dist_state"]
    dist_out = [c["d_plot"], c["d_html"], c["d_table"], dist_state, c["d_status"]]
    heavy = {
        "d_stop": [
            c["d_run"].click(
                run_distribution,
                [
                    c["d_prompt"],
                    c["d_preset"],
                    c["d_rule"],
                    c["d_n"],
                    c["d_tokens"],
                    c["d_temp"],
                    c["d_gamma"],
                    c["d_seed"],
                    dist_state,
                ],
                dist_out,
                **MODEL_EVENT,
            ),
            c["d_all"].click(
                compare_all_rules,
                [
                    c["d_prompt"],
                    c["d_preset"],
                    c["d_n"],
                    c["d_tokens"],
                    c["d_temp"],
                    c["d_gamma"],
                    c["d_seed"],
                    dist_state,
                ],
                dist_out,
                **MODEL_EVENT,
            ),
        ]
    }
    c["d_stop"].click(press_stop, None, c["d_status"], cancels=heavy["d_stop"], **LIGHT_EVENT)
    return heavy
