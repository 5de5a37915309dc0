"""The ``/speculate`` endpoint: a run's trace as JSON for Python clients (``gradio_client``).

Its arguments become one ``RunSettings`` (``playground.api.run_settings``: the one check, the
same messages as the form's) and the run goes through ``api.run``, sharing the app's trace
cache and compute slots.  This module does not lay out the tab or wire events
(``visual.playground_tab`` registers the endpoint).
"""

from __future__ import annotations

import json
from collections.abc import Callable

import gradio as gr

from playground import api
from playground.config import AppConfig
from playground.models.loading import ModelUnavailable
from playground.serving.trace_cache import TraceCache
from visual import tables
from visual.visitor import visitor_of


def make_speculate(cfg: AppConfig, shared: TraceCache | None = None) -> Callable:
    """The ``/speculate`` endpoint: its arguments become one ``RunSettings`` (``api.run_settings``)."""

    def speculate(
        prompt: str,
        preset: str | None = None,
        drafter: str | None = None,
        gamma: int | None = None,
        temperature: float = 0.0,
        top_k: int = 0,
        top_p: float = 1.0,
        seed: int = 0,
        max_new_tokens: int = 64,
        tree_nodes: int | None = None,
        verification: str = "lossless",
        draft_stop: float | None = None,
        request: gr.Request = None,
    ) -> dict:
        """Run lossless speculative decoding and return the trace as JSON.

        Returns {"text", "token_ids", "steps", "stats", "prompt", "prompt_ids", "config"}: the generated text,
        the new token ids, one record per target verification pass (drafts with q, p, u and verdict; the
        resampled/bonus token) and the run's statistics.  tree_nodes > 1 drafts a tree (each draft then has
        a ``parent`` index).  verification: "lossless" (token verification) or "block" (block
        verification, chains only).  draft_stop: MTP drafters stop a chain once the head's confidence
        in it is below this (0 = always gamma drafts; default: the preset's).  Bad input raises an
        error with a clear message.
        """
        try:
            settings = api.run_settings(
                preset=preset or None, drafter=drafter or None, gamma=gamma, temperature=temperature, top_k=top_k,
                top_p=top_p, seed=seed, max_new_tokens=max_new_tokens, tree_nodes=tree_nodes,
                verification=verification, draft_stop=draft_stop,
            )  # fmt: skip
            result = api.run(prompt, settings, shared=shared, visitor=visitor_of(request))
        except (ValueError, TypeError, ModelUnavailable) as exc:
            raise gr.Error(str(exc)) from None
        data = tables.clean_json(result.to_dict())
        size = len(json.dumps(data))
        if size > cfg.limits.max_trace_bytes:
            raise gr.Error(
                f"the trace is too large ({size} bytes, limit {cfg.limits.max_trace_bytes}); ask for fewer tokens"
            )
        return data

    return speculate
