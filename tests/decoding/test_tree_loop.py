"""Tree drafts through the full loop: greedy output identical to the target's own greedy
decoding for every branching drafter (the cache invariant checked after every step), and
the output distribution equal to the target's when sampling (chi-square), with mutants
that must fail."""

from __future__ import annotations

import functools

import pytest
import torch

from playground.decoding import tree_step as tree_step_module
from playground.decoding.draft import Capabilities, TreeDraft
from playground.decoding.engine import run
from playground.decoding.tree import ROOT, DraftTree
from playground.drafters.hybrid import HybridDrafter
from playground.drafters.model import ModelDrafter
from playground.drafters.mtp import MTPDrafter
from playground.drafters.prompt_lookup import PromptLookupDrafter, continuation_tree, find_continuations
from playground.models.tiny import EOS, CharTokenizer
from playground.settings import RunSettings
from tests.contract import (
    CacheSpy,
    DrafterCacheSpy,
    assert_checked_every_step,
    assert_first_token_distribution,
    assert_greedy_equals_target,
    branched_steps,
    first_pair_counts,
    seeded,
)
from tests.fakes import TABLE_V as V
from tests.fakes import BigramLM, LetterTokenizer, disagreeing_tables
from tests.stats import PARAMS, assert_does_not_follow, assert_follows, table_pair_pmf
from tests.tiny_models import sliding_pair, tiny_head, tiny_target

PROMPTS = ["abcabcabd abcabx abcab", "the cat sat. the cat ran. the c", "sliding windows roll back"]


@pytest.mark.parametrize("nodes", [2, 4, 16])
@pytest.mark.parametrize("gamma", [1, 2, 4, 8])
def test_prompt_lookup_tree_greedy_equals_transformers_past_the_window(gamma, nodes):
    target, _ = sliding_pair(window=4)
    tok = CharTokenizer()
    for prompt in PROMPTS:
        spy = CacheSpy(PromptLookupDrafter(), target)
        cfg = RunSettings(gamma=gamma, max_new_tokens=30, tree_nodes=nodes)
        r = assert_greedy_equals_target(target, tok, tok.encode(prompt), cfg, spy, msg=prompt)
        assert_checked_every_step(spy, r)
        if nodes > 1 and "ab" in prompt:
            assert any(len(s.drafted) > 0 and s.drafted[0].parent is not None for s in r.steps)  # tree steps ran


@pytest.mark.parametrize("nodes", [4, 16])
@pytest.mark.parametrize("gamma", [1, 3, 6])
@pytest.mark.parametrize("kind", ["mtp", "mtp+lookup"])
def test_mtp_tree_greedy_equals_transformers(kind, gamma, nodes):
    target = tiny_target()
    head = tiny_head(target)
    tok = CharTokenizer()
    branched = 0
    for prompt in PROMPTS:
        mtp = MTPDrafter(target, head, eos_token_ids=[EOS])
        drafter = CacheSpy(mtp if kind == "mtp" else HybridDrafter(mtp), target)
        cfg = RunSettings(gamma=gamma, max_new_tokens=24, tree_nodes=nodes)
        r = assert_greedy_equals_target(target, tok, tok.encode(prompt), cfg, drafter, msg=prompt)
        branched += branched_steps(r)
    assert branched > 0  # some steps really had siblings


@pytest.mark.parametrize("nodes", [4, 16])
@pytest.mark.parametrize("gamma", [1, 3, 6])
def test_model_drafter_tree_greedy_equals_transformers_past_the_window(gamma, nodes):
    """The two-model drafter drafts its tree with its own tree pass (window-4 sliding layers):
    the output equals the target's greedy decoding and both caches hold exactly committed
    tokens after every step."""
    target, drafter_model = sliding_pair(window=4)
    tok = CharTokenizer()
    branched = 0
    for prompt in PROMPTS:
        spy = DrafterCacheSpy(ModelDrafter(drafter_model, 100), target)
        cfg = RunSettings(gamma=gamma, max_new_tokens=24, tree_nodes=nodes)
        r = assert_greedy_equals_target(target, tok, tok.encode(prompt), cfg, spy, msg=prompt)
        assert_checked_every_step(spy, r)
        branched += branched_steps(r)
    assert branched > 0


class KeepsTreeKeys(ModelDrafter):
    """Mutant: the tree passes' keys stay in the drafter's cache (its crop is skipped)."""

    def propose_tree(self, *args, **kw):
        crop = self.cache.crop
        self.cache.crop = lambda n: None
        try:
            return super().propose_tree(*args, **kw)
        finally:
            self.cache.crop = crop


def test_mutant_model_drafter_keeping_its_tree_keys_is_caught():
    target, drafter_model = sliding_pair(window=4)
    tok = CharTokenizer()
    spy = DrafterCacheSpy(KeepsTreeKeys(drafter_model, 100), target)
    with pytest.raises(AssertionError, match="assert"):
        run(
            target,
            tok,
            tok.encode(PROMPTS[0]),
            RunSettings(gamma=3, max_new_tokens=12, tree_nodes=8),
            drafter=spy,
            eos_token_ids=[EOS],
        )
    assert spy.checks == 1  # the first step: the target's cache passed, the drafter's own failed


