"""Prompt-lookup drafting: copy the continuation of an earlier n-gram match.

If the last n committed tokens (n = max_ngram down to min_ngram) occurred
earlier in the context, propose the tokens that followed the most recent such
occurrence.  Drafts are deterministic, so q is a point mass (draft_probs=None)
and verification uses the one-hot rule.  No model, no cache, no randomness.
"""

from __future__ import annotations

import torch

from playground.drafters.base import Draft, TargetState
from playground.sampling import SamplingParams


def find_continuation(ids: list[int], gamma: int, max_ngram: int = 3, min_ngram: int = 1) -> list[int]:
    """Tokens following the most recent earlier match of the longest suffix n-gram."""
    n_ids = len(ids)
    for n in range(min(max_ngram, n_ids - 1), min_ngram - 1, -1):
        suffix = ids[n_ids - n :]
        # Scan candidate start positions from the most recent backwards; the
        # suffix itself (start = n_ids - n) is excluded.
        for start in range(n_ids - n - 1, -1, -1):
            if ids[start : start + n] == suffix:
                cont = ids[start + n : start + n + gamma]
                if cont:
                    return cont
    return []


class PromptLookupDrafter:
    name = "prompt-lookup"
    needs_target_hidden = False

    def __init__(self, max_ngram: int = 3, min_ngram: int = 1) -> None:
        if not 1 <= min_ngram <= max_ngram:
            raise ValueError("need 1 <= min_ngram <= max_ngram")
        self.max_ngram = max_ngram
        self.min_ngram = min_ngram

    def start(self, state: TargetState) -> None:
        pass

    def propose(
        self, state: TargetState, gamma: int, params: SamplingParams, generator: torch.Generator | None
    ) -> Draft:
        tokens = find_continuation(state.committed_ids, gamma, self.max_ngram, self.min_ngram)
        return Draft(token_ids=tokens, draft_probs=None, info={"matched": bool(tokens)})

    def accept(self, n_accepted: int, state: TargetState) -> None:
        pass

    def cache_len(self) -> int | None:
        return None
