"""``MemoModel``: a memoising view of a causal LM, so identical network calls are answered from a table.

The distribution check draws thousands of short continuations of one prompt, and most of
their network calls repeat exactly (same cached tokens, same new tokens, hence the same
logits).  ``MemoModel`` answers those from a table and appends the stored K/V so the
cache is exactly what a real pass would have left; only the decisions (drafts, u,
accept/reject, resample) are recomputed per sample.  ``ByteBudget`` caps what the tables
hold together (``limits.lab_cache_bytes``).

This module never changes an answer (a call it cannot key, or cannot store, simply runs
the model) and knows nothing of sampling, drafting or statistics.
"""

from __future__ import annotations

import weakref
from types import SimpleNamespace
from typing import Any

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from playground.config import load_config


class ByteBudget:
    """Bytes a group of memo tables may hold together (the target's and the drafter's in one action)."""

    def __init__(self, limit: int) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ValueError(f"the memo byte limit must be a whole number >= 0, got {limit!r}")
        self.limit = limit
        self.used = 0

    def take(self, n: int) -> bool:
        """Reserve n bytes if they fit (True), else leave everything as it is (False)."""
        if self.used + n > self.limit:
            return False
        self.used += n
        return True


def _nbytes(t: torch.Tensor | None) -> int:
    return 0 if t is None else t.numel() * t.element_size()


def _owned(t: torch.Tensor | None) -> torch.Tensor | None:
    """``t`` itself if it owns exactly its memory, else a compact copy.

    A slice of the KV cache is a view that keeps the whole (ever-growing) cache tensor alive;
    storing it would hold far more memory than the slice's own bytes, and the byte cap
    would count the wrong thing."""
    if t is None:
        return None
    if t.is_contiguous() and t.storage_offset() == 0 and t.untyped_storage().nbytes() == _nbytes(t):
        return t
    return t.clone(memory_format=torch.contiguous_format)


class MemoModel:
    """A memoising view of a causal LM for the engine loop.

    The engine (and ``ModelDrafter``) call ``model(input_ids=[[...]], cache=c, use_cache=True,
    logits_to_keep=k, output_hidden_states=h)``.  The output is a function of the tokens already
    in ``c`` plus ``input_ids``; we key the table on exactly that, so a hit returns the same
    logits the network returned for the same call before, and appends the stored K/V of the
    new tokens to ``c`` so the cache stays exactly what a real pass would have left.  Only
    plain ``DynamicLayer`` caches are memoised (sliding-window layers are passed through).

    Memory: a real model's logits row is ~1 MB (Gemma's 262k vocabulary in float32), so the
    table holds at most ``max_bytes`` (default ``limits.lab_cache_bytes``) of stored tensors —
    logits, hidden states and K/V, each stored compact (``_owned``) so the count is the memory
    really held.  ``budget`` shares one cap between several tables (target and drafter).  Once
    full, new calls simply run the model: slower, never different.
    """

    def __init__(
        self, model, max_entries: int = 100_000, max_bytes: int | None = None, budget: ByteBudget | None = None
    ) -> None:
        self.model = model
        self.config = model.config
        self.device = getattr(model, "device", torch.device("cpu"))
        self.max_entries = max_entries
        if budget is None:
            budget = ByteBudget(load_config().limits.lab_cache_bytes if max_bytes is None else max_bytes)
        self.budget = budget
        self.stored_bytes = 0  # this table's share of the budget
        self.hits = 0
        self.misses = 0
        self.not_stored = 0  # misses the cap (or max_entries) kept out of the table
        self._table: dict[tuple, tuple] = {}
        self._tokens: weakref.WeakKeyDictionary[Any, list[int]] = weakref.WeakKeyDictionary()
        self._plain: bool | None = None

    def __getattr__(self, name: str):  # anything else (generation_config, dtype...) from the model
        if name == "model":
            raise AttributeError(name)
        return getattr(self.model, name)

    @property
    def memoises(self) -> bool:
        """Whether this model's calls can be answered from the table at all: its cache layers
        are plain ``DynamicLayer``s (a model with sliding-window layers, as Gemma 3, is passed
        through: its every call runs the model)."""
        if self._plain is None:
            self._plain = self._plain_cache(DynamicCache(config=self.config))
        return self._plain

    def _plain_cache(self, cache) -> bool:

        layers = getattr(cache, "layers", None)
        return bool(layers) and all(type(layer) is DynamicLayer for layer in layers)

    def _store(self, key: tuple, logits, hidden, cache, n: int) -> None:
        """Keep this call's answer if the byte cap allows (sizes are known before any copy)."""
        if len(self._table) >= self.max_entries:
            self.not_stored += 1
            return
        kv_views = [(layer.keys[..., -n:, :], layer.values[..., -n:, :]) for layer in cache.layers]
        size = _nbytes(logits) + _nbytes(hidden) + sum(_nbytes(k) + _nbytes(v) for k, v in kv_views)
        if not self.budget.take(size):
            self.not_stored += 1
            return
        kv = tuple((_owned(k), _owned(v)) for k, v in kv_views)
        self._table[key] = (_owned(logits), _owned(hidden), kv)
        self.stored_bytes += size

    def __call__(self, input_ids=None, cache=None, use_cache=True, logits_to_keep=0, output_hidden_states=False, **kw):
        if cache is None or kw or self._plain is False or input_ids is None or input_ids.shape[0] != 1:
            return self.model(
                input_ids=input_ids,
                cache=cache,
                use_cache=use_cache,
                logits_to_keep=logits_to_keep,
                output_hidden_states=output_hidden_states,
                **kw,
            )
        new = tuple(int(t) for t in input_ids[0].tolist())
        seen = self._tokens.get(cache)
        length = cache.get_seq_length()
        if seen is None:
            seen = []
        if length > len(seen):  # filled by someone else: cannot key it, run for real
            out = self.model(
                input_ids=input_ids,
                cache=cache,
                use_cache=True,
                logits_to_keep=logits_to_keep,
                output_hidden_states=output_hidden_states,
            )
            self._tokens.pop(cache, None)
            return out
        del seen[length:]  # the engine cropped rejected drafts
        key = (tuple(seen), new, int(logits_to_keep), bool(output_hidden_states))
        hit = self._table.get(key)
        if hit is not None:
            self.hits += 1
            logits, hidden, kv = hit
            for i, (k, v) in enumerate(kv):
                cache.update(k, v, i)
        else:
            self.misses += 1
            out = self.model(
                input_ids=input_ids,
                cache=cache,
                use_cache=True,
                logits_to_keep=logits_to_keep,
                output_hidden_states=output_hidden_states,
            )
            logits = out.logits
            hidden = out.hidden_states[-1] if output_hidden_states else None
            if self._plain is None:
                self._plain = self._plain_cache(cache)
            if self._plain:
                self._store(key, logits, hidden, cache, len(new))
        seen.extend(new)
        self._tokens[cache] = seen
        return SimpleNamespace(logits=logits, hidden_states=(hidden,) if hidden is not None else None)
