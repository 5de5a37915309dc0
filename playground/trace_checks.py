"""A parsed trace's checks: strict JSON, its shape, every field's type and every value.

``playground.trace_io`` parses a file into a ``GenerationResult`` and calls these: the JSON
hooks (no NaN/Infinity, no duplicate keys), ``check_shape`` (the lists and objects a trace
holds, before its records are built), ``check_record`` (every field of a record against its
annotation) and ``check_values`` (ranges, probabilities in [0, 1], steps that add up, the
run's settings against ``RunSettings``' schema).  Every refusal is a ``TraceImportError``
naming the step and field.  This module does not read files or bound what parsing builds
(``playground.trace_prescan``).
"""

from __future__ import annotations

import math
import re
import sys
import typing
from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import Any

from playground.decoding.records import Candidate, Correction, DraftDecision, GenerationResult, RunStats, StepRecord
from playground.settings import DEFAULTS, SPECS
from playground.trace_limits import (
    MAX_STRING_CHARS,
    MAX_TRACE_STEPS,
    MAX_TRACE_TOKENS,
    TraceImportError,
)
from playground.validate import MAX_GAMMA, MAX_TREE_NODES, MODES, excerpt


def reject_constant(name: str):
    raise TraceImportError(f"the file contains {name}, which is not valid JSON (numbers must be finite)")


def no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise TraceImportError(f"the file repeats the key {excerpt(k)!r} inside one object")
        out[k] = v
    return out


def _type_ok(value: Any, hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if hint is Any:
        return True
    if hint is type(None):
        return value is None
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", ())):
        return any(_type_ok(value, h) for h in typing.get_args(hint))
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:  # NaN allowed (exports write it as null); infinities, and ints no float can hold, are not
        if isinstance(value, float):
            return not math.isinf(value)
        return isinstance(value, int) and not isinstance(value, bool) and abs(value) <= sys.float_info.max
    if hint is str:
        return isinstance(value, str) and len(value) <= MAX_STRING_CHARS
    if origin is tuple:
        args = typing.get_args(hint)
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_type_ok(v, args[0]) for v in value)
        return len(args) == len(value) and all(_type_ok(v, a) for v, a in zip(value, args))
    if origin is dict:
        return isinstance(value, dict) and all(isinstance(k, str) for k in value)
    if isinstance(hint, type) and hasattr(hint, "__dataclass_fields__"):
        return isinstance(value, hint)
    return False


# Resolved once at import: typing.get_type_hints evaluates the (string) annotations of our own
# records, so doing it here keeps the import path free of any evaluation.
HINTS = {cls: typing.get_type_hints(cls) for cls in (Candidate, DraftDecision, Correction, StepRecord, RunStats)}


# A JSON escape such as \ud800 alone gives a str that is not Unicode text: no page, export or
# UTF-8 file can hold it, so a trace holding one could be imported but never shown.
_SURROGATE = re.compile("[\ud800-\udfff]")


def is_unicode(s: str) -> bool:
    return s.isascii() or _SURROGATE.search(s) is None


def check_record(obj: Any, where: str) -> None:
    hints = HINTS[type(obj)]
    for f in fields(obj):
        v = getattr(obj, f.name)
        if isinstance(v, str) and not is_unicode(v):
            raise TraceImportError(f"{where}: field {f.name!r} holds a lone surrogate (\\ud800), not text")
        if not _type_ok(v, hints[f.name]):
            shown = type(v).__name__
            raise TraceImportError(f"{where}: field {f.name!r} has the wrong type ({shown})")
        if hasattr(v, "__dataclass_fields__"):
            check_record(v, f"{where}.{f.name}")
        elif isinstance(v, tuple):
            for i, x in enumerate(v):
                if hasattr(x, "__dataclass_fields__"):
                    check_record(x, f"{where}.{f.name}[{i}]")


def _prob(x: float | None) -> bool:
    return x is None or (-1e-6 <= x <= 1 + 1e-6)


