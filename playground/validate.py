"""Every check of user-supplied settings: one function per rule, one message per mistake.

The API, the app (form, link, ``/speculate``), the lab, the bench and the CLI all go through
here, mostly by building a ``playground.settings.RunSettings`` (whose fields name these checks;
``settings.check`` reports every mistake at once, keyed by field).  Each check returns the
cleaned value or raises ``Invalid`` (a ``ValueError`` with a code and params, its English
message the same wherever the value came from: ``playground.errors.ENGLISH``).  The
ranges a setting may take are the engine's (``ENGINE``) narrowed by the app's ``limits``.
This module does not know where the value came from (form, URL, endpoint, command line) and
loads nothing.  Text from a shared link or a config file is parsed here too (``parse_*``,
``clean_prompt``), and ``excerpt`` is how a message quotes a value someone else chose.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from playground.errors import Invalid
from playground.rules import APP_RULES, RULES

# Below this, logits / T overflows float32 (a logit gap of 1 at T = 1e-40 is e^(1e40)),
# and the softmax becomes inf / nan.  Anything this cold is greedy in all but name: use 0.
MIN_TEMPERATURE = 0.01
MODES = ("speculative", "autoregressive")
DTYPES = ("float32", "bfloat16")
MAX_GAMMA = 16  # drafts per step the engine takes (the step view and the traces assume at most this)
MAX_TREE_NODES = 64  # draft-tree nodes in one verify pass
MAX_SEED = 2**63 - 1  # torch.Generator.manual_seed's range
MAX_TOP_N = 50  # candidates recorded per distribution


@dataclass(frozen=True)
class Bounds:
    """How far a setting may go.  ``playground.config.Limits`` has the same fields (the app's)."""

    max_gamma: int = MAX_GAMMA
    max_temperature: float = 5.0
    max_top_k: int = 2**31 - 1
    max_new_tokens: int = 100_000


ENGINE = Bounds()  # what the engine itself accepts (tests, the bench and the lab's own runs)


def bounds(limits) -> Bounds:
    """The engine's bounds narrowed by an app's ``limits`` (``config.Limits``; None: the engine's)."""
    if limits is None:
        return ENGINE
    return Bounds(
        max_gamma=min(MAX_GAMMA, limits.max_gamma),
        max_temperature=min(ENGINE.max_temperature, limits.max_temperature),
        max_top_k=min(ENGINE.max_top_k, limits.max_top_k),
        max_new_tokens=min(ENGINE.max_new_tokens, limits.max_new_tokens),
    )


class SettingsError(ValueError):
    """Every mistake in one set of settings: ``errors`` maps a field to its one error (a
    ``ValueError``; ``str()`` of it is the English message)."""

    def __init__(self, errors: Mapping[str, Any]):
        self.errors = dict(errors)
        super().__init__("; ".join(str(m) for m in self.errors.values()))


# --------------------------------------------------------------------------- one rule each


def _finite(value) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def temperature(value, max_temperature: float) -> float:
    """0 (greedy) or a finite number in [MIN_TEMPERATURE, max_temperature]."""
    if not _finite(value):
        raise Invalid("temperature_finite", value=repr(value))
    value = float(value)
    if value == 0.0:
        return 0.0
    if not MIN_TEMPERATURE <= value <= max_temperature:
        raise Invalid("temperature_range", lo=MIN_TEMPERATURE, hi=max_temperature, value=f"{value:g}")
    return value


def top_p(value) -> float:
    """A nucleus mass in (0, 1] (1 = off)."""
    if not _finite(value):
        raise Invalid("top_p_finite", value=repr(value))
    if not 0.0 < value <= 1.0:
        raise Invalid("top_p_range", value=value)
    return float(value)


def seed(value) -> int:
    """A whole number the random generator takes: 0 <= seed < 2**63."""
    value = whole_number("seed", value, -MAX_SEED - 1, MAX_SEED)
    if value < 0:
        raise Invalid("seed_negative", value=value)
    return value


def one_of(name: str, value, choices) -> str:
    """One of ``choices`` (names), quoting at most an excerpt of anything else."""
    if isinstance(value, str) and value in choices:
        return value
    raise Invalid("one_of", name=name, choices=", ".join(choices), value=_got(value))


def _got(value) -> str:
    """What a choice's message quotes: an excerpt of text, else only its type."""
    return repr(excerpt(value)) if isinstance(value, str) else type(value).__name__


def verification(rule) -> str:
    """A rule the Playground and ``/speculate`` offer (``playground.rules.APP_RULES``)."""
    if isinstance(rule, str) and rule in APP_RULES:
        return rule
    raise Invalid("verification", choices=", ".join(APP_RULES), value=_got(rule))


def tree_rule(rule: str, tree_nodes: int) -> str:
    """A tree of drafts is verified with token verification only (``playground.decoding.tree``):
    every other rule judges chains only (block verification judges a chain jointly)."""
    if tree_nodes > 1 and RULES[rule].chains_only:
        if RULES[rule].judges_jointly:
            raise Invalid("block_tree")
        raise Invalid("tree_rule", rule=repr(rule))
    return rule


def draft_stop(value) -> float:
    """An early-stop threshold for drafters (``playground.decoding.draft_stop``): a number in [0, 1), 0 = off."""
    if not _finite(value):
        raise Invalid("draft_stop", value=repr(excerpt(value)))
    if not 0.0 <= value < 1.0:
        raise Invalid("draft_stop", value=f"{value:g}")
    return float(value)


def flag(name: str, value) -> bool:
    if not isinstance(value, bool):
        raise Invalid("bool", name=name, value=type(value).__name__)
    return value


def prompt(value, max_chars: int) -> str:
    """A prompt: text, not blank, at most ``max_chars`` characters."""
    if not isinstance(value, str):
        raise Invalid("prompt_text")
    if not value.strip():
        raise Invalid("prompt_empty")
    if len(value) > max_chars:
        raise Invalid("prompt_long", n=len(value), limit=max_chars)
    return value


def number(name: str, value, lo: float, hi: float) -> float:
    """A finite number (not a bool) in [lo, hi], as a float."""
    if not _finite(value):
        raise Invalid("number", name=name, value=repr(value))
    if not lo <= value <= hi:
        raise Invalid("between", name=name, lo=lo, hi=hi, value=value)
    return float(value)


def whole_number(name: str, value, lo: int, hi: int) -> int:
    """An int (or a float with no fraction, e.g. from a slider) in [lo, hi], as an int."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise Invalid("whole", name=name, value=repr(value))
    if not lo <= value <= hi:
        raise Invalid("between", name=name, lo=lo, hi=hi, value=value)
    return value


# --------------------------------------------------------------------------- text from others
# Values typed into a shared link or a config file arrive as text someone else chose.  The
# messages about them quote at most a short excerpt (a link's message is shown to whoever
# opens it: no room for a convincing "sign in" text).

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_INVISIBLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]")
EXCERPT_CHARS = 24


def excerpt(raw, limit: int = EXCERPT_CHARS) -> str:
    """A short, single-line piece of a value someone else chose, for a message about it.

    Messages about a shared link are shown to whoever opens it, so they never repeat more
    than ``limit`` characters of what the link said (no room for a convincing "sign in"
    text), with control, line-break and bidirectional-override characters removed.  It is
    still untrusted text: renderers escape it like any other (``visual.lab``)."""
    s = _INVISIBLE.sub("", str(raw))
    return s if len(s) <= limit else s[: limit - 1] + "…"


def parse_whole_number(name: str, raw, lo: int, hi: int) -> int:
    """An int, or text of at most 19 digits (an optional ``+``), in [lo, hi]."""
    if isinstance(raw, bool):
        raise Invalid("whole_plain", name=name)
    if isinstance(raw, int):
        v = raw
    else:
        s = str(raw).strip()
        if not re.fullmatch(r"[+]?\d{1,19}", s):
            raise Invalid("whole", name=name, value=repr(excerpt(s)))
        v = int(s)
    if not lo <= v <= hi:
        raise Invalid("between", name=name, lo=lo, hi=hi, value=v)
    return v


def parse_number(name: str, raw, lo: float, hi: float) -> float:
    """An int or float, or text like ``0.7`` (at most 6 digits each side), finite and in [lo, hi]."""
    if isinstance(raw, bool):
        raise Invalid("number_plain", name=name)
    if isinstance(raw, (int, float)):
        v = float(raw)
    else:
        s = str(raw).strip()
        if not re.fullmatch(r"[+-]?(\d{1,6}(\.\d{0,6})?|\.\d{1,6})", s):
            raise Invalid("number_like", name=name, value=repr(excerpt(s)))
        v = float(s)
    if not math.isfinite(v) or not lo <= v <= hi:
        raise Invalid("between", name=name, lo=lo, hi=hi, value=v)
    return v


def clean_prompt(raw, max_chars: int) -> str:
    """A prompt from a link or a config file: control characters removed (CRLF -> LF), then ``prompt``."""
    if not isinstance(raw, str):
        return prompt(raw, max_chars)
    return prompt(_CONTROL.sub("", raw.replace("\r\n", "\n")), max_chars)
