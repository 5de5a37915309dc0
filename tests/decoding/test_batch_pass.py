"""One forward pass over many runs' rows (playground.decoding.batch_pass) equals each row
run alone: logits, hidden states and the cache it leaves, in float32, for chains and
trees, rows with empty caches and rows whose caches crossed the sliding window (the tiny
target's window is 6).  Three mutants must fail: a row that sees another row's keys, a
position id off by one, a row whose pad slots stay in its cache."""

from __future__ import annotations

import pytest
import torch
from transformers import DynamicCache

from playground.decoding import batch_pass
from playground.decoding.batch_pass import RowPass, batched_forward
from playground.decoding.tree import DraftTree, tree_attention_mask, tree_position_ids
from playground.decoding.tree_pass import tree_forward
from tests.tiny_models import rand_ids, tiny_target

ATOL = 1e-5


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return tiny_target().float().eval()


def _cache(model, history: list[int]) -> DynamicCache:
    cache = DynamicCache(config=model.config)
    cache.activate_past_recording()
    if history:
        with torch.inference_mode():
            model(input_ids=torch.tensor([history]), cache=cache, use_cache=True)
    return cache


def _alone(model, history: list[int], new: list[int]):
    cache = _cache(model, history)
    with torch.inference_mode():
        out = model(input_ids=torch.tensor([new]), cache=cache, use_cache=True, output_hidden_states=True)
    return out.logits[0], out.hidden_states[-1][0], cache


def _same_cache(a: DynamicCache, b: DynamicCache) -> bool:
    """Same length, and the same keys and values wherever both hold them (a sliding layer
    that recorded its past may hold more than the last W-1; only those can be seen)."""
    if a.get_seq_length() != b.get_seq_length():
        return False
    for x, y in zip(a.layers, b.layers):
        n = min(x.keys.shape[-2], y.keys.shape[-2])
        if not x.is_sliding and x.keys.shape != y.keys.shape:
            return False
        if n < min(a.get_seq_length(), x.sliding_window - 1 if x.is_sliding else n):
            return False
        for s, t in ((x.keys, y.keys), (x.values, y.values)):
            if not torch.allclose(s[..., s.shape[-2] - n :, :], t[..., t.shape[-2] - n :, :], atol=ATOL):
                return False
    return True


# (history length, new tokens): an empty cache (a prompt), short ones, past the window of 6
ROWS = [(0, 5), (3, 1), (9, 3), (14, 9), (2, 2), (20, 4)]


@pytest.mark.parametrize("n_rows", [1, 2, 4, 6])
def test_rows_equal_alone(model, n_rows):
    rows, refs = [], []
    for i, (hist_len, k) in enumerate(ROWS[:n_rows]):
        hist, new = rand_ids(hist_len, seed=i), rand_ids(k, seed=100 + i)
        refs.append(_alone(model, hist, new))
        rows.append(RowPass(_cache(model, hist), tuple(new), keep=k, hidden=True))
    outs = batched_forward(model, rows)
    for (logits, hidden, cache), out, row in zip(refs, outs, rows):
        torch.testing.assert_close(out.logits, logits, atol=ATOL, rtol=0)
        torch.testing.assert_close(out.hidden, hidden, atol=ATOL, rtol=0)
        assert _same_cache(row.cache, cache)


def test_keep_returns_the_last_rows(model):
    hist, new = rand_ids(7, seed=1), rand_ids(6, seed=2)
    logits, _, _ = _alone(model, hist, new)
    other = RowPass(_cache(model, rand_ids(3, seed=3)), tuple(rand_ids(2, seed=4)), keep=2)
    out = batched_forward(model, [RowPass(_cache(model, hist), tuple(new), keep=1), other])[0]
    assert out.logits.shape[0] == 1 and out.hidden is None
    torch.testing.assert_close(out.logits, logits[-1:], atol=ATOL, rtol=0)


def _tree_row(model, hist, tree, root):
    cache = _cache(model, hist)
    past = cache.get_seq_length()
    return RowPass(
        cache,
        (root, *tree.tokens),
        keep=len(tree) + 1,
        positions=tree_position_ids(tree, past),
        attend=tree_attention_mask(tree, past)[:, past:],
    )


@pytest.mark.parametrize("hist_len", [3, 12])  # inside and past the window
def test_tree_row_equals_tree_forward(model, hist_len):
    tree = DraftTree(tokens=(5, 9, 7, 3, 11), parents=(-1, -1, 0, 0, 2))
    hist = rand_ids(hist_len, seed=5)
    ref_cache = _cache(model, hist)
    with torch.inference_mode():
        ref, _ = tree_forward(model, ref_cache, 4, tree)
    chain = RowPass(_cache(model, rand_ids(8, seed=6)), tuple(rand_ids(3, seed=7)), keep=3)
    out = batched_forward(model, [chain, _tree_row(model, hist, tree, 4)])[1]
    torch.testing.assert_close(out.logits, ref, atol=ATOL, rtol=0)


