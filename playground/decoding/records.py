"""Typed, frozen trace records yielded by the engine.

A run is a sequence of ``StepRecord`` s (one per target verification pass)
followed by a ``GenerationResult`` holding them all plus ``RunStats``.
Probabilities follow ``playground.decoding.sampling``: ``target_prob`` is p(x)
(the target), ``draft_prob`` is q(x) (the drafter).

Every record converts to plain JSON with ``to_dict()``; ``from_dict`` on
the result reverses it (used by trace import).  This module does not compute
anything about models; it only holds numbers.
"""

from __future__ import annotations

import copy
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from functools import cache
from typing import Any


@dataclass(frozen=True)
class Candidate:
    """One entry of a top-k list."""

    token_id: int
    text: str
    prob: float


@dataclass(frozen=True)
class DraftDecision:
    """The verdict on one drafted token.

    position is 1-based within the step.  accept_prob = min(1, p/q); the
    token was accepted iff u < accept_prob.  Positions after the first
    rejection were drafted but never judged: judged=False, u=None.  Block
    verification (rule "block") judges every draft: accept_prob is then h_i,
    ``weight`` is w_i, and accepted means "inside the longest prefix whose last
    u < h", so a kept draft may have u >= accept_prob.  In a tree
    step, p is the residual the draft was judged against (the target's p for the
    first sibling tried, norm(max(0, r - q)) after each rejected sibling).
    """

    position: int
    token_id: int
    text: str
    draft_prob: float
    target_prob: float
    ratio: float | None  # p/q; None when q == 0
    accept_prob: float
    u: float | None
    judged: bool
    accepted: bool
    target_top: tuple[Candidate, ...]
    draft_top: tuple[Candidate, ...]
    # Tree steps: index of this draft's parent in the step's ``drafted`` (-1: the newest
    # committed token), and ``position`` is its depth.  None in chain steps (the parent is
    # the previous draft), so chain traces written before trees existed still import.
    parent: int | None = None
    # Tree steps, a rejected draft only: the top of the residual norm(max(0, r - q)) its
    # rejection left, the r the next sibling (or the resample) was judged against.  Empty
    # otherwise, and in traces written before it was recorded.
    residual_top: tuple[Candidate, ...] = ()
    # Block verification only: the weight w_i = min(1, w_{i-1}·p/q) carried along the block
    # (``playground.decoding.block_verify``).  None for every other rule, and in older traces.
    weight: float | None = None
    # The target's own probability of its top choice where this draft was judged (softmax at
    # temperature 1 of the raw logits, ``playground.decoding.confidence``), and the drafter's own
    # probability of this draft (its softmax for an argmax draft, q for a sampled one; None
    # for a copy).  None for unjudged drafts and in traces written before they were recorded.
    target_conf: float | None = None
    draft_conf: float | None = None


@dataclass(frozen=True)
class Correction:
    """The one token the target always adds after the drafts.

    kind: "resample" (drawn from norm(max(0, p - q)) after a rejection),
    "bonus" (drawn from p at position γ+1 after all drafts were accepted), or
    "target" (an autoregressive step: drawn from p, no drafts).
    position is the 1-based position in the verify pass it came from.
    """

    kind: str
    position: int
    token_id: int
    text: str
    prob: float  # probability of the token under the distribution it was drawn from
    target_prob: float  # p(token) at that position
    distribution_top: tuple[Candidate, ...]  # top of residual (resample) or of p (bonus/target)
    target_top: tuple[Candidate, ...]
    draft_top: tuple[Candidate, ...]  # drafter's top at the rejected position (resample only)
    target_conf: float | None = None  # the target's own top-choice probability there (see DraftDecision)


@dataclass(frozen=True)
class StepRecord:
    index: int
    mode: str  # "speculative" | "autoregressive"
    drafter: str | None
    gamma: int  # drafts requested this step (may be < configured γ near the budget)
    drafted: tuple[DraftDecision, ...]
    n_accepted: int
    correction: Correction | None  # None only if the budget/EOS ended the step first
    emitted_ids: tuple[int, ...]  # tokens committed by this step, in order
    emitted_text: str  # their text, decoded in context (safe across multi-byte splits)
    draft_ms: float
    verify_ms: float
    step_ms: float
    elapsed_ms: float  # wall time since the run started, at the end of this step
    committed_tokens: int  # new tokens committed so far (after this step)
    target_cache_len: int
    drafter_cache_len: int | None
    eos: bool
    drafter_info: dict[str, Any] = field(default_factory=dict)  # drafter-specific facts (e.g. MTP)
    # Runs whose rows this step's target pass carried (``playground.serving``); 1: its own
    # pass.  When > 1, verify_ms is this run's share of the pass (its wall time / rows).
    shared_rows: int = 1

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)


