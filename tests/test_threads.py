"""playground.threads: a thread's torch calls on one core or on all of them, changing only
that thread; a thread gives its parked OpenMP helpers back; a run whose passes the
scheduler's worker runs computes on one core, and the worker gives its helpers back when idle."""

from __future__ import annotations

import os
import threading
import time

import pytest
import torch

from playground import threads
from playground.decoding.target import Target
from playground.serving import scheduler as scheduler_module
from playground.serving.scheduler import PassScheduler
from tests.tiny_models import tiny_target

pytestmark = pytest.mark.skipif(not threads.available(), reason="no OpenMP runtime found in this process")


def _in_thread(fn):
    """``fn()`` in a fresh thread (its OpenMP settings start from the process's), its result."""
    out: dict = {}

    def body():
        try:
            out["value"] = fn()
        except BaseException as exc:  # re-raised in the test's thread
            out["error"] = exc

    t = threading.Thread(target=body)
    t.start()
    t.join(timeout=60)
    if "error" in out:
        raise out["error"]
    return out["value"]


def _tasks() -> int:
    """Threads of this process, OpenMP's helpers included."""
    return len(os.listdir("/proc/self/task"))


def _parallel_kernel() -> None:
    x = torch.randn(1 << 20)  # far past torch's grain size: split across this thread's team
    (x * 2).exp_().sum()


@pytest.fixture
def cores(every_core):
    if every_core < 2:
        pytest.skip("needs two cores")
    return every_core


def test_one_core_changes_only_the_calling_thread(cores):
    def run():
        before = torch.get_num_threads()
        threads.one_core()
        inside = torch.get_num_threads()
        fresh = _in_thread(torch.get_num_threads)  # torch.set_num_threads(1) would change this one too
        threads.one_core()  # twice: still undone by one all_cores
        threads.all_cores()
        return before, inside, fresh, torch.get_num_threads()

    before, inside, fresh, after = _in_thread(run)
    assert (before, inside, fresh, after) == (cores, 1, cores, cores)


def test_on_one_core_lasts_the_block_and_keeps_the_helpers(cores):
    def run():
        _parallel_kernel()  # this thread's team now exists
        tasks = _tasks()
        with threads.on_one_core():
            inside = torch.get_num_threads()
            _parallel_kernel()
            kept = _tasks() == tasks  # nothing given back, nothing started
        return inside, kept, torch.get_num_threads()

    assert _in_thread(run) == (1, True, cores)


def test_all_cores_without_one_core_changes_nothing(cores):
    def run():
        threads.all_cores()
        return torch.get_num_threads()

    assert _in_thread(run) == cores


@pytest.mark.parametrize("give_back", ["release_team", "one_core", "done_computing"])
def test_a_thread_gives_its_helpers_back(cores, give_back):
    def run():
        _parallel_kernel()  # this thread's team starts: cores - 1 helpers
        with_team = _tasks()
        getattr(threads, give_back)()
        given_back = _tasks()
        threads.all_cores()
        _parallel_kernel()  # and comes back at the next parallel kernel
        return with_team, given_back, _tasks()

    with_team, given_back, again = _in_thread(run)
    assert given_back <= with_team - (cores - 1)
    assert again >= given_back + (cores - 1)


