"""The decoding loop: greedy equality with transformers, cache invariants, edge cases.

Reference for greedy equality: ``model.generate(do_sample=False)`` from
transformers on the same model (float32).
"""

import pytest

from playground.decoding.engine import run, stream
from playground.decoding.records import GenerationResult, StepRecord
from playground.drafters.model import ModelDrafter
from playground.drafters.prompt_lookup import PromptLookupDrafter, find_continuation
from playground.models.tiny import EOS, CharTokenizer
from playground.settings import RunSettings
from tests.contract import (
    CacheSpy,
    assert_checked_every_step,
    assert_greedy_equals_target,
    hf_greedy,
    rejected_drafts,
)
from tests.fakes import BigramLM, bigram_table
from tests.fakes import LetterTokenizer as Letters
from tests.tiny_models import sliding_pair

GAMMAS = [1, 2, 4, 8]
PROMPTS = ["The capital of France is", "a", "def f(x):\n    return x * x\n\nprint(f(3))  # 9\nprint(f("]


def make_drafter(kind, drafter_model):
    return PromptLookupDrafter() if kind == "prompt-lookup" else ModelDrafter(drafter_model, 100)


# ---------------------------------------------------------------- greedy equality


@pytest.mark.parametrize("gamma", GAMMAS)
@pytest.mark.parametrize("kind", ["model", "prompt-lookup"])
def test_greedy_speculative_equals_transformers_generate_tiny(tiny_pair, kind, gamma):
    target, drafter_model, tok = tiny_pair
    for prompt in PROMPTS:
        cfg = RunSettings(gamma=gamma, max_new_tokens=40)
        drafter = make_drafter(kind, drafter_model)
        r = assert_greedy_equals_target(target, tok, tok.encode(prompt), cfg, drafter, msg=prompt)
    assert r.stats.steps < len(r.token_ids) or kind == "prompt-lookup"  # drafts really were accepted


def test_greedy_autoregressive_equals_transformers_generate(tiny_pair):
    target, _, tok = tiny_pair
    for prompt in PROMPTS:
        cfg = RunSettings(mode="autoregressive", max_new_tokens=30)
        r = assert_greedy_equals_target(target, tok, tok.encode(prompt), cfg)
        assert r.stats.target_calls == len(r.token_ids) + 1  # prefill + one pass per token


@pytest.mark.parametrize("gamma", GAMMAS)
@pytest.mark.parametrize("kind", ["model", "prompt-lookup"])
def test_greedy_equality_with_sliding_window_rollback(kind, gamma):
    target, drafter_model = sliding_pair(window=4)
    tok = CharTokenizer()
    ids = tok.encode("sliding windows roll back")  # 26 tokens: far past the window of 4
    spy = CacheSpy(make_drafter(kind, drafter_model), target)
    r = assert_greedy_equals_target(target, tok, ids, RunSettings(gamma=gamma, max_new_tokens=30), spy)
    assert_checked_every_step(spy, r)
    if kind == "model":
        assert rejected_drafts(r) > 0  # rollbacks across the window really happened


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_autoregressive_runs_past_the_sliding_window(temperature):
    """The autoregressive loop never crops: a sliding layer past its window (here 4) that
    does not record its past refuses any crop, which once crashed every AR run past 512
    tokens on Gemma 3.  Greedy output still equals transformers'."""
    target, _ = sliding_pair(window=4)
    tok = CharTokenizer()
    ids = tok.encode("sliding windows roll back")  # 26 tokens: far past the window of 4
    cfg = RunSettings(mode="autoregressive", temperature=temperature, max_new_tokens=30)
    r = run(target, tok, ids, cfg, eos_token_ids=[EOS])
    assert len(r.token_ids) > 0
    if temperature == 0.0:
        assert list(r.token_ids) == hf_greedy(target, ids, 30)


# ---------------------------------------------------------------- cache invariant


@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("gamma", [1, 3])
def test_target_cache_equals_fresh_prefill_after_every_step(tiny_pair, temperature, gamma):
    target, drafter_model, tok = tiny_pair
    spy = CacheSpy(ModelDrafter(drafter_model, 100), target)
    r = run(
        target,
        tok,
        tok.encode("Check the cache"),
        RunSettings(gamma=gamma, temperature=temperature, max_new_tokens=25, seed=3),
        drafter=spy,
        eos_token_ids=[EOS],
    )
    assert spy.checks >= len(r.steps) - 1 > 0


