"""Lab tab 7, Replay & share: step through a recorded or imported run, export it, make a share link.

Imports are refused by size before anything reads them (``upload_too_large``), then
parsed and checked by ``playground.trace_io`` in a queue of their own (``IMPORT_EVENT``);
the trace an import gives lives in the session's ``trace_state`` only.  The
classroom-preset dropdown is built here but wired in ``visual.lab_tabs.prefill`` (it fills
every tab).  Frames are ``visual.replay``, rendering ``visual.lab``, links ``visual.share``.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

import gradio as gr

from playground import trace_io
from playground.api import generate
from playground.config import load_config
from visual import lab as vlab
from visual import replay
from visual.i18n import L, localized, t
from visual.lab_tabs.common import (
    LIGHT_EVENT,
    MODEL_EVENT,
    Setup,
    as_int,
    progress_adapter,
    run_errors,
    takes_settings,
)
from visual.share import share_query, share_url
from visual.tables import clean_json, new_export_dir


def _replay_outputs(trace, frame: int, source: str = ""):
    n = replay.frame_count(trace.steps) if trace is not None else 1
    frame = max(0, min(int(frame or 0), n - 1))
    return (
        gr.update(maximum=max(1, n - 1), value=frame),
        vlab.replay_html(trace, frame),
        vlab.trace_summary_html(trace, source),
    )


# the tab's controls of run settings (RunSettings' fields -> component keys), in the Run event's input order
RUN_CONTROLS = {
    "preset": "r_preset",
    "gamma": "r_gamma",
    "temperature": "r_temp",
    "seed": "r_seed",
    "max_new_tokens": "r_tokens",
}


def run_for_replay(values: dict[str, Any], prompt, progress=gr.Progress()):
    """Run: one run of ``values`` (the run settings of ``RUN_CONTROLS``, ``takes_settings``) to replay."""
    res = run_errors(generate, prompt, **values, progress=progress_adapter(progress))
    s, h, summ = _replay_outputs(res, 1, t("lab.r.fresh"))
    return res, s, h, summ, t("lab.r.generated")


def upload_too_large(path, limit: int | None = None) -> str | None:
    """Why an uploaded file is refused before anything reads it (its size on disk), or None.

    Gradio has already stored the upload; ``os.stat`` tells its size without opening it, so a
    multi-gigabyte file costs nothing more here.  The message says the size and the limit."""
    limit = load_config().limits.max_upload_bytes if limit is None else limit
    try:
        size = os.stat(path).st_size
    except OSError:
        return "the uploaded file could not be found; upload it again"
    if size > limit:
        return f"the file is {trace_io.size_text(size)}; uploads are limited to {trace_io.size_text(limit)}, so it was not read"
    return None


# An import parses up to the trace size limit (``playground.trace_io``: at most about 8 bytes of
# memory per byte of that limit, whatever the file holds).  Its own queue lets only as many
# run at once as trace_io parses at once, so uploads wait in the queue, not in worker threads,
# and the light events never wait behind them.
IMPORT_EVENT = {**LIGHT_EVENT, "concurrency_id": "trace_import", "concurrency_limit": trace_io.PARALLEL_PARSES}


class ImportWindow:
    """The bytes of trace files imported in the last ``window_s`` seconds, by everybody.

    An imported trace lives in its session's ``trace_state`` for ``TRACE_TTL_S`` after its
    last change (``gr.State(time_to_live=...)``), and holds about twice its file's size.  So
    while the files imported within that time stay under ``budget_bytes``, all the imported
    traces the server holds stay under about twice that, however many tabs a visitor opens."""

    def __init__(self, budget_bytes: int, window_s: float, clock=time.monotonic) -> None:
        self.budget_bytes, self.window_s, self.clock = int(budget_bytes), float(window_s), clock
        self._lock = threading.Lock()
        self._recent: deque[tuple[float, int]] = deque()  # (when, bytes), oldest first

    def admit(self, n: int) -> bool:
        """Count an import of ``n`` bytes if the window has room for it."""
        with self._lock:
            now = self.clock()
            while self._recent and self._recent[0][0] <= now - self.window_s:
                self._recent.popleft()
            if sum(b for _, b in self._recent) + n > self.budget_bytes:
                return False
            self._recent.append((now, n))
            return True


TRACE_TTL_S = 1800  # an imported (or recorded) trace leaves its session's state this long after its last change
_WINDOW = ImportWindow(load_config().limits.import_window_bytes, TRACE_TTL_S)


def import_trace(path, current, window: ImportWindow | None = None):
    """A file uploaded for replay: the trace it holds goes to this session's ``trace_state`` only."""
    if not path:
        return current, gr.skip(), gr.skip(), gr.skip(), ""
    refused = upload_too_large(path)
    if refused is None and not (window or _WINDOW).admit(os.stat(path).st_size):
        refused = "the server holds as many imported traces as it may right now; try again in a few minutes"
    if refused:
        return current, gr.skip(), gr.skip(), gr.skip(), t("lab.r.refused", reason=vlab.md_escape(refused))
    try:
        res = trace_io.load_trace_file(path)
    except trace_io.TraceImportError as exc:
        return current, gr.skip(), gr.skip(), gr.skip(), t("lab.r.refused", reason=vlab.md_escape(exc))
    except Exception as exc:  # anything unexpected is still a clear refusal
        return current, gr.skip(), gr.skip(), gr.skip(), t("lab.r.refused_kind", kind=type(exc).__name__)
    s, h, summ = _replay_outputs(res, 0, t("lab.r.imported_from", name=Path(str(path)).name))
    return res, s, h, summ, t("lab.r.imported", n=len(res.steps))


