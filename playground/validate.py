"""Checks of user-supplied settings shared by the API, the app, the lab, the bench and the CLI.

Each check returns the cleaned value or raises ``ValueError`` with one message per
mistake, worded the same wherever the value came from.  This module does not know
where the value came from (form, URL, endpoint, command line) and loads nothing.
Text from a shared link or a config file is parsed here too (``parse_*``,
``clean_prompt``), and ``excerpt`` is how a message quotes a value someone else chose.
"""

from __future__ import annotations

import math
import re

# Below this, logits / T overflows float32 (a logit gap of 1 at T = 1e-40 is e^(1e40)),
# and the softmax becomes inf / nan.  Anything this cold is greedy in all but name: use 0.
MIN_TEMPERATURE = 0.01


def temperature(value, max_temperature: float) -> float:
    """0 (greedy) or a finite number in [MIN_TEMPERATURE, max_temperature]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"temperature must be a finite number, got {value!r}")
    value = float(value)
    if value == 0.0:
        return 0.0
    if not MIN_TEMPERATURE <= value <= max_temperature:
        raise ValueError(
            f"temperature must be 0 (greedy) or between {MIN_TEMPERATURE} and {max_temperature}, got {value:g}"
        )
    return value


# The verification rules a visitor can choose (engine names; ``playground.decoding.engine.RULES`` has
# every rule, the lab's wrong ones included).  Block verification judges a chain of drafts.
VERIFICATION_RULES = ("lossless", "block")


def verification(rule, tree_nodes: int = 1) -> str:
    """A rule of ``VERIFICATION_RULES`` that suits the draft shape: block verification needs a chain."""
    if rule not in VERIFICATION_RULES:
        raise ValueError(
            f"verification must be one of {', '.join(VERIFICATION_RULES)}, got {excerpt(rule)!r}"
            if isinstance(rule, str)
            else f"verification must be one of {', '.join(VERIFICATION_RULES)}, got {type(rule).__name__}"
        )
    if rule == "block" and tree_nodes != 1:
        raise ValueError(
            "block verification judges a chain of drafts, not a tree: set the draft tree nodes to 1, "
            "or choose token verification"
        )
    return rule


def draft_stop(value) -> float:
    """An early-stop threshold for drafters (``playground.decoding.draft_stop``): a number in [0, 1), 0 = off."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"draft_stop must be a number in [0, 1) (0 = off), got {excerpt(value)!r}")
    if not 0.0 <= value < 1.0:
        raise ValueError(f"draft_stop must be a number in [0, 1) (0 = off), got {value:g}")
    return float(value)


def number(name: str, value, lo: float, hi: float) -> float:
    """A finite number (not a bool) in [lo, hi], as a float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a number, got {value!r}")
    if not lo <= value <= hi:
        raise ValueError(f"{name} must be between {lo} and {hi}, got {value}")
    return float(value)


def whole_number(name: str, value, lo: int, hi: int) -> int:
    """An int (or a float with no fraction, e.g. from a slider) in [lo, hi], as an int."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    if not lo <= value <= hi:
        raise ValueError(f"{name} must be between {lo} and {hi}, got {value}")
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
        raise ValueError(f"{name} must be a whole number")
    if isinstance(raw, int):
        v = raw
    else:
        s = str(raw).strip()
        if not re.fullmatch(r"[+]?\d{1,19}", s):
            raise ValueError(f"{name} must be a whole number, got {excerpt(s)!r}")
        v = int(s)
    if not lo <= v <= hi:
        raise ValueError(f"{name} must be between {lo} and {hi}, got {v}")
    return v


def parse_number(name: str, raw, lo: float, hi: float) -> float:
    """An int or float, or text like ``0.7`` (at most 6 digits each side), finite and in [lo, hi]."""
    if isinstance(raw, bool):
        raise ValueError(f"{name} must be a number")
    if isinstance(raw, (int, float)):
        v = float(raw)
    else:
        s = str(raw).strip()
        if not re.fullmatch(r"[+-]?(\d{1,6}(\.\d{0,6})?|\.\d{1,6})", s):
            raise ValueError(f"{name} must be a number like 0.7, got {excerpt(s)!r}")
        v = float(s)
    if not math.isfinite(v) or not lo <= v <= hi:
        raise ValueError(f"{name} must be between {lo} and {hi}, got {v}")
    return v


def clean_prompt(raw, max_chars: int) -> str:
    """A prompt from a link or a config file: text, control characters removed (CRLF -> LF), not blank."""
    if not isinstance(raw, str):
        raise ValueError("prompt must be text")
    s = _CONTROL.sub("", raw.replace("\r\n", "\n"))
    if not s.strip():
        raise ValueError("prompt is empty")
    if len(s) > max_chars:
        raise ValueError(f"prompt is too long: {len(s)} characters (limit {max_chars})")
    return s
