"""The step view's replay handlers (``visual.playground_replay``) and how the tab wires them:
frames walked on synthetic traces, clicks that a tick on its way must not undo."""

from __future__ import annotations

import gradio as gr

from tests import synthetic as syn
from visual import playground_replay as pt


def _replay_wiring():
    """(the tick's dependency, {control: its click dependencies}) of a built Playground tab."""
    from visual.playground_tab import build_playground_tab

    with gr.Blocks() as demo:
        tab = build_playground_tab()
    deps = demo.get_config_file()["dependencies"]
    timer_id = next(b._id for b in demo.blocks.values() if isinstance(b, gr.Timer))
    tick = next(d for d in deps if [timer_id, "tick"] in [list(t) for t in d["targets"]])
    clicks = {
        name: [d for d in deps if [tab.components[name]._id, "click"] in [list(t) for t in d["targets"]]]
        for name in ("play", "step", "back", "reset", "run")
    }
    return tick, clicks


def test_every_replay_control_drops_the_tick_on_its_way():
    """The view's lock orders the server's view, not the responses the page gets: a tick done
    just before a click can reach the page after it and show its frame over the click's.  Every
    control's click, and Run's (a tick of the last run would draw over the new run's view),
    cancels the tick's event: the page then drops its response."""
    tick, clicks = _replay_wiring()
    for name, deps in clicks.items():
        assert any(tick["id"] in (d.get("cancels") or []) for d in deps), name
    assert not tick.get("cancels")


def test_pause_redraws_the_frame_it_stops_on():
    """Pause dropped any tick on its way to the page, so the frame it stops on is drawn again
    even when the server drew it last."""
    trace = {**pt.empty_trace(), "run_id": "r1", "done": True, "gamma": 3, "spec_steps": tuple(syn.spec_steps())}
    view = {**pt.empty_view(), "run_id": "r1", "frame": 2, "playing": True}
    view, html_out, _, _ = pt.on_tick(trace, view, 0.5)  # draws frame 3 (the tick's response is then dropped)
    view, html_out, timer, button = pt.on_play_pause(trace, view, 0.5)
    assert view["frame"] == 3 and not view["playing"] and timer.active is False
    assert html_out != gr.skip() and "Step" in html_out and "Play" in button.value


def test_a_tick_on_its_way_never_undoes_a_click():
    """gradio runs a visitor's replay events side by side and writes each one's view back when
    it returns.  A tick that read the view just before Reset, and returns after it, must not
    leave the replay playing past Reset: whichever order the two are written back in."""
    import threading

    trace = {**pt.empty_trace(), "run_id": "r1", "done": True, "gamma": 3, "spec_steps": tuple(syn.spec_steps())}
    stored = {**pt.empty_view(), "run_id": "r1", "frame": 3, "playing": True}
    entered, go = threading.Event(), threading.Event()

    def slow_tick(trace, view, speed_s):
        out = pt.on_tick(trace, view, speed_s)
        entered.set()
        go.wait(5)  # the tick has read the view and computed its frame; it returns later
        return out

    written = []  # (event, view) in the order the events return, as gradio writes them back

    def event(name, handler):
        out = pt.one_at_a_time(handler)(trace, stored, 0.5)
        written.append((name, out[0]))

    tick = threading.Thread(target=event, args=("tick", slow_tick))
    tick.start()
    assert entered.wait(5)
    reset = threading.Thread(target=event, args=("reset", pt.on_reset))
    reset.start()
    reset.join(0.3)  # Reset arrives while the tick is on its way
    go.set()
    tick.join(5), reset.join(5)
    assert [name for name, _ in written] in (["tick", "reset"], ["reset", "tick"])
    last = written[-1][1]
    assert last["frame"] == 0 and last["playing"] is False


def test_nothing_ticks_before_the_first_step():
    """A playing view of a run with no step yet never starts its timer (the Run handler starts
    it when the first step exists) and never stops it either: a tick that read the trace before
    that step may land after the yield that started it.  Paused, it stops; with a step, it ticks
    at the speed slider's pace."""
    trace = {**pt.empty_trace(), "run_id": "r1", "done": False, "gamma": 3}
    view = {**pt.empty_view(), "run_id": "r1", "playing": True}
    view, _, timer, _ = pt.on_tick(trace, view, 0.5)
    assert view["playing"] and timer == gr.skip()
    view, _, timer, _ = pt.on_play_pause(trace, view, 0.5)
    assert not view["playing"] and timer.active is False
    view, _, timer, _ = pt.on_play_pause(trace, view, 0.5)
    assert view["playing"] and timer == gr.skip()
    view, _, timer, _ = pt.on_tick({**trace, "spec_steps": tuple(syn.spec_steps()[:1])}, view, 0.5)
    assert view["frame"] == 1 and timer.active and timer.value == 0.5


def test_tick_does_not_run_ahead_of_generation():
    trace = {**pt.empty_trace(), "run_id": "r1", "spec_steps": tuple(syn.spec_steps()[:1]), "done": False, "gamma": 3}
    view = {**pt.empty_view(), "run_id": "r1", "playing": True}
    for _ in range(5):
        view, *_ = pt.on_tick(trace, view, 0.5)
    assert view["frame"] == 2 and view["playing"]  # waits at the last frame that exists
    view, html_out, *_ = pt.on_tick({**trace, "done": True}, view, 0.5)
    assert not view["playing"]
