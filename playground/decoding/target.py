"""The target model and its KV cache, driven one forward pass at a time.

``Target.forward`` runs the model over new tokens and keeps the logits of the last ones;
``forward_tree`` does it for a draft tree (one pass, tree mask); ``forward_via`` lets a
drafter that computes part of the pass (early exit with KV reuse) do it instead, timed
and counted the same; ``crop`` rolls the cache back.  It counts target calls and
single-token pass times for the run's statistics.

With a ``scheduler`` (``playground.serving.scheduler``) and other runs joined to it, a
pass is handed to the scheduler's worker and shares one forward pass with theirs; the
cache, logits and hidden states are the run's own either way, and the pass's time is
recorded as this run's share of it (its wall time over the rows it carried).  A prompt
is then fed in chunks of ``PREFILL_CHUNK`` tokens, one chunk per shared pass, so a
newcomer's prompt does not stall everyone's next token.  Alone, a run takes the plain
path in its own thread.  While its passes are shared, the run's own torch calls use one
core, so that only the worker keeps OpenMP helper threads (``playground.threads``).

This module does not draft, verify or sample.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import DynamicCache

from playground.decoding.batch_pass import RowPass
from playground.decoding.batch_probs import ReadSpec, RowReads
from playground.decoding.hf_calls import logits_to_keep_arg
from playground.decoding.tree import DraftTree, tree_attention_mask, tree_position_ids
from playground.decoding.tree_pass import compact_cache, tree_forward
from playground.threads import all_cores, one_core

# Prompt tokens per shared pass for a run that joins others (see the module docstring).
PREFILL_CHUNK = 32


@dataclass
class Pass:
    """One target pass: the logits (and hidden states) of its last ``keep`` positions, and its time."""

    logits: torch.Tensor  # [keep, V]
    hidden: torch.Tensor | None  # [keep, H]
    ms: float
    rows: int = 1  # runs whose rows this pass carried (1: the run's own pass)
    reads: RowReads | None = None  # the logits read as the caller's ReadSpec asked (shared passes only)


class Target:
    """A causal LM plus its KV cache, driven one pass at a time."""

    def __init__(self, model, rollback: bool, scheduler=None, start: Prefill | None = None) -> None:
        """``start``: begin from a copy of that prefill's cache (its rollback must match)."""
        self.model = model
        self.rollback = rollback
        self.scheduler = scheduler  # a PassScheduler shared with other runs, or None
        self.last_rows = 1  # runs whose rows the latest pass carried
        if start is not None:
            if start.rollback != rollback:
                raise ValueError("this prefill was made for a run that does not roll back the same way")
            self.cache = copy_cache(start.cache)  # the run writes its own copy, never the shared one
        else:
            self.cache = DynamicCache(config=model.config)
            if rollback:
                self.cache.activate_past_recording()
        self.calls = 0
        self.single_token_ms: list[float] = []

    def _shared(self) -> bool:
        """Whether this pass goes to the scheduler's worker.  The thread's own torch calls then
        run on one core (the worker computes with all of them), and on every core when the run
        computes its passes itself (``playground.threads``)."""
        shared = self.scheduler is not None and self.scheduler.shares_passes()
        (one_core if shared else all_cores)()
        return shared

    def _shared_pass(self, row: RowPass, read: ReadSpec | None = None) -> Pass:
        """One row in the scheduler's next pass; the time recorded is this run's share."""
        shared = self.scheduler.forward(row, read)
        self.calls += 1
        self.last_rows = shared.rows
        return Pass(shared.out.logits, shared.out.hidden, shared.pass_ms / shared.rows, shared.rows, shared.reads)

    def draft_cap(self) -> int:
        """The most drafts this run may propose now: its scheduler's share of a pass, or no cap."""
        return self.scheduler.draft_cap() if self.scheduler is not None else 1 << 30

    def forward(self, ids: list[int], keep: int, hidden: bool, read: ReadSpec | None = None) -> Pass:
        """Run the model over ``ids``: the logits of the last ``keep`` (and their hidden states).
        ``read``: in a shared pass, the worker also reads the logits so (``Pass.reads``)."""
        self.last_rows = 1
        if not self._shared():
            return self._forward_alone(ids, keep, hidden)
        ids = [int(i) for i in ids]
        while len(ids) - PREFILL_CHUNK >= keep:  # a long prompt: one chunk per shared pass
            self._shared_pass(RowPass(self.cache, tuple(ids[:PREFILL_CHUNK]), keep=1))
            self.calls -= 1  # the chunks of one prefill count as one target call
            ids = ids[PREFILL_CHUNK:]
        return self._shared_pass(RowPass(self.cache, tuple(ids), keep=keep, hidden=hidden), read)

    def forward_tree(self, root: int, tree: DraftTree, hidden: bool) -> Pass:
        """One pass over [root, every node] with the tree mask: logits [n+1, V] (row 0 at
        the root, row i+1 after node i) and hidden states [n+1, H] if asked."""
        self.last_rows = 1
        if self._shared():
            past = len(self)
            attend = tree_attention_mask(tree, past)[:, past:]  # [n+1, n+1]: ancestors only
            ids = (int(root), *map(int, tree.tokens))
            row = RowPass(self.cache, ids, len(ids), hidden, tree_position_ids(tree, past), attend)
            return self._shared_pass(row)
        t0 = time.perf_counter()
        logits, h = tree_forward(self.model, self.cache, root, tree, hidden=hidden)  # [n+1, V]
        self.calls += 1
        return Pass(logits=logits, hidden=h, ms=(time.perf_counter() - t0) * 1000.0)

    @torch.inference_mode()
    def _forward_alone(self, ids: list[int], keep: int, hidden: bool) -> Pass:
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

    def compact(self, n_new: int, keep: list[int]) -> None:
        """After a tree pass: of the pass's ``n_new`` cache entries keep only the rows ``keep``
        (the root and the accepted path), contiguous, as if only they had been fed."""
        compact_cache(self.cache, n_new, keep)

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