MAX_TOKEN_ID = 2**31 - 1  # no vocabulary comes near; a bigger "token id" is not one
MAX_COUNT = 2**31 - 1  # counts, lengths, cache sizes
MAX_MS = 1e9  # 11.6 days: any timing beyond is not a measurement


def _in_range(x: float | None, lo: float, hi: float, nan_ok: bool = False) -> bool:
    if x is None:
        return True
    if x != x:
        return nan_ok
    return lo <= x <= hi


def _need(ok: bool, where: str, field: str, what: str, value: Any) -> None:
    if not ok:
        shown = (
            excerpt(value)
            if isinstance(value, str)
            else (f"{value:.4g}" if isinstance(value, float) else excerpt(repr(value)))
        )
        raise TraceImportError(f"{where}: field {field!r} {what}, got {shown}")


def _list_of_objects(obj: Mapping[str, Any], key: str, where: str, required: bool = False) -> list:
    if key not in obj or (obj[key] is None and not required):
        if required:
            raise TraceImportError(f"{where}: field {key!r} is missing")
        return []
    v = obj[key]
    if not isinstance(v, list) or not all(isinstance(x, dict) for x in v):
        raise TraceImportError(f"{where}: field {key!r} must be a list of objects, got {type(v).__name__}")
    return v


def check_shape(obj: Mapping[str, Any]) -> None:
    """The JSON's nesting, checked before any record is built, so every refusal names its field.

    (``from_dict`` would also fail on a string where a list of drafts belongs, but with
    Python's own words: "'str' object is not a mapping".)"""
    for i, step in enumerate(obj["steps"]):
        w = f"step {i + 1}"
        if not isinstance(step, dict):
            raise TraceImportError(f"{w} must be an object, got {type(step).__name__}")
        for j, d in enumerate(_list_of_objects(step, "drafted", w)):
            for key in ("target_top", "draft_top", "residual_top"):
                _list_of_objects(d, key, f"{w}, draft {j + 1}")
        corr = step.get("correction")
        if corr is not None:
            if not isinstance(corr, dict):
                raise TraceImportError(f"{w}: field 'correction' must be an object or null, got {type(corr).__name__}")
            for key in ("distribution_top", "target_top", "draft_top"):
                _list_of_objects(corr, key, f"{w}, correction")
        if "emitted_ids" in step and not isinstance(step["emitted_ids"], list):
            raise TraceImportError(f"{w}: field 'emitted_ids' must be a list of integers")
        if "drafter_info" in step and not isinstance(step["drafter_info"], dict):
            raise TraceImportError(f"{w}: field 'drafter_info' must be an object")
    if not isinstance(obj["stats"], dict):
        raise TraceImportError(f"field 'stats' must be an object, got {type(obj['stats']).__name__}")


def _check_tokens(ids: Sequence[int], where: str, field: str) -> None:
    bad = next((t for t in ids if not 0 <= t <= MAX_TOKEN_ID), None)
    _need(bad is None, where, field, f"must hold token ids between 0 and {MAX_TOKEN_ID:,}", bad)


def _check_candidates(cands: Sequence[Candidate], where: str, field: str) -> None:
    for k, c in enumerate(cands):
        w = f"{where}, {field}[{k}]"
        _need(0 <= c.token_id <= MAX_TOKEN_ID, w, "token_id", f"must be between 0 and {MAX_TOKEN_ID:,}", c.token_id)
        _need(_prob(c.prob), w, "prob", "is a probability outside [0, 1]", c.prob)


# RunStats fields by what they hold (anything not listed is text or a tuple checked below).
_STATS_COUNTS = (
    "new_tokens",
    "steps",
    "target_calls",
    "drafter_calls",
    "drafted_tokens",
    "judged_tokens",
    "accepted_tokens",
)
_STATS_RATES = ("acceptance_rate", "draft_efficiency")
_STATS_MS = (
    "prefill_ms",
    "draft_ms",
    "verify_ms",
    "wall_ms",
    "draft_ms_per_token",
    "verify_ms_per_call",
    "single_token_ms",
)
# config keys the app reads (RunSettings' fields), and the types each may have when present, from
# RunSettings' schema; null preset / dtype / draft_stop: a run on models given to the engine directly
_KIND_TYPES: dict[type, tuple[type, ...]] = {int: (int,), float: (int, float), bool: (bool,), str: (str,)}
_CONFIG_TYPES: dict[str, tuple[type, ...]] = {
    name: _KIND_TYPES[spec.kind] + ((type(None),) if DEFAULTS[name] is None else ()) for name, spec in SPECS.items()
}


