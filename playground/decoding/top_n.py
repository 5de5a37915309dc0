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

about 0.08 ms for n = 5.  The answer is a function of the row alone: the n largest positive
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
