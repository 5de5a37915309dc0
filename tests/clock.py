"""``Ticks``: a fake clock for ``Budget`` that advances a fixed step every time it is read,
so tests run out of time on purpose with no sleeping and no dependence on machine speed."""

from __future__ import annotations


class Ticks:
    """A clock that advances ``step`` seconds every time it is read (``reads`` counts the looks)."""

    def __init__(self, step: float = 1.0) -> None:
        self.t = 0.0
        self.step = step
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        self.t += self.step
        return self.t
