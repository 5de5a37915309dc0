"""The pass scheduler (playground.serving.scheduler): concurrent runs' passes share forward
passes, and each run gets exactly what it would get alone; an error reaches every run of
its pass and the worker lives on; the draft cap follows the policy."""

from __future__ import annotations

import random
import threading
import time

import pytest
import torch

from playground.decoding.batch_pass import RowPass
from playground.decoding.target import PREFILL_CHUNK, Target
from playground.serving import policy
from playground.serving.scheduler import PassScheduler
from tests.tiny_models import rand_ids, tiny_target

ATOL = 1e-5


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return tiny_target().float().eval()


def _script(seed: int) -> list[tuple[list[int], int]]:
    """A run's passes: a prompt, then steps of 1-5 new tokens, each followed by a crop of
    0..k-1 rejected drafts (the engine's pattern), across the tiny target's window of 6."""
    rng = random.Random(seed)
    steps = [(rand_ids(rng.randint(2, 2 * PREFILL_CHUNK + 3), seed=seed), 0)]
    for j in range(6):
        k = rng.randint(1, 5)
        steps.append((rand_ids(k, seed=1000 * seed + j), rng.randint(0, k - 1)))
    return steps


def _run(model, seed: int, scheduler=None, join: threading.Barrier | None = None) -> list[torch.Tensor]:
    target = Target(model, rollback=True, scheduler=scheduler)
    logits = []
    ctx = scheduler.join() if scheduler is not None else None
    if ctx is not None:
        ctx.__enter__()
    try:
        if join is not None:
            join.wait()
        for ids, drop in _script(seed):
            out = target.forward(ids, keep=1 if drop == 0 and len(ids) > 5 else len(ids), hidden=False)
            logits.append(out.logits)
            target.crop(drop)
    finally:
        if ctx is not None:
            ctx.__exit__(None, None, None)
    return logits


