"""The n most likely tokens of a distribution, for the trace's candidate lists.

The step view shows, beside every draft and correction, the top n tokens of p, of q and of
the residual (n = ``top_n``, 5 by default).  When sampling, a step asks for some six such
lists over Gemma's 262,144-token vocabulary, and ``torch.topk`` over a full row took about
0.55 ms on the 2-vCPU CPU: 3 ms a step, 5 % of a run's time at T = 1.

``top_entries`` finds them in two levels, as ``sampling.index_at`` samples:

    blocks    the row as [V / B, B] (B = 1024), m_j = the largest entry of block j
    kth       the n-th largest of the m_j
    keep      blocks with m_j >= kth: every entry of the top n lies in one of them, since an
              entry x in a block with m_j < kth has at least n larger entries (the n block
              maxima >= kth > m_j >= x)
    answer    the entries >= the n-th largest value among the kept blocks' entries (the same
              argument shows none lies outside them), ordered by value, ties by lower id,
              cut at n

about 0.2 ms for n = 5.  ``top_entries_rows`` does the same for many rows at once (a shared
pass reads thirty runs' rows together, ``playground.decoding.batch_probs``): it keeps each
row's n best blocks and takes the top n of their entries by a key that orders them as the
answer does, in batched ops, and gives a row whose n-th block maximum ties with another
block's to ``top_entries``; 30 rows took 9.5-12.0 -> 6.3-8.3 ms on one core of the 2-vCPU
CPU.  The answer is a function of the row alone: the n largest positive
entries, value descending, ties broken towards the lower token id (``torch.topk`` leaves the
order of ties unspecified).  Zero entries are never listed: they are tokens the distribution
cannot produce.  ``tests/decoding/test_top_n.py`` checks it against a sort of the whole row.

This module does not format candidates (``playground.decoding.rows.top``) and does not sample.
"""

from __future__ import annotations

import torch

BLOCK = 1024


def top_entries(row: torch.Tensor, n: int) -> tuple[list[float], list[int]]:
    """(values, ids) of the n largest positive entries of a 1-D row [V], value descending,
    ties by lower id; fewer than n when the row has fewer positive entries."""
    row = row.detach().reshape(-1)
    vocab = row.shape[0]
    if n < 1 or vocab == 0:
        return [], []
    pad = -vocab % BLOCK
    blocks = (torch.nn.functional.pad(row, (0, pad)) if pad else row).view(-1, BLOCK)  # [V / B, B]
    block_max = blocks.amax(dim=1)  # [V / B]
    kth = torch.topk(block_max, min(n, block_max.shape[0])).values[-1]
    kept = torch.nonzero((block_max >= kth) & (block_max > 0)).squeeze(1)  # ascending block ids
    if kept.numel() == 0:
        return [], []
    entries = blocks.index_select(0, kept).reshape(-1)  # [kept * B], ascending token ids
    floor = torch.topk(entries, min(n, entries.shape[0])).values[-1]
    hits = torch.nonzero((entries >= floor) & (entries > 0)).squeeze(1)  # ascending token ids
    values, order = torch.sort(entries[hits], descending=True, stable=True)  # ties keep the lower id first
    hits = hits[order[:n]]
    ids = kept[hits // BLOCK] * BLOCK + hits % BLOCK
    return values[:n].tolist(), ids.tolist()


def top_entries_rows(rows: torch.Tensor, n: int) -> list[tuple[list[float], list[int]]]:
    """``top_entries(row, n)`` for every row of ``rows`` [R, V], computed together."""
    rows = rows.detach()
    count, vocab = rows.shape
    if n < 1 or vocab == 0:
        return [([], [])] * count
    if rows.dtype != torch.float32:  # the keys below read float32 bits
        return [top_entries(row, n) for row in rows]
    pad = -vocab % BLOCK
    blocks = (torch.nn.functional.pad(rows, (0, pad)) if pad else rows).reshape(count, -1, BLOCK)  # [R, V / B, B]
    block_max = blocks.amax(dim=2)  # [R, V / B]
    k = min(n, block_max.shape[1])
    best = torch.topk(block_max, k, dim=1)  # [R, k]: the k best blocks of each row
    # Where another block ties the k-th best, top_entries keeps it too: those rows go there.
    tied = ((block_max >= best.values[:, -1:]).sum(dim=1) > k).tolist()
    kept = best.indices.sort(dim=1).values  # [R, k] ascending block ids, so entries ascend by token id
    entries = blocks.gather(1, kept.unsqueeze(-1).expand(-1, -1, BLOCK)).reshape(count, -1)  # [R, k * B]
    # One key per entry, unique and ordered as the answer is: value descending, then position
    # (token id) ascending.  A non-negative float32's bits, read as an integer, order as its
    # value; negative entries get negative keys and are dropped below with the zeros.  A
    # stable sort of the entries gives the same order but took 10 ms for 30 rows here, the
    # top-n of the keys 0.3 ms.
    width = entries.shape[1]
    keys = entries.view(torch.int32).long() * (1 << 32) + (width - 1 - torch.arange(width))  # [R, k * B]
    order = torch.topk(keys, min(n, width), dim=1).indices  # [R, m], best first
    values = entries.gather(1, order)
    ids = kept.gather(1, order // BLOCK) * BLOCK + order % BLOCK  # [R, m]
    out = []
    for r, (vals, toks) in enumerate(zip(values.tolist(), ids.tolist())):
        if tied[r]:
            out.append(top_entries(rows[r], n))
            continue
        positive = sum(v > 0 for v in vals)  # zeros (and negatives) come last: tokens the row cannot produce
        out.append((vals[:positive], toks[:positive]))
    return out