def test_model_drafter_cache_is_a_prefix_of_committed(tiny_pair):
    target, drafter_model, tok = tiny_pair
    d = ModelDrafter(drafter_model, 100)
    for item in stream(
        target,
        tok,
        tok.encode("prefix"),
        RunSettings(gamma=4, temperature=1.0, max_new_tokens=20),
        drafter=d,
        eos_token_ids=[EOS],
    ):
        if isinstance(item, StepRecord) and not item.eos:
            assert item.drafter_cache_len == len(d._seen) <= len(tok.encode("prefix")) + item.committed_tokens - 1


# ---------------------------------------------------------------- replay and records


def test_same_seed_replays_exactly_and_records_every_u(tiny_pair):
    target, drafter_model, tok = tiny_pair
    cfg = RunSettings(gamma=4, temperature=1.0, max_new_tokens=30, seed=11)
    a = run(target, tok, tok.encode("replay"), cfg, drafter=ModelDrafter(drafter_model, 100), eos_token_ids=[EOS])
    b = run(target, tok, tok.encode("replay"), cfg, drafter=ModelDrafter(drafter_model, 100), eos_token_ids=[EOS])
    assert a.token_ids == b.token_ids
    us_a = [d.u for s in a.steps for d in s.drafted if d.judged]
    assert us_a == [d.u for s in b.steps for d in s.drafted if d.judged]
    assert all(u is not None and 0 <= u < 1 for u in us_a)
    for s in a.steps:  # every judged verdict agrees with its own recorded numbers
        for d in s.drafted:
            if d.judged:
                assert d.accepted == (d.u < d.accept_prob)
        assert s.correction is not None
        assert s.n_accepted + 1 == len(s.emitted_ids)


def test_result_round_trips_through_json(tiny_pair):
    import json

    target, drafter_model, tok = tiny_pair
    r = run(
        target,
        tok,
        tok.encode("json"),
        RunSettings(gamma=3, temperature=1.0, max_new_tokens=12),
        drafter=ModelDrafter(drafter_model, 100),
        eos_token_ids=[EOS],
    )
    back = GenerationResult.from_dict(json.loads(json.dumps(r.to_dict())))
    assert back.token_ids == r.token_ids and back.steps == r.steps and back.stats == r.stats


def test_stats_are_consistent(tiny_pair):
    target, drafter_model, tok = tiny_pair
    r = run(
        target,
        tok,
        tok.encode("stats"),
        RunSettings(gamma=4, temperature=1.0, max_new_tokens=40, seed=2),
        drafter=ModelDrafter(drafter_model, 100),
        eos_token_ids=[EOS],
    )
    s = r.stats
    assert s.new_tokens == len(r.token_ids) == sum(len(x.emitted_ids) for x in r.steps)
    assert s.accepted_tokens == sum(x.n_accepted for x in r.steps)
    assert sum(s.accepted_length_hist) == s.steps
    assert s.target_calls == s.steps + 1  # one verify pass per step + prefill
    assert s.tokens_per_target_call == pytest.approx(s.new_tokens / s.steps)
    judged = sum(1 for x in r.steps for d in x.drafted if d.judged)
    assert s.acceptance_rate == pytest.approx(s.accepted_tokens / judged)
    assert "".join(x.emitted_text for x in r.steps) == r.text


# ---------------------------------------------------------------- edge cases (table-driven fakes)


V, EOS_F = 10, 9


def test_eos_inside_a_draft_is_accepted_and_stops_without_bonus():
    table = bigram_table({5: 6, 6: 7, 7: EOS_F, EOS_F: 1}, V)
    target, drafter = BigramLM(table), BigramLM(table)
    r = run(
        target,
        Letters(),
        [4, 5],
        RunSettings(gamma=6, max_new_tokens=20),
        drafter=ModelDrafter(drafter, V),
        eos_token_ids=[EOS_F],
    )
    assert list(r.token_ids) == [6, 7, EOS_F]
    (step,) = r.steps
    assert [d.token_id for d in step.drafted] == [6, 7, EOS_F]  # drafting stopped at EOS
    assert step.correction is None and step.eos and r.stats.stopped == "eos"


