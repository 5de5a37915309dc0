"""Runs whose caches live in one batched cache (playground.decoding.batch_slots) equal the
same runs alone, pass after pass, in float32: through rollbacks, passes alone between
shared ones, a tree's compaction, the sliding window (the tiny target's is 6) with and
without recorded past, buffers that grow or are released, slots that free when a run ends
and a full slot table.  Mutants must fail: two runs in one slot, a run that left its slot
read as if it were still there, pad slots kept in a cache, rows read from the wrong slots,
buffers that do not start zeroed."""

from __future__ import annotations

import gc

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import DynamicCache

from playground.decoding import batch_slots
from playground.decoding.batch_pass import RowPass, batched_forward, kv_heads, layer_types
from playground.decoding.batch_slots import SlotCache
from playground.decoding.target import copy_cache
from playground.decoding.tree import DraftTree, tree_attention_mask, tree_position_ids
from playground.decoding.tree_pass import compact_cache, tree_forward
from tests.tiny_models import rand_ids, small_llama, tiny_target

ATOL = 1e-5


@pytest.fixture(scope="module")
def model():
    return tiny_target().float().eval()


def _slots(model, max_rows: int = 8) -> SlotCache:
    c = model.config
    return SlotCache(len(layer_types(c)), *kv_heads(c), torch.float32, model.device, max_rows)


class _Run:
    """A run's cache as the scheduler sees it, and the same run's cache alone."""

    def __init__(self, model, history: list[int], record: bool = True) -> None:
        self.model = model
        self.cache, self.ref = DynamicCache(config=model.config), DynamicCache(config=model.config)
        if record:
            self.cache.activate_past_recording()
            self.ref.activate_past_recording()
        if history:
            self.alone(history)

    def _forward(self, cache, ids):
        with torch.inference_mode():
            return self.model(input_ids=torch.tensor([ids]), cache=cache, use_cache=True).logits[0]

    def alone(self, ids: list[int]) -> bool:
        """A pass of this run alone (its cache leaves the slot: the layer concatenates);
        whether it equals the reference's."""
        ref = self._forward(self.ref, ids)
        return torch.allclose(self._forward(self.cache, ids), ref, atol=ATOL)

    def row(self, ids: list[int]) -> RowPass:
        return RowPass(self.cache, tuple(ids), keep=len(ids))

    def crop(self, n: int) -> None:
        self.cache.crop(-n)
        self.ref.crop(-n)

    def same_cache(self) -> bool:
        if self.cache.get_seq_length() != self.ref.get_seq_length():
            return False
        for x, y in zip(self.cache.layers, self.ref.layers):
            if x.keys.shape != y.keys.shape:  # what each holds, a sliding layer's window included
                return False
            if not (torch.allclose(x.keys, y.keys, atol=ATOL) and torch.allclose(x.values, y.values, atol=ATOL)):
                return False
        return True


def _shared(model, runs: list[_Run], new: list[list[int]], slots) -> bool:
    """One shared pass of every run; whether each equals its pass alone (logits and cache)."""
    refs = [r._forward(r.ref, ids) for r, ids in zip(runs, new)]
    outs = batched_forward(model, [r.row(ids) for r, ids in zip(runs, new)], slots=slots)
    same = all(torch.allclose(o.logits, ref, atol=ATOL) for o, ref in zip(outs, refs))
    return same and all(r.same_cache() for r in runs)


def _four_runs(model, slots, record: bool = True, seed: int = 0) -> bool:
    """Four runs through shared passes, rollbacks and passes alone, past the window."""
    runs = [_Run(model, rand_ids(h, seed=seed + i), record) for i, h in enumerate((0, 2, 3, 9))]
    ok = runs[0].alone(rand_ids(1, seed=seed + 40))  # a prompt of one token
    for step in range(6):
        ks = [1 + (step + i) % 4 for i in range(len(runs))]
        ok &= _shared(model, runs, [rand_ids(k, seed=seed + 100 * step + i) for i, k in enumerate(ks)], slots)
        for i, (run, k) in enumerate(zip(runs, ks)):
            if record and k > 1 and (step + i) % 2:
                run.crop(k - 1)  # rejected drafts
        if step == 2:
            ok &= runs[1].alone(rand_ids(2, seed=seed + 77))  # its next pass copies it back
    return ok