@dataclass(frozen=True)
class RunStats:
    mode: str
    drafter: str | None
    gamma: int
    new_tokens: int
    steps: int
    target_calls: int  # target forward passes, prefill included
    drafter_calls: int
    drafted_tokens: int
    judged_tokens: int
    accepted_tokens: int
    acceptance_rate: float | None  # accepted / judged drafts
    draft_efficiency: float | None  # accepted / drafted (drafts never judged count as waste)
    acceptance_by_position: tuple[float | None, ...]  # P(accept | judged) at position 1..γ
    accepted_length_hist: tuple[int, ...]  # steps that accepted 0..γ drafts
    mean_accepted_length: float | None
    tokens_per_target_call: float  # new tokens / decode-phase target calls (prefill excluded)
    prefill_ms: float
    draft_ms: float
    verify_ms: float
    wall_ms: float
    tokens_per_s: float
    draft_ms_per_token: float | None  # mean drafter time per drafted token
    verify_ms_per_call: float | None  # mean target time per decode-phase pass
    single_token_ms: float | None  # mean target time of passes over exactly one token (None if none ran)
    stopped: str  # "eos" | "max_new_tokens"

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)


@dataclass(frozen=True)
class GenerationResult:
    prompt: str
    prompt_ids: tuple[int, ...]
    token_ids: tuple[int, ...]  # new tokens only
    text: str
    steps: tuple[StepRecord, ...]
    stats: RunStats
    config: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "token_ids": list(self.token_ids),
            "steps": [s.to_dict() for s in self.steps],
            "stats": self.stats.to_dict(),
            "prompt": self.prompt,
            "prompt_ids": list(self.prompt_ids),
            "config": dict(self.config),
        }

    @staticmethod
    def from_dict(data: dict[str, Any]) -> GenerationResult:
        """Rebuild a result from ``to_dict()`` output.  Raises ValueError/TypeError/KeyError on bad data."""
        steps = tuple(_step_from_dict(s) for s in data["steps"])
        stats = _build(RunStats, data["stats"])
        return GenerationResult(
            prompt=str(data.get("prompt", "")),
            prompt_ids=tuple(int(i) for i in data.get("prompt_ids", ())),
            token_ids=tuple(int(i) for i in data["token_ids"]),
            text=str(data["text"]),
            steps=steps,
            stats=stats,
            config=dict(data.get("config", {})),
        )


_LEAVES = (int, float, str, bool, type(None))


def _plain(obj):
    """What ``dataclasses.asdict`` gives for a record: dataclasses as dicts, containers copied
    (tuples stay tuples), without its deep copy of every leaf.  A record's leaves are numbers,
    strings, booleans and None, which a copy returns unchanged; anything else is still copied.
    ``/speculate`` converts every answer (a replay's too), and ``asdict`` spent 3-4x as long."""
    kind = type(obj)
    if kind in _LEAVES:
        return obj
    if kind in (tuple, list):
        return kind(_plain(v) for v in obj)
    if kind is dict:
        return {_plain(k): _plain(v) for k, v in obj.items()}
    names = _field_names(kind)
    if names is not None:
        return {name: _plain(getattr(obj, name)) for name in names}
    return copy.deepcopy(obj)


@cache
def _field_names(kind: type) -> tuple[str, ...] | None:
    """A dataclass's field names, in order (None: not a dataclass)."""
    return tuple(f.name for f in fields(kind)) if is_dataclass(kind) else None


def _build(cls, data: dict[str, Any]):
    if not isinstance(data, dict):
        raise TypeError(f"{cls.__name__} must be an object")
    names = {f.name for f in fields(cls)}
    missing = [n for n in names if n not in data and not _has_default(cls, n)]
    if missing:
        raise KeyError(f"{cls.__name__} is missing {', '.join(sorted(missing))}")
    kwargs = {}
    for k in names & data.keys():
        v = data[k]
        kwargs[k] = tuple(v) if isinstance(v, list) else v
    return cls(**kwargs)


def _has_default(cls, name: str) -> bool:

    f = next(f for f in fields(cls) if f.name == name)
    return f.default is not MISSING or f.default_factory is not MISSING  # type: ignore[misc]


def _cands(items) -> tuple[Candidate, ...]:
    return tuple(_build(Candidate, c) for c in items or ())


def _step_from_dict(d: dict[str, Any]) -> StepRecord:
    if not isinstance(d, dict):
        raise TypeError("step must be an object")
    drafted = tuple(
        _build(
            DraftDecision,
            {
                **x,
                "target_top": _cands(x.get("target_top")),
                "draft_top": _cands(x.get("draft_top")),
                "residual_top": _cands(x.get("residual_top")),
            },
        )
        for x in d.get("drafted", [])
    )
    corr = d.get("correction")
    correction = None
    if corr is not None:
        correction = _build(
            Correction,
            {
                **corr,
                "distribution_top": _cands(corr.get("distribution_top")),
                "target_top": _cands(corr.get("target_top")),
                "draft_top": _cands(corr.get("draft_top")),
            },
        )
    return _build(StepRecord, {**d, "drafted": drafted, "correction": correction})
