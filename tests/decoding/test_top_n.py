"""The trace's top-n lists (playground.decoding.top_n): the n largest positive entries of a row,
value descending, ties by lower id, as a sort of the whole row gives them."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from playground.decoding import top_n
from playground.decoding.top_n import top_entries


def reference(row: torch.Tensor, n: int) -> tuple[list[float], list[int]]:
    """Every positive entry sorted by (value descending, id ascending), cut at n."""
    order = sorted((i for i in range(row.shape[0]) if row[i] > 0), key=lambda i: (-float(row[i]), i))[:n]
    return [float(row[i]) for i in order], order


# Rows of few distinct values (many ties, many zeros), across block boundaries and odd lengths.
rows = st.integers(1, 3000).flatmap(
    lambda v: st.lists(st.sampled_from([0.0, 0.0, 0.5, 1.0, 1.5, 2.0, 4.0]), min_size=v, max_size=v)
)


# Long rows with a few entries set: ties between blocks whose maxima tie at the n-th place.
sparse = st.tuples(
    st.integers(1, 12 * top_n.BLOCK),
    st.lists(st.tuples(st.integers(0, 12 * top_n.BLOCK - 1), st.sampled_from([0.25, 0.5, 1.0])), max_size=30),
)


@settings(max_examples=150, deadline=None)
@given(values=rows, n=st.integers(1, 20))
def test_equals_a_sort_of_the_whole_row(values, n):
    row = torch.tensor(values, dtype=torch.float32)
    assert top_entries(row, n) == reference(row, n)


@settings(max_examples=150, deadline=None)
@given(case=sparse, n=st.integers(1, 6))
def test_equals_a_sort_of_a_long_sparse_row(case, n):
    length, entries = case
    row = torch.zeros(length)
    for i, v in entries:
        if i < length:
            row[i] = v
    assert top_entries(row, n) == reference(row, n)


def test_ties_across_blocks_go_to_the_lower_id():
    """The n-th place tied between tokens in different blocks, and block maxima tied too."""
    row = torch.zeros(8 * top_n.BLOCK)
    row[[5, 7000, 3000, 1030, 6000, 4100]] = torch.tensor([0.3, 0.2, 0.2, 0.2, 0.2, 0.1])
    assert top_entries(row, 3) == ([pytest.approx(0.3), pytest.approx(0.2), pytest.approx(0.2)], [5, 1030, 3000])


@pytest.mark.parametrize("seed", range(3))
def test_a_real_sized_distribution(seed):
    """A softmax over Gemma's 262,144 tokens of bfloat16 logits (ties are common there)."""
    g = torch.Generator().manual_seed(seed)
    probs = torch.softmax((torch.randn(262_144, generator=g) * 3).bfloat16().float() / 0.7, dim=-1)
    values, ids = top_entries(probs, 10)
    order = sorted(range(probs.shape[0]), key=lambda i: (-float(probs[i]), i))[:10] if seed == 0 else None
    top = torch.topk(probs, 10)
    assert values == top.values.tolist()  # the same values as torch.topk, whatever the ties
    if order is not None:
        assert ids == order


def test_fewer_positive_entries_than_asked():
    row = torch.zeros(3000)
    row[[7, 2999]] = torch.tensor([0.25, 0.75])
    assert top_entries(row, 5) == ([0.75, 0.25], [2999, 7])
    assert top_entries(torch.zeros(10), 5) == ([], [])


@settings(max_examples=100, deadline=None)
@given(
    values=st.lists(st.sampled_from([0.0, 0.0, 0.5, 1.0, 2.0]), min_size=1, max_size=4 * top_n.BLOCK),
    count=st.integers(1, 4),
    n=st.integers(1, 8),
    seed=st.integers(0, 2**16),
)
def test_rows_together_equal_each_row_alone(values, count, n, seed):
    """Rows of ties and zeros (some rows tied at the n-th block maximum, some not), shuffled per row."""
    g = torch.Generator().manual_seed(seed)
    base = torch.tensor(values, dtype=torch.float32)
    rows = torch.stack([base[torch.randperm(base.shape[0], generator=g)] for _ in range(count)])
    assert top_n.top_entries_rows(rows, n) == [reference(row, n) for row in rows]


@pytest.mark.parametrize("n", [1, 5, 10])
def test_rows_together_at_real_size(n):
    """Thirty softmaxes over 262,144 tokens, as a shared pass reads them: each as top_entries alone."""
    g = torch.Generator().manual_seed(n)
    probs = torch.softmax((torch.randn(30, 262_144, generator=g) * 3).bfloat16().float() / 0.7, dim=-1)
    assert top_n.top_entries_rows(probs, n) == [top_entries(row, n) for row in probs]


def test_rows_together_fall_back_where_block_maxima_tie(monkeypatch):
    """Row 0: its 2nd-best block maximum (0.2) ties a third block's, so only that row goes to
    top_entries, which keeps both blocks and answers the lower id; row 1 has no tie."""
    rows = torch.zeros(2, 8 * top_n.BLOCK)
    rows[0, [5, 1030, 3000]] = torch.tensor([0.3, 0.2, 0.2])
    rows[1, [5, 1030, 3000]] = torch.tensor([0.3, 0.2, 0.1])
    alone = []
    monkeypatch.setattr(top_n, "top_entries", lambda row, n: alone.append(row) or top_entries(row, n))
    got = top_n.top_entries_rows(rows, 2)
    assert got == [reference(rows[0], 2), reference(rows[1], 2)]
    assert got[0][1] == [5, 1030]
    assert len(alone) == 1 and torch.equal(alone[0], rows[0])


def test_rows_together_with_nothing_asked():
    rows = torch.rand(3, 50)
    assert top_n.top_entries_rows(rows, 0) == [([], [])] * 3
    assert top_n.top_entries_rows(torch.zeros(2, 10), 4) == [([], []), ([], [])]
