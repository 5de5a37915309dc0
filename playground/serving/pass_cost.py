"""What one shared target pass of B rows costs on this machine, and the committed measurement.

One shared forward pass with B rows of k new tokens each (every row with its own
``ctx``-token cache), median of ``repeats``, in units of one row of one token: flat while
the pass is memory-bound; the knee where it starts to grow is
``playground.serving.policy.KNEE_TOKENS``.  The Serving-a-class lesson shows the committed
table (``measured``) and can measure it here (``measure_pass_costs``); ``python -m tools
batch-sweep`` measures it together with whole classes and writes the file.

This module does not serve requests (``playground.serving.scheduler``) or decide the policy
(``playground.serving.policy``).
"""

from __future__ import annotations

import json
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import DynamicCache

from playground.config import load_config
from playground.decoding.batch_pass import RowPass, batched_forward
from playground.models import bf16_matmul
from playground.models.loading import load_pair
from playground.serving.policy import KNEE_TOKENS
from playground.threads import release_team

DATA = Path(__file__).resolve().parents[1] / "data"  # batch_sweep*.json: the measurements the lesson shows


@dataclass(frozen=True)
class PassCost:
    rows: int
    tokens: int  # new tokens per row
    ms: float  # median wall time of the shared pass
    relative: float  # ms / one row of one token

    @property
    def row_tokens_per_s(self) -> float:
        return self.rows * self.tokens / (self.ms / 1000.0)


def _filled_cache(model, ctx: int, seed: int) -> DynamicCache:
    cache = DynamicCache(config=model.config)
    cache.activate_past_recording()
    vocab = model.config.get_text_config().vocab_size
    ids = torch.randint(1, min(1000, vocab), (1, ctx), generator=torch.Generator().manual_seed(seed))
    with torch.inference_mode():
        model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1)
    return cache


def _median_ms(fn: Callable[[], None], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000.0)
    return statistics.median(times)


def pass_costs(model, shapes: list[tuple[int, int]], ctx: int = 64, repeats: int = 3) -> list[PassCost]:
    """Median ms of one shared pass per (rows, tokens) shape, each row with a ``ctx`` cache."""

    def one(rows: int, tokens: int) -> None:
        batch = [RowPass(caches[b], tuple(range(1, 1 + tokens)), keep=tokens) for b in range(rows)]
        batched_forward(model, batch)
        for c in caches[:rows]:
            c.crop(-tokens)  # back to ctx for the next repeat

    try:
        caches = [_filled_cache(model, ctx, seed) for seed in range(max(b for b, _ in shapes))]
        _median_ms(lambda: one(1, 1), 2)  # warm up
        before = _median_ms(lambda: one(1, 1), repeats + 2)
        measured = [(rows, tokens, _median_ms(lambda r=rows, t=tokens: one(r, t), repeats)) for rows, tokens in shapes]
        # The unit is timed again after the shapes, and the warmer (faster) of the two is kept: a
        # unit taken while the process still warmed up read 72 ms against 59 ms later in one sweep.
        unit = min(before, _median_ms(lambda: one(1, 1), repeats + 2))
    finally:
        # The calling thread is done computing: its parked OpenMP helpers would slow every later
        # pass of the scheduler's worker (``playground.threads``), e.g. the class the batch sweep
        # runs right after measuring its ceiling, or every run after the lesson's "measure here".
        release_team()
    return [PassCost(rows, tokens, ms, ms / unit) for rows, tokens, ms in measured]


def costs_json(costs: list[PassCost], about: dict) -> dict:
    """The pass-cost table as the JSON the lesson renders (``batch_sweep.json``'s own keys)."""
    return {
        "about": about,
        "pass_costs": [{"rows": c.rows, "tokens": c.tokens, "ms": c.ms, "relative": c.relative} for c in costs],
        "class": [],
    }


LIVE_SHAPES = [(1, 1), (1, 9), (4, 3), (8, 1), (8, 5), (16, 1), (16, 3), (32, 1), (32, 3)]


def measure_pass_costs(preset: str | None = None, dtype: str | None = None) -> dict:
    """The pass-cost table on this machine now (the lab's "measure here", about 20-40 s),
    as the JSON the lesson renders.  Class runs are left to the command line."""

    cfg = load_config()
    try:
        p = cfg.preset(preset or cfg.default_preset)
    except KeyError as exc:
        raise ValueError(str(exc.args[0])) from None
    pair = load_pair(p, dtype or p.dtype)
    costs = pass_costs(pair.target, LIVE_SHAPES, ctx=64, repeats=2)
    about = {"preset": p.name, "dtype": pair.dtype, "knee_tokens": KNEE_TOKENS, "date": time.strftime("%Y-%m-%d %H:%M"),
             "machine": f"{platform.machine()}, {torch.get_num_threads()} threads",
             "command": f"python -m tools batch-sweep --preset {p.name} --no-class"}  # fmt: skip
    return costs_json(costs, about)


def measured(native: bool | None = None) -> dict:
    """The committed measurement the lesson shows, or {}: the one taken on a CPU like this one.

    ``playground/data/batch_sweep.json`` was measured on a CPU with native bfloat16 products,
    ``batch_sweep_avx2.json`` on one without (``playground.models.bf16_matmul``), where a pass
    of a few tokens costs about twice as much.  native: which to read (default: this CPU's kind)."""

    native = bf16_matmul.native_bf16() if native is None else native
    path = DATA / ("batch_sweep.json" if native else "batch_sweep_avx2.json")
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
