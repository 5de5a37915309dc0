"""The classic two-model drafter: an independent small causal LM with its own KV cache.

The drafter shares the target's tokenizer (same token ids).  If its vocabulary
is larger than the target's, the extra ids are masked out before sampling; if
smaller, q is zero-padded: q is always a distribution over the *target's*
vocabulary, exactly the one each draft was drawn from.

Cache invariant: the drafter's cache always holds a prefix of the committed
sequence (plus, during a step, its own drafts); ``accept`` crops it back.  A tree
draft (``propose_tree``) leaves only committed tokens in the cache.
This module does not verify anything.
"""

from __future__ import annotations

import math

import torch
from transformers import DynamicCache

from playground.decoding.draft import Draft, TargetState, TreeDraft
from playground.decoding.hf_calls import logits_to_keep_arg
from playground.decoding.sampling import SamplingParams, draw_draft_token, logits_to_probs
from playground.decoding.tree import ROOT, DraftTree
from playground.decoding.tree_grow import grow_level
from playground.decoding.tree_pass import tree_forward
from playground.drafters.base import BaseDrafter


class ModelDrafter(BaseDrafter):
    name = "model"
    branches = True
    needs_drafter_model = True

    def __init__(self, model, target_vocab_size: int, argmax: bool = False) -> None:
        """argmax=True drafts the drafter's argmax at every temperature (q is then
        one-hot, as with Gemma 4's assistant); default samples from the drafter."""
        self.model = model
        self.argmax = argmax
        self.target_vocab_size = target_vocab_size
        self.cache: DynamicCache | None = None
        self._seen: list[int] = []  # token ids whose K/V are in self.cache

    def start(self, state: TargetState) -> None:
        self.cache = DynamicCache(config=self.model.config)
        self.cache.activate_past_recording()
        self._seen = []

    def _fit_vocab(self, logits: torch.Tensor) -> torch.Tensor:
        # logits: [V_d] -> [V_t]
        vt = self.target_vocab_size
        if logits.shape[-1] > vt:
            return logits[..., :vt]
        if logits.shape[-1] < vt:
            pad = torch.full((vt - logits.shape[-1],), float("-inf"), dtype=logits.dtype)
            return torch.cat([logits, pad], dim=-1)
        return logits

    def _unfed(self, state: TargetState) -> list[int]:
        """The committed tokens the drafting has not fed yet (>= 1: at least the newest)."""
        assert self.cache is not None, "start() not called"
        return state.committed_ids[len(self._seen) :]

    def _next_logits(self, pending: list[int]) -> torch.Tensor:
        """Feed ``pending`` to the drafter (its own cache) and return its logits [V_d] after the last."""
        out = self.model(
            input_ids=torch.tensor([pending], device=self.model.device),
            cache=self.cache,
            use_cache=True,
            logits_to_keep=logits_to_keep_arg(len(pending), 1),
        )
        self._seen.extend(pending)
        return out.logits[0, -1]

    @torch.inference_mode()
    def propose(
        self, state: TargetState, gamma: int, params: SamplingParams, generator: torch.Generator | None
    ) -> Draft:
        pending = self._unfed(state)
        tokens: list[int] = []
        rows: list[torch.Tensor] = []
        deterministic = params.greedy or self.argmax
        for _ in range(gamma):
            logits = self._fit_vocab(self._next_logits(pending))  # [V]
            tok, row = draw_draft_token(logits, params, self.argmax, generator)  # row [V] or None
            if row is not None:
                rows.append(row)
            tokens.append(tok)
            pending = [tok]
        # No crop here: rolling back up to γ tokens in accept() needs the full history
        # since the last crop (sliding-window layers record the past until then).
        return Draft.drawn(tokens, rows, deterministic, forward_calls=gamma)  # q rows [k, V]; None = one-hot

    @torch.inference_mode()
    def propose_tree(
        self,
        state: TargetState,
        max_nodes: int,
        max_depth: int,
        params: SamplingParams,
        generator: torch.Generator | None,
        branch: int = 4,
    ) -> TreeDraft:
        """A dynamic tree, one depth at a time (EAGLE-2's rule, with this model's softmax as
        the confidence): each level is ONE drafter pass over the root and every node so far
        (tree attention mask, as the target's verify pass), and ``ceil(max_nodes / max_depth)``
        children go to the frontier nodes with the highest path probability
        (``playground.decoding.tree_grow``).  The pass's cache entries are cropped after each level,
        so the cache ends holding the committed tokens before the newest one.

        Children are the drafter's top tokens (one-hot q) at temperature 0 or with
        ``argmax``, else drawn without replacement from the drafter's q (rows = the exact
        laws).  Cost: one drafter pass per level, each over at most max_nodes + 1 tokens."""
        assert self.cache is not None, "start() not called"
        committed = state.committed_ids
        if max_nodes <= 0 or max_depth <= 0 or not committed:
            return TreeDraft(tree=DraftTree((), ()), info={"tree_nodes": 0})
        calls = 0
        pending = committed[len(self._seen) : -1]  # bring the cache to committed[:-1] first
        if pending:
            self.model(
                input_ids=torch.tensor([pending], device=self.model.device),
                cache=self.cache,
                use_cache=True,
                logits_to_keep=1,
            )
            calls += 1
            self._seen.extend(pending)
        sample = not (params.greedy or self.argmax)
        per_level = max(1, math.ceil(max_nodes / max_depth))
        tokens: list[int] = []
        parents: list[int] = []
        rows: list[torch.Tensor] = []  # q rows [V] of sampled nodes
        level = [(ROOT, 1.0)]  # (node index, path probability) of the nodes to expand
        for _ in range(max_depth):
            tree = DraftTree(tuple(tokens), tuple(parents))
            logits, _ = tree_forward(self.model, self.cache, committed[-1], tree)  # [n+1, V_d]
            self.cache.crop(-(len(tree) + 1))
            calls += 1
            logits = torch.stack([self._fit_vocab(logits[node + 1]) for node, _ in level])  # [T, V]
            probs = logits_to_probs(logits, params) if sample else torch.softmax(logits.float(), dim=-1)
            kids = grow_level(
                [sc for _, sc in level], probs, min(per_level, max_nodes - len(tokens)), branch, sample, generator
            )
            for kid in kids:
                parents.append(level[kid.slot][0])
                tokens.append(kid.index)
                if kid.row is not None:
                    rows.append(kid.row)
            level = [(len(tokens) - len(kids) + j, kid.score) for j, kid in enumerate(kids)]
            if len(tokens) >= max_nodes or not kids:
                break
        draft_probs = torch.stack(rows).cpu() if sample and rows else None  # [n, V]
        return TreeDraft(
            tree=DraftTree(tuple(tokens), tuple(parents), draft_probs),
            info={"tree_nodes": len(tokens)},
            forward_calls=calls,
        )

    def accept(self, n_accepted: int, state: TargetState) -> None:
        # Keep the longest prefix of what we fed that is still committed, minus the
        # newest committed token (it must be fed again to get the next logits).
        committed = state.committed_ids
        keep = 0
        limit = min(len(self._seen), len(committed) - 1)
        while keep < limit and self._seen[keep] == committed[keep]:
            keep += 1
        drop = len(self._seen) - keep
        if drop:
            self.cache.crop(-drop)
            del self._seen[keep:]
        elif self._seen:  # trims sliding layers back to their window; an empty cache has none
            # (a run whose steps drafted nothing yet, e.g. capped by the load, never filled it,
            # and transformers' crop(0) fails on a sliding layer that holds no keys)
            self.cache.crop(0)

    def cache_len(self) -> int | None:
        return None if self.cache is None else self.cache.get_seq_length()
