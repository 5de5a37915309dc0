"""The engine's own error types, one per failure a user can be told about.

``ValueError`` stays the type for bad input (a setting out of range, an empty prompt).
This module holds only the types; it does not decide what to show.
"""

from __future__ import annotations


class ModelUnavailable(RuntimeError):
    """A preset's models cannot be used here: a package is missing or broken, the hub is
    unreachable, or the models would not fit in the memory budget."""


class Busy(ModelUnavailable):
    """The server cannot take this now (memory held by other users' runs, a full queue);
    trying again later may work.  ``retry_after_s`` is a hint for the message."""

    def __init__(self, message: str, retry_after_s: float = 30.0) -> None:
        super().__init__(message)
        self.retry_after_s = float(retry_after_s)
