"""How sure the target (and the drafter) was: the confidences the step view draws under each chip.

``top_probs(logits, rows)`` is the target's own probability of its top choice at each
given row of a verify pass: softmax at temperature 1 of the raw logits, before temperature,
top-k and top-p.  It is the model's belief, the same whatever the sampling settings; at
temperature 0 the p the verifier uses is a point mass and would say "certain" everywhere.

``with_chain_confidence`` / ``with_tree_confidence`` copy a step's decisions and correction
with ``target_conf`` (and, for argmax drafts whose drafter reported its softmax rows,
``draft_conf``) filled in, for the positions whose tokens the step judged or emitted only
(unjudged drafts after a rejection stay None): one logsumexp per such row.

This module does not decide anything: verdicts, residuals and draws are the verifier's
(``playground.decoding.engine``, ``playground.decoding.tree_step``); it only reads logits the verify pass
already computed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

import torch

from playground.decoding.records import Correction, DraftDecision


def top_probs(logits: torch.Tensor, rows: Iterable[int]) -> dict[int, float]:
    """{row: max softmax probability of logits[row]} (temperature 1, no top-k/top-p)."""
    rows = sorted({int(r) for r in rows if 0 <= int(r) < logits.shape[0]})
    if not rows:
        return {}
    return dict(zip(rows, row_confidence(logits[rows]).tolist()))


def row_confidence(logits: torch.Tensor) -> torch.Tensor:  # [r, V] -> [r]
    """The max softmax probability of each row at temperature 1.

    The softmax works row by row, so a row's value does not depend on the rows beside it
    (``playground.decoding.batch_probs`` computes it for many runs' rows at once); as fast
    as 1 / sum(exp(x - max)) for one row here and 7x faster for three, and 2-3x faster
    than exp(max - logsumexp)."""
    return torch.softmax(logits.float(), dim=-1).amax(dim=-1)


def _draft_conf(d: DraftDecision, j: int, soft_probs) -> float | None:
    """The drafter's own probability of its draft: its softmax for an argmax draft, q(x) for a sampled one."""
    if soft_probs is not None and j < len(soft_probs):
        return float(soft_probs[j, d.token_id])
    if len(d.draft_top) > 1:  # q is a distribution, not a point mass: the draft was sampled from it
        return d.draft_prob
    return None  # a copy (prompt lookup) or an argmax without its softmax: no probability to show


def with_chain_confidence(
    decisions: Sequence[DraftDecision],
    correction: Correction | None,
    logits: torch.Tensor,
    correction_row: int | None,
    soft_probs=None,
    known: dict[int, float] | None = None,
) -> tuple[list[DraftDecision], Correction | None]:
    """Chain step: draft j was judged against row j; the correction came from ``correction_row``.
    ``known``: every row's confidence, already computed with other runs' rows (``batch_probs``)."""
    judged = [j for j, d in enumerate(decisions) if d.judged]
    wanted = [*judged, *([correction_row] if correction_row is not None else [])]
    conf = {r: known[r] for r in wanted if r in known} if known is not None else top_probs(logits, wanted)
    out = [
        replace(d, target_conf=conf.get(j), draft_conf=_draft_conf(d, j, soft_probs)) for j, d in enumerate(decisions)
    ]
    if correction is not None and correction_row is not None:
        correction = replace(correction, target_conf=conf.get(correction_row))
    return out, correction


def with_tree_confidence(
    decisions: Sequence[DraftDecision],
    correction: Correction | None,
    logits: torch.Tensor,
    correction_row: int | None,
) -> tuple[list[DraftDecision], Correction | None]:
    """Tree step: node i was judged against its parent's row (parent + 1; the root's row is 0)."""
    rows = {j: d.parent + 1 for j, d in enumerate(decisions) if d.judged and d.parent is not None}
    conf = top_probs(logits, [*rows.values(), *([correction_row] if correction_row is not None else [])])
    out = [
        replace(d, target_conf=conf.get(rows[j]) if j in rows else None, draft_conf=_draft_conf(d, j, None))
        for j, d in enumerate(decisions)
    ]
    if correction is not None and correction_row is not None:
        correction = replace(correction, target_conf=conf.get(correction_row))
    return out, correction
