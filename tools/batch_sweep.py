"""``python -m tools batch-sweep``: what sharing target passes buys on this machine.

Two measurements, one table each (markdown, plus a plotly chart as HTML):

1. **Pass cost** — one shared forward pass with B rows of k new tokens each (every row
   with its own ``ctx``-token cache), median of ``repeats``, in units of one row of one
   token.  Flat while the pass is memory-bound; the knee where it starts to grow is
   ``playground.serving.policy.KNEE_TOKENS``.
2. **A class at once** — B concurrent runs, each its own prompt and seed, through one
   ``PassScheduler``: speculative with the preset's γ and no cap, speculative with the
   load-capped γ (the app's policy), and plain autoregressive decoding.  Throughput of
   the class (new tokens / wall time) and per-run latency p50 / p95.  Beside each class
   figure, the machine's ceiling measured just before that class size's runs: plain decoding
   through passes of B rows alone (B rows of 1 token, each row with a ``ctx``-token cache),
   B × 1000 / ms of that pass, and the class's throughput as a share of it, so every claim
   is a ratio on one machine.

This module does not serve requests (``playground.serving.scheduler``) or decide the
policy (``playground.serving.policy``); it measures both.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from playground import api
from playground.config import load_config
from playground.models.loading import load_pair
from playground.serving.pass_cost import DATA, PassCost, costs_json, pass_costs
from playground.serving.policy import KNEE_TOKENS
from playground.serving.pool import scheduler_for
from playground.serving.scheduler import PassLedger
from playground.validate import DTYPES


@dataclass(frozen=True)
class ClassRun:
    """B concurrent runs of one variant."""

    variant: str  # "speculative" | "speculative, capped" | "autoregressive"
    runs: int
    wall_s: float
    tokens: int
    latencies_s: tuple[float, ...]
    mean_shared_rows: float
    ceiling_tokens_per_s: float | None = None  # plain decoding through passes of ``runs`` rows alone
    per_pass: dict[str, float] | None = None  # the scheduler's ``PassLedger.per_pass()`` over the class's shared passes

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.wall_s if self.wall_s else 0.0

    @property
    def of_ceiling(self) -> float | None:
        """The class's throughput ÷ the ceiling (above 1: better than plain decoding's best case here)."""
        return self.tokens_per_s / self.ceiling_tokens_per_s if self.ceiling_tokens_per_s else None

    def percentile(self, q: float) -> float:
        xs = sorted(self.latencies_s)
        return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


def run_class(start_run: Callable[[int], object], runs: int, variant: str) -> ClassRun:
    """Start ``runs`` threads at once, each calling ``start_run(i)`` (which returns a
    GenerationResult); time the class and each run."""
    results: dict[int, tuple[float, object]] = {}
    barrier = threading.Barrier(runs)

    def go(i: int) -> None:
        barrier.wait()
        t0 = time.perf_counter()
        r = start_run(i)
        results[i] = (time.perf_counter() - t0, r)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=go, args=(i,)) for i in range(runs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    steps = [s for _, r in results.values() for s in r.steps]
    shared = statistics.fmean(s.shared_rows for s in steps) if steps else 1.0
    return ClassRun(
        variant=variant,
        runs=runs,
        wall_s=wall,
        tokens=sum(len(r.token_ids) for _, r in results.values()),
        latencies_s=tuple(lat for lat, _ in results.values()),
        mean_shared_rows=shared,
    )


def cost_table(costs: list[PassCost]) -> str:
    head = "| B rows × k tokens | " + " | ".join(f"{c.rows} × {c.tokens}" for c in costs) + " |"
    sep = "|---|" + "---|" * len(costs)
    rel = "| cost in single passes | " + " | ".join(f"{c.relative:.2f}" for c in costs) + " |"
    tps = "| row tokens per second | " + " | ".join(f"{c.row_tokens_per_s:.0f}" for c in costs) + " |"
    return "\n".join([head, sep, rel, tps])


def class_table(runs: list[ClassRun]) -> str:
    lines = [
        "| runs | variant | class tokens/s | ceiling tokens/s | of ceiling | p50 s | p95 s | mean runs per pass "
        "| shared pass ms: model · gather · write · read · wait |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in runs:
        ceiling = "–" if r.ceiling_tokens_per_s is None else f"{r.ceiling_tokens_per_s:.1f}"
        share = "–" if r.of_ceiling is None else f"{r.of_ceiling:.2f}×"
        lines.append(
            f"| {r.runs} | {r.variant} | {r.tokens_per_s:.1f} | {ceiling} | {share} | {r.percentile(0.5):.2f} | "
            f"{r.percentile(0.95):.2f} | {r.mean_shared_rows:.1f} | {pass_split(r.per_pass)} |"
        )
    return "\n".join(lines + [CEILING_NOTE])


SPLIT = ("model_ms", "gather_ms", "write_ms", "read_ms", "wait_ms")


def pass_split(per_pass: dict[str, float] | None) -> str:
    """Mean ms per shared pass, model first, then the scheduler's own work ("–": no shared pass)."""
    if not per_pass:
        return "–"
    return " · ".join(f"{per_pass[k]:.0f}" for k in SPLIT)