@pytest.mark.parametrize("record", [True, False])
def test_runs_in_slots_equal_runs_alone(model, record):
    slots = _slots(model)
    assert _four_runs(model, slots, record)
    assert slots.rows == 8 and slots.length == SlotCache.MIN_LENGTH


def test_a_tree_pass_then_compaction_then_a_chain(model):
    """A tree's nodes go into the slot; the engine's compaction then builds new tensors (the
    run leaves its slot), and the next shared pass copies the compacted cache back."""
    slots = _slots(model)
    tree = DraftTree(tokens=(5, 9, 7, 3, 11), parents=(-1, -1, 0, 0, 2))
    runs = [_Run(model, rand_ids(4, seed=1)), _Run(model, rand_ids(3, seed=2))]
    past = runs[0].cache.get_seq_length()
    tree_row = RowPass(
        runs[0].cache,
        (4, *tree.tokens),
        keep=len(tree) + 1,
        positions=tree_position_ids(tree, past),
        attend=tree_attention_mask(tree, past)[:, past:],
    )
    with torch.inference_mode():
        ref_tree, _ = tree_forward(model, runs[0].ref, 4, tree)
    ref_chain = runs[1]._forward(runs[1].ref, [6, 7])
    outs = batched_forward(model, [tree_row, runs[1].row([6, 7])], slots=slots)
    torch.testing.assert_close(outs[0].logits, ref_tree, atol=ATOL, rtol=0)
    torch.testing.assert_close(outs[1].logits, ref_chain, atol=ATOL, rtol=0)
    assert runs[0].same_cache()
    compact_cache(runs[0].cache, len(tree) + 1, [0, 1, 3])  # the root, node 0, node 2: a path
    runs[0].ref = copy_cache(runs[0].cache)
    assert _shared(model, runs, [[8], [9, 10]], slots)


def test_growing_and_released_buffers_keep_every_run(model, monkeypatch):
    monkeypatch.setattr(SlotCache, "MIN_LENGTH", 8)
    slots = _slots(model)
    runs = [_Run(model, rand_ids(3, seed=i)) for i in range(3)]
    for step in range(5):  # 3 + 5 x 4 tokens: the length doubles twice
        assert _shared(model, runs, [rand_ids(4, seed=10 * step + i) for i in range(3)], slots)
        if step == 2:
            slots.release()
    assert slots.length == 32


def test_a_slot_frees_when_its_run_ends_and_a_full_table_takes_the_plain_path(model):
    slots = _slots(model, max_rows=2)
    a, b = _Run(model, rand_ids(3, seed=1)), _Run(model, rand_ids(3, seed=2))
    assert _shared(model, [a, b], [[5], [6]], slots)
    first = slots.slot(a.cache)
    c = _Run(model, rand_ids(3, seed=3))
    assert slots.slot(c.cache) is None  # both slots are held
    assert _shared(model, [a, c], [[7], [8]], slots)  # the plain path, still exact
    del a
    gc.collect()
    assert slots.slot(c.cache) == first  # a's slot, now free
    assert _shared(model, [b, c], [[9, 4], [3]], slots)


def test_a_llama_without_sliding_layers(model):
    llama = small_llama(vocab=6)
    c = llama.config
    slots = SlotCache(len(layer_types(c)), *kv_heads(c), torch.float32, llama.device, 4)
    runs = [_Run(llama, rand_ids(h, seed=h, vocab=6)) for h in (0, 3, 5)]
    for step in range(3):
        assert _shared(llama, runs, [rand_ids(1 + i, seed=step * 7 + i, vocab=6) for i in range(3)], slots)


