"""What one loop step reads and what it decides: ``LoopState`` and ``Step``.

Both kinds of step take the same ``LoopState`` and return a ``Step``: the chain step
(``engine``: also the autoregressive step, with no drafts) and the tree step
(``tree_step``).  The loop (``engine.stream``) commits a ``Step`` — extends the committed
tokens, tells the drafter, adds it to the ``Tally`` — and writes its ``StepRecord``.

This module decides nothing and runs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from playground.decoding.draft import Drafter, TargetState
from playground.decoding.records import Correction, DraftDecision
from playground.decoding.sampling import SamplingParams
from playground.decoding.target import Target
from playground.decoding.text import TokenTexts
from playground.settings import RunSettings


@dataclass
class LoopState:
    """What every step of one generation reads: the models, the committed tokens (grown by
    ``stream``), the settings and the random stream."""

    target: Target
    drafter: Drafter | None
    state: TargetState  # what the drafter sees (committed tokens, the target's hidden state and cache)
    committed: list[int]
    settings: RunSettings
    params: SamplingParams
    generator: torch.Generator
    texts: TokenTexts | None  # token texts for the trace (None: no trace)
    eos: frozenset[int]
    vocab: int
    want_hidden: bool  # the drafter reads the target's hidden state
    speculative: bool


@dataclass(frozen=True)
class Step:
    """What one loop step decided (steps 1-4), before it is committed and recorded."""

    decisions: tuple[DraftDecision, ...]
    correction: Correction | None
    emitted: tuple[int, ...]  # accepted drafts, then the correction's token
    n_accepted: int
    drafted: int  # draft tokens (tree nodes) proposed
    judged: tuple[tuple[int, bool], ...]  # (depth, accepted) of every judged draft
    draft_ms: float
    verify_ms: float
    forward_calls: int  # drafter forward passes
    info: dict[str, Any]  # the drafter's facts for the trace
    hidden: torch.Tensor | None  # [H] the target's state that produced the newest token
