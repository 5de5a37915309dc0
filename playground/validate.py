"""Checks of user-supplied settings shared by the API, the app, the lab, the bench and the CLI.

Each check returns the cleaned value or raises ``ValueError`` with one message per
mistake, worded the same wherever the value came from.  This module does not know
where the value came from (form, URL, endpoint, command line) and loads nothing.
"""

from __future__ import annotations

import math

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
