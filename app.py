"""Speculative Decoding Playground — the Gradio app (thin: layout and launch only).

    python app.py            # serves on 0.0.0.0:7860 (PORT overrides)

The engine is ``playground`` (models, drafters, the decoding loop); the
renderers and the Playground tab are in ``visual``.  To add a tab, append a
``(title key, builder)`` pair (the title's text in ``visual.i18n``'s catalogue) to ``TABS``: ``builder(cfg, warmup)`` is called inside
``gr.Tab(title)``; with ``title=None`` it is called directly inside ``gr.Tabs``
(for builders that create their own tabs).
"""

from __future__ import annotations

import os

import gradio as gr

from playground.config import load_config
from visual import CSS_PATH, sessions
from visual.bench_tab import build_benchmark_tab
from visual.i18n import L, gradio_i18n, localized, retitle_tabs
from visual.i18n.switch import language_switch
from visual.lab_tab import build_lab_tabs
from visual.playground_tab import LINK_KEYS, build_playground_tab
from visual.share import prefill_from_query
from visual.theme import app_theme
from visual.warmup import Warmup


def _playground(cfg, warmup=None):
    tab = build_playground_tab(cfg, warmup=warmup)
    outputs = [tab.components[k] for k in LINK_KEYS]

    def wire(demo: gr.Blocks) -> None:
        # A teacher's link (?preset=..&prompt=..&gamma=..&temperature=..&seed=..&verification=.. or ?classroom=..)
        # prefills the Playground; invalid values are ignored (validated in visual.share).  The same load
        # renders the tab's server-side HTML and charts in the visitor's language (visual.i18n).
        def on_load(request: gr.Request):
            return tab.link_updates(prefill_from_query(request, cfg)) + tab.localized_values()

        # Progress on the prompt alone: gradio's page re-reads the value of every component that
        # ever showed progress on each status change of any event (each replay tick's included).
        demo.load(
            localized(on_load),
            None,
            outputs + tab.localized_outputs(),
            api_visibility="private",
            show_progress="hidden",
            show_progress_on=outputs[:1],
        )

    return wire


# (title's catalogue key (visual.i18n) or None, builder(cfg, warmup)); None: the builder makes its own tabs.  A builder may
# return a function wire(demo), called once the Blocks exist (e.g. for demo.load events).
TABS: list[tuple[str | None, object]] = [
    ("tab.playground", _playground),
    ("tab.lab", lambda cfg, warmup: build_lab_tabs(cfg, warmup).wire),
    ("tab.bench", lambda cfg, warmup: build_benchmark_tab(cfg, warmup)),
]


# gradio rebuilds its monitoring summary (a pandas table of up to 10,000 past events, grouped by
# handler) after every event it serves: 5-13 ms holding the GIL on a 2-core machine, for a dashboard
# this app never turns on, and a class's replay timers send dozens of events a second.  It is rebuilt
# once per this many events instead; GRADIO_ANALYTICS_CACHE_FREQUENCY in the environment wins.
ANALYTICS_EVERY = 100_000

# gradio's queue looks for new events every millisecond while none is waiting (its default off
# Windows).  Each look wakes the server's event loop: about 8 % of a core on an idle server, and
# a run's passes, which use every core, wait for the thread it interrupts.  One run alone (48
# greedy tokens, default preset, interleaved, 2-vCPU Xeon) took 2.17-2.27 s beside the 1-ms look
# and 1.90-1.97 s beside a 10-ms one.  An event then starts at most 10 ms later.
QUEUE_POLL_S = 0.01


def build_demo(warmup=None) -> gr.Blocks:
    cfg = load_config()
    os.environ.setdefault("GRADIO_ANALYTICS_CACHE_FREQUENCY", str(ANALYTICS_EVERY))  # read when the queue is made
    sessions.install()  # a visitor's first event no longer builds every block's config (visual.sessions)
    title = cfg.app.get("title", "Speculative Decoding Playground")
    # delete_cache: gradio's copies of uploads and served files older than an hour go, hourly
    with gr.Blocks(title=title, delete_cache=(3600, 3600)) as demo:
        gr.Markdown(L("app.header"), elem_classes=["sd-intro"])
        switch = language_switch()
        wires = [switch]
        with gr.Tabs():
            for tab_title, builder in TABS:
                with gr.Tab(L(tab_title)):
                    wires.append(builder(cfg, warmup))
        retitle_tabs(demo)  # the top tabs and the lab's sub-tabs
        for wire in wires:
            if callable(wire):
                wire(demo)
    q = cfg.queue
    demo.queue(max_size=q.get("max_size"), default_concurrency_limit=q.get("default_concurrency_limit", 1))
    demo._queue.sleep_when_free = QUEUE_POLL_S  # read at every look, so it holds once the app serves
    return demo


def launch_kwargs(port: int | None = None) -> dict:
    cfg = load_config()
    return dict(
        server_name=os.environ.get("GRADIO_SERVER_NAME", "0.0.0.0"),
        server_port=int(port if port is not None else os.environ.get("PORT", cfg.app.get("port", 7860))),
        css_paths=[CSS_PATH],
        theme=app_theme(),
        footer_links=["api", "gradio"],
        i18n=gradio_i18n(cfg),  # translates component props (labels, info, buttons, tab titles) in the browser
        max_file_size=cfg.limits.max_upload_bytes,  # gradio refuses larger uploads before they reach a handler
        max_threads=int(cfg.queue.get("max_threads", 64)),  # every Run event holds a worker thread for its whole run
    )


def main() -> None:
    cfg = load_config()
    warmup = Warmup(cfg.default_preset).start()  # models load once, in the background, at start-up
    build_demo(warmup=warmup).launch(**launch_kwargs())


if __name__ == "__main__":
    main()
