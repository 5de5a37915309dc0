"""Engine messages in the visitor's language: ``playground``'s errors and notices (a bad setting,
an unknown preset, the lab's progress lines, a replayed run's note) and stop reasons.

The engine raises ``playground.errors.Invalid`` and reports ``Message``\\ s: each has a ``code``
and ``params``, and its ``str()`` is the English.  Here the code is the catalogue key
``eng.<code>`` (the English entries are the engine's own templates, ``playground.errors.ENGLISH``),
filled with the params (numbers, names, an excerpt of what the visitor typed) untranslated.
Anything without a code (an unexpected exception, a plain string) is shown as the engine wrote
it.  This module does not raise or validate anything itself.
"""

from __future__ import annotations

from playground.errors import ENGLISH, message_of
from playground.validate import SettingsError
from visual.i18n import CATALOGUE, t


def engine_message(x: object) -> str:
    """An engine error or notice (an exception, a ``Message``, any text) in the current language;
    a ``SettingsError`` as each of its errors."""
    if isinstance(x, SettingsError):
        return "; ".join(engine_message(m) for m in x.errors.values())
    msg = message_of(x)
    if msg is None or msg.TEMPLATES is not ENGLISH:
        return str(x)
    return t(f"eng.{msg.code}", **msg.params)


def stop_reason(reason: object) -> str:
    """Why generation stopped (``RunStats.stopped``: ``eos`` or ``max_new_tokens``), in words."""
    key = f"stop.{reason}"
    return t(key) if key in CATALOGUE["en"] else str(reason)
