"""The engine's error types and its messages, each with a code a page can render in its own words.

``ValueError`` stays the type for bad input (a setting out of range, an empty prompt): the
checks raise ``Invalid``, a ``ValueError`` with a ``code`` and ``params``.  Progress lines and
notes (a replayed run) are ``Message``\\ s: a ``str`` (the English sentence) that also carries
its ``code`` and ``params``.  ``ENGLISH`` holds the one English template of every code: the
command line, the Python API and ``/speculate`` show that text; the app renders the code from
its catalogue in the visitor's language (``visual.i18n.errors``).  Params are what a message
shows, already formatted (a quoted excerpt of text someone else chose, a number as written).
This module holds only the types and templates; it does not decide what to show.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

# code -> the English message; each placeholder is a param of that code
ENGLISH: dict[str, str] = {
    # ---- bad settings (playground.validate)
    "temperature_finite": "temperature must be a finite number, got {value}",
    "temperature_range": "temperature must be 0 (greedy) or between {lo} and {hi}, got {value}",
    "top_p_finite": "top_p must be a finite number, got {value}",
    "top_p_range": "top_p must be in (0, 1], got {value}",
    "seed_negative": "seed must be >= 0, got {value}",
    "one_of": "{name} must be one of {choices}, got {value}",
    "verification": "verification must be one of {choices}, got {value}",
    "block_tree": (
        "block verification judges a chain of drafts, not a tree: set the draft tree nodes to 1, or choose token "
        "verification"
    ),
    "tree_rule": "tree drafts are verified with the lossless rule only, not {rule}: set tree_nodes to 1",
    "draft_stop": "draft_stop must be a number in [0, 1) (0 = off), got {value}",
    "bool": "{name} must be true or false, got {value}",
    "prompt_text": "the prompt must be text",
    "prompt_empty": "the prompt is empty: type at least one word",
    "prompt_long": "the prompt is too long: {n} characters (limit {limit})",
    "number": "{name} must be a number, got {value}",
    "number_plain": "{name} must be a number",
    "number_like": "{name} must be a number like 0.7, got {value}",
    "between": "{name} must be between {lo} and {hi}, got {value}",
    "whole": "{name} must be a whole number, got {value}",
    "whole_plain": "{name} must be a whole number",
    "not_a_setting": "{name} is not a run setting",
    "name": "{name} must be a name, got {value}",
    # ---- presets, drafters, prompts in tokens (playground.api, playground.models.loading)
    "unknown_preset": "unknown preset {preset}; choose one of: {choices}",
    "no_drafter": "preset {preset} has no {drafter} drafter; choose one of: {choices}",
    "prompt_long_tokens": "the prompt is too long: {n} tokens (limit {limit})",
    "preset_unavailable": "preset {preset} is unavailable here: {reason}",
    # ---- progress lines of the lab's heavy actions (playground.lab)
    "progress.speculative_continuations": "speculative: {done} / {n} continuations",
    "progress.target_continuations": "target only: {done} / {n} continuations",
    "progress.statistics": "statistics",
    "progress.exact": "the target's exact probabilities",
    "progress.done": "done",
    "progress.target_greedy": "target alone (greedy)",
    "progress.speculative_greedy": "speculative (greedy)",
    "progress.replay_divergence": "replaying both passes at the divergence",
    "progress.warmup": "warming up (first passes are slower)",
    "progress.target": "target alone",
    "progress.speculative": "speculative",
    # ---- a run served from another request's (playground.serving.trace_cache.describe_replay)
    "replay.shared": (
        "Shared run: an identical request (same preset, prompt, settings and seed) started this run at {at}; "
        "you watched it as it was computed. Timings are that run's."
    ),
    "replay.recorded": (
        "Replay of a recorded run: an identical request (same preset, prompt, settings and seed) was computed at "
        "{at}; the trace is that run's, and so are its timings."
    ),
}


class Message(str):
    """An English message (``TEMPLATES[code]`` filled with ``params``) that keeps its code and params.

    It is the English text for anything that treats it as a string (``print``, ``in``, JSON);
    a page renders ``code`` and ``params`` in its own language instead.  Immutable.  A tool
    with messages of its own subclasses it with its own ``TEMPLATES``."""

    TEMPLATES: ClassVar[Mapping[str, str]] = ENGLISH
    code: str
    params: dict[str, Any]

    def __new__(cls, code: str, /, **params: Any) -> Message:
        self = super().__new__(cls, cls.TEMPLATES[code].format(**params))
        object.__setattr__(self, "code", code)
        object.__setattr__(self, "params", params)
        return self

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __reduce__(self):  # pickle, deepcopy (gr.State): rebuilt from the code, not the text
        return _message, (type(self), self.code, dict(self.params))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code!r}, **{self.params!r})"


def _message(cls: type[Message], code: str, params: dict[str, Any]) -> Message:
    return cls(code, **params)


class Invalid(ValueError):
    """Bad input: ``code`` (a key of ``ENGLISH``) and ``params``; ``str()`` is the English message
    (a ``Message``, so the code survives ``str(exc)``)."""

    def __init__(self, code: str, /, **params: Any) -> None:
        super().__init__(Message(code, **params))

    @property
    def message(self) -> Message:
        return self.args[0]

    @property
    def code(self) -> str:
        return self.message.code

    @property
    def params(self) -> dict[str, Any]:
        return self.message.params

    def __str__(self) -> Message:
        return self.message

    def __reduce__(self):
        return _invalid, (type(self), self.code, dict(self.params))


def _invalid(cls: type[Invalid], code: str, params: dict[str, Any]) -> Invalid:
    return cls(code, **params)


class ModelUnavailable(RuntimeError):
    """A preset's models cannot be used here: a package is missing or broken, the hub is
    unreachable, or the models would not fit in the memory budget.  Its message may be a
    ``Message`` (``str()`` keeps it)."""

    def __str__(self) -> str:
        return self.args[0] if len(self.args) == 1 and isinstance(self.args[0], Message) else super().__str__()


class Busy(ModelUnavailable):
    """The server cannot take this now (memory held by other users' runs, a full queue);
    trying again later may work.  ``retry_after_s`` is a hint for the message."""

    def __init__(self, message: str, retry_after_s: float = 30.0) -> None:
        super().__init__(message)
        self.retry_after_s = float(retry_after_s)


def message_of(x: object) -> Message | None:
    """The ``Message`` that ``x`` is or was raised with (``Invalid``, a ``ModelUnavailable`` made
    with one), else None."""
    if isinstance(x, Message):
        return x
    if isinstance(x, BaseException) and len(x.args) == 1 and isinstance(x.args[0], Message):
        return x.args[0]
    return None
