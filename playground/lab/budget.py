"""How long a heavy lab action may run, whether its user pressed Stop, and how it reports progress.

The lab's loops ask their ``Budget`` between continuations and generation steps: once out
of time (``limits.lab_wall_s`` on real models, no limit on the built-in tiny ones, a fake
clock in tests) they stop and return what they collected, labelled partial; once Stop was
pressed they raise ``LabCancelled``.  ``Progress`` is the callback the actions report
through: ``progress(fraction done, message)``.

This module does not run or measure anything and knows nothing of sessions: the Stop
buttons' per-session bookkeeping is ``visual.lab_tabs.stop.StopRequests``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from playground.config import AppConfig, load_config
from playground.progress import Progress as _Progress

Progress = _Progress | None  # playground.progress: progress(fraction, message)


class LabCancelled(RuntimeError):
    """The user pressed Stop: the action ends at once, without a result (nobody is waiting for it)."""


class Budget:
    """How long a heavy lab action may run, and whether its user pressed Stop.

    Gradio's ``cancels=`` only abandons an event: a function already running in a worker
    thread goes on to the end and keeps its slot.  So the loops themselves ask
    ``expired()`` between continuations (and between generation steps): it raises
    ``LabCancelled`` once ``cancelled()`` says so, and returns True once ``wall_s``
    seconds have passed (``None``: no limit), after which the action stops and reports
    what it collected.  ``clock`` is injectable so tests can run out of time on purpose.
    """

    def __init__(
        self,
        wall_s: float | None,
        cancelled: Callable[[], bool] | None = None,
        clock: Callable[[], float] = time.monotonic,
        _start: float | None = None,
    ) -> None:
        if wall_s is not None and (
            isinstance(wall_s, bool) or not isinstance(wall_s, (int, float)) or wall_s != wall_s or wall_s < 0
        ):
            raise ValueError(f"wall_s must be a number of seconds >= 0 or None, got {wall_s!r}")
        self.wall_s = None if wall_s is None or math.isinf(wall_s) else float(wall_s)
        self.cancelled = cancelled or (lambda: False)
        self.clock = clock
        self.start = clock() if _start is None else _start

    @classmethod
    def for_preset(
        cls, preset: str | None, cancelled: Callable[[], bool] | None = None, cfg: AppConfig | None = None
    ) -> Budget:
        """The configured budget: ``limits.lab_wall_s`` on real models, none on the built-in tiny ones."""
        return cls(default_wall_s(preset, cfg), cancelled)

    def elapsed(self) -> float:
        return self.clock() - self.start

    def remaining(self) -> float:
        return math.inf if self.wall_s is None else max(0.0, self.wall_s - self.elapsed())

    def expired(self) -> bool:
        """True once the time is up; raises LabCancelled once Stop was pressed."""
        if self.cancelled():
            raise LabCancelled("stopped by the user")
        return self.wall_s is not None and self.elapsed() >= self.wall_s

    def share(self, fraction: float) -> Budget:
        """A budget for one part of the action: ``fraction`` of the time left now, the same Stop."""
        if self.wall_s is None:
            return Budget(None, self.cancelled, self.clock)
        return Budget(self.remaining() * max(0.0, min(1.0, fraction)), self.cancelled, self.clock)

    def describe(self) -> str:
        """'60 s' — the limit, as the reports name it."""
        return "no limit" if self.wall_s is None else f"{self.wall_s:g} s"


def is_builtin(preset: Any, cfg: AppConfig | None = None) -> bool:
    """Whether a preset (name or Preset; None: the default) is one of the built-in tiny models.
    An unknown name is not (the action will refuse the name itself)."""
    cfg = cfg or load_config()
    source = getattr(preset, "source", None)
    if source is None:
        try:
            source = cfg.preset(str(preset if preset is not None else cfg.default_preset)).source
        except (KeyError, ValueError):
            source = None
    return source == "builtin"


def default_wall_s(preset: Any, cfg: AppConfig | None = None) -> float | None:
    """``limits.lab_wall_s`` for a preset (name or Preset); None (no limit) for the built-in tiny models.

    Tiny-random draws 5,000 continuations in seconds, so its runs keep their old behaviour;
    an unknown name gets the limit."""
    cfg = cfg or load_config()
    return None if is_builtin(preset, cfg) else float(cfg.limits.lab_wall_s)