def copy_cache(cache: DynamicCache) -> DynamicCache:
    """A cache that starts where ``cache`` is and shares nothing a run writes: each layer object
    copied (its window, its count, whether it records its past) and its keys and values cloned.
    ``copy.deepcopy`` gives the same through Python's generic walk, about 2 ms for Gemma 3's
    cache, which is most of a short lab draw's own work."""
    new = copy.copy(cache)
    new.layers = [copy.copy(layer) for layer in cache.layers]
    for layer in new.layers:
        if getattr(layer, "is_initialized", False):
            layer.keys, layer.values = layer.keys.clone(), layer.values.clone()
    return new


@dataclass(frozen=True)
class Prefill:
    """A prompt's prefill, computed once for many runs of the same prompt (the lab draws
    hundreds of continuations of one prompt).  Each run starts from its own copy of
    ``cache``, which is exactly the cache its own prefill would have left: the same pass
    over the same tokens, computed once instead of once per run."""

    ids: tuple[int, ...]  # the tokens in the cache: the prompt without its newest token
    cache: DynamicCache  # never written: ``Target(start=...)`` copies it
    hidden: torch.Tensor | None  # [H] at the cache's last position, if asked
    rollback: bool  # made for runs that roll back (speculative) or not (autoregressive)
    ms: float

    @classmethod
    def of(cls, model, prompt_ids: Sequence[int], rollback: bool, hidden: bool) -> Prefill:
        ids = tuple(int(i) for i in prompt_ids[:-1])
        if not ids:
            raise ValueError("a one-token prompt has nothing to prefill")
        target = Target(model, rollback)
        out = target.forward(list(ids), keep=1, hidden=hidden)
        return cls(ids, target.cache, out.hidden[-1] if hidden else None, rollback, out.ms)