def test_prompt_lookup_trie_merges_shared_prefixes():
    ids = [1, 2, 3, 1, 2, 4, 1, 2, 3, 5, 1, 2]
    conts = find_continuations(ids, depth=3)
    assert conts == [[3, 5, 1], [4, 1, 2], [3, 1, 2]]  # most recent match first
    tree = continuation_tree(conts, max_nodes=16)
    assert tree.tokens == (3, 5, 1, 4, 1, 2, 1, 2) and tree.parents == (ROOT, 0, 1, ROOT, 3, 4, 0, 6)
    assert len(continuation_tree(conts, max_nodes=4)) == 4


# ---------------------------------------------------------------- sampling through the loop


class SampledTreeDrafter:
    """Siblings drawn from the drafter's q without replacement (``branch`` per node, depth
    ``depth``); q rows are the conditional laws they were drawn from, unless
    ``unconditional`` (a MUTANT: the plain q)."""

    name = "sampled-tree"
    needs_target_hidden = False
    capabilities = Capabilities(branches=True)

    def __init__(self, table: torch.Tensor, params, branch: int = 2, unconditional: bool = False):
        self.table, self.params, self.branch, self.unconditional = table, params, branch, unconditional

    def start(self, state):
        pass

    def accept(self, n, state):
        pass

    def cache_len(self):
        return None

    def propose(self, state, gamma, params, generator):  # pragma: no cover - trees only here
        raise AssertionError("tree drafter")

    def propose_tree(self, state, max_nodes, max_depth, params, generator):
        from playground.decoding.sampling import logits_to_probs

        tokens, parents, rows = [], [], []
        frontier = [(ROOT, state.committed_ids[-1], 1)]
        while frontier:
            node, last, depth = frontier.pop(0)
            q = logits_to_probs(self.table[last], params)  # [V]
            left = q.clone()
            for _ in range(self.branch):
                if len(tokens) >= max_nodes or float(left.sum()) <= 1e-9:
                    break
                row = q.clone() if self.unconditional else left / left.sum()
                tok = int(torch.multinomial(left / left.sum(), 1, generator=generator))
                tokens.append(tok)
                parents.append(node)
                rows.append(row)
                left = left.clone()
                left[tok] = 0.0
                if depth < max_depth:
                    frontier.append((len(tokens) - 1, tok, depth + 1))
        tree = DraftTree(tuple(tokens), tuple(parents), torch.stack(rows) if rows else None)
        return TreeDraft(tree=tree)


def sample_tree_pairs(params, drafter_factory, n=3000):
    target_logits, drafter_logits = disagreeing_tables()
    target = BigramLM(target_logits)
    config = RunSettings(
        gamma=2,
        temperature=params.temperature,
        top_k=params.top_k,
        top_p=params.top_p,
        max_new_tokens=3,
        trace=False,
        tree_nodes=6,
    )
    counts = first_pair_counts(
        lambda seed: run(
            target, LetterTokenizer(), [0], config, drafter=drafter_factory(drafter_logits), generator=seeded(seed)
        ),
        n,
        V,
    )
    return counts, table_pair_pmf(target_logits, params)


@pytest.mark.parametrize("name", ["T=1", "T=0.7,top-k=4"])
@pytest.mark.parametrize("branch", [1, 3])
def test_sampled_tree_matches_target_distribution(name, branch):
    params = PARAMS[name]
    counts, pmf = sample_tree_pairs(params, lambda t: SampledTreeDrafter(t, params, branch=branch))
    assert_follows(counts, pmf)


@pytest.mark.parametrize("name", ["T=1", "T=0.7,top-k=4"])
def test_model_drafter_tree_matches_target_distribution(name):
    """The two-model drafter's children drawn without replacement, two levels of them (the
    second under each first-drawn child only: ``tree_grow``), through the full loop."""
    params = PARAMS[name]
    counts, pmf = sample_tree_pairs(params, lambda t: ModelDrafter(BigramLM(t), V), n=2000)
    assert_follows(counts, pmf)


def test_mutant_unconditional_q_for_sampled_siblings_fails():
    params = PARAMS["T=1"]
    counts, pmf = sample_tree_pairs(params, lambda t: SampledTreeDrafter(t, params, branch=3, unconditional=True))
    assert_does_not_follow(counts, pmf)


def test_mutant_no_residual_update_between_siblings_fails(monkeypatch):
    params = PARAMS["T=1"]
    monkeypatch.setattr(
        tree_step_module, "verify_tree", functools.partial(tree_step_module.verify_tree, update_residual=False)
    )
    counts, pmf = sample_tree_pairs(params, lambda t: SampledTreeDrafter(t, params, branch=3))
    assert_does_not_follow(counts, pmf)


def test_trees_refuse_teaching_rules():
    with pytest.raises(ValueError, match="lossless rule only"):
        RunSettings(tree_nodes=4, rule="typical")


def test_mtp_sampled_tree_first_token_matches_the_target():
    """At T=1 the MTP head draws its tree's children without replacement (rows = the exact
    laws); the first emitted token is distributed as the target's own p."""
    target = tiny_target()
    head = tiny_head(target)
    prompt = CharTokenizer().encode("the cat sat")
    config = RunSettings(gamma=2, temperature=1.0, max_new_tokens=2, trace=False, tree_nodes=6)
    runs = assert_first_token_distribution(
        target, CharTokenizer(), prompt, config, lambda: MTPDrafter(target, head, eos_token_ids=[EOS]), 1500, [EOS]
    )
    assert sum(r.stats.judged_tokens for r in runs) > 1500  # trees were drafted and judged
