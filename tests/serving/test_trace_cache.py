"""Shared runs for identical requests: one computation, followers and replays equal to the
sequential answer, no cross-talk between different requests, bounded storage, a clear
busy message when every compute slot stays taken."""

from __future__ import annotations

import threading
import time

import pytest

from playground import api
from playground.api import generate
from playground.errors import Busy
from playground.serving.trace_cache import WAITING, TraceCache, Visitor, describe_replay

REQ = dict(preset="tiny-random", gamma=3, temperature=0.9, max_new_tokens=12)


def tokens(result):
    return list(result.token_ids)


def test_an_identical_request_is_replayed_and_says_so():
    shared = TraceCache()
    first = generate("abc", seed=1, shared=shared, **REQ)
    again = generate("abc", seed=1, shared=shared, **REQ)
    assert shared.runs == 1 and shared.replays == 1
    assert tokens(again) == tokens(first) == tokens(generate("abc", seed=1, **REQ))
    assert "replay" not in first.config
    assert again.config["replay"]["live"] is False
    assert again.stats.wall_ms == first.stats.wall_ms  # the recorded timings, not new ones
    assert "Replay of a recorded run" in describe_replay(again.config["replay"])
    assert len(again.steps) == len(first.steps)


@pytest.mark.parametrize(
    "change",
    [
        dict(seed=2),
        dict(temperature=0.5),
        dict(gamma=2),
        dict(prompt="abd"),
        dict(max_new_tokens=11),
        dict(rule="target-sample"),
    ],
)
def test_any_difference_is_a_new_run(change):
    shared = TraceCache()
    base = dict(REQ, seed=1, prompt="abc")
    generate(shared=shared, **base)
    other = dict(base, **change)
    r = generate(shared=shared, **other)
    assert shared.runs == 2 and "replay" not in r.config


def test_thirty_simultaneous_identical_requests_compute_once():
    shared = TraceCache(slots=2)
    reference = tokens(generate("Monday, Tuesday,", seed=3, **REQ))
    results, errors = [], []

    def student():
        try:
            results.append(generate("Monday, Tuesday,", seed=3, shared=shared, **REQ))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=student) for _ in range(30)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and len(results) == 30
    assert all(tokens(r) == reference for r in results)
    assert shared.runs == 1 and shared.follows + shared.replays == 29


def test_concurrent_different_requests_each_get_their_sequential_answer():
    """Runs that compute at once share target passes and, under that load, may draft less
    (playground.serving.policy): each answer must equal its request run alone with the same
    draft lengths (at T > 0 a seed's tokens depend on them)."""
    seeds = list(range(8))
    shared = TraceCache(slots=2)
    got: dict[int, object] = {}

    def user(s):
        got[s] = generate("abc abc", seed=s, shared=shared, **REQ)

    threads = [threading.Thread(target=user, args=(s,)) for s in seeds]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    settings = {s: api.run_settings(seed=s, **REQ) for s in seeds}
    sequential = {s: tokens(api.run("abc abc", settings[s], draft_caps=[st.gamma for st in got[s].steps]))
                  for s in seeds}  # fmt: skip
    assert len({tuple(v) for v in sequential.values()}) > 1  # seeds matter, so cross-talk would show
    assert {s: tokens(r) for s, r in got.items()} == sequential and shared.runs == len(seeds)


def _blocking_run(gate: threading.Event, started: threading.Event):
    def run():
        started.set()
        assert gate.wait(10)
        yield generate("abc", seed=0, **REQ)

    return run


def _hold_the_slot(shared):
    """A run that has taken ``shared``'s one compute slot and keeps it until the gate opens:
    (the gate, its thread)."""
    gate, started = threading.Event(), threading.Event()
    holder = threading.Thread(target=lambda: list(shared.stream("slow", _blocking_run(gate, started))))
    holder.start()
    assert started.wait(10)
    return gate, holder


def test_busy_when_no_compute_slot_frees_in_time():
    shared = TraceCache(slots=1, wait_s=0.2)
    gate, holder = _hold_the_slot(shared)
    with pytest.raises(Busy, match=r"busy: 1 run\(s\) were ahead of yours. Try again in about \d+ s"):
        list(shared.stream("other", lambda: iter(())))
    gate.set()
    holder.join(10)


