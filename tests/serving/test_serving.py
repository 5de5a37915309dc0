"""Many runs at once through one PassScheduler (playground.serving): every run's output is
what it is alone.

Greedy (float32): each of 1-16 concurrent runs — prompts of 1 to 40 tokens, γ 1-8, chains
and trees, model, prompt-lookup and MTP drafters, plain decoding, caches far past the
tiny target's sliding window of 4 — equals transformers' greedy decoding, and the target
cache equals a fresh prefill after every step (``CacheSpy``).  Sampling: with the draft
cap off, a seed gives the same tokens shared or alone (its random stream is its own).
With the cap on, drafts get shorter under load and greedy output still does not change.
"""

from __future__ import annotations

import dataclasses
import threading

import pytest

from playground.decoding.engine import run
from playground.drafters.model import ModelDrafter
from playground.drafters.mtp import MTPDrafter
from playground.drafters.prompt_lookup import PromptLookupDrafter
from playground.models.tiny import EOS, CharTokenizer
from playground.serving.scheduler import PassScheduler
from playground.settings import RunSettings
from tests.contract import CacheSpy, assert_checked_every_step, hf_greedy
from tests.tiny_models import char_target_and_head, sliding_pair

TOK = CharTokenizer()
PROMPTS = [
    "a",
    "sliding windows roll back",
    "The capital of France is",
    "def f(x):\n    return x * x\n\nprint(f(",
    "ab ab ab ab",
    "one two three one two three",
]


