"""Tree drafts through the full loop: greedy output identical to the target's own greedy
decoding for every branching drafter (the cache invariant checked after every step), and
the output distribution equal to the target's when sampling (chi-square), with mutants
that must fail."""

from __future__ import annotations

import functools

import pytest
import torch
from transformers import DynamicCache

from playground import tree_step as tree_step_module
from playground.drafters.base import TreeDraft
from playground.drafters.hybrid import HybridDrafter
from playground.drafters.model import ModelDrafter
from playground.drafters.mtp import MTPDrafter
from playground.drafters.prompt_lookup import PromptLookupDrafter, continuation_tree, find_continuations
from playground.engine import GenerationConfig, run
from playground.tiny import EOS, CharTokenizer
from playground.tree import ROOT, DraftTree
from tests.fakes import BigramLM
from tests.test_distribution import PARAMS, V, _Tok, _tables, exact_pair_pmf, gof_pvalue
from tests.test_engine import CacheSpy, hf_greedy, sliding_pair
from tests.test_mtp import tiny_head, tiny_target

class TreeSpy(CacheSpy):
    """CacheSpy for branching drafters: the cache invariant is checked after every tree step."""

    def propose_tree(self, *args):
        return self.inner.propose_tree(*args)


class OwnCacheSpy(TreeSpy):
    """TreeSpy for a drafter with its own KV cache: after every step its cache must equal a
    fresh prefill of the tokens it claims to hold, and those must be committed tokens."""

    @torch.inference_mode()
    def accept(self, n, state):
        super().accept(n, state)
        d = self.inner
        assert d._seen == state.committed_ids[: len(d._seen)]
        assert d.cache.get_seq_length() == len(d._seen)
        fresh = DynamicCache(config=d.model.config)
        d.model(input_ids=torch.tensor([d._seen]), cache=fresh, use_cache=True)
        for a, b in zip(d.cache.layers, fresh.layers):
            assert a.keys.shape == b.keys.shape
            assert torch.allclose(a.keys, b.keys, atol=1e-5) and torch.allclose(a.values, b.values, atol=1e-5)


PROMPTS = ["abcabcabd abcabx abcab", "the cat sat. the cat ran. the c", "sliding windows roll back"]


@pytest.mark.parametrize("nodes", [2, 4, 16])
@pytest.mark.parametrize("gamma", [1, 2, 4, 8])
def test_prompt_lookup_tree_greedy_equals_transformers_past_the_window(gamma, nodes):
    target, _ = sliding_pair(window=4)
    tok = CharTokenizer()
    for prompt in PROMPTS:
        ids = tok.encode(prompt)
        spy = TreeSpy(PromptLookupDrafter(), target)
        r = run(target, tok, ids, GenerationConfig(gamma=gamma, max_new_tokens=30, tree_nodes=nodes), drafter=spy,
                eos_token_ids=[EOS])
        assert list(r.token_ids) == hf_greedy(target, ids, 30), prompt
        assert spy.checks == len(r.steps) - (1 if r.stats.stopped == "eos" else 0)
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
        ids = tok.encode(prompt)
        mtp = MTPDrafter(target, head, eos_token_ids=[EOS])
        drafter = TreeSpy(mtp if kind == "mtp" else HybridDrafter(mtp), target)
        r = run(target, tok, ids, GenerationConfig(gamma=gamma, max_new_tokens=24, tree_nodes=nodes), drafter=drafter,
                eos_token_ids=[EOS])
        assert list(r.token_ids) == hf_greedy(target, ids, 24), prompt
        branched += sum(1 for s in r.steps if len({d.parent for d in s.drafted}) < len(s.drafted))
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
        ids = tok.encode(prompt)
        spy = OwnCacheSpy(ModelDrafter(drafter_model, 100), target)
        r = run(target, tok, ids, GenerationConfig(gamma=gamma, max_new_tokens=24, tree_nodes=nodes), drafter=spy,
                eos_token_ids=[EOS])
        assert list(r.token_ids) == hf_greedy(target, ids, 24), prompt
        assert spy.checks == len(r.steps) - (1 if r.stats.stopped == "eos" else 0)
        branched += sum(1 for s in r.steps if len({d.parent for d in s.drafted}) < len(s.drafted))
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
    spy = OwnCacheSpy(KeepsTreeKeys(drafter_model, 100), target)
    with pytest.raises(AssertionError, match="assert"):
        run(target, tok, tok.encode(PROMPTS[0]), GenerationConfig(gamma=3, max_new_tokens=12, tree_nodes=8),
            drafter=spy, eos_token_ids=[EOS])
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
        from playground.sampling import logits_to_probs

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
    target_logits, drafter_logits = _tables()
    target = BigramLM(target_logits)
    config = GenerationConfig(gamma=2, temperature=params.temperature, top_k=params.top_k, top_p=params.top_p,
                              max_new_tokens=3, trace=False, tree_nodes=6)
    counts = torch.zeros(V * V)
    for seed in range(n):
        r = run(target, _Tok(), [0], config, drafter=drafter_factory(drafter_logits),
                generator=torch.Generator().manual_seed(seed))
        y1, y2 = r.token_ids[:2]
        counts[y1 * V + y2] += 1
    return counts, exact_pair_pmf(target_logits, params)


