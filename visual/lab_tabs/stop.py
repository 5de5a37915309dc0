"""The lab's Stop buttons: who pressed Stop, per browser session, and each action's budget.

A gradio ``cancels=`` ends an event only between yields and lets a running function
finish, so a Stop press is also recorded here (``STOPS``) and a running lab loop, which
holds a ``Budget`` watching its session (``session_budget``), notices it between
continuations and frees its slot.

This module does not build buttons or wire events (each tab module wires its own Stop)
and does not decide time limits (``playground.lab.budget`` does).
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

import gradio as gr

from playground.lab.budget import Budget
from visual.i18n import t


class StopRequests:
    """Stop presses per browser session, so a running lab action can notice its own.

    ``watcher(session)`` is taken when an action starts and answers True once Stop was pressed
    in that session *after* that moment (a press left over from an earlier action does not
    stop the next one).  Bounded: the oldest sessions are forgotten beyond ``max_sessions``.
    """

    def __init__(self, max_sessions: int = 4096, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_sessions = max_sessions
        self.clock = clock
        self._pressed: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def press(self, session: str | None) -> bool:
        if not session:
            return False
        with self._lock:
            self._pressed[session] = self.clock()
            self._pressed.move_to_end(session)
            while len(self._pressed) > self.max_sessions:
                self._pressed.popitem(last=False)
        return True

    def watcher(self, session: str | None) -> Callable[[], bool]:
        if not session:
            return lambda: False
        started = self.clock()
        return lambda: self._pressed.get(session, -math.inf) >= started

    def __len__(self) -> int:
        return len(self._pressed)


STOPS = StopRequests()


def _session(request) -> str | None:
    return getattr(request, "session_hash", None) if request is not None else None


def session_budget(preset, request) -> Budget:
    """The action's time limit (``limits.lab_wall_s`` on real models) and this session's Stop."""
    return Budget.for_preset(preset, STOPS.watcher(_session(request)))


def press_stop(request: gr.Request = None) -> str:
    """The Stop button: tell this session's running action (and say so where there is a status line)."""
    STOPS.press(_session(request))
    return t("lab.stopping")


def press_stop_quietly(request: gr.Request = None) -> None:
    STOPS.press(_session(request))