CEILING_NOTE = (
    "\nceiling = plain decoding through passes of B rows alone, measured in this run just before the class "
    "of B: B × 1000 / ms of one pass of B rows of 1 token; of ceiling = class tokens/s ÷ ceiling. "
    "Shared pass ms (means over the class's shared passes): the model (decoder and LM head), then the "
    "scheduler's own work: gathering the pass (its ids, masks and the rows' caches in the batched cache), "
    "extending each row's cache by its new keys, reading every run's logits, and waiting for stragglers "
    "before the pass."
)


VARIANTS = ("speculative, capped", "speculative", "autoregressive")


def class_prompts(n: int) -> list[str]:
    """``n`` prompts, one per student: the held-out eval prompts (no drafter trained on them), cycled."""

    data = json.loads((DATA / "heldout_prompts.json").read_text())
    flat = [p for prompts in data["categories"].values() for p in prompts]
    return [flat[i % len(flat)] for i in range(n)]


def class_sweep(batches: list[int], settings_for, variants=VARIANTS, ctx: int = 64) -> list[ClassRun]:
    """For each class size B and variant: B runs at once (run i: prompt i, seed i) through the
    model's scheduler; ``settings_for(i, mode)`` gives run i's RunSettings.  Each class size's
    ceiling (one pass of B rows of 1 token, ``ctx``-token caches) is measured just before its runs."""

    out = []
    prompts = class_prompts(max(batches))
    first = settings_for(0, "speculative")
    pair = load_pair(load_config().preset(first.preset), first.dtype)
    scheduler = scheduler_for(pair.target, load_config().limits.max_batch)
    for b in batches:
        ceiling = pass_costs(pair.target, [(b, 1)], ctx=ctx)[0].row_tokens_per_s
        for variant in variants:
            scheduler.knee_tokens = None if variant == "speculative" else KNEE_TOKENS
            mode = "autoregressive" if variant == "autoregressive" else "speculative"
            scheduler.ledger = PassLedger()
            run = run_class(lambda i, m=mode: api.run(prompts[i], settings_for(i, m), batch=True), b, variant)
            out.append(replace(run, ceiling_tokens_per_s=ceiling, per_pass=scheduler.ledger.per_pass() or None))
    scheduler.knee_tokens = KNEE_TOKENS
    return out


# ------------------------------------------------------------------------------- the command


def to_json(costs: list[PassCost], runs: list[ClassRun], about: dict) -> dict:
    return {
        **costs_json(costs, about),
        "class": [
            {"runs": r.runs, "variant": r.variant, "tokens_per_s": r.tokens_per_s, "p50_s": r.percentile(0.5),
             "p95_s": r.percentile(0.95), "mean_shared_rows": r.mean_shared_rows,
             "ceiling_tokens_per_s": r.ceiling_tokens_per_s, "of_ceiling": r.of_ceiling, "per_pass": r.per_pass}
            for r in runs
        ],
    }  # fmt: skip


SHAPES = [(1, 1), (1, 9), (4, 1), (4, 9), (8, 1), (8, 3), (8, 9), (16, 1), (16, 3), (16, 9), (32, 1), (32, 3)]


def build_parser():
    p = argparse.ArgumentParser(prog="python -m tools batch-sweep", description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default=None)
    p.add_argument("--dtype", default=None, choices=list(DTYPES))
    p.add_argument("--batches", default="1,2,4,8,16,32", help="class sizes, comma-separated")
    p.add_argument("--tokens", type=int, default=32, help="new tokens per run")
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--ctx", type=int, default=64, help="cached tokens per row in the pass-cost table and the ceiling")
    p.add_argument("--no-class", action="store_true", help="only the pass-cost table")
    p.add_argument("--out", default="batch_sweep", help="folder for batch_sweep.md / .json")
    return p


def main(argv: list[str] | None = None) -> int:

    args = build_parser().parse_args(argv)
    batches = [int(b) for b in args.batches.split(",") if b.strip()]
    if not batches or not all(1 <= b <= load_config().limits.max_batch for b in batches):
        raise SystemExit(f"--batches must be class sizes between 1 and {load_config().limits.max_batch}")

    def settings_for(i: int, mode: str):
        return api.run_settings(preset=args.preset, dtype=args.dtype, mode=mode, temperature=args.temperature,
                                seed=i, max_new_tokens=args.tokens)  # fmt: skip

    first = settings_for(0, "speculative")
    pair = load_pair(load_config().preset(first.preset), first.dtype)
    costs = pass_costs(pair.target, SHAPES, ctx=args.ctx)
    runs = [] if args.no_class else class_sweep(batches, settings_for, ctx=args.ctx)
    about = {
        "command": "python -m tools batch-sweep " + " ".join(argv or []),
        "preset": first.preset, "dtype": first.dtype, "drafter": first.drafter, "gamma": first.gamma,
        "temperature": args.temperature, "tokens": args.tokens, "knee_tokens": KNEE_TOKENS,
        "machine": f"{platform.machine()}, {torch.get_num_threads()} threads", "date": time.strftime("%Y-%m-%d"),
    }  # fmt: skip
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    md = "\n\n".join([cost_table(costs)] + ([class_table(runs)] if runs else []))
    (out / "batch_sweep.md").write_text(md + "\n", encoding="utf-8")
    (out / "batch_sweep.json").write_text(json.dumps(to_json(costs, runs, about), indent=1), encoding="utf-8")
    print(md)
    print(f"\nwrote {out / 'batch_sweep.md'} and {out / 'batch_sweep.json'}")
    return 0