@pytest.mark.parametrize("name", ["T=1", "T=0.7,top-k=4"])
@pytest.mark.parametrize("branch", [1, 3])
def test_sampled_tree_matches_target_distribution(name, branch):
    params = PARAMS[name]
    counts, pmf = sample_tree_pairs(params, lambda t: SampledTreeDrafter(t, params, branch=branch))
    assert gof_pvalue(counts, pmf) > 1e-3


@pytest.mark.parametrize("name", ["T=1", "T=0.7,top-k=4"])
def test_model_drafter_tree_matches_target_distribution(name):
    """The two-model drafter's deterministic top-k children (one-hot q) through the full loop."""
    params = PARAMS[name]
    counts, pmf = sample_tree_pairs(params, lambda t: ModelDrafter(BigramLM(t), V), n=2000)
    assert gof_pvalue(counts, pmf) > 1e-3


def test_mutant_unconditional_q_for_sampled_siblings_fails():
    params = PARAMS["T=1"]
    counts, pmf = sample_tree_pairs(params, lambda t: SampledTreeDrafter(t, params, branch=3, unconditional=True))
    assert gof_pvalue(counts, pmf) < 1e-6


def test_mutant_no_residual_update_between_siblings_fails(monkeypatch):
    params = PARAMS["T=1"]
    monkeypatch.setattr(tree_step_module, "verify_tree",
                        functools.partial(tree_step_module.verify_tree, update_residual=False))
    counts, pmf = sample_tree_pairs(params, lambda t: SampledTreeDrafter(t, params, branch=3))
    assert gof_pvalue(counts, pmf) < 1e-6


def test_trees_refuse_teaching_rules():
    with pytest.raises(ValueError, match="lossless rule only"):
        GenerationConfig(tree_nodes=4, rule="typical")


def test_mtp_sampled_tree_first_token_matches_the_target():
    """At T=1 the MTP head draws its tree's children without replacement (rows = the exact
    laws); the first emitted token is distributed as the target's own p."""
    from playground.sampling import SamplingParams, logits_to_probs

    target = tiny_target()
    head = tiny_head(target)
    prompt = CharTokenizer().encode("the cat sat")
    with torch.no_grad():
        p = logits_to_probs(target(input_ids=torch.tensor([prompt])).logits[0, -1], SamplingParams(temperature=1.0))
    config = GenerationConfig(gamma=2, temperature=1.0, max_new_tokens=2, trace=False, tree_nodes=6)
    counts = torch.zeros(p.shape[0])
    sampled_rows = 0
    for seed in range(1500):
        mtp = MTPDrafter(target, head, eos_token_ids=[EOS])
        r = run(target, CharTokenizer(), prompt, config, drafter=mtp, eos_token_ids=[EOS],
                generator=torch.Generator().manual_seed(seed))
        counts[r.token_ids[0]] += 1
        sampled_rows += r.stats.judged_tokens
    assert sampled_rows > 1500  # trees were drafted and judged
    assert gof_pvalue(counts, p) > 1e-3
