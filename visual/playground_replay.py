"""The step view's replay: its per-visitor view state and the light handlers that walk it.

Timer ticks, Step, Play/Pause, Back and Reset only read the stored trace (what a run recorded,
``visual.playground_run``) and render one frame of it (``visual.replay``, ``visual.tokens``).
They write only the ``view`` state, never the trace, and have no concurrency limit; a visitor's
run one at a time, under their view's own lock (``one_at_a_time``).  The Playground tab wires
them (``visual.playground_tab``).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

import gradio as gr

from visual import replay, tokens
from visual.i18n import t
from visual.i18n.errors import engine_message
from visual.playground_run import empty_trace

# --------------------------------------------------------------------------- trace & view state


def empty_view() -> dict[str, Any]:
    return {"run_id": 0, "frame": 0, "playing": False, "shown": None}


def stagger_for(speed_s: float, gamma: int) -> float:
    """Delay between chips appearing in a draft frame, so the whole draft fits in ~60 % of a frame."""
    return max(0.0, min(0.25, 0.6 * float(speed_s or 1.0) / max(1, gamma)))


def render_view(trace: dict, view: dict, speed_s: float = 1.0) -> str:
    steps = trace.get("spec_steps", ())
    frame = replay.frame_at(steps, view.get("frame", 0))
    message = None
    if frame.phase == replay.START:
        if trace.get("error"):
            message = t("pg.view.stopped", error=engine_message(trace["error"]))
        elif not trace.get("done"):
            message = t("pg.view.generating")
    spec = trace.get("spec")
    return tokens.step_view(
        trace.get("prompt", ""),
        steps,
        frame,
        running=not trace.get("done", True),
        stagger_s=stagger_for(speed_s, trace.get("gamma", 1)),
        message=message,
        prompt_tokens=(len(spec.prompt_ids) or None) if spec is not None else None,
    )


def _view_key(trace: dict, view: dict) -> tuple:
    steps = trace.get("spec_steps", ())
    frame = replay.clamp(view.get("frame", 0), steps)
    waiting = frame == 0 and (not trace.get("done"), trace.get("error"))
    # total steps matter for the header ("Step 3 of 12"), but only re-render on a frame change while playing
    return (trace.get("run_id"), frame, waiting, bool(trace.get("done")))


def play_label(playing: bool) -> str:
    """The Play button's text in the current language (a handler's update: translated here)."""
    return t("pg.pause") if playing else t("pg.play")


# --------------------------------------------------------------------------- replay handlers (light)


def replay_outputs(trace: dict, view: dict, speed_s: float, force: bool = False):
    key = _view_key(trace, view)
    html = gr.skip()
    if force or key != view.get("shown"):
        html = render_view(trace, view, speed_s)
        view = {**view, "shown": key}
    # Before a run's first step nothing ticks: the Run handler starts the timer when that step
    # exists (a tick is a round trip to the server, and a class's pages would poll it together).
    # A playing view that waits leaves the timer as it is, never stops it: this handler may have
    # read the trace before the first step and land after the yield that started the timer.
    waiting = not trace.get("spec_steps") and not trace.get("done")
    if not view["playing"]:
        timer = gr.Timer(active=False)
    elif waiting:
        timer = gr.skip()
    else:
        timer = gr.Timer(value=max(0.1, float(speed_s or 1.0)), active=True)
    return view, html, timer, gr.Button(value=play_label(view["playing"]))


_LOCK = "lock"  # the view state's own lock, made on its first replay event


def one_at_a_time(handler: Callable) -> Callable:
    """``handler(trace, view, speed_s)`` run under the view's own lock, its new view written into
    the stored view in place.

    gradio runs a visitor's replay events side by side and writes each one's view back when it
    returns, so a tick that read the view just before a click could be written after it and
    undo it (the replay playing again after Pause, a frame past Reset).  Under the lock each
    handler reads what the one before it left, and every handler returns the same dict, so the
    order in which gradio writes it back does not matter.  It does not order the responses the
    page receives (gradio sends each after the lock is released): the tab's controls cancel the
    tick's event, so the page drops a tick's response that comes after a click's."""

    @functools.wraps(handler)
    def locked(trace: dict, view: dict, speed_s: float):
        if not isinstance(view, dict) or not view:
            view = empty_view()  # a fresh session's first event: nothing else holds it
        lock = view.setdefault(_LOCK, threading.Lock())  # dict.setdefault is atomic
        with lock:
            new_view, *rest = handler(trace, {k: v for k, v in view.items() if k != _LOCK}, speed_s)
            view.clear()
            view.update(new_view, **{_LOCK: lock})
        return (view, *rest)

    return locked


def on_tick(trace: dict, view: dict, speed_s: float):
    trace = trace or empty_trace()
    view = view or empty_view()
    if view.get("run_id") != trace.get("run_id"):
        view = {**empty_view(), "run_id": trace.get("run_id"), "playing": view.get("playing", False)}
    steps = trace.get("spec_steps", ())
    last = replay.frame_count(steps) - 1
    frame = min(view.get("frame", 0), last)
    playing = bool(view.get("playing"))
    if playing:
        if frame < last:
            frame += 1
        elif trace.get("done"):
            playing = False
    return replay_outputs(trace, {**view, "frame": frame, "playing": playing}, speed_s)


def on_play_pause(trace: dict, view: dict, speed_s: float):
    trace = trace or empty_trace()
    view = view or empty_view()
    if not trace.get("run_id"):
        gr.Info(t("pg.info.nothing_to_play"))
        return replay_outputs(trace, {**view, "playing": False}, speed_s)
    steps = trace.get("spec_steps", ())
    last = replay.frame_count(steps) - 1
    playing = not view.get("playing")
    frame = view.get("frame", 0)
    if playing and frame >= last and trace.get("done"):
        frame = 0  # at the end: play again from the start
    # Drawn even when the frame is the one last drawn here: the click dropped any tick on its way
    # to the page, which may have carried that frame.
    new_view = {**view, "run_id": trace["run_id"], "frame": frame, "playing": playing}
    return replay_outputs(trace, new_view, speed_s, force=True)


def _move(trace: dict, view: dict, speed_s: float, delta: int | None):
    trace = trace or empty_trace()
    view = view or empty_view()
    steps = trace.get("spec_steps", ())
    frame = 0 if delta is None else replay.clamp(view.get("frame", 0) + delta, steps)
    if delta is not None and frame == view.get("frame", 0) and delta > 0 and trace.get("run_id"):
        if trace.get("done"):
            gr.Info(t("pg.info.last_step"))
        else:
            gr.Info(t("pg.info.next_pending"))
    return replay_outputs(
        trace, {**view, "run_id": trace.get("run_id"), "frame": frame, "playing": False}, speed_s, force=True
    )


def on_step(trace, view, speed_s):
    return _move(trace, view, speed_s, +1)


def on_back(trace, view, speed_s):
    return _move(trace, view, speed_s, -1)


def on_reset(trace, view, speed_s):
    return _move(trace, view, speed_s, None)
