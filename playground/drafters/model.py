"""The classic two-model drafter: an independent small causal LM with its own KV cache.

The drafter shares the target's tokenizer (same token ids).  If its vocabulary
is larger than the target's, the extra ids are masked out before sampling; if
smaller, q is zero-padded: q is always a distribution over the *target's*
vocabulary, exactly the one each draft was drawn from.

Cache invariant: the drafter's cache always holds a prefix of the committed
sequence (plus, during a step, its own drafts); ``accept`` crops it back.
This module does not verify anything.
"""

from __future__ import annotations

import time

import torch
from transformers import DynamicCache

from playground.drafters.base import Draft, TargetState
from playground.engine import logits_to_keep_arg
from playground.sampling import SamplingParams, draw_draft_token


class ModelDrafter:
    name = "model"
    needs_target_hidden = False

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

    @torch.inference_mode()
    def propose(
        self, state: TargetState, gamma: int, params: SamplingParams, generator: torch.Generator | None
    ) -> Draft:
        assert self.cache is not None, "start() not called"
        committed = state.committed_ids
        pending = committed[len(self._seen) :]  # not yet in the drafter cache (>= 1 token)
        tokens: list[int] = []
        rows: list[torch.Tensor] = []
        calls = 0
        deterministic = params.greedy or self.argmax
        for _ in range(gamma):
            out = self.model(
                input_ids=torch.tensor([pending], device=self.model.device),
                cache=self.cache,
                use_cache=True,
                logits_to_keep=logits_to_keep_arg(len(pending), 1),
            )
            calls += 1
            self._seen.extend(pending)
            logits = self._fit_vocab(out.logits[0, -1])  # [V]
            tok, row = draw_draft_token(logits, params, self.argmax, generator)  # row [V] or None
            if row is not None:
                rows.append(row)
            tokens.append(tok)
            pending = [tok]
        # No crop here: rolling back up to γ tokens in accept() needs the full history
        # since the last crop (sliding-window layers record the past until then).
        return Draft(
            token_ids=tokens,
            draft_probs=None if deterministic else torch.stack(rows),  # [k, V]; None = one-hot
            forward_calls=calls,
            soft_probs=torch.stack(rows) if deterministic and rows else None,
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
        else:
            self.cache.crop(0)

    def cache_len(self) -> int | None:
        return None if self.cache is None else self.cache.get_seq_length()
