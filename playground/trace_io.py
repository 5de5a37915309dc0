"""Traces as files: ``trace_to_json`` writes a ``GenerationResult``; ``parse_trace`` reads one back, validated.

A trace file comes from anyone, so ``parse_trace`` / ``load_trace_file`` check in order:
the size, UTF-8, then, on the raw bytes before any Python object is made from them, what
parsing would build (``_prescan``: objects, lists and values per byte, nesting, keys per
object, key names, the longest string, and the memory all of it takes, bounded by
``PARSE_BYTES_PER_BYTE`` times the size limit); then strict JSON (no NaN/Infinity, no
duplicate keys), the shape, every field's type (``GenerationResult.from_dict`` plus a type
check against the records' annotations) and the values (ranges, probabilities in [0, 1],
steps that add up).  Every refusal is a ``TraceImportError`` whose message names the step
and field and quotes at most a short excerpt of the file.  At most ``PARALLEL_PARSES``
files are read and parsed at once in a process; the others wait.  Nothing in a file is ever
executed: no ``eval``, no pickle.

This module does not define the records (``playground.decoding.records``) or show a trace
(``visual.replay``, ``visual.lab``), and does not stream: a file of up to the size limit is
read whole (uploads over their own limit are refused unread by the lab).
"""

from __future__ import annotations

import codecs
import json
import math
import os
import re
import sys
import threading
import typing
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import fields
from typing import Any

import numpy as np

from playground.config import load_config
from playground.decoding.records import Candidate, Correction, DraftDecision, GenerationResult, RunStats, StepRecord
from playground.settings import DEFAULTS, SPECS
from playground.validate import MAX_GAMMA, MAX_TREE_NODES, MODES, excerpt


class TraceImportError(ValueError):
    """A trace file was rejected; the message is meant for the user."""


MAX_TRACE_STEPS = 10_000
MAX_TRACE_TOKENS = 100_000
MAX_STRING_CHARS = 100_000
MAX_JSON_DEPTH = 16


def size_text(n: int) -> str:
    return f"{n / 1_000_000:.1f} MB" if n >= 100_000 else f"{n:,} bytes"


def _reject_constant(name: str):
    raise TraceImportError(f"the file contains {name}, which is not valid JSON (numbers must be finite)")


def _no_duplicates(pairs):
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
_HINTS = {cls: typing.get_type_hints(cls) for cls in (Candidate, DraftDecision, Correction, StepRecord, RunStats)}


# A JSON escape such as \ud800 alone gives a str that is not Unicode text: no page, export or
# UTF-8 file can hold it, so a trace holding one could be imported but never shown.
_SURROGATE = re.compile("[\ud800-\udfff]")


def _unicode(s: str) -> bool:
    return s.isascii() or _SURROGATE.search(s) is None


def _check_record(obj: Any, where: str) -> None:
    hints = _HINTS[type(obj)]
    for f in fields(obj):
        v = getattr(obj, f.name)
        if isinstance(v, str) and not _unicode(v):
            raise TraceImportError(f"{where}: field {f.name!r} holds a lone surrogate (\\ud800), not text")
        if not _type_ok(v, hints[f.name]):
            shown = type(v).__name__
            raise TraceImportError(f"{where}: field {f.name!r} has the wrong type ({shown})")
        if hasattr(v, "__dataclass_fields__"):
            _check_record(v, f"{where}.{f.name}")
        elif isinstance(v, tuple):
            for i, x in enumerate(v):
                if hasattr(x, "__dataclass_fields__"):
                    _check_record(x, f"{where}.{f.name}[{i}]")


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


def _check_shape(obj: Mapping[str, Any]) -> None:
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


