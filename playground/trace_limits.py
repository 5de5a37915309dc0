"""What a trace file may hold at most, and the one error a refused file raises (``playground.trace_io``)."""

from __future__ import annotations


class TraceImportError(ValueError):
    """A trace file was rejected; the message is meant for the user."""


MAX_TRACE_STEPS = 10_000
MAX_TRACE_TOKENS = 100_000
MAX_STRING_CHARS = 100_000
MAX_JSON_DEPTH = 16


def size_text(n: int) -> str:
    return f"{n / 1_000_000:.1f} MB" if n >= 100_000 else f"{n:,} bytes"