# ------------------------------------------------------------------------------- mutants
def test_mutant_two_runs_in_one_slot(model, monkeypatch):
    monkeypatch.setattr(SlotCache, "slot", lambda self, cache: 0)
    assert not _four_runs(model, _slots(model))


def test_mutant_a_run_that_left_its_slot_is_not_copied_back(model, monkeypatch):
    monkeypatch.setattr(SlotCache, "_holds", lambda self, *args: True)
    assert not _four_runs(model, _slots(model))


def test_mutant_pad_slots_stay_in_the_cache(model, monkeypatch):
    real = batch_slots.SlotPass.commit

    def keeps_pads(self, caches, new_counts):
        real(self, caches, [self.slots_new] * len(caches))

    monkeypatch.setattr(batch_slots.SlotPass, "commit", keeps_pads)
    assert not _four_runs(model, _slots(model))


def test_mutant_rows_read_from_the_wrong_slots(model, monkeypatch):
    real = batch_slots._SlotLayer.__init__

    def rolled(self, keys, values, where, rows, width):
        real(self, keys, values, where, rows.roll(1), width)

    monkeypatch.setattr(batch_slots._SlotLayer, "__init__", rolled)
    assert not _four_runs(model, _slots(model))


def test_mutant_buffers_not_zeroed(model, monkeypatch):
    real = SlotCache._ensure

    def unzeroed(self, rows, length):
        grows = rows > self.rows or length > self.length
        real(self, rows, length)
        if grows:  # what uninitialised memory may hold
            for t in self.keys + self.values:
                t.fill_(float("nan"))

    monkeypatch.setattr(SlotCache, "_ensure", unzeroed)
    assert not _four_runs(model, _slots(model))


def _mask_row_by_row(geo, slots_new: int, width: int, window: int | None) -> torch.Tensor:
    """The mask as its definition reads, one row at a time (the reference for SlotPass.mask)."""
    mask = torch.zeros(len(geo), 1, slots_new, width, dtype=torch.bool)
    for b, (past, pos, attend) in enumerate(geo):
        k = len(pos)
        for j in range(slots_new):
            if j >= k:  # a pad query sees only its own slot
                mask[b, 0, j, past + j] = True
                continue
            for w in range(past):  # cached keys, position w
                mask[b, 0, j, w] = window is None or int(pos[j]) - w < window
            for i in range(k):  # the row's new keys
                mask[b, 0, j, past + i] = bool(attend[j, i]) and (window is None or int(pos[j] - pos[i]) < window)
    return mask


rows_geo = st.lists(st.tuples(st.integers(0, 9), st.integers(1, 4), st.integers(0, 2**16)), min_size=1, max_size=5)


@settings(max_examples=80, deadline=None)
@given(rows=rows_geo, extra=st.integers(0, 2), window=st.sampled_from([None, 1, 3, 6]))
def test_the_mask_of_every_row_at_once_is_its_definition(rows, extra, window):
    """Rows of 0-9 cached tokens and 1-4 new ones (chains, and trees' masks and positions),
    padded to the pass's widest; the slots as wide as the longest row or wider."""
    geo = []
    for past, k, seed in rows:
        g = torch.Generator().manual_seed(seed)
        attend = (torch.rand(k, k, generator=g) < 0.6).tril() | torch.eye(k, dtype=torch.bool)
        depth = attend.sum(dim=1) - 1  # a tree's positions: past + depth of each node
        geo.append((past, past + depth, attend))
    slots_new = max(k for _, k, _ in rows) + extra
    width = max(past for past, _, _ in rows) + slots_new + extra
    plan = batch_slots.SlotPass.__new__(batch_slots.SlotPass)
    plan.slots_new, plan.width = slots_new, width
    assert torch.equal(plan.mask(geo, window), _mask_row_by_row(geo, slots_new, width, window))
