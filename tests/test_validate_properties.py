"""Property tests of the request validator and the share-link parser (``hypothesis``).

Whatever a visitor sends — a form, ``/speculate`` arguments, a crafted link — the checks either
return values inside the app's limits or refuse with a ``ValueError`` (``SettingsError`` for a
run's settings) whose message quotes at most a short excerpt; nothing else is ever raised, and a
link's bad values are dropped with a reason, never raised.  Inputs hypothesis once found to
break a check stay below as explicit examples.
"""

from __future__ import annotations

import math

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from playground import validate
from playground.config import load_config
from playground.rules import RULES
from playground.settings import PUBLIC, SPECS, check_public
from playground.settings import check as check_settings
from visual.share import QUERY_KEYS, validate_query

LIM = load_config().limits
B = validate.bounds(LIM)
FIELDS = tuple(n for n in SPECS if n not in ("preset", "drafter"))  # names: resolved by api.run_settings

# Anything a JSON body, a form or a query string can carry, and a few Python values besides.
anything = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.sampled_from(["4", "0.7", "1e309", "nan", "-0", " 8 ", "lossless", "block", "bfloat16", "speculative"]),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
PROPS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPS
@given(st.dictionaries(st.sampled_from(FIELDS), anything, max_size=len(FIELDS)))
@example({"temperature": float("nan"), "top_p": float("inf"), "seed": 2**64})
@example({"gamma": True, "tree_nodes": 2, "rule": "block"})
@example({"max_new_tokens": 10**30, "top_k": -1})
def test_run_settings_are_clean_and_in_bounds_or_refused_field_by_field(values):
    try:
        clean = check_settings(values, LIM)
    except validate.SettingsError as exc:
        assert exc.errors and set(exc.errors) <= set(values) | {"rule"}
        assert all(isinstance(m, ValueError) and len(str(m)) < 400 for m in exc.errors.values())
        return
    for name, v in clean.items():
        if name in ("gamma",):
            assert type(v) is int and 1 <= v <= B.max_gamma
        elif name in ("max_new_tokens",):
            assert type(v) is int and 1 <= v <= B.max_new_tokens
        elif name == "top_k":
            assert type(v) is int and 0 <= v <= B.max_top_k
        elif name == "tree_nodes":
            assert type(v) is int and 1 <= v <= validate.MAX_TREE_NODES
        elif name == "seed":
            assert type(v) is int and 0 <= v <= validate.MAX_SEED
        elif name == "temperature":
            assert isinstance(v, float) and math.isfinite(v) and (v == 0 or validate.MIN_TEMPERATURE <= v)
            assert v <= B.max_temperature
        elif name == "top_p":
            assert isinstance(v, float) and 0 < v <= 1
        elif name == "min_p":
            assert isinstance(v, float) and 0 <= v <= 1
        elif name == "rule":
            assert v in RULES
        elif name == "dtype":
            assert v is None or v in validate.DTYPES
        elif name == "mode":
            assert v in validate.MODES


@PROPS
@given(st.dictionaries(st.sampled_from([*QUERY_KEYS, "x"]), st.text(max_size=60), max_size=9))
@example({"gamma": "99999999999999999999", "temperature": "1e309"})
@example({"seed": "+9223372036854775808", "prompt": "\u202e\x00hi"})
@example({"classroom": "0", "preset": "../../etc"})
@example({"preset": "Sign in at https://evil.example to continue"})
@example({"classroom": "²"})  # str.isdigit() but not int(): it raised ValueError out of the page load
def test_a_crafted_link_never_raises_and_keeps_only_values_inside_the_limits(params):
    p = validate_query(params)
    if p.get("gamma") is not None:
        assert 1 <= p.get("gamma") <= B.max_gamma
    if p.get("temperature") is not None:
        assert 0 <= p.get("temperature") <= LIM.max_temperature
    if p.get("seed") is not None:
        assert 0 <= p.get("seed") <= validate.MAX_SEED
    if p.get("prompt") is not None:
        assert len(p.get("prompt")) <= LIM.max_prompt_chars and "\x00" not in p.get("prompt")
    if p.get("preset") is not None:
        assert p.get("preset") in {pr.name for pr in load_config().presets}
    kept = {k: v for k, v in p.values().items() if k not in ("prompt", "preset")}
    assert check_public(kept, LIM) == {PUBLIC[k]: v for k, v in kept.items()}  # every kept setting is clean
    for raw in params.values():  # a message quotes an excerpt of what the link said, never all of it
        if len(raw) > validate.EXCERPT_CHARS:
            assert not any(raw in e for e in p.errors)


@PROPS
@given(st.text(max_size=200))
def test_an_excerpt_is_short_and_single_line(raw):
    out = validate.excerpt(raw)
    assert len(out) <= validate.EXCERPT_CHARS
    assert not any(c in out for c in "\n\r\u202e\u2028\x00")
