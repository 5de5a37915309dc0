"""The drafter protocol: the only thing the decoding loop knows about drafters.

The loop defines it here (drafters implement it in ``playground.drafters``), so the decoding
core imports no drafter.  What a drafter can do is *declared* (``Capabilities``; each kind
declares it on its class, ``playground.drafters.base``): the loop reads it, never probes the
object for methods.

A drafter proposes up to γ tokens together with the *exact* distribution each
was drawn from (``draft_probs``; a one-hot row for a deterministic draft), and
is told after each verification how many were accepted so it can roll back.

The loop keeps one invariant for the target and offers the same to drafters:
the *committed* sequence is prompt + emitted tokens, and the newest committed
token has not yet been fed to the target (it is the first input of the next
verify pass).  Drafters that read the target's state (MTP / EAGLE / Gemma 4
assistant) get, through ``TargetState``, the target's final hidden state at
the position *before* the newest committed token (the state whose logits
produced that token) and read-only access to the target's KV cache.

This module does not implement any drafter (``playground.drafters``) and does not sample or
verify.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import torch

from playground.decoding.sampling import SamplingParams


@dataclass
class TargetState:
    """What the target exposes to drafters after prefill and after each verify pass.

    committed_ids: prompt + emitted tokens (the newest is not yet in the target cache).
    hidden: [H] final-norm hidden state at the position before the newest committed
        token, or None if the target was not asked for hidden states (or the
        prompt was one token long, so no such position was computed).
    target_cache: the target's cache object (read-only for drafters!).
    """

    committed_ids: list[int]
    hidden: torch.Tensor | None = None
    target_cache: Any = None


def token_id_set(ids) -> frozenset[int]:
    """EOS ids as a set: None -> empty, one int -> {it}, an iterable -> its ints."""
    if ids is None:
        return frozenset()
    if isinstance(ids, int):
        return frozenset((ids,))
    return frozenset(int(i) for i in ids)


@dataclass(frozen=True)
class Capabilities:
    """What a drafter can do, as its kind declares it."""

    branches: bool = False  # has propose_tree: drafts a tree when tree_nodes > 1
    stops_early: bool = False  # has stop_below: its chains stop when unsure (decoding.draft_stop)
    shares_target_cache: bool = False  # drafts in the target's own cache; verify through verify_logits


@dataclass
class Draft:
    """A drafter's proposal.

    token_ids: k <= γ proposed tokens (k may be 0: nothing to propose).
    draft_probs: [k, V] float32, row i is the distribution token i was drawn from,
        over the *target's* vocabulary.  None means every draft was deterministic
        (point masses); the loop then uses one-hot rows.
    info: drafter-specific facts for the trace (JSON-serialisable), e.g. how many
        candidate tokens an MTP head scored.
    """

    token_ids: list[int]
    draft_probs: torch.Tensor | None
    info: dict[str, Any] = field(default_factory=dict)
    forward_calls: int = 0
    # [k, V] the drafter's softmax for deterministic (argmax) drafts.  NOT q: it is
    # what a buggy verifier would use instead of the one-hot q (rule "softmax-q").
    soft_probs: torch.Tensor | None = None

    @classmethod
    def drawn(
        cls,
        tokens: list[int],
        rows: list[torch.Tensor],
        deterministic: bool,
        *,
        info: dict[str, Any] | None = None,
        forward_calls: int = 0,
    ) -> Draft:
        """A chain drawn token by token (``sampling.draw_draft_token``): row i came with token i.

        Sampled drafts: the rows are q.  Deterministic drafts: q is a point mass (None here),
        and the rows, if any, are the drafter's softmax — kept only for the "softmax-q" lesson."""
        stacked = torch.stack(rows) if rows else None  # [k, V]
        return cls(
            token_ids=list(tokens),
            draft_probs=None if deterministic else stacked,
            info=dict(info or {}),
            forward_calls=forward_calls,
            soft_probs=stacked if deterministic else None,
        )


@dataclass
class TreeDraft:
    """A branching draft (``playground.decoding.tree.DraftTree``) plus what ``Draft`` carries.

    Drafters that can branch implement ``propose_tree(state, max_nodes, max_depth, params,
    generator) -> TreeDraft``; the tree's q rows are exactly the laws the nodes were drawn
    from (None: every node deterministic, one-hot q)."""

    tree: Any  # playground.decoding.tree.DraftTree
    info: dict[str, Any] = field(default_factory=dict)
    forward_calls: int = 0


@runtime_checkable
class Drafter(Protocol):
    name: str  # e.g. "model", "prompt-lookup", "mtp"
    needs_target_hidden: bool  # ask the target for output_hidden_states on every pass
    capabilities: Capabilities  # what it can do (its class's declaration, drafters.base)

    def start(self, state: TargetState) -> None:
        """Reset for a new run; state holds the prompt (and, if asked, the prefill hidden state)."""

    def propose(
        self, state: TargetState, gamma: int, params: SamplingParams, generator: torch.Generator | None
    ) -> Draft:
        """Propose up to gamma tokens continuing state.committed_ids."""

    def accept(self, n_accepted: int, state: TargetState) -> None:
        """Called after verification: n_accepted drafts were kept and one more token
        was committed; state describes the new committed sequence.  Roll back any
        internal cache to a prefix of state.committed_ids."""

    def cache_len(self) -> int | None:
        """Tokens in the drafter's own cache (None if it has none)."""