def _together(jobs):
    """Run every job (a callable returning a GenerationResult) in its own thread, started at once."""
    results: dict[int, object] = {}
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(jobs))

    def go(i, job):
        barrier.wait()
        try:
            results[i] = job()
        except BaseException as exc:  # surfaced below with the run's index
            errors.append(exc)

    threads = [threading.Thread(target=go, args=(i, j)) for i, j in enumerate(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    if errors:
        raise errors[0]
    return [results[i] for i in range(len(jobs))]


def _job(target, drafter_model, i, scheduler, spies):
    """Run i of a mixed class: its own prompt, γ, drafter and shape."""
    prompt = PROMPTS[i % len(PROMPTS)] * (1 + i // len(PROMPTS))
    kinds = ["model", "prompt-lookup", "model-tree", "autoregressive"]
    kind = kinds[i % len(kinds)]
    gamma = [1, 2, 4, 8][i % 4]
    settings = RunSettings(
        mode="autoregressive" if kind == "autoregressive" else "speculative",
        gamma=gamma,
        tree_nodes=4 if kind == "model-tree" else 1,
        max_new_tokens=24,
    )
    drafter = None
    if kind != "autoregressive":
        inner = PromptLookupDrafter() if kind == "prompt-lookup" else ModelDrafter(drafter_model, 100)
        drafter = spies[i] = CacheSpy(inner, target)
    ids = TOK.encode(prompt)
    return ids, lambda: run(target, TOK, ids, settings, drafter=drafter, eos_token_ids=[EOS], scheduler=scheduler)


@pytest.mark.parametrize("n_runs", [1, 2, 5, 16])
def test_greedy_runs_at_once_equal_transformers(n_runs):
    target, drafter_model = sliding_pair(window=4)
    scheduler = PassScheduler(target, max_batch=16)
    spies: dict[int, CacheSpy] = {}
    jobs = [_job(target, drafter_model, i, scheduler, spies) for i in range(n_runs)]
    results = _together([job for _, job in jobs])
    for i, ((ids, _), r) in enumerate(zip(jobs, results)):
        assert list(r.token_ids) == hf_greedy(target, ids, 24), f"run {i}"
        if i in spies:
            assert_checked_every_step(spies[i], r)
    if n_runs > 1:
        assert scheduler.max_rows_seen > 1  # passes really were shared
        assert max(s.shared_rows for r in results for s in r.steps) > 1


def test_mtp_chains_and_trees_at_once_equal_transformers():
    target, head = char_target_and_head()
    scheduler = PassScheduler(target)
    jobs = []
    for i, prompt in enumerate(PROMPTS):
        settings = RunSettings(gamma=4, tree_nodes=[1, 6][i % 2], max_new_tokens=20)
        ids = TOK.encode(prompt)
        drafter = MTPDrafter(target, head, eos_token_ids=[EOS])
        jobs.append((ids, lambda ids=ids, s=settings, d=drafter: run(target, TOK, ids, s, drafter=d,
                                                                      eos_token_ids=[EOS], scheduler=scheduler)))  # fmt: skip
    for (ids, _), r in zip(jobs, _together([j for _, j in jobs])):
        assert list(r.token_ids) == hf_greedy(target, ids, 20)


@pytest.mark.parametrize("temperature", [0.7, 1.0])
def test_a_seed_gives_the_same_tokens_shared_or_alone(temperature):
    target, drafter_model = sliding_pair(window=4)
    scheduler = PassScheduler(target, knee_tokens=None)  # no draft cap: the same draft lengths
    runs = []
    for i in range(6):
        settings = RunSettings(gamma=[2, 4][i % 2], temperature=temperature, seed=i, max_new_tokens=20,
                               tree_nodes=[1, 1, 4][i % 3], top_p=[1.0, 0.9][i % 2])  # fmt: skip
        ids = TOK.encode(PROMPTS[i])
        runs.append((ids, settings))

    def one(ids, settings, scheduler):
        return run(target, TOK, ids, settings, drafter=ModelDrafter(drafter_model, 100), eos_token_ids=[EOS],
                   scheduler=scheduler)  # fmt: skip

    alone = [one(ids, s, None) for ids, s in runs]
    shared = _together([lambda ids=ids, s=s: one(ids, s, scheduler) for ids, s in runs])
    for a, b in zip(alone, shared):
        assert a.token_ids == b.token_ids
        assert [s.n_accepted for s in a.steps] == [s.n_accepted for s in b.steps]
        # The trace too: p, q, u, the top-n lists and the confidences, read by the pass's
        # worker for the shared runs (playground.decoding.batch_probs), by each run alone
        # (to float rounding: a shared pass's logits may differ from a lone pass's in the last bits).
        _assert_close([(s.drafted, s.correction) for s in a.steps], [(s.drafted, s.correction) for s in b.steps])


def _assert_close(a, b, path="trace"):
    """Equal structures, with floats equal to a relative 1e-5."""
    if dataclasses.is_dataclass(a):
        assert type(a) is type(b), path
        for f in dataclasses.fields(a):
            _assert_close(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
    elif isinstance(a, (tuple, list)):
        assert isinstance(b, (tuple, list)) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_close(x, y, f"{path}[{i}]")
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), path
        for key in a:
            _assert_close(a[key], b[key], f"{path}[{key!r}]")
    elif isinstance(a, float):
        assert b == pytest.approx(a, rel=1e-5, abs=1e-9), path
    else:
        assert a == b, path


def test_the_draft_cap_shortens_drafts_under_load_and_greedy_output_stays():
    target, drafter_model = sliding_pair(window=4)
    scheduler = PassScheduler(target, knee_tokens=6)  # 3 runs: 6 // 3 - 1 = 1 draft each
    jobs = []
    for i in range(3):
        ids = TOK.encode(PROMPTS[i + 1])
        settings = RunSettings(gamma=8, max_new_tokens=20)
        jobs.append((ids, lambda ids=ids, s=settings: run(target, TOK, ids, s, drafter=ModelDrafter(drafter_model, 100),
                                                         eos_token_ids=[EOS], scheduler=scheduler)))  # fmt: skip
    results = _together([j for _, j in jobs])
    for (ids, _), r in zip(jobs, results):
        assert list(r.token_ids) == hf_greedy(target, ids, 20)
    # Steps far from the token budget, which alone would have drafted 8: the cap shortened them.
    gammas = [s.gamma for r in results for s in r.steps if s.committed_tokens < 20 - 9]
    assert gammas and min(gammas) <= 1


def test_kv_shared_layers_are_not_batched_and_runs_stay_exact():
    """Gemma 4's KV-shared layers read another layer's keys: such a model's runs take the
    plain path even when several are joined (never a shared pass), and stay exact."""
    from playground.drafters.gemma4_assistant import Gemma4AssistantDrafter
    from tests.fakes import LetterTokenizer
    from tests.tiny_models import gemma4_pair, rand_ids

    target, assistant = gemma4_pair()
    scheduler = PassScheduler(target)
    assert not scheduler.batchable
    tok = LetterTokenizer()
    jobs = []
    for i in range(3):
        ids = rand_ids(6 + 5 * i, seed=i, vocab=64)
        settings = RunSettings(gamma=3, max_new_tokens=12)
        drafter = Gemma4AssistantDrafter(target, assistant, eos_token_ids=[])
        jobs.append((ids, lambda ids=ids, s=settings, d=drafter: run(target, tok, ids, s, drafter=d,
                                                                      scheduler=scheduler)))  # fmt: skip
    results = _together([j for _, j in jobs])
    for (ids, _), r in zip(jobs, results):
        assert list(r.token_ids) == hf_greedy(target, ids, 12, eos=None)
    assert scheduler.passes == 0 and all(s.shared_rows == 1 for r in results for s in r.steps)