def _check_values(res: GenerationResult) -> None:
    """Value ranges and consistency: everything the replay and the theory bench compute with.

    Types are already right (``_check_record``); here a negative position, a gamma of 10^30 or
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
            if not all(isinstance(k, str) and _unicode(k) for k in o):
                raise TraceImportError(f"{where} has a key that is not text")
            stack.extend(o.values())
        elif isinstance(o, (list, tuple)):
            stack.extend(o)
        elif isinstance(o, str):
            if len(o) > MAX_STRING_CHARS:
                raise TraceImportError(f"{where} has an overlong text")
            if not _unicode(o):
                raise TraceImportError(f"{where} holds a lone surrogate (\\ud800), not text")
        elif o is None or isinstance(o, (bool, int)):
            pass
        elif isinstance(o, float):
            if not math.isfinite(o):
                raise TraceImportError(f"{where} has a non-finite number")
        else:
            raise TraceImportError(f"{where} has a value of type {type(o).__name__}")


# --------------------------------------------------------------------------- before parsing
#
# json.loads builds one Python object for every value in the file, and a value can take as
# little as two bytes: a 20 MB file of "[]," is 6.7 million lists, 900 MB.  So ``_prescan``
# reads the raw bytes first and refuses a file whose parse would build more than a trace's
# parse does.  JSON's own characters are ASCII, and every byte of a multi-byte UTF-8
# character is >= 0x80, so the bytes alone tell strings from structure: once escaped
# backslashes and quotes are set aside, every quote opens or closes a string.  It is all
# counted with bytes methods and numpy, a piece at a time where that would build arrays.
#
# The bounds come from the largest traces the app writes (tiny-random preset, 256 new tokens,
# γ = 16, chains and trees of 64 nodes, T = 0 and 0.3, full top lists, and the Playground's
# export with its race trace), per byte of the file without its whitespace (so that a trace
# saved without spaces is no denser):
#   objects and lists: one per 55 bytes or more   -> refused above one per BYTES_PER_CONTAINER
#   values: one per 12.8 bytes or more            -> refused above one per BYTES_PER_VALUE
#   keys in one object: 25 at most (the stats)    -> refused above MAX_OBJECT_KEYS
#   different key names: under 100                -> refused above MAX_KEY_NAMES
#   nesting: 7 levels                             -> refused above MAX_JSON_DEPTH
#   longest string: a prompt                      -> refused above MAX_STRING_CHARS characters
# Last, the memory the parse would take (the file, its text and every object it builds, each
# at its CPython size, counted from the bytes) must stay under PARSE_BYTES_PER_BYTE times the
# size limit.  A trace at the size limit takes 6.7 bytes per byte by that count (7.1 if saved
# without spaces) and less in fact; a crafted file, at most the bound: 160 MB for a 20 MB
# limit.  The scan itself takes about three times the file's size besides the file.  And only
# PARALLEL_PARSES files are read and parsed at once.

MAX_OBJECT_KEYS = 64
MAX_KEY_NAMES = 512
BYTES_PER_CONTAINER = 40
BYTES_PER_VALUE = 8
PARSE_BYTES_PER_BYTE = 8
_MAX_STRING_BYTES = 12 * MAX_STRING_CHARS + 2  # a character takes at most 12 bytes (\ud83d\ude00)
PARALLEL_PARSES = 2  # files read and parsed at once in this process; the others wait their turn
_PARSING = threading.BoundedSemaphore(PARALLEL_PARSES)

_CHUNK = 1 << 18  # bytes, or array entries, handled at once where it would build arrays
_LEADING_WS = re.compile(rb"[ \t\n\r]*")
_KEY = re.compile(rb'"([^"\x03]*)\x03[ \t\n\r]*:')  # a key, in _outside_strings' marked bytes
_ASTRAL = re.compile(rb"[\xf0-\xf4][\x80-\xbf]{3}")  # a character beyond U+FFFF, in UTF-8


def _all_but(keep: bytes) -> bytes:
    return bytes(b for b in range(256) if b not in keep)


_ASCII = bytes(range(0x80))
_NOT_CONTINUATION = _all_but(bytes(range(0x80, 0xC0)))
_NOT_ASTRAL_LEAD = _all_but(bytes(range(0xF0, 0xF5)))
_NOT_WIDE_LEAD = _all_but(bytes(range(0xC4, 0xF0)))  # the leads of U+0100 to U+FFFF
_NOT_STRUCTURE = _all_but(b"{}[]:")
_NOT_OPEN = _all_but(b"{[")
_WHITESPACE = np.zeros(256, dtype=bool)
_WHITESPACE[list(b" \t\n\r")] = True
# brackets as depth steps (+1, -1 as a byte), colons as 0
_STEPS = bytes.maketrans(b"{[}]:", b"\x01\x01\xff\xff\x00")


def _dict_bytes() -> np.ndarray:
    """CPython's size of a dict that the parser fills with k keys, and its pointer, for each k."""
    sizes, d = [], {}
    for k in range(MAX_OBJECT_KEYS + 1):
        sizes.append(sys.getsizeof(d) + 8)
        d[str(k)] = None
    return np.array(sizes, dtype=np.int64)