def test_rollback_then_next_pass_equals_alone(model):
    """The engine crops a row's rejected drafts from its own cache: the next shared pass
    must see exactly the kept tokens, across the window."""
    hist, drafts, nxt = rand_ids(10, seed=8), rand_ids(5, seed=9), rand_ids(3, seed=10)
    row = RowPass(_cache(model, hist), tuple(drafts), keep=5)
    other = RowPass(_cache(model, rand_ids(4, seed=11)), (1, 2), keep=2)
    batched_forward(model, [row, other])
    row.cache.crop(-3)  # two drafts kept
    out = batched_forward(model, [RowPass(row.cache, tuple(nxt), keep=3), RowPass(other.cache, (3,), keep=1)])[0]
    logits, _, cache = _alone(model, hist + drafts[:2], nxt)
    torch.testing.assert_close(out.logits, logits, atol=ATOL, rtol=0)
    assert _same_cache(row.cache, cache)


def test_bad_rows_are_refused(model):
    cache = _cache(model, [1, 2])
    with pytest.raises(ValueError, match="at least one new token"):
        batched_forward(model, [RowPass(cache, (), keep=1)])
    with pytest.raises(ValueError, match="keep"):
        batched_forward(model, [RowPass(cache, (1, 2), keep=3)])


# ------------------------------------------------------------------------------- mutants
def _differs(model) -> bool:
    """Does a batch of rows differ from the rows alone?"""
    rows, refs = [], []
    for i, (hist_len, k) in enumerate(ROWS):
        hist, new = rand_ids(hist_len, seed=i), rand_ids(k, seed=100 + i)
        refs.append(_alone(model, hist, new))
        rows.append(RowPass(_cache(model, hist), tuple(new), keep=k))
    outs = batched_forward(model, rows)
    bad_logits = any(not torch.allclose(o.logits, r[0], atol=ATOL) for o, r in zip(outs, refs))
    bad_cache = any(not _same_cache(row.cache, r[2]) for row, r in zip(rows, refs))
    return bad_logits or bad_cache


def test_mutant_row_sees_other_rows_keys(model, monkeypatch):
    real = batch_pass._mask

    def leaky(geo, n_past, width, slots, window):
        m = real(geo, n_past, width, slots, window)
        m[:, :, :, :width] = True  # every cached slot, other rows' included
        return m

    monkeypatch.setattr(batch_pass, "_mask", leaky)
    assert _differs(model)


def test_mutant_position_off_by_one(model, monkeypatch):
    real = batch_pass._row_geometry

    def shifted(row):
        past, pos, attend = real(row)
        return past, pos + 1, attend

    monkeypatch.setattr(batch_pass, "_row_geometry", shifted)
    assert _differs(model)


def test_mutant_pad_slots_stay_in_the_cache(model, monkeypatch):
    monkeypatch.setattr(batch_pass, "_own_slots", lambda width, slots, k: slice(width, width + slots))
    assert _differs(model)


def _softcapped():
    m = tiny_target(seed=4).float().eval()
    m.config.final_logit_softcapping = 3.0  # Gemma 2/3's tanh cap on the logits, tight enough to matter
    return m


@pytest.mark.parametrize("which", ["llama-eager", "gemma-softcap"])
def test_other_models_equal_alone(which):
    """A Llama with eager attention (additive masks, no sliding layers) and a Gemma whose
    logits are soft-capped: the decoder + LM-head path equals the model's own forward."""
    from tests.tiny_models import small_llama

    model = small_llama(vocab=6) if which == "llama-eager" else _softcapped()
    vocab = model.config.vocab_size
    rows, refs = [], []
    for i, (hist_len, k) in enumerate(ROWS):
        hist, new = rand_ids(hist_len, seed=i, vocab=vocab), rand_ids(k, seed=100 + i, vocab=vocab)
        refs.append(_alone(model, hist, new))
        rows.append(RowPass(_cache(model, hist), tuple(new), keep=k, hidden=True))
    for (logits, hidden, _), out in zip(refs, batched_forward(model, rows)):
        torch.testing.assert_close(out.logits, logits, atol=ATOL, rtol=0)
        torch.testing.assert_close(out.hidden, hidden, atol=ATOL, rtol=0)