# drafter_info keys the drafters write (playground/drafters) and the replay reads: their types.
_INFO_COUNTS = (
    "hidden_from_position",
    "position_id",
    "target_kv_positions",
    "sliding_kv_positions",
    "candidates_scored",
    "context_candidates",
    "clusters_scored",
    "num_clusters",
    "vocab_size",
    "draft_steps",
    "target_layers",
    "tree_nodes",
    "branches",
)


def _check_drafter_info(info: Mapping[str, Any], where: str) -> None:
    w = f"{where}, drafter_info"
    for key in _INFO_COUNTS:
        v = info.get(key)
        _need(v is None or (type(v) is int and 0 <= v <= MAX_COUNT), w, key, "must be a whole number >= 0 or null", v)
    v = info.get("target_kv_layer")
    _need(
        v is None or (type(v) is int and abs(v) <= MAX_COUNT), w, "target_kv_layer", "must be a whole number or null", v
    )
    v = info.get("draft_ms_per_token")
    _need(
        v is None or (isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= MAX_MS),
        w,
        "draft_ms_per_token",
        "must be a time in ms >= 0 or null",
        v,
    )
    for key, typ in (("source", str), ("matched", bool), ("shared_cache", bool), ("reused", str), ("exit", str)):
        _need(key not in info or isinstance(info[key], typ), w, key, f"must be {typ.__name__}", info.get(key))


def _check_stats(st: RunStats) -> None:
    w = "stats"
    _need(st.mode in MODES, w, "mode", f"must be one of {', '.join(MODES)}", st.mode)
    _need(0 <= st.gamma <= MAX_GAMMA, w, "gamma", f"must be between 0 and {MAX_GAMMA}", st.gamma)
    for name in _STATS_COUNTS:
        v = getattr(st, name)
        _need(0 <= v <= MAX_COUNT, w, name, "must be a count >= 0", v)
    for name in _STATS_RATES:
        v = getattr(st, name)
        _need(_in_range(v, 0.0, 1.0, nan_ok=True), w, name, "must be a fraction in [0, 1]", v)
    for name in _STATS_MS:
        v = getattr(st, name)
        _need(_in_range(v, 0.0, MAX_MS, nan_ok=True), w, name, "must be a time in ms >= 0", v)
    _need(_in_range(st.tokens_per_s, 0.0, 1e9, nan_ok=True), w, "tokens_per_s", "must be >= 0", st.tokens_per_s)
    _need(
        _in_range(st.tokens_per_target_call, 0.0, MAX_GAMMA + 1.0, nan_ok=True),
        w,
        "tokens_per_target_call",
        f"must be between 0 and {MAX_GAMMA + 1}",
        st.tokens_per_target_call,
    )
    _need(
        _in_range(st.mean_accepted_length, 0.0, float(MAX_GAMMA), nan_ok=True),
        w,
        "mean_accepted_length",
        f"must be between 0 and {MAX_GAMMA}",
        st.mean_accepted_length,
    )
    _need(
        len(st.acceptance_by_position) <= MAX_GAMMA,
        w,
        "acceptance_by_position",
        f"must have at most {MAX_GAMMA} entries",
        len(st.acceptance_by_position),
    )
    bad = next((x for x in st.acceptance_by_position if not _in_range(x, 0.0, 1.0, nan_ok=True)), None)
    _need(bad is None, w, "acceptance_by_position", "must hold fractions in [0, 1]", bad)
    _need(
        len(st.accepted_length_hist) <= MAX_GAMMA + 1,
        w,
        "accepted_length_hist",
        f"must have at most {MAX_GAMMA + 1} entries",
        len(st.accepted_length_hist),
    )
    bad = next((x for x in st.accepted_length_hist if not 0 <= x <= MAX_COUNT), None)
    _need(bad is None, w, "accepted_length_hist", "must hold counts >= 0", bad)