def test_results_are_the_same_on_one_core_or_all(cores):
    x = torch.randn(64, 262_144 // 64)

    def run():
        probs = torch.softmax(x, dim=-1)
        threads.one_core()
        single = torch.softmax(x, dim=-1)
        threads.all_cores()
        return probs, single

    probs, single = _in_thread(run)
    assert torch.equal(probs, single)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return tiny_target().float().eval()


def test_a_shared_run_computes_on_one_core_and_a_lone_run_on_all(model, cores):
    scheduler = PassScheduler(model, max_batch=4)
    other = scheduler.join()  # a second run: this one's passes are shared

    def run():
        target = Target(model, rollback=True, scheduler=scheduler)
        with scheduler.join():
            other.__enter__()
            target.forward([1, 2, 3], keep=1, hidden=False)
            shared = torch.get_num_threads()
            other.__exit__(None, None, None)  # alone again: its own passes, on every core
            target.forward([4], keep=1, hidden=False)
            alone = torch.get_num_threads()
        return shared, alone

    assert _in_thread(run) == (1, cores)


def test_an_idle_worker_gives_its_helpers_back(model, monkeypatch):
    given_back: list[str] = []
    monkeypatch.setattr(scheduler_module, "release_team", lambda: given_back.append(threading.current_thread().name))
    scheduler = PassScheduler(model, max_batch=4)
    scheduler.RELEASE_AFTER_S = 0.05
    a, b = Target(model, rollback=True, scheduler=scheduler), Target(model, rollback=True, scheduler=scheduler)
    with scheduler.join(), scheduler.join():
        a.forward([1, 2], keep=1, hidden=False)
        b.forward([3], keep=1, hidden=False)
        deadline = time.monotonic() + 5
        while not given_back and time.monotonic() < deadline:
            time.sleep(0.01)
    assert given_back == ["pass-scheduler"]


def test_a_shared_run_leaves_each_thread_on_all_cores_between_steps(model, cores):
    """gradio may run a generator's next step in another thread: none is left on one core."""
    from playground.decoding.engine import stream
    from playground.models.tiny import CharTokenizer
    from playground.settings import RunSettings

    scheduler = PassScheduler(model, max_batch=4)
    settings = RunSettings(mode="autoregressive", max_new_tokens=4)

    def run():
        seen = []
        with scheduler.join():  # another run: this one's passes are shared
            for item in stream(model, CharTokenizer(), [1, 2, 3], settings, scheduler=scheduler):
                seen.append((torch.get_num_threads(), getattr(item, "shared_rows", None)))
        return seen

    seen = _in_thread(run)
    assert [n for n, _ in seen] == [cores] * len(seen)
    assert any(rows is not None for _, rows in seen)  # steps were recorded (and their passes shared)


def test_measuring_pass_costs_leaves_no_helpers_behind(model, monkeypatch):
    """The lesson's "measure here" and the batch sweep's ceiling compute on every core in
    their own thread; a team left parked there would slow every later pass of the worker."""
    from playground.serving import pass_cost

    given_back: list[str] = []
    monkeypatch.setattr(pass_cost, "release_team", lambda: given_back.append(threading.current_thread().name))

    def measure():
        threading.current_thread().name = "measuring"
        return pass_cost.pass_costs(model, [(2, 1)], ctx=4, repeats=1)

    costs = _in_thread(measure)
    assert [c.rows for c in costs] == [2] and given_back == ["measuring"]


@pytest.mark.parametrize("fails", [False, True])
def test_a_lab_handler_leaves_its_gradio_thread_without_helpers(monkeypatch, fails):
    """gradio's worker threads live on: a lab handler's thread gives its team back when the
    handler returns or fails (``visual.lab_tabs.common.run_errors``)."""
    gr = pytest.importorskip("gradio")
    from visual.lab_tabs import common

    given_back: list[str] = []
    monkeypatch.setattr(common, "done_computing", lambda: given_back.append(threading.current_thread().name))

    def handler():
        threading.current_thread().name = "gradio-worker"
        _parallel_kernel()
        if fails:
            raise ValueError("a clear message")
        return "ok"

    def call():
        try:
            return common.run_errors(handler)
        except gr.Error:
            return "error"

    assert _in_thread(call) == ("error" if fails else "ok")
    assert given_back == ["gradio-worker"]


def test_the_live_benchmark_gives_back_each_steps_helpers(monkeypatch):
    """Each step of the Benchmark tab's generator may run in another gradio thread: every step
    gives back the helpers of the thread that ran it."""
    pytest.importorskip("gradio")
    from visual import bench_tab

    given_back: list[str] = []
    monkeypatch.setattr(bench_tab, "done_computing", lambda: given_back.append(threading.current_thread().name))
    steps = bench_tab.run_live(
        "tiny-random", "custom", "abc abc abc abc", ["prompt-lookup"], [2], 4, 0.0, False, 1,
        progress=lambda *a, **k: None,
    )  # fmt: skip
    names = []
    while True:

        def step():
            threading.current_thread().name = f"gradio-worker-{len(names)}"
            return next(steps, None)

        if _in_thread(step) is None:
            break
        names.append(f"gradio-worker-{len(names)}")
    assert len(names) >= 3 and set(names[1:-1]) <= set(given_back)
