"""A memory-budgeted, least-recently-used cache of loaded models, safe for many users.

What it guarantees:
* a value is loaded once per key, however many callers ask at the same time;
* loads of *different* keys run in parallel, and a hit never waits for any load;
* the bytes held stay under ``budget_bytes``: before a load, least-recently-used idle
  entries are evicted to make room for its estimate; a load whose estimate alone exceeds
  the budget is refused up front (``OverBudget``), without loading anything;
* an evicted value that a running generation still holds is not loaded twice: it is
  remembered (weakly) with its bytes, counted against the budget while alive, and
  re-admitted if asked for again.

It knows nothing about models: the caller passes ``load`` and ``measure`` functions.
It does not free memory itself; Python does, once no run holds an evicted value.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from playground.errors import Busy, ModelUnavailable


class OverBudget(ModelUnavailable):
    """This key can never fit in the budget (its estimate alone is larger)."""


def gb(n_bytes: float) -> str:
    return f"{n_bytes / 1e9:.1f} GB"


@dataclass
class _Entry:
    value: Any
    nbytes: int


class BudgetedCache:
    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = int(budget_bytes)
        self._lock = threading.Lock()  # guards the dicts below; never held during a load
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()  # oldest first
        self._evicted: dict[Hashable, tuple[weakref.ref, int]] = {}  # maybe still in use by a run
        self._reserved: dict[Hashable, int] = {}  # loads in flight: their estimates
        self._key_locks: dict[Hashable, threading.Lock] = {}

    # -- accounting ----------------------------------------------------------------------
    def _alive_evicted_bytes(self) -> int:
        dead = [k for k, (ref, _) in self._evicted.items() if ref() is None]
        for k in dead:
            del self._evicted[k]
        return sum(n for _, n in self._evicted.values())

    def held_bytes(self) -> int:
        """Bytes of cached values, evicted values still alive, and loads in flight."""
        with self._lock:
            return self._held()

    def _held(self) -> int:
        return (
            sum(e.nbytes for e in self._entries.values()) + self._alive_evicted_bytes() + sum(self._reserved.values())
        )

    def keys(self) -> list[Hashable]:
        with self._lock:
            return list(self._entries)

    def _evict_oldest(self) -> None:
        key, entry = self._entries.popitem(last=False)
        try:
            self._evicted[key] = (weakref.ref(entry.value), entry.nbytes)
        except TypeError:  # not weak-referenceable: assume it is gone
            pass

    def check_fits(self, nbytes: int, what: str = "this model") -> None:
        """Raise ``OverBudget`` if ``nbytes`` alone exceeds the budget (nothing else is done)."""
        if nbytes > self.budget_bytes:
            raise OverBudget(
                f"{what} needs about {gb(nbytes)} of memory; this server's model memory budget is "
                f"{gb(self.budget_bytes)} (limits.memory_budget_mb in spaces_config.yaml)"
            )

    def _make_room(self, nbytes: int, what: str, keep: Hashable | None = None) -> None:
        self.check_fits(nbytes, what)
        while self._held() + nbytes > self.budget_bytes and any(k != keep for k in self._entries):
            if next(iter(self._entries)) == keep:
                self._entries.move_to_end(keep)
            self._evict_oldest()
        if self._held() + nbytes > self.budget_bytes:
            raise Busy(
                f"{what} needs about {gb(nbytes)}, and other users' runs hold "
                f"{gb(self._held())} of the {gb(self.budget_bytes)} model memory budget right now",
                retry_after_s=60.0,
            )

    # -- the one entry point -------------------------------------------------------------
    def get(
        self,
        key: Hashable,
        load: Callable[[], Any],
        measure: Callable[[Any], int],
        estimate_bytes: int = 0,
        what: str = "this model",
    ) -> Any:
        """The cached value of ``key``, loading it (once) if needed."""
        with self._lock:
            hit = self._hit(key)
            if hit is not None:
                return hit
            if estimate_bytes > self.budget_bytes:  # refuse before waiting on anyone
                self._make_room(estimate_bytes, what)
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:  # one loader per key; other keys load in parallel
            with self._lock:
                hit = self._hit(key)
                if hit is not None:
                    return hit
                self._make_room(estimate_bytes, what)
                self._reserved[key] = int(estimate_bytes)
            try:
                value = load()
                nbytes = int(measure(value))
            except BaseException:
                with self._lock:
                    self._reserved.pop(key, None)
                raise
            with self._lock:
                self._reserved.pop(key, None)
                self._entries[key] = _Entry(value, nbytes)
                # the estimate may have been low: evict others (never this one) to get back under
                while self._held() > self.budget_bytes and len(self._entries) > 1:
                    if next(iter(self._entries)) == key:
                        self._entries.move_to_end(key)
                    self._evict_oldest()
            return value

    def peek(self, key: Hashable) -> Any | None:
        """The cached value of ``key`` (marked as just used), or None; never loads."""
        with self._lock:
            return self._hit(key)

    def _hit(self, key: Hashable) -> Any | None:
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
            return entry.value
        ref = self._evicted.get(key)
        if ref is not None and ref[0]() is not None:  # still held by a run: take it back
            value = ref[0]()
            del self._evicted[key]
            self._entries[key] = _Entry(value, ref[1])
            return value
        return None

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._evicted.clear()
