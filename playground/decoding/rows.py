"""Rows of distributions as the verifier reads them, and their top-n lists for the trace.

``PointRows`` (``playground.decoding.point_mass``) stands in for [n, V] one-hot rows (greedy
target rows, deterministic drafts) without filling n x V floats; ``top`` / ``row_top`` make
the trace's candidate lists, answering a known point mass without a top-k over the
vocabulary.  This module does not verify or sample.
"""

from __future__ import annotations

import torch

from playground.decoding.batch_probs import RowReads
from playground.decoding.point_mass import PointRows
from playground.decoding.records import Candidate
from playground.decoding.sampling import SamplingParams, logits_to_probs
from playground.decoding.text import TokenTexts
from playground.decoding.top_n import top_entries


def top(
    probs: torch.Tensor,
    n: int,
    texts: TokenTexts | None,
    point: int | None = None,
    known: tuple[list[float], list[int]] | None = None,
) -> tuple[Candidate, ...]:
    """Top-n of a [V] distribution, zero-probability entries dropped (``top_entries`` lists
    positive entries only).

    point: the caller knows ``probs`` is a point mass on this id (a greedy target row, a
    one-hot draft row): the answer is that one entry, without a top-k over the vocabulary.
    known: (values, ids) of ``top_n.top_entries(probs, n)``, already computed with other runs'
    rows (``playground.decoding.batch_probs``)."""
    if texts is None:
        return ()
    if point is not None:
        return (Candidate(token_id=int(point), text=texts.solo(int(point)), prob=float(probs[point])),)
    if known is None:
        known = top_entries(probs, n)
    return tuple(Candidate(token_id=int(i), text=texts.solo(int(i)), prob=float(v)) for v, i in zip(*known))


def target_rows(
    logits: torch.Tensor, params: SamplingParams, reads: RowReads | None = None
) -> tuple[torch.Tensor | PointRows, list[int] | None]:
    """Step 2's distributions from the target's logits [n, V], for chain and tree steps alike:
    (rows [n, V], the argmax per row at T = 0 else None).  ``reads``: the same, already
    computed by the pass's worker with other runs' rows (``batch_probs``)."""
    if reads is not None:
        if params.greedy:
            return PointRows(reads.argmax, logits.shape[-1]), list(reads.argmax)
        return reads.probs, None
    if params.greedy:
        # = logits_to_probs (a point mass on the first maximum), but max() on the raw
        # logits is 3-4x faster than float().argmax() over a 262k vocabulary here.
        argmax = logits.max(dim=-1).indices.tolist()  # [n]
        return PointRows(argmax, logits.shape[-1]), argmax
    return logits_to_probs(logits.cpu(), params), None  # [n, V], on the CPU with the generator


def row_top(
    rows, i: int, n: int, texts: TokenTexts | None, point: int | None, known: tuple | None = None
) -> tuple[Candidate, ...]:
    """``top(rows[i])``; a known point mass (``point``) is answered without reading the row
    (rows may be ``PointRows``, which would build it), a known top-n (``known``) without a top-k."""
    if texts is None:
        return ()
    if point is not None:
        return (Candidate(token_id=int(point), text=texts.solo(int(point)), prob=float(rows[i, point])),)
    return top(rows[i], n, texts, known=known)
