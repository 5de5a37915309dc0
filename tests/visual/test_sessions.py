"""``visual.sessions``: a session starts without building every block's config, and a deep link
still reads what gradio's own session would have given."""

from __future__ import annotations

import gradio as gr
import pytest
from gradio import state_holder
from gradio.blocks import BlocksConfig

from visual import sessions


@pytest.fixture(scope="module")
def demo():
    with gr.Blocks() as demo:
        box = gr.Textbox("hello", label="prompt")
        gr.Markdown("intro")
        with gr.Row():
            slider = gr.Slider(0, 10, value=3)
            gr.Button("Run")
        memo = gr.State({"n": 0})
        box.submit(lambda s: s, box, box)
    demo.ids = {"box": box._id, "slider": slider._id, "memo": memo._id}
    return demo


def _built(monkeypatch) -> list[int]:
    """The ids of the blocks whose config gets built from now on."""
    seen: list[int] = []
    real = BlocksConfig.config_for_block

    def counted(_id, *args, **kwargs):
        seen.append(_id)
        return real(_id, *args, **kwargs)

    monkeypatch.setattr(BlocksConfig, "config_for_block", staticmethod(counted))
    return seen


def _events(session, demo) -> None:
    """What a visitor's events do to a session: a state written, a value sent, a block updated."""
    ids = demo.ids
    session[ids["memo"]] = {"n": 1}
    session._update_value_in_config(ids["box"], "a new prompt")
    session[ids["slider"]] = gr.Slider(0, 10, value=7)


def test_a_session_has_gradios_attributes(demo):
    """The class copies gradio's __init__: an upgrade that adds or drops one fails here."""
    ours = set(vars(sessions.OnDemandSession(demo))) - {"_app_ids"}
    assert ours == set(vars(sessions.GradioSession(demo)))


def test_a_session_starts_without_building_configs(demo, monkeypatch):
    built = _built(monkeypatch)
    sessions.GradioSession(demo)
    assert len(built) == len(demo.blocks)  # what gradio's own session costs
    built.clear()
    session = sessions.OnDemandSession(demo)
    assert built == []
    _events(session, demo)
    assert sorted(set(built)) == sorted(demo.ids.values())  # only the blocks events changed


@pytest.mark.parametrize("with_events", [False, True])
def test_a_deep_link_reads_what_gradio_would_give(demo, with_events):
    theirs, ours = sessions.GradioSession(demo), sessions.OnDemandSession(demo)
    if with_events:
        _events(theirs, demo)
        _events(ours, demo)
    assert list(ours.components) == list(theirs.components)  # order included
    assert list(ours.components) == list(theirs.components)  # and again, once filled in


def test_install_makes_the_state_holder_start_them(demo, monkeypatch):
    monkeypatch.setattr(state_holder, "SessionState", state_holder.SessionState)  # undone after the test
    sessions.install()
    holder = state_holder.StateHolder()
    holder.set_blocks(demo)
    assert type(holder["visitor"]) is sessions.OnDemandSession