def check_values(res: GenerationResult) -> None:
    """Value ranges and consistency: everything the replay and the theory bench compute with.

    Types are already right (``check_record``); here a negative position, a gamma of 10^30 or
    a probability of 7 is refused, naming the step and field."""
    if len(res.steps) > MAX_TRACE_STEPS:
        raise TraceImportError(f"the trace has {len(res.steps):,} steps; the limit is {MAX_TRACE_STEPS:,}")
    if len(res.token_ids) > MAX_TRACE_TOKENS or len(res.prompt_ids) > MAX_TRACE_TOKENS:
        raise TraceImportError("the trace has too many tokens")
    _check_tokens(res.token_ids, "trace", "token_ids")
    _check_tokens(res.prompt_ids, "trace", "prompt_ids")
    _check_stats(res.stats)
    emitted: list[int] = []
    for i, s in enumerate(res.steps):
        _check_step(s, i)
        emitted.extend(s.emitted_ids)
    if tuple(emitted) != res.token_ids:
        raise TraceImportError("the steps' emitted tokens do not add up to token_ids: the trace is inconsistent")
    if res.stats.steps != len(res.steps) or res.stats.new_tokens != len(res.token_ids):
        raise TraceImportError("stats do not match the steps (steps or new_tokens differ)")
    _check_config(res.config)


def _check_step(s: StepRecord, i: int) -> None:
    """One step's values: its index, mode and γ, its drafts, its correction, its times and counts."""
    w = f"step {i + 1}"
    if s.index != i:
        raise TraceImportError(f"{w}: index is {excerpt(s.index)}, expected {i}")
    if s.mode not in MODES:
        raise TraceImportError(f"{w}: mode must be one of {', '.join(MODES)}")
    _need(0 <= s.gamma <= MAX_GAMMA, w, "gamma", f"must be between 0 and {MAX_GAMMA}", s.gamma)
    tree = any(d.parent is not None for d in s.drafted)
    cap = MAX_TREE_NODES if tree else MAX_GAMMA
    _need(len(s.drafted) <= cap, w, "drafted", f"must hold at most {cap} drafts", len(s.drafted))
    if not 0 <= s.n_accepted <= len(s.drafted):
        raise TraceImportError(f"{w}: n_accepted = {excerpt(s.n_accepted)} but {len(s.drafted)} drafts")
    depth = _check_drafts(s.drafted, w, tree)
    if s.correction is not None:
        last = (max(depth) if depth else 0) if tree else len(s.drafted)
        _check_correction(s.correction, f"{w}, correction", last)
    for name in ("draft_ms", "verify_ms", "step_ms", "elapsed_ms"):
        v = getattr(s, name)
        if v < 0:
            raise TraceImportError(f"{w}: {name} is negative")
        _need(v <= MAX_MS, w, name, "is not a plausible time in ms", v)
    for name in ("committed_tokens", "target_cache_len", "drafter_cache_len"):
        v = getattr(s, name)
        _need(v is None or 0 <= v <= MAX_COUNT, w, name, "must be a count >= 0", v)
    _need(
        type(s.shared_rows) is int and 1 <= s.shared_rows <= MAX_COUNT,
        w,
        "shared_rows",
        "must be a count >= 1",
        s.shared_rows,
    )
    _check_tokens(s.emitted_ids, w, "emitted_ids")
    _check_jsonish(s.drafter_info, f"{w}: drafter_info")
    _check_drafter_info(s.drafter_info, w)