_DICT_BYTES = _dict_bytes()
_LIST_BYTES, _SLOT_BYTES = 56 + 8, 9  # an empty list and its pointer; one pointer in a list, grown by 1/8
_FLOAT_BYTES, _INT_BYTES = 24, 36  # a float; an int of up to 19 digits
_STR_BYTES = 76  # a str object without its characters (of the widest kind)
_KEY_NAME_BYTES = 200  # a key name the parser keeps for the whole file, with its place in its table
_FIXED_BYTES = 1_000_000  # what any parse takes besides the file's own objects


def _check_utf8(body: bytes) -> None:
    """Strict UTF-8, checked a piece at a time (decoded whole, it could take 4 bytes per byte)."""
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    view = memoryview(body)
    try:
        for i in range(0, max(len(view), 1), _CHUNK):
            decoder.decode(view[i : i + _CHUNK], final=i + _CHUNK >= len(view))
    except UnicodeDecodeError:
        raise TraceImportError("the file is not UTF-8 text: export a trace as JSON from the playground") from None


def _first_value(body: bytes) -> None:
    """A trace is an object: a file that starts with anything else is refused unparsed."""
    i = _LEADING_WS.match(body).end()
    first = body[i : i + 1]
    if first == b"{":
        return
    kinds = {b"[": "list", b'"': "str", b"t": "bool", b"f": "bool", b"n": "NoneType"}
    kind = kinds.get(first, "number" if first and first in b"-0123456789" else None)
    if kind is not None:
        raise TraceImportError(f"a trace is a JSON object; this file holds a {kind}")
    line = body.count(b"\n", 0, i) + 1
    col = i - (body.rfind(b"\n", 0, i) + 1) + 1
    raise TraceImportError(f"the file is not valid JSON (line {line}, column {col}: Expecting value)")


def _unescaped(body: bytes) -> bytearray:
    """The file with each escaped backslash and escaped quote as one control byte (not allowed
    raw in a JSON string): every quote left opens or closes a string, and key names stay apart."""
    return bytearray(body.replace(b"\\\\", b"\x01").replace(b'\\"', b"\x02"))


def _outside_strings(flat: bytearray) -> tuple[bytes, int, int, int]:
    """``_unescaped``'s bytes without the strings and whitespace (a quote is left where each
    string was), the number of strings, the bytes they take and the longest one's bytes.

    Marks each closing quote in ``flat`` as ``\\x03``, so that ``_KEY`` can only start a
    string at an opening quote."""
    a = np.frombuffer(flat, dtype=np.uint8)
    parts, kept, longest, opened_at = [], 0, 0, -1  # opened_at: where the string still open began
    for i in range(0, len(a), _CHUNK):
        c = a[i : i + _CHUNK]
        quote = c == ord('"')
        odd = (np.cumsum(quote, dtype=np.int32) + (opened_at >= 0)) & 1  # in a string, or its opening quote
        outside = odd == 0  # closing quotes stay, one for each string
        kept += int(np.count_nonzero(outside))
        parts.append(c[outside & ~_WHITESPACE[c]].tobytes())
        q = np.flatnonzero(quote) + i
        c[quote & outside] = 3
        if opened_at >= 0 and len(q):
            longest, opened_at, q = max(longest, int(q[0]) - opened_at + 1), -1, q[1:]
        starts, ends = q[0::2], q[1::2]
        if len(ends):
            longest = max(longest, int((ends - starts[: len(ends)]).max()) + 1)
        if len(starts) > len(ends):
            opened_at = int(starts[-1])
    if opened_at >= 0:
        longest = max(longest, len(a) - opened_at)
    compact = b"".join(parts)
    strings = compact.count(b'"')
    return compact, strings, len(flat) - kept + strings, longest


def _steps(compact: bytes) -> np.ndarray:
    """The brackets and colons of ``_outside_strings``' bytes as depth steps: +1, -1 and 0."""
    return np.frombuffer(compact.translate(None, _NOT_STRUCTURE).translate(_STEPS), dtype=np.int8)


def _deepest(steps: np.ndarray) -> int:
    deepest, depth = 0, 0
    for i in range(0, len(steps), _CHUNK):
        d = np.cumsum(steps[i : i + _CHUNK], dtype=np.int32) + depth
        deepest, depth = max(deepest, int(d.max())), int(d[-1])
    return deepest


