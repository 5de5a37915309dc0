"""``mtp+lookup`` (playground.drafters.hybrid): prompt lookup when the text repeats, else the
fallback drafter.  The choice depends on the committed tokens only, so every step is an
ordinary lossless step with the chosen drafter's own q."""

from __future__ import annotations

import pytest
import torch

from playground.decoding.draft import Draft, TargetState
from playground.decoding.engine import run
from playground.decoding.sampling import SamplingParams, logits_to_probs, sample
from playground.drafters.base import BaseDrafter
from playground.drafters.hybrid import HybridDrafter
from playground.settings import RunSettings
from tests.contract import assert_greedy_equals_target, first_pair_counts, hf_greedy, seeded
from tests.fakes import TABLE_V as V
from tests.fakes import BigramLM, LetterTokenizer, disagreeing_tables
from tests.stats import PARAMS, assert_does_not_follow, assert_follows, table_pair_pmf

PROMPT = [0, 1, 2, 0, 1]  # the bigram (0, 1) repeats: prompt lookup proposes [2, 0, 1, ...]


class TableDrafter(BaseDrafter):
    """Stateless bigram drafter: q = logits_to_probs(table[last token]), exactly what it samples.
    Chains only (BaseDrafter's declaration); no state to reset or roll back."""

    name = "table"

    def __init__(self, table: torch.Tensor) -> None:
        self.table = table  # [V, V]

    def propose(self, state, gamma, params, generator) -> Draft:
        last, tokens, rows = state.committed_ids[-1], [], []
        for _ in range(gamma):
            if params.greedy:
                last = int(torch.argmax(self.table[last]))
            else:
                probs = logits_to_probs(self.table[last], params)  # [V]
                last = sample(probs, generator)
                rows.append(probs)
            tokens.append(last)
        return Draft(token_ids=tokens, draft_probs=torch.stack(rows) if rows else None, info={"table": True})


def _state(ids):
    return TargetState(committed_ids=list(ids), hidden=None, target_cache=None)


def test_lookup_first_fallback_otherwise():
    _, drafter_logits = disagreeing_tables()
    h = HybridDrafter(TableDrafter(drafter_logits))
    g = torch.Generator().manual_seed(0)
    d = h.propose(_state(PROMPT), 3, SamplingParams(temperature=1.0), g)
    assert d.token_ids == [2, 0, 1] and d.draft_probs is None  # copied span: q is a point mass
    assert d.info["source"] == "prompt-lookup"
    # no 2-token match (a 1-token match is not enough): the fallback drafts, its q untouched
    ids = [0, 1, 2, 3, 4, 1]
    d = h.propose(_state(ids), 3, SamplingParams(temperature=1.0), torch.Generator().manual_seed(5))
    ref = TableDrafter(drafter_logits).propose(
        _state(ids), 3, SamplingParams(temperature=1.0), torch.Generator().manual_seed(5)
    )
    assert d.token_ids == ref.token_ids and torch.equal(d.draft_probs, ref.draft_probs)
    assert d.info == {"table": True, "source": "table"}


def _sample_pairs(params, gamma, rule="lossless", n=3000):
    target_logits, drafter_logits = disagreeing_tables()
    config = RunSettings(
        mode="speculative",
        gamma=gamma,
        temperature=params.temperature,
        top_k=params.top_k,
        top_p=params.top_p,
        max_new_tokens=2,
        trace=False,
        rule=rule,
    )
    sources = set()

    def run_seed(seed):
        nonlocal sources
        d = HybridDrafter(TableDrafter(drafter_logits))
        r = run(BigramLM(target_logits), LetterTokenizer(), PROMPT, config, drafter=d, generator=seeded(seed))
        sources |= {s.drafter_info.get("source") for s in r.steps} if r.steps else set()
        return r

    counts = first_pair_counts(run_seed, n, V)
    return counts, table_pair_pmf(target_logits, params, last=PROMPT[-1]), sources


@pytest.mark.parametrize("gamma", [1, 3])
def test_hybrid_sampling_matches_target_distribution(gamma):
    counts, pmf, _ = _sample_pairs(PARAMS["T=1"], gamma)
    assert_follows(counts, pmf)


def test_hybrid_uses_both_sources_and_a_broken_rule_is_caught():
    config = RunSettings(mode="speculative", gamma=3, temperature=1.0, max_new_tokens=6, trace=True)
    target_logits, drafter_logits = disagreeing_tables()
    sources = set()
    for seed in range(30):
        d = HybridDrafter(TableDrafter(drafter_logits))
        r = run(BigramLM(target_logits), LetterTokenizer(), PROMPT, config, drafter=d, generator=seeded(seed))
        sources |= {s.drafter_info.get("source") for s in r.steps}
    assert {"prompt-lookup", "table"} <= sources
    counts, pmf, _ = _sample_pairs(PARAMS["T=1"], 1, rule="target-sample")  # no residual after a rejection
    assert_does_not_follow(counts, pmf)


def test_greedy_equality_with_mtp_fallback():
    """mtp+lookup at temperature 0 == the target's greedy generate (tiny Gemma 3, float32)."""
    from playground.drafters.mtp import MTPDrafter
    from playground.models.tiny import CharTokenizer
    from tests.tiny_models import char_target_and_head

    model, head = char_target_and_head()
    tok = CharTokenizer()
    prompt = tok.encode("the cat sat on the mat; the cat sat on the")
    ref = hf_greedy(model, prompt, 24, eos=None)
    for gamma in (1, 3, 5):
        drafter = HybridDrafter(MTPDrafter(model, head, eos_token_ids=[]))
        assert drafter.needs_target_hidden
        cfg = RunSettings(mode="speculative", gamma=gamma, temperature=0.0, max_new_tokens=24)
        res = assert_greedy_equals_target(model, tok, prompt, cfg, drafter, eos_token_ids=[], expected=ref, msg=gamma)
        used = {s.drafter_info.get("source") for s in res.steps}
        assert "prompt-lookup" in used and "mtp" in used, used


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_fallback_that_cannot_branch_drafts_its_chain_as_the_tree(temperature):
    """Asked for a tree where prompt lookup finds no match, the hybrid gives the fallback's
    chain (``BaseDrafter.propose_tree``): the same tokens and q rows as its ``propose``."""
    table = disagreeing_tables()[1]
    state, params = _state([3, 4]), SamplingParams(temperature=temperature)  # no earlier match: no lookup
    tree = HybridDrafter(TableDrafter(table)).propose_tree(state, 8, 3, params, seeded(0))
    chain = TableDrafter(table).propose(state, 3, params, seeded(0))
    assert list(tree.tree.tokens) == chain.token_ids and tree.tree.parents == (-1, 0, 1)
    assert (tree.tree.draft_probs is None) == (chain.draft_probs is None)
    if chain.draft_probs is not None:
        assert torch.equal(tree.tree.draft_probs, chain.draft_probs)
    assert tree.info["source"] == "table"
