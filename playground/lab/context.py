"""``LabContext``: a preset loaded for lab runs (models, tokenizer, prompt encoding, a drafter factory).

The distribution and equality checks share it.  Its ``drafter_factory`` gives a fresh
drafter per sample and the target to run, wrapped in ``MemoModel`` views sharing one
byte cap when memoisation is asked for, the drafter kind allows it and the target's tables
can answer at all (no sliding-window layers).

This module does not run generation or compute any statistic.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from playground.api import encode_prompt, make_drafter, resolve
from playground.config import load_config
from playground.drafters.registry import KINDS
from playground.lab.budget import is_builtin
from playground.lab.memo import ByteBudget, MemoModel
from playground.models.loading import load_pair


class LabContext:
    """A loaded preset ready for lab runs: models, tokenizer, drafter factory."""

    def __init__(self, preset: str | None = None, drafter: str | None = None, dtype: str | None = None, progress=None):
        self.preset, self.drafter_kind = resolve(preset, drafter)
        self.pair = load_pair(self.preset, dtype, progress=progress)
        self.tokenizer = self.pair.tokenizer
        self.vocab = self.pair.target.config.get_text_config().vocab_size

    def encode(self, prompt: str) -> list[int]:
        lim = load_config().limits
        return encode_prompt(prompt, self.tokenizer, lim.max_prompt_chars, lim.max_prompt_tokens)

    @property
    def fast(self) -> bool:
        return is_builtin(self.preset)

    def drafter_factory(
        self, argmax: bool, memo: bool, cache_bytes: int | None = None
    ) -> tuple[Callable[[], Any], Any]:
        """(make a fresh drafter, the target model to use) — memoised views when possible.

        The target's and the drafter's memo tables share one cap of ``cache_bytes``
        (default ``limits.lab_cache_bytes``)."""
        kind, pair = self.drafter_kind, self.pair
        if memo and KINDS[kind].memoisable:  # its drafts read only the tokens (and its own model)
            cap = ByteBudget(load_config().limits.lab_cache_bytes if cache_bytes is None else cache_bytes)
            target = MemoModel(pair.target, budget=cap)
            if target.memoises:  # else every call would run the model anyway (Gemma 3's sliding layers)
                dm = MemoModel(pair.drafter_model, budget=cap) if pair.drafter_model is not None else None
                pair = replace(pair, target=target, drafter_model=dm)
        return (lambda: make_drafter(kind, pair, self.preset, argmax=argmax)), pair.target
