"""Speculative Decoding Playground — the Gradio app (thin: layout and launch only).

    python app.py            # serves on 0.0.0.0:7860 (PORT overrides)

The engine is ``playground`` (models, drafters, the decoding loop); the
renderers and the Playground tab are in ``visual``.  To add a tab, append a
``(title, builder)`` pair to ``TABS``: ``builder(cfg, warmup)`` is called inside
``gr.Tab(title)``; with ``title=None`` it is called directly inside ``gr.Tabs``
(for builders that create their own tabs).
"""

from __future__ import annotations

import os

import gradio as gr

from playground.config import load_config
from visual import CSS_PATH
from visual.playground_tab import build_playground_tab

INTRO = (
    "Watch **lossless speculative decoding** step by step: a cheap *drafter* proposes γ tokens, the *target* model "
    "checks them all in **one** forward pass, keeps each draft with probability min(1, p/q), and always adds one token "
    "of its own (a resample from the residual after a rejection, or a bonus token). The output follows the target's "
    "distribution exactly; the speedup depends on how often drafts are accepted and what they cost."
)


def _playground(cfg, warmup=None):
    build_playground_tab(cfg, warmup=warmup)


# (title or None, builder(cfg, warmup)) — more tabs (Benchmark, Classroom lab, ...) are appended here.
TABS: list[tuple[str | None, object]] = [("Playground", _playground)]


def build_demo(warmup=None, tabs=None) -> gr.Blocks:
    cfg = load_config()
    title = cfg.app.get("title", "Speculative Decoding Playground")
    with gr.Blocks(title=title) as demo:
        gr.Markdown(f"# {title}\n{INTRO}", elem_classes=["sd-intro"])
        with gr.Tabs():
            for tab_title, builder in tabs or TABS:
                if tab_title is None:  # the builder makes its own gr.Tab(s)
                    builder(cfg, warmup)
                    continue
                with gr.Tab(tab_title):
                    builder(cfg, warmup)
    q = cfg.queue
    demo.queue(max_size=q.get("max_size"), default_concurrency_limit=q.get("default_concurrency_limit", 1))
    return demo


def launch_kwargs(port: int | None = None) -> dict:
    cfg = load_config()
    return dict(
        server_name=os.environ.get("GRADIO_SERVER_NAME", "0.0.0.0"),
        server_port=int(port if port is not None else os.environ.get("PORT", cfg.app.get("port", 7860))),
        css_paths=[CSS_PATH],
        theme=gr.themes.Soft(primary_hue="blue", secondary_hue="orange"),
        footer_links=["api", "gradio"],
    )


def main() -> None:
    from visual.warmup import Warmup

    cfg = load_config()
    warmup = Warmup(cfg.default_preset).start()  # models load once, in the background, at start-up
    build_demo(warmup=warmup).launch(**launch_kwargs())


if __name__ == "__main__":
    main()
