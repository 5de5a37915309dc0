"""One target pass over a draft tree equals separate passes over each branch, on a tiny
Gemma 3 whose sliding window (4) is far shorter than the context; after keeping only the
accepted path, the cache equals a fresh prefill of the committed tokens."""

from __future__ import annotations

import random

import pytest
import torch
from transformers import DynamicCache

from playground.decoding.tree import ROOT, DraftTree
from playground.decoding.tree_pass import compact_cache, tree_forward
from tests.tiny_models import sliding_pair


def random_tree(rnd: random.Random, n: int, vocab: int = 100) -> DraftTree:
    parents = [ROOT] + [rnd.randrange(-1, i) for i in range(1, n)]
    return DraftTree(tuple(rnd.randrange(vocab) for _ in range(n)), tuple(parents))


def prefill(model, ids):
    cache = DynamicCache(config=model.config)
    cache.activate_past_recording()
    with torch.inference_mode():
        model(input_ids=torch.tensor([ids]), cache=cache, use_cache=True)
    return cache


def branch_logits(model, ids):
    with torch.inference_mode():
        return model(input_ids=torch.tensor([ids])).logits[0, -1]


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("context", [2, 3, 9, 20])  # shorter and longer than the window of 4
def test_tree_pass_equals_each_branch_and_compaction_restores_the_invariant(attn, context):
    target, _ = sliding_pair(window=4)
    target.config._attn_implementation = attn
    rnd = random.Random(context)
    committed = [rnd.randrange(100) for _ in range(context)]
    cache = prefill(target, committed[:-1])
    for step in range(3):  # several steps: compaction must leave a cache the next pass can use
        tree = random_tree(rnd, n=7)
        logits, _ = tree_forward(target, cache, committed[-1], tree)  # [8, V]
        assert torch.allclose(logits[0], branch_logits(target, committed), atol=1e-5)
        for i in range(len(tree)):
            branch = committed + [tree.tokens[j] for j in tree.path(i)]
            assert torch.allclose(logits[i + 1], branch_logits(target, branch), atol=1e-5), (step, i)
        leaf = rnd.randrange(len(tree))
        path = tree.path(leaf)
        compact_cache(cache, len(tree) + 1, [0] + [1 + j for j in path])
        committed = committed + [tree.tokens[j] for j in path] + [rnd.randrange(100)]
        fresh = prefill(target, committed[:-1])
        assert cache.get_seq_length() == fresh.get_seq_length() == len(committed) - 1
        for mine, ref in zip(cache.layers, fresh.layers):
            n = min(mine.keys.shape[-2], ref.keys.shape[-2])  # a fresh sliding prefill may hold more
            assert n >= min(len(committed) - 1, 3)
            assert torch.allclose(mine.keys[..., -n:, :], ref.keys[..., -n:, :], atol=1e-5)
            assert torch.allclose(mine.values[..., -n:, :], ref.values[..., -n:, :], atol=1e-5)


def test_mutant_keeping_a_rejected_branch_breaks_the_cache():
    target, _ = sliding_pair(window=4)
    target.config._attn_implementation = "eager"
    committed = list(range(10, 22))
    cache = prefill(target, committed[:-1])
    tree = DraftTree(tokens=(5, 6, 7), parents=(ROOT, ROOT, 0))  # two branches: [5, 7] and [6]
    tree_forward(target, cache, committed[-1], tree)
    compact_cache(cache, 4, [0, 2])  # WRONG: keeps node 1 (token 6) instead of the accepted node 0
    committed = committed + [5, 99]
    fresh = prefill(target, committed[:-1])
    assert not torch.allclose(cache.layers[1].keys[..., -1:, :], fresh.layers[1].keys[..., -1:, :], atol=1e-3)


def test_compact_cache_refuses_bad_indices():
    target, _ = sliding_pair(window=4)
    cache = prefill(target, [1, 2, 3])
    with pytest.raises(ValueError):
        compact_cache(cache, 3, [2, 1])
    with pytest.raises(ValueError):
        compact_cache(cache, 3, [0, 3])


def test_tree_pass_on_a_full_attention_model(tiny_pair):
    target = tiny_pair[0]
    rnd = random.Random(5)
    committed = [rnd.randrange(100) for _ in range(12)]
    cache = prefill(target, committed[:-1])
    tree = random_tree(rnd, n=9)
    logits, _ = tree_forward(target, cache, committed[-1], tree)
    for i in range(len(tree)):
        branch = committed + [tree.tokens[j] for j in tree.path(i)]
        assert torch.allclose(logits[i + 1], branch_logits(target, branch), atol=1e-5)


@pytest.mark.real_model
def test_tree_pass_on_gemma3_270m_past_its_window(all_threads, gemma_fp32):
    """The real target: 600 committed tokens (window 512), a 16-node tree, float32."""
    model = gemma_fp32[0]
    rnd = random.Random(0)
    committed = [rnd.randrange(1000, 20000) for _ in range(600)]
    cache = prefill(model, committed[:-1])
    tree = DraftTree(
        tuple(rnd.randrange(1000, 20000) for _ in range(16)),
        (ROOT, ROOT, ROOT, 0, 0, 1, 3, 3, 4, 6, 6, 7, 9, 10, 12, 13),
    )
    logits, _ = tree_forward(model, cache, committed[-1], tree)
    for i in (0, 5, 9, 15):  # a root child, a depth-2 node, deeper ones
        branch = committed + [tree.tokens[j] for j in tree.path(i)]
        ref = branch_logits(model, branch)
        assert torch.allclose(logits[i + 1], ref, atol=2e-3), (i, float((logits[i + 1] - ref).abs().max()))
        assert int(logits[i + 1].argmax()) == int(ref.argmax())