def _keys_per_object(compact: bytes, steps: np.ndarray) -> np.ndarray:
    """The number of keys of each object.

    A colon belongs to the last bracket opened before it at its own depth: sorted by (depth,
    position), the brackets of one depth are in file order, so numpy finds it for each colon."""
    if not len(steps):
        return np.zeros(0, dtype=np.int64)
    depth = np.cumsum(steps, dtype=np.int32)
    opens = np.flatnonzero(steps == 1)
    open_depth = depth[opens]
    keys = open_depth.astype(np.int64) * len(steps) + opens
    order = np.argsort(keys, kind="stable")
    keys = keys[order]
    counts = np.zeros(len(opens), dtype=np.int64)
    for i in range(0, len(steps), _CHUNK):
        colons = np.flatnonzero(steps[i : i + _CHUNK] == 0) + i
        at = depth[colons]
        owner = np.searchsorted(keys, at.astype(np.int64) * len(steps) + colons, side="right") - 1
        found = owner >= 0
        owner = order[owner[found]]
        owner = owner[open_depth[owner] == at[found]]  # otherwise no bracket at its depth: not valid JSON
        counts += np.bincount(owner, minlength=len(opens))
    is_object = np.frombuffer(compact.translate(None, _NOT_OPEN), dtype=np.uint8) == ord("{")
    return counts[is_object]


def _text_bytes(body: bytes) -> tuple[int, int, int, int]:
    """(characters, astral characters, CPython bytes per character of the text, the same without the astral ones)."""
    if body.isascii():
        return len(body), 0, 1, 1
    high = body.translate(None, _ASCII)
    chars = len(body) - len(high.translate(None, _NOT_CONTINUATION))
    astral = len(high.translate(None, _NOT_ASTRAL_LEAD))
    narrow = 2 if high.translate(None, _NOT_WIDE_LEAD) else 1
    return chars, astral, 4 if astral else narrow, narrow


def _escape_astral(body: bytes) -> bytes:
    """Each astral character as a JSON surrogate-pair escape, which json.loads reads back as the same str.

    A piece at a time, each ending just after an astral character (so no character
    and no run of backslashes is cut)."""

    def pair(m: re.Match) -> bytes:
        piece, j = m.string, m.start()
        while j and piece[j - 1] == 0x5C:
            j -= 1
        if (m.start() - j) % 2:  # after an odd backslash: not valid JSON, left for json to refuse
            return m.group()
        cp = ord(m.group().decode("utf-8")) - 0x10000
        return b"\\u%04x\\u%04x" % (0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF))

    view, parts, start = memoryview(body), [], 0
    while start < len(body):
        m = _ASTRAL.search(body, min(start + _CHUNK, len(body)))
        end = m.end() if m else len(body)
        parts.append(_ASTRAL.sub(pair, view[start:end]))
        start = end
    return b"".join(parts)


def _key_names(marked: bytearray) -> tuple[set[bytes], int]:
    """The different key names in ``_outside_strings``' marked bytes, and the bytes of all keys.

    The parser keeps one str for each name for the whole parse: more than MAX_KEY_NAMES are refused."""
    names: set[bytes] = set()
    key_bytes = 0
    for m in _KEY.finditer(marked):
        name = m.group(1)
        key_bytes += len(name)
        names.add(name)
        if len(names) > MAX_KEY_NAMES:
            raise TraceImportError(f"the file uses more than {MAX_KEY_NAMES} key names; a trace uses about 100")
    return names, key_bytes


def _too_many(what: str, n: int, cap: int) -> TraceImportError:
    return TraceImportError(f"the file holds {n:,} {what}; a trace of its size holds at most {cap:,}")