def test_a_follower_of_an_identical_request_never_waits_for_a_slot():
    shared = TraceCache(slots=1, wait_s=0.2)
    gate, started = threading.Event(), threading.Event()
    out = {}  # by role: the two threads may finish in either order
    leader = threading.Thread(
        target=lambda: out.__setitem__("leader", list(shared.stream("k", _blocking_run(gate, started))))
    )
    leader.start()
    assert started.wait(10)
    follower = threading.Thread(target=lambda: out.__setitem__("follower", list(shared.stream("k", lambda: iter(())))))
    follower.start()
    time.sleep(0.5)  # longer than wait_s: a follower that queued for the slot would be Busy
    gate.set()
    leader.join(10)
    follower.join(10)
    assert len(out) == 2 and tokens(out["leader"][-1]) == tokens(out["follower"][-1])
    assert out["follower"][-1].config["replay"]["live"] is True


def _wait_for(cond, timeout=10.0):
    deadline = time.time() + timeout
    while not cond() and time.time() < deadline:
        time.sleep(0.02)
    return cond()


def _steps(n, gate=None, seen=None):
    """A run of ``n`` items (plain objects, not results) that waits for ``gate`` before each."""

    def run():
        for i in range(n):
            if gate is not None:
                assert gate.wait(10)
            if seen is not None:
                seen.append(i)
            yield f"step {i}"

    return run


def test_a_run_stops_at_its_next_step_once_everybody_has_left_and_is_not_kept():
    from playground.api import stream_generate

    shared = TraceCache()
    stream = shared.stream("k", lambda: stream_generate("abc", seed=0, **dict(REQ, max_new_tokens=200)))
    next(stream)  # the first step arrives ...
    stream.close()  # ... and the visitor leaves
    assert _wait_for(lambda: shared.abandoned == 1)
    assert len(shared) == 0 and not shared._flights
    again = generate("abc", seed=0, shared=shared, **REQ)  # a new request for it computes afresh
    assert shared.runs == 2 and "replay" not in again.config


def test_a_run_goes_on_while_one_follower_stays():
    shared = TraceCache()
    gate, seen = threading.Event(), []
    lead = shared.stream("k", _steps(5, gate, seen))
    assert next(lead) is WAITING  # started; its first step waits for the gate
    follower = shared.stream("k", lambda: iter(()))
    assert next(follower) is WAITING and shared.follows == 1
    lead.close()  # the visitor who started it leaves; the follower stays
    gate.set()
    assert [x for x in follower if x is not WAITING] == [f"step {i}" for i in range(5)]
    assert shared.abandoned == 0 and seen == list(range(5))


def test_a_run_nobody_follows_never_takes_a_compute_slot():
    shared = TraceCache(slots=1, wait_s=30)
    gate, holder = _hold_the_slot(shared)
    ran = []
    queued = shared.stream("queued", _steps(1, seen=ran))
    assert next(queued) is WAITING  # it waits for the slot, and says so every second ...
    queued.close()  # ... so the page notices its visitor left
    assert _wait_for(lambda: shared.abandoned == 1 and shared._waiting == 0)
    gate.set()
    holder.join(10)
    assert ran == [] and len(shared) == 1  # it never ran; the holder's run was kept


@pytest.mark.parametrize("cap_kind", ["session", "address"])
def test_a_visitor_leads_at_most_their_cap_of_runs_and_the_rest_hold_nothing(cap_kind):
    shared = TraceCache(slots=8, per_session=2, per_address=3)
    cap = 2 if cap_kind == "session" else 3
    if cap_kind == "session":
        visitors = [Visitor("s1", "10.0.0.1")] * 50
    else:  # one address, a new session each time (what a script can fake)
        visitors = [Visitor(f"s{i}", "10.0.0.1") for i in range(50)]
    gate = threading.Event()
    running, refused = [], 0
    for i, v in enumerate(visitors):
        stream = shared.stream(f"run {i}", _steps(2, gate), v)
        try:
            assert next(stream) is WAITING or True
            running.append(stream)
        except Busy as exc:
            assert "already computing, the most one visitor may have at once" in str(exc)
            refused += 1
    assert len(running) == cap and refused == 50 - cap and shared.runs == cap
    assert shared.leading(visitors[0])[cap_kind] == cap
    for stream in running:
        stream.close()  # the script drops its runs: they stop and free the visitor's count
    gate.set()
    assert _wait_for(lambda: shared.leading(visitors[0])[cap_kind] == 0)
    assert [x for x in shared.stream("after", _steps(1), visitors[0]) if x is not WAITING] == ["step 0"]


