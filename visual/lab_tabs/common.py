"""What every lab tab shares: the event settings, the starting values, input and error handling.

``Setup`` is what each tab's builder starts from (limits, preset choices, defaults);
``as_int`` and ``run_errors`` turn slider values and the engine's errors into ``gr.Error``
messages (and ``run_errors`` leaves the gradio thread that computed with no parked OpenMP
helpers); ``takes_settings`` hands a handler its run-settings controls as one dict;
``progress_adapter`` gives ``playground.lab`` a plain progress callback.

This module builds no components and holds no per-user data (that lives in ``gr.State``).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gradio as gr

from playground.config import AppConfig
from playground.lab.budget import LabCancelled
from playground.models.loading import ModelUnavailable
from playground.threads import done_computing
from visual.i18n import t
from visual.i18n.errors import engine_message
from visual.presets import preset_choices

# Events that run a model share the "model" concurrency group with the Playground tab; light ones have no limit.
MODEL_EVENT = dict(concurrency_id="model", concurrency_limit="default", api_visibility="private")
LIGHT_EVENT = dict(concurrency_limit=None, api_visibility="private", show_progress="hidden")


@dataclass(frozen=True)
class Setup:
    """What every lab tab starts from: the limits, the preset choices and the defaults."""

    lim: Any
    preset_opts: list
    start: str
    fast: str
    gamma0: int
    ex_prompt: str
    classroom: list


@dataclass(frozen=True)
class Choice:
    """A preset as the lab's dropdowns offer it (unavailable ones are labelled, not hidden)."""

    name: str
    label: str
    available: bool
    reason: str
    gamma: int
    source: str


def lab_choices(cfg: AppConfig) -> list[Choice]:
    return [
        Choice(
            c.preset.name,
            c.preset.label if c.available else f"{c.preset.label} — unavailable",
            c.available,
            c.reason,
            c.preset.gamma,
            c.preset.source,
        )
        for c in preset_choices(cfg)
    ]


def pick(choices: list[Choice], preferred: str) -> str:
    """``preferred`` if it is available here, else the first available preset."""
    by = {c.name: c for c in choices}
    if preferred in by and by[preferred].available:
        return preferred
    return next((c.name for c in choices if c.available), preferred)


def progress_adapter(progress):
    """gradio's ``gr.Progress`` as the ``(fraction, message)`` callback ``playground.lab`` reports to
    (its lines, ``playground.errors.Message``\ s, in the visitor's language)."""
    if progress is None:
        return None

    def report(fraction: float, message: str) -> None:
        try:
            progress(float(fraction), desc=engine_message(message))
        except Exception:
            pass

    return report


def as_int(x: Any, name: str) -> int:
    """A slider's or number box's value as an int, or a ``gr.Error`` naming the field."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        raise gr.Error(t("lab.whole", name=name))
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise gr.Error(t("lab.whole.got", name=name, value=repr(x))) from None
    if not v.is_integer():
        raise gr.Error(t("lab.whole.got", name=name, value=repr(x)))
    return int(v)


def takes_settings(fn: Callable, names: Sequence[str]) -> Callable:
    """``fn(values, *rest)`` as a gradio handler whose first inputs are the controls of the run
    settings ``names`` (``RunSettings``' fields, in the event's input order), handed to ``fn``
    as one dict ``values``: a tab passes its settings on whole, so one more setting is one more
    control and name, not one more parameter.  ``fn``'s other parameters (more inputs, a
    ``gr.Request``, a ``gr.Progress``) follow as they are, for gradio to fill in.  An empty
    control is refused (a ``gr.Error`` naming it), not read as the setting's default.  Wrap it
    in ``visual.i18n.localized`` (which gives gradio the ``gr.Request`` annotation); ``fn`` is not
    a generator."""
    names = tuple(names)
    sig = inspect.signature(fn)
    rest = list(sig.parameters.values())[1:]

    def handler(*args, **kwargs):
        values = dict(zip(names, args[: len(names)], strict=True))
        empty = next((k for k, v in values.items() if v is None or v == ""), None)
        if empty is not None:
            raise gr.Error(t("lab.whole", name=empty))
        return fn(values, *args[len(names) :], **kwargs)

    own = [inspect.Parameter(k, inspect.Parameter.POSITIONAL_OR_KEYWORD) for k in names]
    handler.__signature__ = sig.replace(parameters=own + rest)
    handler.__name__ = getattr(fn, "__name__", "handler")
    handler.__qualname__ = getattr(fn, "__qualname__", handler.__name__)
    handler.__doc__ = fn.__doc__
    handler.__annotations__ = {}  # the signature's own (``visual.i18n.localized`` reads the request there)
    return handler


class Stopped(Exception):
    """The user pressed Stop; the handler returns without new results."""


def run_errors(fn, *args, **kwargs):
    """Call fn, turning the engine's clear ValueErrors into gr.Error messages.

    fn computes in one of gradio's worker threads, which live on: when it returns, the thread
    gives back its OpenMP helpers (``playground.threads``).  One team left parked anywhere made
    every later run's one-token pass about 30% slower (57 -> 73-76 ms, Gemma 3 270M, 2 vCPUs)."""
    try:
        return fn(*args, **kwargs)
    except gr.Error:
        raise
    except LabCancelled:
        raise Stopped() from None
    except (ValueError, ModelUnavailable) as exc:
        raise gr.Error(engine_message(exc)) from None
    except Exception as exc:  # keep serving; say what happened
        raise gr.Error(t("lab.failed", error=f"{type(exc).__name__}: {exc}")) from None
    finally:
        done_computing()