def _prescan(body: bytes, limit: int, held: int) -> tuple[bytes, int]:
    """Refuse a file whose parse would build more than a trace's; return the bytes to parse and
    the most memory (bytes) that parsing them takes.

    From the bytes alone: the first value must be an object; then the objects and lists and
    the values per byte, the nesting, the keys of one object, the different key names, and
    last the memory the parse would take (``held``: the bytes already held for the file)
    against ``PARSE_BYTES_PER_BYTE`` × ``limit``.  A text that a few astral characters would
    make 4 bytes a character is parsed with those characters escaped (the same strs come out)."""
    _first_value(body)
    flat = _unescaped(body)
    compact, strings, string_bytes, longest = _outside_strings(flat)
    if longest > _MAX_STRING_BYTES:
        raise TraceImportError(
            f"the file has a string of {size_text(longest)}; a trace's are at most {MAX_STRING_CHARS:,} characters"
        )
    steps = _steps(compact)
    if _deepest(steps) > MAX_JSON_DEPTH:
        raise TraceImportError(f"the JSON is nested more than {MAX_JSON_DEPTH} levels deep; a trace never is")
    size = len(compact) - strings + string_bytes  # the file without whitespace between values
    objects, lists, colons, commas = (compact.count(c) for c in (b"{", b"[", b":", b","))
    containers = objects + lists
    cap = size // BYTES_PER_CONTAINER + 8
    if containers > cap:
        raise _too_many("JSON objects and lists", containers, cap)
    elements = max(0, commas - colons + containers - compact.count(b"{}") - compact.count(b"[]"))
    values = elements + colons + 1
    cap = size // BYTES_PER_VALUE + 8
    if values > cap:
        raise _too_many("JSON values", values, cap)
    keys_per_object = _keys_per_object(compact, steps)
    del steps
    most = int(keys_per_object.max()) if len(keys_per_object) else 0
    if most > MAX_OBJECT_KEYS:
        raise TraceImportError(f"an object in the file has {most:,} keys; a trace's have at most {MAX_OBJECT_KEYS}")
    names, key_bytes = _key_names(flat)
    # a value that is not a string, an object, a list or a literal is a number
    trues, falses = compact.count(b"true"), compact.count(b"false")
    literals = compact.count(b"null") + trues + falses
    value_strings = max(0, strings - colons)
    numbers = max(0, values - value_strings - containers - literals)
    floats = min(numbers, max(0, sum(compact.count(c) for c in (b".", b"e", b"E")) - trues - falses))
    number_bytes = max(0, len(compact) - strings - 2 * containers - colons - commas - 4 * literals)
    # the scan itself: the marked copy, the bytes outside strings while they are joined, numpy's pieces
    scan_bytes = held + len(flat) + 2 * len(compact) + 64 * _CHUNK
    del compact, flat
    chars, astral, width, narrow = _text_bytes(body)
    text_bytes = chars * width
    # escaped: the copy is joined from its pieces, then decoded while it is still held
    escaped_copy = len(body) + 8 * astral
    escaped = max(2 * escaped_copy, escaped_copy + (chars + 11 * astral) * narrow)
    escape = astral > 0 and escaped < text_bytes
    if escape:
        text_bytes = escaped
    parse_bytes = (
        held
        + text_bytes
        + int(_DICT_BYTES[np.minimum(keys_per_object, MAX_OBJECT_KEYS)].sum())
        + _LIST_BYTES * lists
        + _SLOT_BYTES * elements
        + _FLOAT_BYTES * floats
        + _INT_BYTES * (numbers - floats)
        + number_bytes // 2  # an int beyond 19 digits: about 4 bytes per 9 digits
        + _STR_BYTES * value_strings
        + width * max(0, string_bytes - 2 * strings - key_bytes)
        + _KEY_NAME_BYTES * len(names)
    )
    budget = PARSE_BYTES_PER_BYTE * limit
    if parse_bytes > budget:
        raise TraceImportError(
            f"reading this file would take about {parse_bytes / 1e6:.0f} MB of memory; "
            f"a trace at the size limit needs less than {budget / 1e6:.0f} MB"
        )
    return (_escape_astral(body) if escape else body), max(scan_bytes, parse_bytes + _FIXED_BYTES)


def parse_trace(data: bytes | str, max_bytes: int | None = None) -> GenerationResult:
    """Validate and rebuild a trace exported with ``GenerationResult.to_dict()`` (JSON).

    Checks, in order: size, UTF-8, what parsing the file would build (``_prescan``: nesting,
    keys, values, memory), strict JSON (no NaN/Infinity, no duplicate keys), the schema
    (``GenerationResult.from_dict`` plus a type check of every field) and the values
    (probabilities in [0, 1], consistent steps).  Raises TraceImportError with a message for
    the user.  Nothing in the file is ever executed.
    """
    limit = load_config().limits.max_trace_bytes if max_bytes is None else max_bytes
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    if len(raw) > limit:
        raise TraceImportError(f"the file is {size_text(len(raw))}; the limit is {size_text(limit)}")
    with _PARSING:
        return _parse(raw, limit)