def test_another_visitor_is_not_held_by_one_at_their_cap():
    shared = TraceCache(slots=4, per_session=1, per_address=1)
    gate = threading.Event()
    busy = shared.stream("a", _steps(2, gate), Visitor("s1", "10.0.0.1"))
    t = threading.Thread(target=lambda: list(busy), daemon=True)
    t.start()
    assert _wait_for(lambda: shared.runs == 1)
    assert list(shared.stream("b", _steps(1), Visitor("s2", "10.0.0.2"))) == ["step 0"]
    gate.set()
    t.join(10)


def test_a_run_past_its_wall_time_stops_with_a_message():
    from playground.serving.trace_cache import RunStopped

    shared = TraceCache(run_wall_s=0.2)

    def slow():
        for i in range(100):
            time.sleep(0.05)
            yield f"step {i}"

    with pytest.raises(RunStopped, match=r"stopped after 0 s, the longest a run may compute here"):
        list(shared.stream("k", slow))
    assert len(shared) == 0 and not shared._flights


def test_a_run_whose_thread_cannot_start_leaves_nothing_in_flight(monkeypatch):
    shared = TraceCache(per_session=1)
    v = Visitor("s1", "10.0.0.1")

    def no_thread(self):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", no_thread)
    with pytest.raises(Busy, match="cannot start another run now"):
        list(shared.stream("k", _steps(1), v))
    monkeypatch.undo()
    assert not shared._flights and shared.leading(v) == {"session": 0}
    assert list(shared.stream("k", _steps(1), v)) == ["step 0"]  # the same request runs now


def test_errors_reach_every_follower_and_are_not_cached():
    shared = TraceCache()

    def broken():
        raise ValueError("the prompt is too long: 5000 tokens (limit 1024)")
        yield  # pragma: no cover

    for _ in range(2):
        with pytest.raises(ValueError, match="too long"):
            list(shared.stream("k", broken))
    assert len(shared) == 0 and shared.runs == 2


def test_storage_is_bounded_by_entries_and_bytes():
    shared = TraceCache(max_entries=2, size_of=lambda r: 10)
    for s in range(4):
        generate("abc", seed=s, shared=shared, **REQ)
    assert len(shared) == 2
    generate("abc", seed=3, shared=shared, **REQ)  # the newest is kept
    assert shared.replays == 1
    small = TraceCache(max_bytes=25, size_of=lambda r: 10)
    for s in range(4):
        generate("abc", seed=s, shared=small, **REQ)
    assert len(small) == 2 and small.held_bytes() == 20
    too_big = TraceCache(max_bytes=5, size_of=lambda r: 10)
    generate("abc", seed=0, shared=too_big, **REQ)
    assert len(too_big) == 0


@pytest.mark.parametrize(
    ("forwarded", "host", "address"),
    [
        (None, "203.0.113.7", "203.0.113.7"),  # no proxy: the socket's
        ("8.8.4.4", "10.16.3.80", "8.8.4.4"),  # one proxy (a Space): what it saw
        ("1.2.3.4, 8.8.4.4", "10.16.3.80", "8.8.4.4"),  # a forged front entry is ignored
        ("8.8.4.4, 10.0.0.9", "10.16.3.80", "8.8.4.4"),  # internal hops are skipped
        ("garbage, 10.0.0.9", "10.16.3.80", "10.16.3.80"),  # nothing public: the socket's
    ],
)
def test_a_visitor_is_their_session_and_the_address_our_proxies_saw(forwarded, host, address):
    from types import SimpleNamespace

    from visual.visitor import visitor_of

    headers = {"x-forwarded-for": forwarded} if forwarded else {}
    request = SimpleNamespace(session_hash="abc", headers=headers, client=SimpleNamespace(host=host))
    assert visitor_of(request) == Visitor("abc", address)
    assert visitor_of(None) is None
