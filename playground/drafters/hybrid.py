"""``mtp+lookup``: prompt lookup when the text repeats itself, the MTP head otherwise.

Each step asks the first drafter (prompt lookup with at least a 2-token match) for a
draft; if it finds none, the fallback drafter (the MTP head) drafts instead.  The choice
is a function of the committed tokens only — never of the target's probabilities or of
any random draw — so each step is an ordinary speculative step with that drafter's own
q (a point mass for prompt lookup, the MTP head's q otherwise), and the output stays
exactly the target's (greedy-identical at temperature 0, the target's distribution
when sampling).  ``Draft.info["source"]`` names the drafter that drafted the step.

This is how production servers combine a free n-gram drafter with a learned one: copy
spans (edits, code, quoting, a small model's repetition loops) go to the n-gram match,
everything else to the model.  This module does not verify anything (``engine``).
"""

from __future__ import annotations

import torch

from playground.decoding.draft import Draft, TargetState, TreeDraft
from playground.decoding.sampling import SamplingParams
from playground.drafters.base import BaseDrafter
from playground.drafters.prompt_lookup import PromptLookupDrafter


class HybridDrafter(BaseDrafter):
    """First drafter if it proposes anything, else the fallback (both see every step).

    Both are ``BaseDrafter``s: a fallback that cannot branch drafts its chain as a tree."""

    name = "mtp+lookup"
    branches = True  # a tree always (the fallback's chain as one when it cannot branch)
    stops_early = True  # when its fallback does (the MTP head's): narrowed in __init__

    def __init__(self, fallback: BaseDrafter, first: BaseDrafter | None = None, name: str = "mtp+lookup") -> None:
        self.first = first if first is not None else PromptLookupDrafter(max_ngram=3, min_ngram=2)
        self.fallback = fallback
        self.name = name
        self.needs_target_hidden = bool(fallback.needs_target_hidden or self.first.needs_target_hidden)
        self.stops_early = fallback.capabilities.stops_early

    @property
    def stop_below(self) -> float | None:
        """The fallback's early-stop threshold (``playground.decoding.draft_stop``); None if it has none.
        Prompt lookup's copies are not stopped: they cost nothing to draft."""
        return self.fallback.stop_below if self.fallback.capabilities.stops_early else None

    @stop_below.setter
    def stop_below(self, value: float) -> None:
        if not self.fallback.capabilities.stops_early:
            raise AttributeError(f"{self.fallback.name} does not stop early")
        self.fallback.stop_below = value

    def start(self, state: TargetState) -> None:
        self.first.start(state)
        self.fallback.start(state)

    def propose(
        self, state: TargetState, gamma: int, params: SamplingParams, generator: torch.Generator | None
    ) -> Draft:
        draft = self.first.propose(state, gamma, params, generator)
        source = self.first
        if not draft.token_ids:
            draft = self.fallback.propose(state, gamma, params, generator)
            source = self.fallback
        draft.info = {**draft.info, "source": source.name}
        return draft

    def propose_tree(
        self,
        state: TargetState,
        max_nodes: int,
        max_depth: int,
        params: SamplingParams,
        generator: torch.Generator | None,
    ) -> TreeDraft:
        """The first drafter's tree if it has one, else the fallback's (a chain if it cannot branch)."""
        result, source = None, self.first
        if self.first.capabilities.branches:
            result = self.first.propose_tree(state, max_nodes, max_depth, params, generator)
        if result is None or len(result.tree) == 0:
            source = self.fallback
            result = self.fallback.propose_tree(
                state, max_nodes, max_depth, params, generator
            )  # a chain if it cannot branch
        result.info = {**result.info, "source": source.name}
        return result

    def accept(self, n_accepted: int, state: TargetState) -> None:
        self.first.accept(n_accepted, state)
        self.fallback.accept(n_accepted, state)

    def cache_len(self) -> int | None:
        return self.fallback.cache_len()
