"""What every run of a shared pass reads from its logits, computed for all its rows at once.

After a target pass each run turns its logits [keep, V] into what its step reads: the p
rows at its temperature, top-k and top-p (``rows.target_rows``), the target's confidence
for the step view (``confidence.top_probs``) and the top-n candidates of each p row for
the trace (``rows.top``).  Done run by run after a shared pass, thirty runs in thirty
threads each ran a 262k-wide softmax, exp and top-k while the next pass waited for them
(serialized by the GIL, about half of the time between two passes).  The scheduler's
worker calls ``read_rows`` once instead: rows with the same sampling parameters share
one softmax.

Every value equals what the run computes alone, bit for bit: the division by the
temperature, the top-k and top-p filters, the softmaxes and the top-n lists work row by row, so
a row's result does not depend on the rows beside it (``tests/decoding/test_batch_probs.py``),
and a run that reads nothing here (alone, or a tree step) computes the same values itself.

This module does not draw, verify, record or know which rows a step will judge.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from playground.decoding.confidence import row_confidence
from playground.decoding.sampling import SamplingParams, logits_to_probs, plain_softmax
from playground.decoding.top_n import top_entries_rows


@dataclass(frozen=True)
class ReadSpec:
    """What a run will read from its logits."""

    params: SamplingParams
    top_n: int = 0  # candidates per p row for the trace (0: no trace)
    confidence: bool = False  # the target's confidence per row (the step view's bars)


@dataclass(frozen=True)
class RowReads:
    """One run's rows, read: exactly what it would compute from its logits alone."""

    probs: torch.Tensor | None  # [keep, V] float32 p rows; None at T = 0 (point masses on ``argmax``)
    argmax: list[int] | None  # [keep] at T = 0 (the first maximum), else None
    confidence: dict[int, float] | None  # {row: the target's top probability at T = 1}
    top: list[tuple[list[float], list[int]]] | None  # per row: (values, ids) of its top-n p entries

    def top_of(self, row: int) -> tuple[list[float], list[int]] | None:
        return self.top[row] if self.top is not None and 0 <= row < len(self.top) else None


def read_rows(logits: list[torch.Tensor], specs: list[ReadSpec | None]) -> list[RowReads | None]:
    """``logits[b]`` [keep_b, V] read as ``specs[b]`` asks (None: nothing read for that run)."""
    if len(logits) != len(specs):
        raise ValueError(f"{len(logits)} runs' logits but {len(specs)} specs")
    out: list[RowReads | None] = [None] * len(specs)
    groups: dict[SamplingParams, list[int]] = {}
    for b, spec in enumerate(specs):
        if spec is not None:
            groups.setdefault(spec.params, []).append(b)
    for params, members in groups.items():
        sizes = [logits[b].shape[0] for b in members]
        parts = [logits[b] for b in members]
        # cat straight into float32: one copy instead of two (7 against 16 ms for 30 rows on one core)
        x = torch.cat(parts, out=parts[0].new_empty((sum(sizes), parts[0].shape[-1]), dtype=torch.float32)).cpu()
        wants = any(specs[b].confidence for b in members)
        # Where the p rows are the softmax the confidence takes, their maxima are its values,
        # without a second softmax over the vocabulary; otherwise it reads x before the
        # temperature divides x in place.
        from_probs = plain_softmax(params, x.shape[-1])
        top = row_confidence(x) if wants and not from_probs else None
        if params.greedy:
            argmax_of = _split_list(x.max(dim=-1).indices.tolist(), sizes)  # the first maximum, as target_rows
            probs_of = top_of = [None] * len(members)
        else:
            probs = logits_to_probs(x, params, scratch=True)  # [sum keep, V], row by row; x is spent
            if wants and from_probs:
                top = probs.amax(dim=-1)
            probs_of, argmax_of = list(probs.split(sizes)), [None] * len(members)
            top_of = _tops_by_n(probs, sizes, [specs[b].top_n for b in members])
        confidence = _split_list(top.tolist(), sizes) if wants else None
        for j, b in enumerate(members):
            conf = dict(enumerate(confidence[j])) if specs[b].confidence else None
            out[b] = RowReads(probs=probs_of[j], argmax=argmax_of[j], confidence=conf, top=top_of[j])
    return out


def _tops_by_n(probs: torch.Tensor, sizes: list[int], top_ns: list[int]) -> list[list | None]:
    """Per run (``sizes[j]`` rows of ``probs`` [sum keep, V] each), each of its p rows' (values,
    ids) as ``rows.top`` finds them alone (``top_n.top_entries`` at the run's own n), computed
    for all the runs that ask for the same n together (``top_n.top_entries_rows``)."""
    out: list[list | None] = [None] * len(sizes)
    starts = [sum(sizes[:j]) for j in range(len(sizes))]
    for n in set(top_ns) - {0}:
        members = [j for j, m in enumerate(top_ns) if m == n]
        picked = [starts[j] + i for j in members for i in range(sizes[j])]
        # a view where the members' rows lie together (a class asking alike), a copy otherwise
        together = picked == list(range(picked[0], picked[0] + len(picked)))
        rows = probs[picked[0] : picked[0] + len(picked)] if together else probs[picked]
        found = iter(top_entries_rows(rows, n))
        for j in members:
            out[j] = [next(found) for _ in range(sizes[j])]
    return out


def _split_list(items: list, sizes: list[int]) -> list[list]:
    out, start = [], 0
    for size in sizes:
        out.append(items[start : start + size])
        start += size
    return out
