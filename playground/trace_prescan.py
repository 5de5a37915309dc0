"""Bounding what parsing a trace file would build, from its raw bytes, before any object is made.

This module does not parse (``playground.trace_io``) or check values (``playground.trace_checks``).
"""

from __future__ import annotations

import codecs
import re
import sys

import numpy as np

from playground.trace_limits import (
    MAX_JSON_DEPTH,
    MAX_STRING_CHARS,
    TraceImportError,
    size_text,
)

# --------------------------------------------------------------------------- before parsing
#
# json.loads builds one Python object for every value in the file, and a value can take as
# little as two bytes: a 20 MB file of "[]," is 6.7 million lists, 900 MB.  So ``prescan``
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


def check_utf8(body: bytes) -> None:
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


def prescan(body: bytes, limit: int, held: int) -> tuple[bytes, int]:
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
