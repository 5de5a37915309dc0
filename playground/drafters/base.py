"""``BaseDrafter``: what every drafter shares — its declared capabilities and the protocol's defaults.

The loop knows a drafter only through ``playground.decoding.draft.Drafter``.  Each drafter
class declares what it can do as class attributes (``branches``, ``stops_early``,
``shares_target_cache``, ``needs_drafter_model``); an instance may narrow them (an early exit
without KV reuse, a hybrid whose fallback does not stop early), and ``capabilities`` is what
the loop reads.  The registry (``playground.drafters.registry``) reads the classes'
declarations, so a fact about a kind is written once, on its class.  The defaults: no state
to reset or roll back (``start``, ``accept``, ``cache_len``) and, for drafters that do not
branch, the chain as a one-branch tree (``propose_tree``).

This module drafts nothing itself and imports no model code.
"""

from __future__ import annotations

import torch

from playground.decoding.draft import Capabilities, Draft, TargetState, TreeDraft
from playground.decoding.sampling import SamplingParams
from playground.decoding.tree import DraftTree


class BaseDrafter:
    """One subclass per drafter kind; ``propose`` is the one method every subclass writes."""

    name: str = ""  # the kind's name (RunSettings.drafter, presets, traces)
    needs_target_hidden: bool = False  # ask the target for output_hidden_states on every pass
    branches: bool = False  # drafts a real tree (its own propose_tree) when tree_nodes > 1
    stops_early: bool = False  # has stop_below: its chains stop when unsure (decoding.draft_stop)
    shares_target_cache: bool = False  # drafts in the target's own cache; verify through verify_logits
    needs_drafter_model: bool = False  # a second model (a preset's drafter_model)

    @classmethod
    def declared(cls) -> Capabilities:
        """What every drafter of this class can do (the registry's view of the kind)."""
        return Capabilities(cls.branches, cls.stops_early, cls.shares_target_cache)

    @property
    def capabilities(self) -> Capabilities:
        """What this drafter can do (the loop's view): the class's declaration, as narrowed."""
        return Capabilities(self.branches, self.stops_early, self.shares_target_cache)

    def start(self, state: TargetState) -> None:
        """Reset for a new run (nothing to reset by default)."""

    def propose(
        self, state: TargetState, gamma: int, params: SamplingParams, generator: torch.Generator | None
    ) -> Draft:
        raise NotImplementedError

    def propose_tree(
        self,
        state: TargetState,
        max_nodes: int,
        max_depth: int,
        params: SamplingParams,
        generator: torch.Generator | None,
    ) -> TreeDraft:
        """A drafter that does not branch drafts its chain as a one-branch tree (the loop asks
        only drafters that branch; a hybrid asks its fallback either way)."""
        d = self.propose(state, max_depth, params, generator)
        return TreeDraft(DraftTree.chain(d.token_ids, d.draft_probs), d.info, d.forward_calls)

    def accept(self, n_accepted: int, state: TargetState) -> None:
        """After verification (no cache to roll back by default)."""

    def cache_len(self) -> int | None:
        """Tokens in the drafter's own cache (None: it has none)."""
        return None
