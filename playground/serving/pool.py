"""One ``PassScheduler`` per loaded target model, shared by every run on it.

Models load once per process and are shared read-only (``playground.models.pair_cache``);
their schedulers are too.  Keyed weakly by the model object, so a pair the memory budget
evicts takes its scheduler (and its idle worker's reference) with it.

This module holds schedulers, not per-user state, and does not load models.
"""

from __future__ import annotations

import threading
import weakref

from playground.serving.scheduler import PassScheduler

_LOCK = threading.Lock()
_SCHEDULERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def scheduler_for(model, max_batch: int, kv_budget_mb: float | None = None) -> PassScheduler:
    """The scheduler of ``model`` (made on first use, with at most ``max_batch`` rows a pass and
    its runs' caches together under ``kv_budget_mb``)."""
    with _LOCK:
        scheduler = _SCHEDULERS.get(model)
        if scheduler is None:
            budget = None if kv_budget_mb is None else int(kv_budget_mb * 1_000_000)
            scheduler = _SCHEDULERS[model] = PassScheduler(model, max_batch=max_batch, kv_budget_bytes=budget)
        return scheduler
