"""The target model and its KV cache, driven one forward pass at a time.

``Target.forward`` runs the model over new tokens and keeps the logits of the last ones;
``forward_via`` lets a drafter that computes part of the pass (early exit with KV reuse)
do it instead, timed and counted the same; ``crop`` rolls the cache back.  It counts
target calls and single-token pass times for the run's statistics.

This module does not draft, verify or sample.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from transformers import DynamicCache

from playground.models.hf_calls import logits_to_keep_arg


@dataclass
class Pass:
    """One target pass: the logits (and hidden states) of its last ``keep`` positions, and its time."""

    logits: torch.Tensor  # [keep, V]
    hidden: torch.Tensor | None  # [keep, H]
    ms: float


class Target:
    """A causal LM plus its KV cache, driven one pass at a time."""

    def __init__(self, model, rollback: bool) -> None:
        self.model = model
        self.rollback = rollback
        self.cache = DynamicCache(config=model.config)
        if rollback:
            self.cache.activate_past_recording()
        self.calls = 0
        self.single_token_ms: list[float] = []

    @torch.inference_mode()
    def forward(self, ids: list[int], keep: int, hidden: bool) -> Pass:
        t0 = time.perf_counter()
        out = self.model(
            input_ids=torch.tensor([ids], device=self.model.device),
            cache=self.cache,
            use_cache=True,
            logits_to_keep=logits_to_keep_arg(len(ids), keep, self.model.device),
            output_hidden_states=hidden,
        )
        logits = out.logits[0, -keep:]  # [keep, V]
        h = out.hidden_states[-1][0, -keep:] if hidden else None  # [keep, H]
        ms = (time.perf_counter() - t0) * 1000.0
        self.calls += 1
        if len(ids) == 1:
            self.single_token_ms.append(ms)
        return Pass(logits=logits, hidden=h, ms=ms)

    def forward_via(self, logits_of: Callable[[Any, list[int], int], torch.Tensor], ids: list[int], keep: int) -> Pass:
        """``forward`` through a drafter that computes part of the pass itself (early exit
        with KV reuse): ``logits_of(cache, ids, keep)`` -> [keep, V]; timed and counted alike."""
        t0 = time.perf_counter()
        logits = logits_of(self.cache, ids, keep)
        ms = (time.perf_counter() - t0) * 1000.0
        self.calls += 1
        if len(ids) == 1:
            self.single_token_ms.append(ms)
        return Pass(logits=logits, hidden=None, ms=ms)

    def crop(self, n_remove: int) -> None:
        """Drop the ``n_remove`` newest tokens from the cache.

        Without rollback (the autoregressive loop) there is never anything to drop, and a
        sliding-window layer past its window refuses even ``crop(0)`` when it does not
        record its past, so nothing is called.  With rollback, ``crop(0)`` also trims a
        sliding layer back to its window."""
        if n_remove < 0:
            raise ValueError(f"cannot crop a negative number of tokens ({n_remove})")
        if n_remove == 0 and not self.rollback:
            return
        if n_remove and not self.rollback:
            raise RuntimeError("this cache was built without rollback; it cannot drop tokens")
        self.cache.crop(-n_remove)

    def __len__(self) -> int:
        return self.cache.get_seq_length()