def move(trace, frame, delta):
    if trace is None:
        return gr.skip(), gr.skip()
    n = replay.frame_count(trace.steps)
    f = max(0, min(int(frame or 0) + delta, n - 1))
    return gr.update(value=f), vlab.replay_html(trace, f)


def export_trace(trace):
    if trace is None:
        raise gr.Error(t("lab.r.nothing"))
    d = new_export_dir(prefix="lab-")  # bounded: only the newest exports are kept
    p = d / "speculative_trace.json"

    p.write_text(json.dumps(clean_json(trace.to_dict()), ensure_ascii=False, allow_nan=False), encoding="utf-8")
    return str(p)


def share_link(preset, prompt, gamma, temperature, seed, request: gr.Request = None):
    q = share_query(
        dict(
            preset=preset,
            prompt=prompt,
            gamma=as_int(gamma, "γ"),
            temperature=float(temperature),
            seed=as_int(seed, t("lab.name.seed")),
        )
    )
    return share_url(request, q)


def file_label(lim) -> str:
    """The import box's label in the current language (its limit is the config's; re-rendered on page load)."""
    return t("lab.r.file", mb=lim.max_trace_bytes // 1_000_000)


def build_tab(c: dict[str, Any], s: Setup) -> None:
    """7. Step through a recorded or imported run; share links and classroom presets."""
    with gr.Tab(L("lab.r.tab")):
        gr.Markdown(L("lab.r.intro"))
        if s.classroom:
            with gr.Row():
                c["r_class"] = gr.Dropdown(
                    [(cp.label, cp.slug) for cp in s.classroom], value=s.classroom[0].slug, label=L("lab.r.classroom")
                )
                c["r_apply"] = gr.Button(L("lab.r.apply"))
            c["r_class_md"] = gr.Markdown(vlab.classroom_md(s.classroom[0]))
        with gr.Row():
            c["r_preset"] = gr.Dropdown(s.preset_opts, value=s.start, label=L("lab.preset"))
            c["r_gamma"] = gr.Slider(1, s.lim.max_gamma, value=s.gamma0, step=1, label="γ")
            c["r_temp"] = gr.Slider(0, s.lim.max_temperature, value=0.0, step=0.05, label=L("lab.temperature"))
            c["r_seed"] = gr.Number(value=0, precision=0, minimum=0, label=L("lab.seed"))
            c["r_tokens"] = gr.Slider(4, min(128, s.lim.max_new_tokens), value=32, step=1, label=L("lab.new_tokens"))
        c["r_prompt"] = gr.Textbox(value=s.ex_prompt, label=L("lab.prompt"), lines=2)
        with gr.Row():
            c["r_run"] = gr.Button(L("lab.r.run"), variant="primary")
            c["r_file"] = gr.File(
                label=file_label(s.lim),
                file_types=[".json"],
                type="filepath",
                file_count="single",
            )
        c["r_status"] = gr.Markdown("")
        with gr.Row():
            c["r_back"] = gr.Button(L("lab.r.back"))
            c["r_frame"] = gr.Slider(0, 1, value=0, step=1, label=L("lab.r.frame"))
            c["r_fwd"] = gr.Button(L("lab.r.fwd"))
        c["r_view"] = gr.HTML(vlab.replay_html(None, 0))
        c["r_summary"] = gr.HTML("")
        with gr.Row():
            c["r_export"] = gr.DownloadButton(L("lab.r.export"))
            c["r_share_btn"] = gr.Button(L("lab.r.share_btn"))
        c["r_share"] = gr.Textbox(label=L("lab.r.share"), interactive=False, buttons=["copy"])


def wire_events(c: dict[str, Any], states: dict[str, Any]) -> dict[str, list]:
    """Run, import, the frame controls, export and the share link; nothing here has a Stop button."""
    trace_state = states["trace_state"]
    replay_out = [trace_state, c["r_frame"], c["r_view"], c["r_summary"], c["r_status"]]
    c["r_run"].click(
        localized(takes_settings(run_for_replay, RUN_CONTROLS)),
        [c[k] for k in RUN_CONTROLS.values()] + [c["r_prompt"]],
        replay_out,
        **MODEL_EVENT,
    )
    c["r_file"].upload(localized(import_trace), [c["r_file"], trace_state], replay_out, **IMPORT_EVENT)
    c["r_frame"].release(
        localized(lambda tr, f: vlab.replay_html(tr, int(f or 0))),
        [trace_state, c["r_frame"]],
        c["r_view"],
        **LIGHT_EVENT,
    )
    c["r_back"].click(
        localized(lambda tr, f: move(tr, f, -1)),
        [trace_state, c["r_frame"]],
        [c["r_frame"], c["r_view"]],
        **LIGHT_EVENT,
    )
    c["r_fwd"].click(
        localized(lambda tr, f: move(tr, f, +1)),
        [trace_state, c["r_frame"]],
        [c["r_frame"], c["r_view"]],
        **LIGHT_EVENT,
    )
    c["r_export"].click(localized(export_trace), trace_state, c["r_export"], **LIGHT_EVENT)
    c["r_share_btn"].click(
        share_link, [c["r_preset"], c["r_prompt"], c["r_gamma"], c["r_temp"], c["r_seed"]], c["r_share"], **LIGHT_EVENT
    )
    return {}
