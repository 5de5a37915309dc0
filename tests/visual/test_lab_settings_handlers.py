"""The lab tabs hand their run-settings controls to a handler as one dict (``takes_settings``).

A handler's first inputs are the controls its tab names in ``RUN_CONTROLS`` (a ``RunSettings``
field -> a component key), in that order; gradio still finds its ``gr.Request`` and
``gr.Progress``; an empty control is refused, not read as the setting's default.  The wired
events are checked against the tabs' tables, and one of them runs on the tiny-random models.
"""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import gradio as gr
import pytest
from gradio.helpers import special_args

from visual.i18n import localized
from visual.lab_tabs import distribution, predict, replay_share
from visual.lab_tabs.common import takes_settings


def _handler(values, prompt, history, request: gr.Request = None, progress=gr.Progress()):
    return values, prompt, history, request


NAMES = ("preset", "gamma", "seed")


def test_the_first_inputs_arrive_as_one_dict_and_the_rest_as_they_were():
    h = takes_settings(_handler, NAMES)
    assert list(inspect.signature(h).parameters) == [*NAMES, "prompt", "history", "request", "progress"]
    req = SimpleNamespace(session_hash="s")
    got = h("tiny-random", 4.0, 7, "Hi", [1], req)
    assert got == ({"preset": "tiny-random", "gamma": 4.0, "seed": 7}, "Hi", [1], req)


@pytest.mark.parametrize("empty", [None, ""])
def test_an_empty_control_is_refused_by_name(empty):
    h = takes_settings(_handler, NAMES)
    with pytest.raises(gr.Error, match="seed"):
        h("tiny-random", 4, empty, "Hi", [])


def test_gradio_finds_the_request_and_the_progress_of_a_wrapped_handler():
    h = localized(takes_settings(_handler, NAMES))
    req = SimpleNamespace(session_hash="s", headers={}, query_params={})
    inputs, progress_index, _, _ = special_args(h, ["tiny-random", 4, 7, "Hi", []], request=req)
    # the three controls, the two inputs, then what gradio fills in: the request, the progress
    assert inputs[:5] == ["tiny-random", 4, 7, "Hi", []] and inputs[5] is req
    assert progress_index == 6 and isinstance(inputs[6], gr.Progress)


@pytest.fixture(scope="module")
def lab():
    from visual import lab_tab

    with gr.Blocks() as demo:
        tabs = lab_tab.build_lab_tabs()
    return demo, tabs.components, demo.get_config_file()["dependencies"]


@pytest.mark.parametrize(
    ("button", "controls", "names"),
    [
        ("d_run", distribution.RUN_CONTROLS, tuple(distribution.RUN_CONTROLS)),
        ("d_all", distribution.RUN_CONTROLS, tuple(k for k in distribution.RUN_CONTROLS if k != "rule")),
        ("p_new", predict.RUN_CONTROLS, tuple(predict.RUN_CONTROLS)),
        ("r_run", replay_share.RUN_CONTROLS, tuple(replay_share.RUN_CONTROLS)),
    ],
)
def test_each_event_wires_its_controls_first_in_the_handlers_order(lab, button, controls, names):
    demo, c, deps = lab
    (dep,) = [d for d in deps if [c[button]._id, "click"] in [list(t) for t in d["targets"]] and d["backend_fn"]]
    assert dep["inputs"][: len(names)] == [c[controls[k]]._id for k in names]
    params = [p for p in inspect.signature(demo.fns[dep["id"]].fn).parameters if p != "_sd_request"]
    assert params[: len(names)] == list(names)  # after the request localized adds where the handler takes none


def test_a_new_round_runs_the_settings_its_controls_hold(lab):
    demo, c, deps = lab
    (dep,) = [d for d in deps if [c["p_new"]._id, "click"] in [list(t) for t in d["targets"]]]
    values = {"preset": "tiny-random", "gamma": 3, "temperature": 0.0, "seed": 0, "max_new_tokens": 8}
    state, *_ = demo.fns[dep["id"]].fn(None, *values.values(), "Hello", 50, None)
    assert state["result"].config["gamma"] == 3 and len(state["result"].token_ids) == 8
    assert state["result"].config["preset"] == "tiny-random"
