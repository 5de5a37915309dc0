"""A bounded soak of the running app (about a minute, loopback only, stops by itself).

At the same time, against one app server (tiny presets): a class of ``/speculate`` clients with
prompts and seeds of their own (greedy and sampled, several drafters, early exit among them),
clients that drop their request mid-run, a bench action with transformers' rows (its early
exit lowers ``num_hidden_layers`` on a view of its own), a lab draw, and crafted trace imports.
Afterwards: every completed answer equals its run alone (sampled ones with the draft lengths
they had under load), no request hung, the process's RSS grew by less than a bound while it
soaked, and the app still answers.
"""

from __future__ import annotations

import threading
import time

import pytest

from playground import api
from playground.trace_io import TraceImportError, parse_trace
from tools.bench import BenchOptions, iter_bench
from tools.bench.options import BenchPrompt

SOAK_S = 40.0  # how long the class keeps sending requests
RSS_GROWTH_MB = 1500  # the process (app, tiny models, bench, lab, imports) may grow by at most this while it soaks

DRAFTERS = ["model", "prompt-lookup", "early-exit", None]
PROMPTS = ["Once upon a time", "The capital of France is", "abc abc abc", "def f(x):", "Monday, Tuesday,"]


def _request(i: int) -> dict:
    return dict(
        prompt=f"{PROMPTS[i % len(PROMPTS)]} {i}",
        preset="tiny-random",
        drafter=DRAFTERS[i % len(DRAFTERS)],
        gamma=1 + i % 4,
        temperature=[0.0, 0.8][i % 2],
        seed=i,
        max_new_tokens=24,
    )


def _alone(req: dict, answer: dict) -> list[int]:
    settings = api.run_settings(**{k: v for k, v in req.items() if k != "prompt"})
    caps = [s["gamma"] for s in answer["steps"]] if settings.temperature > 0 else None
    return list(api.run(req["prompt"], settings, draft_caps=caps).token_ids)


def _rss_mb() -> float:
    """The process's resident memory now (the suite's earlier tests set its all-time peak)."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024.0


@pytest.mark.timeout(300)
def test_a_class_beside_bench_lab_imports_and_dropped_clients(server):
    from gradio_client import Client

    stop_at = time.monotonic() + SOAK_S
    answers: list[tuple[dict, dict, float]] = []
    errors: list[str] = []
    lock = threading.Lock()

    def student(k: int) -> None:
        client = Client(server, verbose=False)
        i = k
        while time.monotonic() < stop_at:
            req = _request(i)
            t0 = time.monotonic()
            try:
                out = client.predict(**req, api_name="/speculate")
                with lock:
                    answers.append((req, out, time.monotonic() - t0))
            except Exception as exc:  # "busy" is an answer too; anything else is a failure
                if "busy" not in str(exc).lower():
                    with lock:
                        errors.append(f"{req}: {exc}")
            i += 8

    def dropper() -> None:
        client = Client(server, verbose=False)
        i = 1000
        while time.monotonic() < stop_at:
            job = client.submit(**dict(_request(i), max_new_tokens=64), api_name="/speculate")
            time.sleep(0.3)
            job.cancel()
            i += 1

    def bencher() -> None:
        opts = BenchOptions(
            preset="tiny-random",
            prompts=(BenchPrompt("soak", "general", "Once upon a time"),),
            methods=("autoregressive", "speculative", "hf_generate", "hf_assisted"),
            drafters=("early-exit", "prompt-lookup"),
            gammas=(2,),
            max_new_tokens=16,
            repeats=1,
        )
        while time.monotonic() < stop_at:
            for _ in iter_bench(opts):
                pass

    def lab() -> None:
        from playground.lab.distribution import DistributionSettings, distribution_check

        while time.monotonic() < stop_at:
            distribution_check(DistributionSettings.of("abc", n_samples=200, n_tokens=2, temperature=1.0, seed=1))

    def importer() -> None:
        crafted = [b"[]," * 2_000_000, b"{" * 100_000, b'{"steps": [' + b"{}," * 1_000_000 + b"{}]}"]
        while time.monotonic() < stop_at:
            for data in crafted:
                try:
                    parse_trace(data)
                    errors.append("a crafted trace was accepted")
                except TraceImportError:
                    pass

    rss = [_rss_mb()]

    def sample() -> None:
        while time.monotonic() < stop_at + 5:
            rss.append(_rss_mb())
            time.sleep(0.2)

    workers = [threading.Thread(target=student, args=(k,)) for k in range(8)]
    workers += [threading.Thread(target=f) for f in (dropper, dropper, bencher, lab, importer, sample)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=SOAK_S + 180)
    assert not any(w.is_alive() for w in workers), "a request hung"
    assert not errors, errors[:3]

    # the app still answers, and every answer is its run alone
    after = Client(server, verbose=False).predict(**_request(1), api_name="/speculate")
    assert after["token_ids"]
    assert len(answers) >= 16
    for req, out, _ in answers:
        assert out["token_ids"] == _alone(req, out), req
    waits = sorted(s for _, _, s in answers)
    p95 = waits[int(0.95 * (len(waits) - 1))]
    grown = max(rss) - rss[0]
    print(f"soak: {len(answers)} answers checked, p95 {p95:.2f} s, RSS {rss[0]:,.0f} -> peak {max(rss):,.0f} MB")
    assert p95 < 60
    assert grown < RSS_GROWTH_MB