def _check_drafts(drafted: Sequence[DraftDecision], w: str, tree: bool) -> list[int]:
    """Each draft's position (its depth in a tree), probabilities, token and top lists.

    Returns the drafts' depths in a tree ([] for a chain): the correction's position is checked against them."""
    depth: list[int] = []
    for j, d in enumerate(drafted):
        wd = f"{w}, draft {j + 1}"
        if tree:  # a draft tree: every draft names its parent (-1: the newest committed token)
            _need(
                d.parent is not None and -1 <= d.parent < j,
                wd,
                "parent",
                f"must be between -1 and {j - 1} (an earlier draft)",
                d.parent,
            )
            depth.append(1 if d.parent == -1 else depth[d.parent] + 1)
            _need(d.position == depth[j], wd, "position", f"must be {depth[j]} (the draft's depth)", d.position)
        else:
            _need(d.position == j + 1, wd, "position", f"must be {j + 1} (drafts are numbered from 1)", d.position)
        if not all(
            _prob(x) for x in (d.draft_prob, d.target_prob, d.accept_prob, d.u, d.weight, d.target_conf, d.draft_conf)
        ):
            raise TraceImportError(f"{wd}: a probability is outside [0, 1]")
        _need(0 <= d.token_id <= MAX_TOKEN_ID, wd, "token_id", f"must be between 0 and {MAX_TOKEN_ID:,}", d.token_id)
        _need(_in_range(d.ratio, 0.0, math.inf), wd, "ratio", "must be >= 0 (p/q) or null", d.ratio)
        _check_candidates(d.target_top, wd, "target_top")
        _check_candidates(d.draft_top, wd, "draft_top")
        _check_candidates(d.residual_top, wd, "residual_top")
    return depth


def _check_correction(c: Correction, wc: str, last: int) -> None:
    """A step's correction: its kind, a position at most one past the deepest draft, its token and probabilities."""
    if c.kind not in ("resample", "bonus", "target"):
        raise TraceImportError(f"{wc}: kind {excerpt(c.kind)!r} is unknown (resample, bonus or target)")
    _need(1 <= c.position <= last + 1, wc, "position", f"must be between 1 and {last + 1}", c.position)
    _need(0 <= c.token_id <= MAX_TOKEN_ID, wc, "token_id", f"must be between 0 and {MAX_TOKEN_ID:,}", c.token_id)
    if not (_prob(c.prob) and _prob(c.target_prob) and _prob(c.target_conf)):
        raise TraceImportError(f"{wc}: a probability is outside [0, 1]")
    for name in ("distribution_top", "target_top", "draft_top"):
        _check_candidates(getattr(c, name), wc, name)


def _check_config(config: dict[str, Any]) -> None:
    """The run's config: JSON-like, and the known keys of the types the app reads them as."""
    _check_jsonish(config, "config")
    for key, types in _CONFIG_TYPES.items():
        if key in config:
            v = config[key]
            ok = isinstance(v, types) and not (isinstance(v, bool) and bool not in types)
            if ok and isinstance(v, float):
                ok = math.isfinite(v)
            if ok and isinstance(v, int) and not isinstance(v, bool):
                ok = abs(v) <= 2**63
            _need(
                ok, "config", key, f"must be {' or '.join('null' if t is type(None) else t.__name__ for t in types)}", v
            )


def _check_jsonish(obj: Any, where: str) -> None:
    stack = [obj]
    while stack:
        o = stack.pop()
        if isinstance(o, dict):
            if not all(isinstance(k, str) and is_unicode(k) for k in o):
                raise TraceImportError(f"{where} has a key that is not text")
            stack.extend(o.values())
        elif isinstance(o, (list, tuple)):
            stack.extend(o)
        elif isinstance(o, str):
            if len(o) > MAX_STRING_CHARS:
                raise TraceImportError(f"{where} has an overlong text")
            if not is_unicode(o):
                raise TraceImportError(f"{where} holds a lone surrogate (\\ud800), not text")
        elif o is None or isinstance(o, (bool, int)):
            pass
        elif isinstance(o, float):
            if not math.isfinite(o):
                raise TraceImportError(f"{where} has a non-finite number")
        else:
            raise TraceImportError(f"{where} has a value of type {type(o).__name__}")
