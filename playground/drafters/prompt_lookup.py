"""Prompt-lookup drafting: copy the continuation of an earlier n-gram match.

If the last n committed tokens (n = max_ngram down to min_ngram) occurred
earlier in the context, propose the tokens that followed the most recent such
occurrence.  Drafts are deterministic, so q is a point mass (draft_probs=None)
and verification uses the one-hot rule.  As a tree (``propose_tree``), the continuations
of several earlier matches become branches.  No model, no cache, no randomness.
"""

from __future__ import annotations

import torch

from playground.decoding.draft import Draft, TargetState, TreeDraft
from playground.decoding.sampling import SamplingParams
from playground.decoding.tree import ROOT, DraftTree
from playground.drafters.base import BaseDrafter


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


def find_continuations(
    ids: list[int], depth: int, max_ngram: int = 3, min_ngram: int = 1, limit: int = 16
) -> list[list[int]]:
    """Up to ``limit`` continuations (each up to ``depth`` tokens) that followed earlier
    matches of the longest suffix n-gram that has any, most recent match first."""
    n_ids = len(ids)
    for n in range(min(max_ngram, n_ids - 1), min_ngram - 1, -1):
        suffix = ids[n_ids - n :]
        found = []
        for start in range(n_ids - n - 1, -1, -1):
            if ids[start : start + n] == suffix:
                cont = ids[start + n : start + n + depth]
                if cont:
                    found.append(cont)
                    if len(found) >= limit:
                        break
        if found:
            return found
    return []


def continuation_tree(conts: list[list[int]], max_nodes: int) -> DraftTree:
    """The trie of the continuations, first ones first, cut at ``max_nodes`` nodes.
    Siblings are distinct tokens; every node is deterministic (one-hot q)."""
    tokens: list[int] = []
    parents: list[int] = []
    child: dict[tuple[int, int], int] = {}  # (parent, token) -> node
    for cont in conts:
        node = ROOT
        for tok in cont:
            key = (node, int(tok))
            if key not in child:
                if len(tokens) >= max_nodes:
                    break
                child[key] = len(tokens)
                tokens.append(int(tok))
                parents.append(node)
            node = child[key]
    return DraftTree(tuple(tokens), tuple(parents))


class PromptLookupDrafter(BaseDrafter):
    name = "prompt-lookup"
    branches = True

    def __init__(self, max_ngram: int = 3, min_ngram: int = 1) -> None:
        if not 1 <= min_ngram <= max_ngram:
            raise ValueError("need 1 <= min_ngram <= max_ngram")
        self.max_ngram = max_ngram
        self.min_ngram = min_ngram

    def propose(
        self, state: TargetState, gamma: int, params: SamplingParams, generator: torch.Generator | None
    ) -> Draft:
        tokens = find_continuation(state.committed_ids, gamma, self.max_ngram, self.min_ngram)
        return Draft(token_ids=tokens, draft_probs=None, info={"matched": bool(tokens)})

    def propose_tree(
        self,
        state: TargetState,
        max_nodes: int,
        max_depth: int,
        params: SamplingParams,
        generator: torch.Generator | None,
    ) -> TreeDraft:
        """Several earlier matches' continuations as branches (a trie: shared prefixes once)."""
        conts = find_continuations(state.committed_ids, max_depth, self.max_ngram, self.min_ngram)
        tree = continuation_tree(conts, max_nodes)
        return TreeDraft(tree=tree, info={"matched": bool(conts), "branches": len(conts)})
