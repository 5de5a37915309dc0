"""Shared runs for identical requests: a bounded cache of finished traces, one run per
request in flight, and a small pool of compute slots.

Every run is deterministic given its settings (all randomness comes from a generator
seeded with the request's seed), so two requests with the same preset, drafter, prompt,
settings, seed, dtype and rule produce the same trace.  When thirty students press Run on
the same classroom example, one run is computed; everybody else follows it live or gets
its recording.  A replayed result says so: ``result.config["replay"]`` holds when and how
it was recorded, and its timings are the recorded ones.

Runs execute in a worker thread that owns one of ``slots`` compute slots, so a run keeps
going (and lands in the cache) if the visitor who started it leaves, and a visitor who
only follows or replays never waits for a slot.  A request that waits longer than
``wait_s`` for a slot gets ``Busy`` with an estimate of when to try again.

This module does not validate requests or know about models: the caller builds the key
and passes the function that runs.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Any

from playground.decoding.records import GenerationResult, StepRecord
from playground.errors import Busy

Item = StepRecord | GenerationResult


def result_bytes(result: GenerationResult) -> int:
    """Size of the trace as JSON (what the cache budget counts)."""
    return len(json.dumps(result.to_dict(), default=str))


class _Flight:
    """One run in progress: the items so far, for any number of followers."""

    def __init__(self) -> None:
        self.items: list[Item] = []
        self.done = False
        self.error: BaseException | None = None
        self.started_at = time.time()
        self.cond = threading.Condition()

    def push(self, item: Item) -> None:
        with self.cond:
            self.items.append(item)
            self.cond.notify_all()

    def finish(self, error: BaseException | None = None) -> None:
        with self.cond:
            self.done, self.error = True, error
            self.cond.notify_all()

    def follow(self, poll_s: float = 1.0) -> Iterator[Item]:
        i = 0
        while True:
            with self.cond:
                while i >= len(self.items) and not self.done:
                    self.cond.wait(poll_s)
                batch = self.items[i:]
                done, error = self.done, self.error
            yield from batch
            i += len(batch)
            if done and i >= len(self.items):
                if error is not None:
                    raise error
                return


class TraceCache:
    def __init__(
        self,
        max_entries: int = 128,
        max_bytes: int = 64_000_000,
        slots: int = 2,
        wait_s: float = 120.0,
        size_of: Callable[[GenerationResult], int] = result_bytes,
    ) -> None:
        self.max_entries, self.max_bytes = int(max_entries), int(max_bytes)
        self.wait_s = float(wait_s)
        self.size_of = size_of
        self._lock = threading.Lock()
        self._done: OrderedDict[Hashable, tuple[GenerationResult, int, float]] = OrderedDict()  # oldest first
        self._flights: dict[Hashable, _Flight] = {}
        self._slots = threading.BoundedSemaphore(max(1, int(slots)))
        self._n_slots = max(1, int(slots))
        self._waiting = 0
        self._running = 0
        self._recent_run_s: list[float] = []
        self.runs = self.replays = self.follows = 0  # counters, for tests and the load test

    # -- the one entry point -------------------------------------------------------------
    def stream(self, key: Hashable, run: Callable[[], Iterator[Item]]) -> Iterator[Item]:
        """The items of the run for ``key``: recorded, followed live, or computed now."""
        with self._lock:
            hit = self._done.get(key)
            if hit is not None:
                self._done.move_to_end(key)
                self.replays += 1
            flight = self._flights.get(key) if hit is None else None
            lead = hit is None and flight is None
            if lead:
                flight = self._flights[key] = _Flight()
                self.runs += 1
            elif flight is not None:
                self.follows += 1
        if hit is not None:
            result, _, recorded_at = hit
            yield from result.steps
            yield _marked(result, recorded_at, live=False)
            return
        if lead:
            threading.Thread(target=self._run, args=(key, flight, run), daemon=True, name="trace-run").start()
        for item in flight.follow():
            if isinstance(item, GenerationResult) and not lead:
                item = _marked(item, flight.started_at, live=True)
            yield item

    def _run(self, key: Hashable, flight: _Flight, run: Callable[[], Iterator[Item]]) -> None:
        try:
            with self._slot():
                t0 = time.perf_counter()
                result = None
                for item in run():
                    flight.push(item)
                    if isinstance(item, GenerationResult):
                        result = item
                self._note_run_time(time.perf_counter() - t0)
            if result is not None:
                self._store(key, result, flight.started_at)
            flight.finish()
        except BaseException as exc:  # followers get the same error
            flight.finish(exc)
        finally:
            with self._lock:
                self._flights.pop(key, None)

    # -- compute slots -------------------------------------------------------------------
    def _slot(self):
        with self._lock:
            ahead = self._running + self._waiting
            self._waiting += 1
        try:
            if not self._slots.acquire(timeout=self.wait_s):
                wait = self.retry_after_s(ahead)
                raise Busy(
                    f"The server is busy: {ahead} run(s) were ahead of yours. Try again in about {wait:.0f} s.",
                    retry_after_s=wait,
                )
            with self._lock:
                self._running += 1
        finally:
            with self._lock:
                self._waiting -= 1
        return _Release(self)

    def retry_after_s(self, ahead: int | None = None) -> float:
        """Seconds until a slot is likely free: the median recent run time per run ahead."""
        with self._lock:
            recent = list(self._recent_run_s)
            ahead = self._running + self._waiting if ahead is None else ahead
        typical = sorted(recent)[len(recent) // 2] if recent else 10.0
        return max(5.0, typical * max(1, ahead) / self._n_slots)

    def _note_run_time(self, seconds: float) -> None:
        with self._lock:
            self._recent_run_s = (self._recent_run_s + [seconds])[-20:]

    # -- the bounded store ---------------------------------------------------------------
    def _store(self, key: Hashable, result: GenerationResult, recorded_at: float) -> None:
        size = self.size_of(result)
        if size > self.max_bytes or self.max_entries <= 0:
            return
        with self._lock:
            self._done[key] = (result, size, recorded_at)
            self._done.move_to_end(key)
            while len(self._done) > self.max_entries or sum(s for _, s, _ in self._done.values()) > self.max_bytes:
                self._done.popitem(last=False)

    def held_bytes(self) -> int:
        with self._lock:
            return sum(s for _, s, _ in self._done.values())

    def __len__(self) -> int:
        with self._lock:
            return len(self._done)

    def clear(self) -> None:
        with self._lock:
            self._done.clear()


class _Release:
    def __init__(self, cache: TraceCache) -> None:
        self.cache = cache

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        with self.cache._lock:
            self.cache._running -= 1
        self.cache._slots.release()


def _marked(result: GenerationResult, recorded_at: float, live: bool) -> GenerationResult:
    """The result with ``config["replay"]`` saying it is another request's run."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(recorded_at))
    replay: dict[str, Any] = {"recorded_at": stamp, "live": live}
    return dataclasses.replace(result, config={**result.config, "replay": replay})


def describe_replay(replay: dict[str, Any] | None) -> str:
    """One sentence for the page, or "" for a run computed for this request."""
    if not replay:
        return ""
    if replay.get("live"):
        return (
            f"Shared run: an identical request (same preset, prompt, settings and seed) started this run at "
            f"{replay.get('recorded_at')}; you watched it as it was computed. Timings are that run's."
        )
    return (
        f"Replay of a recorded run: an identical request (same preset, prompt, settings and seed) was computed at "
        f"{replay.get('recorded_at')}; the trace is that run's, and so are its timings."
    )