@pytest.mark.parametrize("n_runs", [2, 5, 12])
def test_concurrent_runs_get_what_they_get_alone(model, n_runs):
    alone = [_run(model, seed) for seed in range(n_runs)]
    scheduler = PassScheduler(model, max_batch=8)
    barrier = threading.Barrier(n_runs)
    shared: dict[int, list] = {}

    def go(seed):
        shared[seed] = _run(model, seed, scheduler, barrier)

    threads = [threading.Thread(target=go, args=(s,)) for s in range(n_runs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert len(shared) == n_runs
    for seed in range(n_runs):
        for a, b in zip(alone[seed], shared[seed], strict=True):
            torch.testing.assert_close(b, a, atol=ATOL, rtol=0)
    assert 1 < scheduler.max_rows_seen <= 8  # passes were shared, never past the cap


def test_an_error_reaches_its_runs_and_the_worker_lives_on(model):
    scheduler = PassScheduler(model, wait_ms=200)
    caches = [Target(model, rollback=True).cache for _ in range(2)]
    errors = []

    def bad(cache):
        with scheduler.join():
            try:
                scheduler.forward(RowPass(cache, (1, 2), keep=3))  # keep > tokens
            except ValueError as exc:
                errors.append(str(exc))

    threads = [threading.Thread(target=bad, args=(c,)) for c in caches]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(errors) == 2 and all("keep" in e for e in errors)
    with scheduler.join():
        out = scheduler.forward(RowPass(caches[0], (1, 2), keep=2))
    assert out.out.logits.shape[0] == 2


def test_a_run_that_leaves_is_not_waited_for(model):
    """The worker waits for every joined run; one that leaves must stop holding the pass."""
    scheduler = PassScheduler(model, wait_ms=60_000)  # only leaving can release the wait
    cache = Target(model, rollback=True).cache
    left = threading.Event()

    def leave_soon():
        with scheduler.join():
            left.wait(5)

    other = threading.Thread(target=leave_soon)
    with scheduler.join():
        other.start()
        result = {}
        t = threading.Thread(target=lambda: result.setdefault("out", scheduler.forward(RowPass(cache, (1,), keep=1))))
        t.start()
        left.set()
        t.join(timeout=30)
    other.join()
    assert "out" in result


@pytest.mark.parametrize(("runs", "cap"), [(1, policy.NO_CAP), (2, 17), (4, 8), (8, 3), (12, 2), (18, 1), (36, 0)])
def test_draft_cap_shares_the_knee(runs, cap):
    assert policy.draft_cap(runs, knee_tokens=36) == cap


@pytest.mark.parametrize(("runs", "cap"), [(1, policy.NO_CAP), (2, 2), (3, 1), (4, 0), (30, 0)])
def test_the_app_budget_turns_speculation_off_from_four_runs(runs, cap):
    assert policy.draft_cap(runs) == cap


def test_runs_caches_count_against_the_kv_budget(model):
    """Each joined run holds its cache's bytes (tokens x bytes per token) and, once runs share
    passes, the batched cache: every row padded to the longest run, rounded as the slot cache
    grows its buffers; one that would pass the budget gets Busy with a clear message, and
    leaving gives the bytes back."""
    from playground.decoding.batch_slots import SlotCache
    from playground.errors import Busy
    from playground.serving.scheduler import kv_bytes_per_token

    per_token = kv_bytes_per_token(model)
    cfg = model.config  # 4 layers, K and V, float32
    assert per_token == 4 * 2 * cfg.num_key_value_heads * cfg.head_dim * 4
    batched = SlotCache.tokens_for(2, 60)  # two rows of up to 60 tokens: 8 rows x 128 slots
    assert batched == 8 * 128
    scheduler = PassScheduler(model, kv_budget_bytes=(80 + batched) * per_token)
    with scheduler.join(60):
        assert scheduler.held_bytes() == 60 * per_token  # alone: no shared pass, no padding
        with pytest.raises(Busy, match="holding 1 runs' caches"):
            with scheduler.join(30):  # own caches 90 tokens, plus the batched cache
                pass
        assert scheduler.load == 1
        with scheduler.join(20):  # 80 + the batched cache: the whole budget
            assert scheduler.load == 2 and scheduler.held_bytes() == (80 + batched) * per_token
    with scheduler.join(200):  # all given back
        assert scheduler.load == 1


def test_a_failed_shared_pass_runs_each_row_alone_and_fails_only_the_bad_one(model, monkeypatch):
    """One row that breaks a shared pass fails its own run only: the others get their pass,
    their outputs those of the rows alone."""
    import playground.serving.scheduler as sched
    from playground.decoding.batch_pass import batched_forward

    real = sched.batched_forward

    def fragile(m, rows, *args):
        if any(r.ids == (99,) for r in rows) and len(rows) > 1:
            raise RuntimeError("a shared pass broke")
        if rows[0].ids == (99,):
            raise ValueError("this row is bad")
        return real(m, rows, *args)

    monkeypatch.setattr(sched, "batched_forward", fragile)
    scheduler = PassScheduler(model, wait_ms=200)
    ids = [(5,), (99,), (7,)]
    caches = [_prefilled(model) for _ in ids]
    results = _one_pass(scheduler, [RowPass(c, i, 1) for c, i in zip(caches, ids)])
    assert isinstance(results[1], ValueError)
    assert results[0].rows == 3  # it was in the shared pass that broke
    for b in (0, 2):
        assert not isinstance(results[b], Exception)
        alone = batched_forward(model, [RowPass(_prefilled(model), ids[b], 1)])[0]
        assert torch.allclose(results[b].out.logits, alone.logits, atol=1e-5)
    assert caches[1].get_seq_length() == 3  # the bad row's cache is as it was


def _prefilled(model):
    t = Target(model, rollback=True)
    t.forward([1, 2, 3], keep=1, hidden=False)
    return t.cache


def test_a_run_whose_pass_never_starts_gets_busy_and_leaves_nothing_pending(model, monkeypatch):
    from playground.errors import Busy

    scheduler = PassScheduler(model)
    monkeypatch.setattr(scheduler, "_ensure_worker", lambda: None)  # a worker that never comes
    monkeypatch.setattr(PassScheduler, "PASS_WAIT_S", 0.2)
    with pytest.raises(Busy, match="No shared pass started within 0 s"):
        scheduler.forward(RowPass(_prefilled(model), (5,), 1))
    assert scheduler._pending == []


def test_runs_that_came_in_during_a_pass_wait_for_the_runs_it_served(model, monkeypatch):
    """A pass costs about the same for 3 rows as for 6, so runs must not settle into two
    cohorts: runs that submitted during a pass would go alone the moment it ends, while the
    runs it served come back (a few ms later, after their own sampling) for the next pass.
    The worker counts its wait from the end of the pass: from the second pass on, every
    pass carries all six runs."""
    import playground.serving.scheduler as sched

    def slow(*args):  # a pass that takes long enough for the late runs to submit during it
        time.sleep(0.3)
        return real(*args)

    real = sched.batched_forward
    monkeypatch.setattr(sched, "batched_forward", slow)
    n, steps = 6, 4
    scheduler = PassScheduler(model, wait_ms=100)
    caches = [Target(model, rollback=True).cache for _ in range(n)]
    barrier = threading.Barrier(n)
    rows_seen: dict[int, list[int]] = {b: [] for b in range(n)}

    def run(b):
        with scheduler.join():
            barrier.wait()
            if b >= n // 2:
                time.sleep(0.15)  # the late half arrives during the first pass (100-400 ms)
            for _ in range(steps):
                rows_seen[b].append(scheduler.forward(RowPass(caches[b], (1 + b,), keep=1)).rows)

    threads = [threading.Thread(target=run, args=(b,)) for b in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    # The first pass went without the late half, the last one without the early half (done);
    # every pass between carried all six.
    early, late = [n // 2] + [n] * (steps - 1), [n] * (steps - 1) + [n // 2]
    assert rows_seen == {b: early if b < n // 2 else late for b in range(n)}


def _one_pass(scheduler, rows, reads=None):
    """Each row submitted at once by a run of its own, joined to ``scheduler``: what each run's
    ``forward`` returned, or the exception it raised."""
    reads = reads or [None] * len(rows)
    barrier = threading.Barrier(len(rows))
    got: dict[int, object] = {}

    def go(b):
        with scheduler.join():
            barrier.wait()
            try:
                got[b] = scheduler.forward(rows[b], reads[b])
            except Exception as exc:
                got[b] = exc

    threads = [threading.Thread(target=go, args=(b,)) for b in range(len(rows))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return [got[b] for b in range(len(rows))]


def _class_with_reads(model, scheduler, specs):
    """One pass of len(specs) runs, each asking for its logits read as its spec says."""
    rows = [
        RowPass(Target(model, rollback=True).cache, tuple(rand_ids(1 + b % 3, seed=b)), keep=1 + b % 3)
        for b in range(len(specs))
    ]
    return _one_pass(scheduler, rows, specs)


def test_the_worker_reads_each_runs_logits_as_it_asked(model):
    from playground.decoding.batch_probs import ReadSpec
    from playground.decoding.rows import target_rows
    from playground.decoding.sampling import SamplingParams

    params = [SamplingParams(0.7), SamplingParams(1.0, top_k=5), SamplingParams(0.0), SamplingParams(0.9, top_p=0.5)]
    specs = [ReadSpec(params[b % 4], top_n=3, confidence=True) if b != 6 else None for b in range(11)]
    scheduler = PassScheduler(model, wait_ms=2_000)
    scheduler.read_chunk = 4  # released in chunks of 4, 4 and 3 runs
    for b, (spec, shared) in enumerate(zip(specs, _class_with_reads(model, scheduler, specs))):
        assert shared.rows == 11, b
        if spec is None:
            assert shared.reads is None
            continue
        probs, argmax = target_rows(shared.out.logits, spec.params)  # what the run computes alone
        got, got_argmax = target_rows(shared.out.logits, spec.params, shared.reads)
        assert got_argmax == argmax, b
        if argmax is None:
            assert torch.equal(got, probs), b


def test_the_ledger_counts_every_shared_pass_and_where_its_time_went(model):
    from playground.serving.scheduler import PassLedger

    scheduler = PassScheduler(model, wait_ms=2_000)
    assert scheduler.ledger.per_pass() == {}
    outs = _class_with_reads(model, scheduler, [None] * 5)
    ledger = scheduler.ledger
    assert ledger.passes == scheduler.passes == 1 and ledger.rows == 5 and outs[0].rows == 5
    split = ledger.per_pass()
    assert split["rows"] == 5 and split["model_ms"] > 0
    assert all(split[k] >= 0 for k in ("wait_ms", "gather_ms", "write_ms", "read_ms"))
    # the parts fit in the pass's wall time as the runs saw it (reads included)
    parts = split["gather_ms"] + split["model_ms"] + split["write_ms"] + split["read_ms"]
    assert parts <= max(o.pass_ms for o in outs) + 1.0
    totals = PassLedger()
    totals.add(3, 10.0, None, 2.0)  # a pass that failed before timing itself still counts
    assert totals.per_pass() == {"rows": 3, "wait_ms": 10.0, "gather_ms": 0.0, "model_ms": 0.0, "write_ms": 0.0,
                                 "read_ms": 2.0}  # fmt: skip


def test_a_failed_read_reaches_the_runs_of_its_chunk_only(model, monkeypatch):
    import playground.serving.scheduler as scheduler_module
    from playground.decoding.batch_probs import ReadSpec
    from playground.decoding.sampling import SamplingParams

    calls = []

    def flaky(logits, specs):
        calls.append(len(specs))
        if len(calls) == 2:
            raise RuntimeError("reading failed")
        return [None] * len(specs)

    monkeypatch.setattr(scheduler_module, "read_rows", flaky)
    scheduler = PassScheduler(model, wait_ms=2_000)
    scheduler.read_chunk = 3
    results = _class_with_reads(model, scheduler, [ReadSpec(SamplingParams(0.7))] * 7)
    failed = [b for b, r in enumerate(results) if isinstance(r, RuntimeError)]
    assert calls == [3, 3, 1] and len(failed) == 3  # the second chunk's three runs, nobody else
    with scheduler.join():  # the worker lives on
        assert scheduler.forward(RowPass(Target(model, rollback=True).cache, (1, 2), keep=1)).rows == 1


def _logged_passes(monkeypatch) -> list[list[RowPass]]:
    """The rows of every shared pass the scheduler runs from now on, in order."""
    import playground.serving.scheduler as scheduler_module

    passes: list[list[RowPass]] = []
    real = scheduler_module.batched_forward

    def logged(model, rows, *args):
        passes.append(list(rows))
        return real(model, rows, *args)

    monkeypatch.setattr(scheduler_module, "batched_forward", logged)
    return passes


@pytest.mark.parametrize("prompt_tokens", [2, 20, 31])
def test_prompt_chunks_and_steps_never_share_a_pass(model, monkeypatch, prompt_tokens):
    """A newcomer's prompt chunk (keeps 1 logit row of many tokens) would make every 1-token
    step pay for its length; each kind goes in passes of its own, whatever the chunk's length."""
    logged = _logged_passes(monkeypatch)
    scheduler = PassScheduler(model, wait_ms=2_000)
    rows = [RowPass(Target(model, rollback=True).cache, tuple(rand_ids(1, seed=b)), keep=1) for b in range(4)]
    rows.append(RowPass(Target(model, rollback=True).cache, tuple(rand_ids(prompt_tokens, seed=9)), keep=1))
    rows.append(RowPass(Target(model, rollback=True).cache, tuple(rand_ids(3, seed=8)), keep=3))  # a chain step
    barrier = threading.Barrier(len(rows))

    def go(row):
        with scheduler.join():
            barrier.wait()
            scheduler.forward(row)

    threads = [threading.Thread(target=go, args=(r,)) for r in rows]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    passes = [sorted((len(r.ids), r.keep) for r in rows) for rows in logged]
    assert sorted(passes) == sorted([[(1, 1)] * 4 + [(3, 3)], [(prompt_tokens, 1)]])


def test_the_last_chunk_read_is_waited_for_like_the_first(model, monkeypatch):
    """The worker waits ``wait_ms`` for missing runs from the latest submission or release: a
    slow read of the last chunk must not start the next pass without that chunk's runs
    (the class would split into two cohorts, each paying a full pass per token)."""
    import playground.serving.scheduler as scheduler_module

    def slow_read(logits, specs):
        time.sleep(0.06)  # longer than wait_ms: the first chunks' runs have long submitted again
        return [None] * len(specs)

    monkeypatch.setattr(scheduler_module, "read_rows", slow_read)
    scheduler = PassScheduler(model, wait_ms=25)
    scheduler.read_chunk = 2
    logged = _logged_passes(monkeypatch)
    barrier = threading.Barrier(6)

    def go(b):
        cache = Target(model, rollback=True).cache
        with scheduler.join():
            barrier.wait()
            for step in range(3):
                scheduler.forward(RowPass(cache, (1 + b + step,), keep=1))

    threads = [threading.Thread(target=go, args=(b,)) for b in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert [len(rows) for rows in logged] == [6, 6, 6]


@pytest.mark.parametrize("late_ms", [0, 30])
def test_a_pass_of_prompts_waits_for_runs_still_joining(model, monkeypatch, late_ms):
    """A class's requests arrive over a few hundred ms.  Two runs submit their prompts and a
    third joins ``late_ms`` later, after the gap the worker waits out for stragglers: its
    prompt still goes in the same pass, not in a second full prompt pass after it.  A step is
    not held for newcomers: runs in the middle of a class keep their pace."""
    from playground.serving.scheduler import _is_prompt

    logged = _logged_passes(monkeypatch)
    scheduler = PassScheduler(model, wait_ms=10)  # stragglers' gap: shorter than the newcomer's delay
    first_two = threading.Barrier(2)

    def run(b, prompt_tokens, delay_s):
        cache = Target(model, rollback=True).cache
        time.sleep(delay_s)
        with scheduler.join():
            if b < 2:
                first_two.wait()
            scheduler.forward(RowPass(cache, tuple(rand_ids(prompt_tokens, seed=b)), keep=1))

    def cohort(prompt_tokens):
        delays = [0.0, 0.0, 0.01 + late_ms / 1000.0]
        threads = [threading.Thread(target=run, args=(b, prompt_tokens, d)) for b, d in enumerate(delays)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)

    cohort(prompt_tokens=6)  # prompts: one pass of three
    cohort(prompt_tokens=1)  # one-token steps: the first two go without waiting for the third
    sizes = [(len(rows), all(map(_is_prompt, rows))) for rows in logged]
    assert sizes == [(3, True), (2, False), (1, False)]
