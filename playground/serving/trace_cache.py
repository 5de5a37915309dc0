"""Shared runs for identical requests: a bounded cache of finished traces, one run per
request in flight, and a small pool of compute slots.

Every run is deterministic given its settings (all randomness comes from a generator
seeded with the request's seed), so two requests with the same preset, drafter, prompt,
settings, seed, dtype and rule produce the same trace.  When thirty students press Run on
the same classroom example, one run is computed; everybody else follows it live or gets
its recording.  A replayed result says so: ``result.config["replay"]`` holds when and how
it was recorded, and its timings are the recorded ones.

Runs execute in a worker thread that owns one of ``slots`` compute slots, and a visitor
who only follows or replays never waits for a slot.  A request that waits longer than
``wait_s`` for a slot gets ``Busy`` with an estimate of when to try again.

One visitor cannot hold the slots the others need:
- a visitor (``Visitor``: the browser session and the address it comes from) may lead at most
  ``per_session`` runs in flight from one session and ``per_address`` from one address (a
  classroom behind one router shares an address, so that cap is larger: it keeps one address
  from taking every slot); more get ``Busy`` at once, holding nothing;
- a run nobody follows any more (every visitor who asked for it left: its streams were
  closed) does not take a slot, and stops at its next step if it had one; it is not stored;
- a run stops with ``RunStopped`` once it has computed for ``run_wall_s`` seconds.

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
from dataclasses import dataclass
from typing import Any

from playground.decoding.records import GenerationResult, StepRecord
from playground.errors import Busy, Message

Item = StepRecord | GenerationResult


def result_bytes(result: GenerationResult) -> int:
    """Size of the trace as JSON (what the cache budget counts)."""
    return len(json.dumps(result.to_dict(), default=str))


class Waiting:
    """What a stream yields while its run waits for a compute slot or its next step: the caller
    may show that it waits, and a gradio handler that yields it lets gradio notice a visitor
    who left (gradio closes a stream only between two of its items)."""

    def __repr__(self) -> str:
        return "WAITING"


WAITING = Waiting()


class RunStopped(ValueError):
    """A run was stopped before its end (it ran too long, or nobody followed it any more)."""


@dataclass(frozen=True)
class Visitor:
    """Who asked for a run: a browser session and the address it came from (None: unknown)."""

    session: str | None = None
    address: str | None = None


class _Flight:
    """One run in progress: the items so far, for any number of followers."""

    def __init__(self, visitor: Visitor | None = None) -> None:
        self.items: list[Item] = []
        self.done = False
        self.error: BaseException | None = None
        self.started_at = time.time()
        self.cond = threading.Condition()
        self.visitor = visitor  # who leads it (counted against their caps while it is in flight)
        self.followers = 0  # streams that still read it (the leader's included); guarded by the cache's lock

    def push(self, item: Item) -> None:
        with self.cond:
            self.items.append(item)
            self.cond.notify_all()

    def finish(self, error: BaseException | None = None) -> None:
        with self.cond:
            self.done, self.error = True, error
            self.cond.notify_all()

    def follow(self, poll_s: float = 1.0) -> Iterator[Item | Waiting]:
        """The items as they come; ``WAITING`` after every ``poll_s`` without one."""
        i = 0
        while True:
            with self.cond:
                if i >= len(self.items) and not self.done:
                    self.cond.wait(poll_s)
                batch = self.items[i:]
                done, error = self.done, self.error
            if not batch and not done:
                yield WAITING
                continue
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
        per_session: int | None = None,
        per_address: int | None = None,
        run_wall_s: float | None = None,
    ) -> None:
        self.max_entries, self.max_bytes = int(max_entries), int(max_bytes)
        self.wait_s = float(wait_s)
        self.size_of = size_of
        self.per_session, self.per_address = per_session, per_address  # None: no cap
        self.run_wall_s = run_wall_s  # None: no limit
        self._lock = threading.Lock()
        self._done: OrderedDict[Hashable, tuple[GenerationResult, int, float]] = OrderedDict()  # oldest first
        self._flights: dict[Hashable, _Flight] = {}
        self._slots = threading.BoundedSemaphore(max(1, int(slots)))
        self._n_slots = max(1, int(slots))
        self._waiting = 0
        self._running = 0
        self._recent_run_s: list[float] = []
        self._leading: dict[tuple[str, str], int] = {}  # ("session" | "address", id) -> runs in flight
        self.runs = self.replays = self.follows = self.abandoned = 0  # counters, for tests and the load test

    # -- the one entry point -------------------------------------------------------------
    def stream(
        self, key: Hashable, run: Callable[[], Iterator[Item]], visitor: Visitor | None = None
    ) -> Iterator[Item]:
        """The items of the run for ``key``: recorded, followed live, or computed now (``visitor``
        leads it then, within their caps)."""
        with self._lock:
            hit = self._done.get(key)
            if hit is not None:
                self._done.move_to_end(key)
                self.replays += 1
            flight = self._flights.get(key) if hit is None else None
            lead = hit is None and flight is None
            if lead:
                self._check_caps(visitor)
                flight = self._flights[key] = _Flight(visitor)
                self._count(visitor, +1)
                self.runs += 1
            elif flight is not None:
                self.follows += 1
            if flight is not None:
                flight.followers += 1
        if hit is not None:
            result, _, recorded_at = hit
            yield from result.steps
            yield _marked(result, recorded_at, live=False)
            return
        try:
            if lead:
                self._start(key, flight, run)
            for item in flight.follow():
                if isinstance(item, GenerationResult) and not lead:
                    item = _marked(item, flight.started_at, live=True)
                yield item
        finally:  # also when the visitor left (gradio closed the stream)
            with self._lock:
                flight.followers -= 1

    def _start(self, key: Hashable, flight: _Flight, run: Callable[[], Iterator[Item]]) -> None:
        try:
            threading.Thread(target=self._run, args=(key, flight, run), daemon=True, name="trace-run").start()
        except RuntimeError:  # no thread to be had: nothing may stay "in flight" for this key
            self._end(key, flight)
            error = Busy("The server cannot start another run now. Try again in a few seconds.", retry_after_s=10.0)
            flight.finish(error)
            raise error from None

    def _run(self, key: Hashable, flight: _Flight, run: Callable[[], Iterator[Item]]) -> None:
        items = None
        try:
            with self._slot(key, flight):
                t0 = time.perf_counter()
                result, left = None, False
                items = run()
                for item in items:
                    flight.push(item)
                    if isinstance(item, GenerationResult):
                        result = item
                    elif self._abandon(key, flight):
                        left = True
                        break
                    elif self.run_wall_s is not None and time.perf_counter() - t0 > self.run_wall_s:
                        raise RunStopped(
                            f"The run was stopped after {self.run_wall_s:.0f} s, the longest a run may compute "
                            "here. Ask for fewer new tokens, or run it again when the server is less busy."
                        )
                self._note_run_time(time.perf_counter() - t0)
            self._end(key, flight)
            if result is not None:
                self._store(key, result, flight.started_at)
            flight.finish(RunStopped("Everyone who asked for this run left.") if left else None)
        except BaseException as exc:  # followers get the same error
            self._end(key, flight)
            flight.finish(exc)
        finally:
            if hasattr(items, "close"):
                items.close()  # the engine leaves its scheduler and frees its caches now, not at collection

    def _abandon(self, key: Hashable, flight: _Flight) -> bool:
        """Nobody follows ``flight`` any more: it leaves the table (a new request for ``key``
        starts afresh) and stops.  Decided under the lock, so no new follower can join it."""
        with self._lock:
            if flight.followers > 0:
                return False
            if self._flights.get(key) is flight:
                del self._flights[key]
            self.abandoned += 1
            return True

    def _end(self, key: Hashable, flight: _Flight) -> None:
        """The flight is over: out of the table (once), and off its visitor's caps."""
        with self._lock:
            if self._flights.get(key) is flight:
                del self._flights[key]
            if flight.visitor is not None:
                self._count(flight.visitor, -1)
                flight.visitor = None

    # -- per-visitor caps ----------------------------------------------------------------
    def _caps(self, visitor: Visitor) -> list[tuple[tuple[str, str], int]]:
        out = []
        if visitor.session is not None and self.per_session is not None:
            out.append((("session", visitor.session), self.per_session))
        if visitor.address is not None and self.per_address is not None:
            out.append((("address", visitor.address), self.per_address))
        return out

    def _check_caps(self, visitor: Visitor | None) -> None:  # with the lock held
        for who, cap in self._caps(visitor) if visitor is not None else ():
            if self._leading.get(who, 0) >= cap:
                where = "this page" if who[0] == "session" else "your network"
                raise Busy(
                    f"{cap} run(s) from {where} are already computing, the most one visitor may have at once. "
                    "Wait for one to finish, then try again.",
                    retry_after_s=self._retry_after(0),
                )

    def _count(self, visitor: Visitor | None, step: int) -> None:
        for who, _ in self._caps(visitor) if visitor is not None else ():
            n = self._leading.get(who, 0) + step
            if n > 0:
                self._leading[who] = n
            else:
                self._leading.pop(who, None)

    def leading(self, visitor: Visitor) -> dict[str, int]:
        """Runs ``visitor`` leads now, by session and by address (for tests and the load test)."""
        with self._lock:
            return {kind: self._leading.get((kind, ident), 0) for (kind, ident), _ in self._caps(visitor)}

    # -- compute slots -------------------------------------------------------------------
    SLOT_POLL_S = 0.25  # how often a waiting run checks that somebody still follows it

    def _slot(self, key: Hashable, flight: _Flight):
        """A compute slot for ``flight``, or ``Busy`` after ``wait_s``, or ``RunStopped`` as soon
        as nobody follows it any more (it then never takes one)."""
        with self._lock:
            ahead = self._running + self._waiting
            self._waiting += 1
        try:
            deadline = time.monotonic() + self.wait_s
            while True:
                if self._abandon(key, flight):
                    raise RunStopped("Everyone who asked for this run left before it started.")
                left = deadline - time.monotonic()
                if left <= 0:
                    wait = self.retry_after_s(ahead)
                    raise Busy(
                        f"The server is busy: {ahead} run(s) were ahead of yours. Try again in about {wait:.0f} s.",
                        retry_after_s=wait,
                    )
                if self._slots.acquire(timeout=min(self.SLOT_POLL_S, left)):
                    break
            with self._lock:
                self._running += 1
        finally:
            with self._lock:
                self._waiting -= 1
        return _Release(self)

    def retry_after_s(self, ahead: int | None = None) -> float:
        """Seconds until a slot is likely free: the median recent run time per run ahead."""
        with self._lock:
            return self._retry_after(ahead)

    def _retry_after(self, ahead: int | None) -> float:  # with the lock held
        recent = self._recent_run_s
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
    """One sentence for the page (a ``Message``: the English, and its code for the page's
    language), or "" for a run computed for this request."""
    if not replay:
        return ""
    return Message("replay.shared" if replay.get("live") else "replay.recorded", at=replay.get("recorded_at"))
