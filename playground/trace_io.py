"""Traces as files: ``trace_to_json`` writes a ``GenerationResult``; ``parse_trace`` reads one back, validated.

A trace file comes from anyone, so ``parse_trace`` / ``load_trace_file`` check in order:
the size, UTF-8, then, on the raw bytes before any Python object is made from them, what
parsing would build (``playground.trace_prescan``: objects, lists and values per byte, nesting, keys per
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
import os
import threading
from collections.abc import Iterator

from playground.config import load_config
from playground.decoding.records import GenerationResult, RunStats
from playground.trace_checks import (
    HINTS,
    check_record,
    check_shape,
    check_values,
    is_unicode,
    no_duplicates,
    reject_constant,
)
from playground.trace_limits import MAX_TRACE_STEPS, TraceImportError, size_text
from playground.trace_prescan import check_utf8, prescan

PARALLEL_PARSES = 2  # files read and parsed at once in this process; the others wait their turn
_PARSING = threading.BoundedSemaphore(PARALLEL_PARSES)


def parse_trace(data: bytes | str, max_bytes: int | None = None) -> GenerationResult:
    """Validate and rebuild a trace exported with ``GenerationResult.to_dict()`` (JSON).

    Checks, in order: size, UTF-8, what parsing the file would build (``prescan``: nesting,
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
    check_utf8(body)
    source, _ = prescan(body, limit, held=len(raw) + (len(body) if body is not raw else 0))
    text = source.decode("utf-8")
    del source, body
    try:
        obj = json.loads(text, parse_constant=reject_constant, object_pairs_hook=no_duplicates)
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
        if key in obj and not (isinstance(obj[key], str) and is_unicode(obj[key])):
            raise TraceImportError(f"{key!r} must be text")
    if "config" in obj and not isinstance(obj["config"], dict):
        raise TraceImportError("'config' must be an object")
    check_shape(obj)
    if isinstance(obj["stats"], dict):  # exports write non-finite floats (e.g. tokens_per_s) as null
        hints = HINTS[RunStats]
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
    check_record(res.stats, "stats")
    for i, s in enumerate(res.steps):
        check_record(s, f"step {i + 1}")
    check_values(res)
    return res


def _handing_over(items: list) -> Iterator:
    for i in range(len(items)):
        item, items[i] = items[i], None
        yield item


def trace_to_json(result: GenerationResult) -> str:
    return json.dumps(result.to_dict(), ensure_ascii=False, allow_nan=False)