def load_trace_file(path: str | os.PathLike, max_bytes: int | None = None) -> GenerationResult:
    """Read a file of at most the size limit and ``parse_trace`` it (reading waits its turn like parsing)."""
    limit = load_config().limits.max_trace_bytes if max_bytes is None else max_bytes
    try:
        size = os.path.getsize(path)
    except OSError:
        raise TraceImportError("the file could not be read") from None
    if size > limit:
        raise TraceImportError(f"the file is {size_text(size)}; the limit is {size_text(limit)}")
    with _PARSING:
        try:
            with open(path, "rb") as fh:
                data = fh.read(size + 1)  # not limit + 1: read() sets aside as many bytes as it is asked for
        except OSError:
            raise TraceImportError("the file could not be read") from None
        if len(data) > limit:  # it grew since
            raise TraceImportError(f"the file is over the limit of {size_text(limit)}")
        return _parse(data, limit)


def _parse(raw: bytes, limit: int) -> GenerationResult:
    """``parse_trace``'s checks after the size, on a file's bytes (held by the caller)."""
    if not raw or raw.isspace():  # not strip(): that would copy the file
        raise TraceImportError("the file is empty")
    body = raw[3:] if raw.startswith(codecs.BOM_UTF8) else raw  # a copy only when there is a BOM
    _check_utf8(body)
    source, _ = _prescan(body, limit, held=len(raw) + (len(body) if body is not raw else 0))
    text = source.decode("utf-8")
    del source, body
    try:
        obj = json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_no_duplicates)
    except TraceImportError:
        raise
    except RecursionError:
        raise TraceImportError("the JSON is nested too deeply; a trace never is") from None
    except json.JSONDecodeError as exc:
        raise TraceImportError(
            f"the file is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    except ValueError as exc:  # e.g. an integer with thousands of digits
        raise TraceImportError(f"the file has an invalid number ({str(exc)[:80]})") from None
    del text
    if not isinstance(obj, dict):
        raise TraceImportError(f"a trace is a JSON object; this file holds a {type(obj).__name__}")
    missing = [k for k in ("token_ids", "text", "steps", "stats") if k not in obj]
    if missing:
        raise TraceImportError(f"this is not a playground trace: it has no {', '.join(repr(m) for m in missing)}")
    if not isinstance(obj["steps"], list):
        raise TraceImportError("'steps' must be a list")
    if len(obj["steps"]) > MAX_TRACE_STEPS:
        raise TraceImportError(f"the trace has {len(obj['steps']):,} steps; the limit is {MAX_TRACE_STEPS:,}")
    for key in ("token_ids", "prompt_ids"):
        if key in obj and not (isinstance(obj[key], list) and all(type(t) is int for t in obj[key])):
            raise TraceImportError(f"{key!r} must be a list of integers")
    for key in ("text", "prompt"):
        if key in obj and not (isinstance(obj[key], str) and _unicode(obj[key])):
            raise TraceImportError(f"{key!r} must be text")
    if "config" in obj and not isinstance(obj["config"], dict):
        raise TraceImportError("'config' must be an object")
    _check_shape(obj)
    if isinstance(obj["stats"], dict):  # exports write non-finite floats (e.g. tokens_per_s) as null
        hints = _HINTS[RunStats]
        obj["stats"] = {
            k: (float("nan") if v is None and hints.get(k) is float else v) for k, v in obj["stats"].items()
        }
    # Each step's JSON is let go once its record is built, so the JSON and the records are
    # not both held whole.
    obj["steps"] = _handing_over(obj["steps"])
    try:
        res = GenerationResult.from_dict(obj)
    except TraceImportError:
        raise
    except KeyError as exc:
        raise TraceImportError(f"the trace is incomplete: {str(exc).strip(chr(34) + chr(39))}") from None
    except (TypeError, ValueError, AttributeError) as exc:
        raise TraceImportError(f"the trace has the wrong structure ({str(exc)[:120]})") from None
    del obj
    _check_record(res.stats, "stats")
    for i, s in enumerate(res.steps):
        _check_record(s, f"step {i + 1}")
    _check_values(res)
    return res


def _handing_over(items: list) -> Iterator:
    for i in range(len(items)):
        item, items[i] = items[i], None
        yield item


def trace_to_json(result: GenerationResult) -> str:
    return json.dumps(result.to_dict(), ensure_ascii=False, allow_nan=False)
