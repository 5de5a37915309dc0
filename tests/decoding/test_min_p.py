"""min-p sampling: the filter by hand and against transformers' own, exactness through the whole
loop (chi-square against the filtered target's exact law), a mutant that ignores it, and greedy
decoding unchanged.

min-p keeps the tokens with p >= min_p * p_max (after temperature, top-k and top-p); the engine
applies the same ``logits_to_probs`` to the target's p and the drafter's q, so verification stays
exact for the filtered target.
"""

import pytest
import torch
from transformers.generation.logits_process import MinPLogitsWarper

from playground.decoding.engine import run
from playground.decoding.sampling import SamplingParams, logits_to_probs
from playground.drafters.model import ModelDrafter
from playground.settings import RunSettings
from tests.contract import first_pair_counts, seeded
from tests.fakes import TABLE_V as V
from tests.fakes import BigramLM, LetterTokenizer, disagreeing_tables
from tests.stats import assert_does_not_follow, assert_follows, table_pair_pmf

N = 4000


def T(xs):
    return torch.tensor(xs, dtype=torch.float32)


@pytest.mark.parametrize(
    "min_p,want",
    [
        (0.0, [0.5, 0.3, 0.15, 0.05]),  # off
        (0.25, [0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0.0]),  # keep p >= 0.125: drops 0.05
        (0.5, [0.625, 0.375, 0.0, 0.0]),  # keep p >= 0.25
        (1.0, [1.0, 0.0, 0.0, 0.0]),  # only the most likely token
    ],
)
def test_min_p_by_hand(min_p, want):
    logits = T([0.5, 0.3, 0.15, 0.05]).log()  # softmax gives these probabilities back
    probs = logits_to_probs(logits, SamplingParams(temperature=1.0, min_p=min_p))
    assert torch.allclose(probs, T(want), atol=1e-6)


@pytest.mark.parametrize("temperature,min_p", [(1.0, 0.05), (0.7, 0.1), (1.5, 0.3)])
def test_min_p_matches_transformers_warper(temperature, min_p):
    logits = torch.randn(3, 50, generator=torch.Generator().manual_seed(0)) * 3  # [3, V]
    ours = logits_to_probs(logits, SamplingParams(temperature=temperature, min_p=min_p))
    warped = MinPLogitsWarper(min_p)(None, logits / temperature)
    assert torch.equal(ours > 0, warped > float("-inf"))  # the same tokens kept
    assert torch.allclose(ours, torch.softmax(warped, dim=-1), atol=1e-6)


def _pairs(min_p_run: float, min_p_law: float, gamma: int):
    """First-two-token counts of N runs with ``min_p_run``, and the exact law under ``min_p_law``."""
    target_logits, drafter_logits = disagreeing_tables()
    target, drafter = BigramLM(target_logits), BigramLM(drafter_logits)
    config = RunSettings(gamma=gamma, temperature=1.0, min_p=min_p_run, max_new_tokens=2, trace=False)

    def run_seed(seed):
        return run(target, LetterTokenizer(), [0], config, drafter=ModelDrafter(drafter, V), generator=seeded(seed))

    law = table_pair_pmf(target_logits, SamplingParams(temperature=1.0, min_p=min_p_law))
    return first_pair_counts(run_seed, N, V), law


@pytest.mark.parametrize("gamma", [1, 3])
def test_speculative_sampling_with_min_p_follows_the_filtered_target(gamma):
    counts, law = _pairs(0.2, 0.2, gamma)
    assert_follows(counts, law)


def test_a_loop_that_ignores_min_p_is_caught():
    counts, law = _pairs(0.0, 0.2, 1)  # the mutant: the run samples the unfiltered target
    assert_does_not_follow(counts, law)


def test_greedy_decoding_is_unchanged_by_min_p():
    target_logits, drafter_logits = disagreeing_tables()
    target, drafter = BigramLM(target_logits), BigramLM(drafter_logits)

    def tokens(min_p):
        s = RunSettings(gamma=3, temperature=0.0, min_p=min_p, max_new_tokens=12, trace=False)
        return run(target, LetterTokenizer(), [0], s, drafter=ModelDrafter(drafter, V)).token_ids

    assert tokens(0.0) == tokens(0.5) == tokens(1.0)
