"""Lab tab 6, Predict, then reveal: guess which drafts the target accepts, then see why.

A round is one generated run (``round_state``: the result, the steps with drafts, where
the student is); the score is a ``Scoreboard`` kept for the session.  The questions and
scoring are ``playground.lab.quiz``; the cards are ``visual.lab``.  This module holds the
tab's components, handlers and events.
"""

from __future__ import annotations

from typing import Any

import gradio as gr

from playground.api import generate
from playground.lab.quiz import Scoreboard, question, question_steps, reveal
from visual import lab as vlab
from visual.fmt import pct, token_plain
from visual.i18n import L, localized, t
from visual.lab_tabs.common import LIGHT_EVENT, MODEL_EVENT, Setup, progress_adapter, run_errors, takes_settings


def empty_round() -> dict[str, Any]:
    return {"result": None, "order": [], "pos": 0, "revealed": False, "rate_guess": None, "rate_scored": False}


def _question_outputs(state: dict):
    res, order, pos = state["result"], state["order"], state["pos"]
    if res is None:
        return vlab.question_html(None), gr.update(choices=[], value=[])
    if pos >= len(order):
        msg = t("lab.p.over")
        return f'<div style="{vlab._BOX}">{msg}</div>', gr.update(choices=[], value=[])
    q = question(res, order[pos])
    choices = [(f"{i + 1}: \u201c{token_plain(t)}\u201d", str(i)) for i, t in enumerate(q.drafts)]
    return vlab.question_html(q, len(order) - pos - 1), gr.update(choices=choices, value=[])


# the tab's controls of run settings (RunSettings' fields -> component keys), in the event's input order
RUN_CONTROLS = {
    "preset": "p_preset",
    "gamma": "p_gamma",
    "temperature": "p_temp",
    "seed": "p_seed",
    "max_new_tokens": "p_tokens",
}


def new_round(values: dict[str, Any], prompt, rate_guess, progress=gr.Progress()):
    """New round: one run of ``values`` (the run settings of ``RUN_CONTROLS``, ``takes_settings``)."""
    res = run_errors(generate, prompt, **values, progress=progress_adapter(progress))
    order = question_steps(res)
    state = {**empty_round(), "result": res, "order": order, "rate_guess": float(rate_guess) / 100.0}
    note = t("lab.p.new_run", k=len(order), n=len(res.steps), guess=f"{float(rate_guess):.0f}")
    if not order:
        note = t("lab.p.no_drafts")
    qh, cb = _question_outputs(state)
    return state, qh, cb, "", note


def do_reveal(selected, state, board):
    state = dict(state or empty_round())
    if state["result"] is None or state["pos"] >= len(state["order"]):
        return state, gr.skip(), board, vlab.score_card(board)
    if state["revealed"]:
        raise gr.Error(t("lab.p.already"))
    res, idx = state["result"], state["order"][state["pos"]]
    k = len(res.steps[idx].drafted)
    picked = {int(s) for s in (selected or []) if str(s).isdigit()}
    r = reveal(res, idx, [i in picked for i in range(k)])
    board = board.add_step(r)
    state["revealed"] = True
    return state, vlab.reveal_html(r, question(res, idx)), board, vlab.score_card(board)


def next_step(state):
    state = dict(state or empty_round())
    if state["result"] is not None and state["pos"] < len(state["order"]):
        state["pos"] += 1
        state["revealed"] = False
    qh, cb = _question_outputs(state)
    return state, qh, cb, ""


def reveal_rate(state, board):
    state = dict(state or empty_round())
    if state["result"] is None:
        raise gr.Error(t("lab.p.start_first"))
    actual = state["result"].stats.acceptance_rate
    if state["rate_scored"]:
        return state, board, vlab.score_card(board), t("lab.p.rate_again", actual=pct(actual))
    board = board.add_rate(state["rate_guess"] or 0.0, actual)
    state["rate_scored"] = True
    return (
        state,
        board,
        vlab.score_card(board),
        t(
            "lab.p.rate_scored",
            actual=pct(actual),
            guess=pct(state["rate_guess"]),
            drafted=state["result"].stats.drafted_tokens,
            steps=state["result"].stats.steps,
        ),
    )


def build_tab(c: dict[str, Any], s: Setup) -> None:
    """6. Guess which drafts the target accepts, then reveal."""
    with gr.Tab(L("lab.p.tab")):
        gr.Markdown(L("lab.p.intro"))
        with gr.Row():
            c["p_preset"] = gr.Dropdown(s.preset_opts, value=s.start, label=L("lab.preset"))
            c["p_gamma"] = gr.Slider(1, s.lim.max_gamma, value=s.gamma0, step=1, label="γ")
            c["p_temp"] = gr.Slider(0, s.lim.max_temperature, value=0.0, step=0.05, label=L("lab.temperature"))
            c["p_seed"] = gr.Number(value=0, precision=0, minimum=0, label=L("lab.seed"))
            c["p_tokens"] = gr.Slider(8, min(96, s.lim.max_new_tokens), value=32, step=1, label=L("lab.new_tokens"))
        c["p_prompt"] = gr.Textbox(value=s.ex_prompt, label=L("lab.prompt"), lines=2)
        with gr.Row():
            c["p_rate"] = gr.Slider(0, 100, value=50, step=1, label=L("lab.p.rate"))
            c["p_new"] = gr.Button(L("lab.p.new"), variant="primary")
        c["p_note"] = gr.Markdown("")
        c["p_question"] = gr.HTML(vlab.question_html(None))
        c["p_guess"] = gr.CheckboxGroup(choices=[], value=[], label=L("lab.p.guess"))
        with gr.Row():
            c["p_reveal"] = gr.Button(L("lab.p.reveal"), variant="primary")
            c["p_next"] = gr.Button(L("lab.p.next"))
            c["p_rate_reveal"] = gr.Button(L("lab.p.rate_reveal"))
        c["p_answer"] = gr.HTML("")
        c["p_score"] = gr.HTML(vlab.score_card(Scoreboard()))


def wire_events(c: dict[str, Any], states: dict[str, Any]) -> dict[str, list]:
    """New round, Reveal, Next step, Reveal the rate; nothing here has a Stop button."""
    round_state, board_state = states["round_state"], states["board_state"]
    c["p_new"].click(
        localized(takes_settings(new_round, RUN_CONTROLS)),
        [c[k] for k in RUN_CONTROLS.values()] + [c["p_prompt"], c["p_rate"]],
        [round_state, c["p_question"], c["p_guess"], c["p_answer"], c["p_note"]],
        **MODEL_EVENT,
    )
    c["p_reveal"].click(
        localized(do_reveal),
        [c["p_guess"], round_state, board_state],
        [round_state, c["p_answer"], board_state, c["p_score"]],
        **LIGHT_EVENT,
    )
    c["p_next"].click(
        localized(next_step), round_state, [round_state, c["p_question"], c["p_guess"], c["p_answer"]], **LIGHT_EVENT
    )
    c["p_rate_reveal"].click(
        localized(reveal_rate),
        [round_state, board_state],
        [round_state, board_state, c["p_score"], c["p_note"]],
        **LIGHT_EVENT,
    )
    return {}
