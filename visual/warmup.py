"""Load a preset's models and warm their kernels in the background at start-up, with progress others can follow.

``app.py`` starts one ``Warmup`` for the default preset before launching, so
the page comes up at once and the first Run finds the models ready and every kernel shape a
default run uses already built (``playground.serving.warm``), or shows the progress while it
waits: the status says ready only then, so no visitor's run is timed on cold kernels.  One instance per process, created by
``app.py`` and handed to the tab builder: no module-level state here.  ``wire_status``
shows the loading in the Playground's status line until it is done.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import gradio as gr

from playground.config import load_config
from playground.models.loading import load_pair
from playground.serving.warm import warm_preset
from visual.fmt import esc
from visual.i18n import localized, t


class Warmup:
    def __init__(self, preset: str, dtype: str | None = None) -> None:
        self.preset = preset
        self.dtype = dtype
        self.message = "waiting to start"
        self.fraction = 0.0
        self.error: str | None = None
        self.seconds: float | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"warmup-{preset}", daemon=True)

    def start(self) -> Warmup:
        self._thread.start()
        return self

    def _progress(self, fraction: float, message: str) -> None:
        self.message, self.fraction = str(message), float(fraction)

    def _run(self) -> None:
        t0 = time.perf_counter()
        try:
            self._progress(0.0, f"loading preset {self.preset}")
            load_pair(load_config().preset(self.preset), self.dtype, progress=lambda f, m: self._progress(0.8 * f, m))
            warm_preset(self.preset, self.dtype, progress=lambda f, m: self._progress(0.8 + 0.2 * f, m))
            self._progress(1.0, "models ready")
        except Exception as exc:  # reported to users when they press Run
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self.seconds = time.perf_counter() - t0
            self._done.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, preset: str, poll_s: float = 0.5) -> Iterator[tuple[str, float]]:
        """While this preset is still warming up, yield (message, fraction) every ``poll_s``."""
        if preset != self.preset:
            return
        while not self._done.wait(poll_s):
            yield f"Loading models for {self.preset}: {self.message}", self.fraction


def wire_status(status, warmup: Warmup) -> None:
    """At start-up, the status line shows the background model loading until it is done."""
    warm_timer = gr.Timer(value=1.0, active=True)

    def on_warm_tick():
        if warmup.done:
            msg = (
                t("pg.warm.ready", preset=warmup.preset, seconds=f"{warmup.seconds:.1f}")
                if not warmup.error
                else t("pg.warm.failed", preset=warmup.preset, error=esc(warmup.error))
            )
            return msg, gr.Timer(active=False)
        return (
            t("pg.warm.loading", preset=warmup.preset, message=esc(warmup.message), percent=f"{warmup.fraction:.0%}"),
            gr.skip(),
        )

    warm_timer.tick(
        localized(on_warm_tick),
        None,
        [status, warm_timer],
        concurrency_limit=None,
        show_progress="hidden",
        api_visibility="private",
    )
