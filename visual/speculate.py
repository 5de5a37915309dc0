"""The ``/speculate`` endpoint: a run's trace as JSON for Python clients (``gradio_client``).

Its arguments become one ``RunSettings`` (``playground.api.run_settings``: the one check, the
same messages as the form's) and the run goes through ``api.run``, sharing the app's trace
cache and compute slots.  This module does not lay out the tab or wire events
(``visual.playground_tab`` registers the endpoint).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

import gradio as gr

from playground import api
from playground.config import AppConfig
from playground.models.loading import ModelUnavailable
from playground.serving.trace_cache import TraceCache
from playground.settings import DEFAULTS, ENDPOINT, SPECS, offered, public_name
from visual import tables
from visual.visitor import visitor_of

_DOC = """Run lossless speculative decoding and return the trace as JSON.

Returns {"text", "token_ids", "steps", "stats", "prompt", "prompt_ids", "config"}: the generated text,
the new token ids, one record per target verification pass (drafts with q, p, u and verdict; the
resampled/bonus token) and the run's statistics.  tree_nodes > 1 drafts a tree (each draft then has a
``parent`` index).  Bad input raises an error with a clear message.

Args:
    prompt: the text to continue
"""


def _signature() -> tuple[inspect.Signature, dict[str, Any], str]:
    """``/speculate``'s parameters, types and documentation: the prompt, then every setting
    ``RunSettings`` offers the endpoint, under its public name (gradio reads all three)."""
    params = [inspect.Parameter("prompt", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=str)]
    hints: dict[str, Any] = {"prompt": str}
    doc = [_DOC.rstrip("\n")]
    for name in offered(ENDPOINT):
        spec = SPECS[name]
        optional = spec.preset or DEFAULTS[name] is None
        hint = spec.kind | None if optional else spec.kind
        default = None if optional else DEFAULTS[name]
        params.append(inspect.Parameter(public_name(name), inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default,
                                        annotation=hint))  # fmt: skip
        hints[public_name(name)] = hint
        doc.append(f"    {public_name(name)}: {spec.doc}")
    params.append(inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None,
                                    annotation=gr.Request))  # fmt: skip
    hints |= {"request": gr.Request, "return": dict}
    return inspect.Signature(params, return_annotation=dict), hints, "\n".join(doc) + "\n"


SIGNATURE, HINTS, DOC = _signature()


def make_speculate(cfg: AppConfig, shared: TraceCache | None = None) -> Callable:
    """The ``/speculate`` endpoint: its arguments become one ``RunSettings`` (``api.run_settings``)."""

    def speculate(*args, **kwargs) -> dict:
        values = SIGNATURE.bind(*args, **kwargs).arguments
        request, prompt = values.pop("request", None), values.pop("prompt")
        try:
            settings = api.run_settings(
                **{k: (v or None) if k in ("preset", "drafter") else v for k, v in values.items()}
            )
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

    speculate.__signature__ = SIGNATURE
    speculate.__annotations__ = HINTS
    speculate.__doc__ = DOC
    return speculate