def test_eos_as_the_bonus_token():
    table = bigram_table({5: 6, 6: 7, 7: EOS_F}, V)
    target, drafter = BigramLM(table), BigramLM(table)
    r = run(
        target,
        Letters(),
        [5],
        RunSettings(gamma=2, max_new_tokens=20),
        drafter=ModelDrafter(drafter, V),
        eos_token_ids=[EOS_F],
    )
    assert list(r.token_ids) == [6, 7, EOS_F]
    assert r.steps[0].correction.kind == "bonus" and r.steps[0].correction.token_id == EOS_F


def test_eos_from_the_residual_stops_generation():
    target = BigramLM(bigram_table({5: EOS_F}, V))
    drafter = BigramLM(bigram_table({5: 2}, V))
    r = run(
        target,
        Letters(),
        [5],
        RunSettings(gamma=3, max_new_tokens=20),
        drafter=ModelDrafter(drafter, V),
        eos_token_ids=[EOS_F],
    )
    assert list(r.token_ids) == [EOS_F] and r.steps[0].correction.kind == "resample"


@pytest.mark.parametrize("max_new", [1, 2, 3, 5])
def test_never_drafts_past_the_budget(max_new):
    table = bigram_table({}, V)
    target, drafter = BigramLM(table), BigramLM(table)
    r = run(
        target,
        Letters(),
        [0],
        RunSettings(gamma=8, max_new_tokens=max_new),
        drafter=ModelDrafter(drafter, V),
        eos_token_ids=[],
    )
    assert len(r.token_ids) == max_new
    for s in r.steps:
        assert len(s.drafted) <= max_new - 1
    assert target.calls == [max_new]  # one-token prompt: no prefill; one pass over the last token + max_new-1 drafts


def test_one_token_prompt():
    table = bigram_table({}, V)
    target, drafter = BigramLM(table), BigramLM(table)
    r = run(target, Letters(), [3], RunSettings(gamma=2, max_new_tokens=6), drafter=ModelDrafter(drafter, V))
    assert list(r.token_ids) == [4, 5, 6, 7, 8, 9]
    assert target.calls == [3, 3]  # no prefill; two passes of 1 + 2 drafts


def test_prompt_lookup_without_match_falls_back_to_plain_steps():
    table = bigram_table({}, V)
    target = BigramLM(table)
    r = run(target, Letters(), [0, 1, 2], RunSettings(gamma=4, max_new_tokens=3), drafter=PromptLookupDrafter())
    assert list(r.token_ids) == [3, 4, 5]
    assert all(len(s.drafted) == 0 and s.correction.kind == "target" for s in r.steps)
    assert r.stats.acceptance_rate is None


def test_prompt_lookup_copies_after_most_recent_match():
    assert find_continuation([1, 2, 3, 9, 1, 2, 3, 7, 8, 1, 2, 3], 3) == [7, 8, 1]
    assert find_continuation([5, 6, 7], 4) == []
    assert find_continuation([4, 4, 4], 2) == [4]  # the suffix itself is excluded


def test_empty_prompt_is_rejected_with_a_clear_message():
    from playground import generate

    with pytest.raises(ValueError, match="empty"):
        generate("   ", preset="tiny-random")
    with pytest.raises(ValueError, match="empty"):
        run(BigramLM(bigram_table({}, V)), Letters(), [], RunSettings(), drafter=PromptLookupDrafter())


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(gamma=0), "gamma"),
        (dict(gamma=99), "gamma"),
        (dict(temperature=-0.1), "temperature"),
        (dict(temperature=float("nan")), "temperature"),
        (dict(top_p=0.0), "top_p"),
        (dict(max_new_tokens=0), "max_new_tokens"),
        (dict(preset="no-such-preset"), "unknown preset"),
        (dict(drafter="mtp"), "drafter"),
        (dict(mode="beam"), "mode"),
    ],
)
def test_api_rejects_bad_settings(kwargs, match):
    from playground import generate

    with pytest.raises(ValueError, match=match):
        generate("hello", **{"preset": "tiny-random", **kwargs})


def test_api_generate_tiny_random():
    from playground import generate

    r = generate("Hello", preset="tiny-random", gamma=3, max_new_tokens=10, temperature=0.0)
    assert len(r.token_ids) == 10 and r.stats.mode == "speculative" and r.config["preset"] == "tiny-random"
    ar = generate("Hello", preset="tiny-random", mode="autoregressive", max_new_tokens=10)
    assert ar.token_ids == r.token_ids
