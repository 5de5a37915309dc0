"""Statistical losslessness through the full loop, and mutants that must fail.

Small vocabulary (V = 6) bigram models with hand-chosen, disagreeing tables:
the exact target distribution of the first two tokens is
P(y1, y2) = p(y1 | x) · p(y2 | y1), computed from the tables.  We draw N
two-token continuations with the real loop (ModelDrafter, verify, rollback,
bonus) and run a chi-square goodness-of-fit test against it.  The same test
is run on deliberately broken rules and must reject them: a statistical test
that passes a broken sampler proves nothing.
"""

import pytest

from playground.decoding.engine import run
from playground.drafters.model import ModelDrafter
from playground.settings import RunSettings
from tests.contract import first_pair_counts, seeded
from tests.fakes import TABLE_V as V
from tests.fakes import BigramLM, LetterTokenizer, disagreeing_tables
from tests.stats import PARAMS, assert_does_not_follow, assert_follows, table_pair_pmf

N = 4000


def sample_pairs(params, gamma, rule="lossless", draft_argmax=False, mode="speculative", n=N):
    target_logits, drafter_logits = disagreeing_tables()
    target, drafter = BigramLM(target_logits), BigramLM(drafter_logits)
    config = RunSettings(
        mode=mode,
        gamma=gamma,
        temperature=params.temperature,
        top_k=params.top_k,
        top_p=params.top_p,
        max_new_tokens=2,
        trace=False,
        rule=rule,
    )
    tok = LetterTokenizer()

    def run_seed(seed):
        d = ModelDrafter(drafter, V, argmax=draft_argmax) if mode == "speculative" else None
        return run(target, tok, [0], config, drafter=d, generator=seeded(seed))

    return first_pair_counts(run_seed, n, V), table_pair_pmf(target_logits, params)


@pytest.mark.parametrize("gamma", [1, 3])
@pytest.mark.parametrize("name", list(PARAMS))
def test_speculative_sampling_matches_target_distribution(name, gamma):
    counts, pmf = sample_pairs(PARAMS[name], gamma)
    assert_follows(counts, pmf)


def test_autoregressive_baseline_matches_target_distribution():
    counts, pmf = sample_pairs(PARAMS["T=1"], 1, mode="autoregressive")
    assert_follows(counts, pmf)


@pytest.mark.parametrize(
    "rule,draft_argmax,gamma",
    [
        ("softmax-q", True, 1),  # argmax drafts verified against softmax q (transformers #32867)
        ("target-sample", False, 1),  # no residual: after a rejection, a plain target sample
        ("bonus-wrong-position", False, 1),  # bonus from p at position γ instead of γ+1
    ],
)
def test_mutants_are_detected(rule, draft_argmax, gamma):
    counts, pmf = sample_pairs(PARAMS["T=1"], gamma, rule=rule, draft_argmax=draft_argmax)
    assert_does_not_follow(counts, pmf)


def test_argmax_drafts_with_one_hot_q_are_lossless():
    # The honest version of the softmax-q mutant: same argmax drafts, one-hot q.
    counts, pmf = sample_pairs(PARAMS["T=1"], 1, draft_argmax=True)
    assert_follows(counts, pmf)


def test_exact_match_rule_is_lossless_but_accepts_less():
    counts, pmf = sample_pairs(PARAMS["T=1"], 1, rule="exact-match")
    assert_follows(counts, pmf)
