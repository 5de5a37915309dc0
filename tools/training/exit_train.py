"""Train early-exit adapters: ``python -m tools train-drafter --drafter early-exit``.

One linear map A per exit layer k (``playground.drafters.exit_adapter``), fitted so that
lm_head(final_norm(A h_k)) matches the target's own next-token distribution:

1. features — one bf16 prefill per text row (the MTP run's generated and corpus rows,
   ``--work``; the held-out prompts' rows are left out, as for the MTP head) records h_k
   after every chosen layer (a forward hook per layer) and the target's top-``TOPK``
   next-token probabilities at every position.
2. train   — per layer, A starts at the identity (= the untrained exit) and minimises the
   soft cross-entropy -sum_topk p log softmax(lm_head(norm(A h_k))) over the *full*
   vocabulary (the LM head is frozen; a batch of 256 positions costs one 262k-wide
   product each way), Adam, ``--exit-steps`` steps; the last 10 % of the training rows
   validate every 100 steps and the best A is kept (the identity too: near the top of
   the stack the untrained exit is hard to beat).
3. eval    — greedy agreement of the exit with the full model (= the acceptance of a greedy
   early-exit draft whose prefix is right) before and after, on the target's greedy
   continuations of ``playground/data/heldout_prompts.json`` (by category; no training
   source has these prompts).
4. export  — bf16 adapters + config.json + MODEL_CARD.md into ``--exit-out``.

Deterministic for a given ``--seed``.  This module does not draft, and it reuses the MTP
run's text (``train-drafter`` stages corpus and gen) rather than writing its own.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from playground.drafters.early_exit import exit_logits
from playground.drafters.exit_adapter import ExitAdapter, save_adapters
from playground.models.view import decoder, num_layers
from tools.paths import WEIGHTS
from tools.training import mtp_eval

TOPK = 32  # target probabilities kept per position (the rest of the mass is < 1% on average)
MAX_LEN = 512  # tokens per row
DEFAULT_EXIT_OUT = WEIGHTS / "gemma3-270m-exit"


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("early exit (--drafter early-exit)")
    g.add_argument("--exit-layers", default="6,9,12,15,17", help="exit layers to train an adapter for")
    g.add_argument("--exit-rows", type=int, default=500, help="training rows (of the MTP run's text) to prefill")
    g.add_argument("--exit-steps", type=int, default=800, help="optimiser steps per layer")
    g.add_argument("--exit-batch", type=int, default=256, help="positions per step")
    g.add_argument("--exit-lr", type=float, default=1e-3)
    g.add_argument("--exit-out", default=str(DEFAULT_EXIT_OUT), help="where the adapters go")


@dataclass
class ExitFeatures:
    states: dict[int, torch.Tensor]  # layer -> [N, H] bf16, the state after that many layers
    top_ids: torch.Tensor  # [N, TOPK] the target's most likely next tokens, best first
    top_probs: torch.Tensor  # [N, TOPK] their probabilities
    category: list[str]  # per position (held-out rows) or "" (training rows)


@torch.inference_mode()
def collect(model, rows: list[dict], layers: list[int], first: str = "all") -> ExitFeatures:
    """Prefill each row once, keeping h_k for every k in ``layers`` and the target's top-k.
    ``first="continuation"`` keeps only the positions that predict a continuation token."""
    kept: dict[int, torch.Tensor] = {}
    blocks = decoder(model).layers
    hooks = [
        blocks[k - 1].register_forward_hook(
            lambda m, a, out, k=k: kept.__setitem__(k, out[0] if isinstance(out, tuple) else out)
        )
        for k in layers
    ]
    states: dict[int, list[torch.Tensor]] = {k: [] for k in layers}
    ids_out, probs_out, cats = [], [], []
    try:
        for row in rows:
            ids = row["ids"][:MAX_LEN]
            start = max(0, row["n_prompt"] - 1) if first == "continuation" else 0
            logits = model(input_ids=torch.tensor([ids], device=model.device)).logits[0, start:-1].float()  # [n, V]
            probs, top = torch.softmax(logits, -1).topk(TOPK, dim=-1)
            ids_out.append(top.to(torch.int32))
            probs_out.append(probs.to(torch.float16))
            cats += [row.get("category", "")] * len(top)
            for k in layers:
                states[k].append(kept[k][0, start:-1].to(torch.bfloat16).clone())
    finally:
        for h in hooks:
            h.remove()
    return ExitFeatures({k: torch.cat(v) for k, v in states.items()}, torch.cat(ids_out), torch.cat(probs_out), cats)


@torch.inference_mode()
def agreement(model, adapter: ExitAdapter | None, feats: ExitFeatures, layer: int) -> dict[str, float]:
    """Share of positions where the exit's argmax is the target's, overall and per category."""
    hits = []
    for s in range(0, len(feats.top_ids), 512):
        pred = exit_logits(model, feats.states[layer][s : s + 512], adapter).argmax(-1)
        hits.append(pred == feats.top_ids[s : s + 512, 0].long())
    hit = torch.cat(hits).float()
    out = {"all": round(float(hit.mean()), 4)}
    for cat in sorted(set(feats.category) - {""}):
        mask = torch.tensor([c == cat for c in feats.category])
        out[cat] = round(float(hit[mask].mean()), 4)
    return out


VALIDATION = 0.1  # the last share of the training positions (its last rows): early stopping, never trained on


def train_adapter(model, feats: ExitFeatures, layer: int, args, seed: int) -> tuple[ExitAdapter, dict]:
    """Fit A for one layer (the LM head and norm frozen) on all but the last ``VALIDATION``
    share of the positions; every 100 steps measure greedy agreement on that share and keep
    the best A seen, the identity (step 0, the untrained exit) included, so a layer whose
    untrained exit is already good is not made worse.  Returns A and the curve."""
    for p in model.parameters():
        p.requires_grad_(False)
    n_all = len(feats.top_ids)
    n = n_all - max(1, int(n_all * VALIDATION))
    val = ExitFeatures({layer: feats.states[layer][n:]}, feats.top_ids[n:], feats.top_probs[n:], [])
    adapter = ExitAdapter(feats.states[layer].shape[1])
    opt = torch.optim.Adam(adapter.parameters(), lr=args.exit_lr)
    gen = torch.Generator().manual_seed(seed * 1000 + layer)
    curve = {"step": [], "loss": [], "validation_agreement": []}
    best_step, best_agree, best_weight = 0, agreement(model, None, val, layer)["all"], adapter.proj.weight.clone()
    for step in range(1, args.exit_steps + 1):
        idx = torch.randint(0, n, (args.exit_batch,), generator=gen)
        logits = exit_logits(model, feats.states[layer][idx], adapter).float()  # [B, V]
        logp = torch.log_softmax(logits, -1).gather(1, feats.top_ids[idx].long())  # [B, TOPK]
        loss = -(feats.top_probs[idx].float() * logp).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 100 == 0 or step == args.exit_steps:
            agree = agreement(model, adapter, val, layer)["all"]
            for key, v in (("step", step), ("loss", round(float(loss.detach()), 4)), ("validation_agreement", agree)):
                curve[key].append(v)
            if agree > best_agree:
                best_step, best_agree, best_weight = step, agree, adapter.proj.weight.detach().clone()
            print(f"exit layer {layer}: step {step} loss {curve['loss'][-1]:.3f} validation {agree:.3f}", flush=True)
    with torch.no_grad():
        adapter.proj.weight.copy_(best_weight)
    return adapter.eval(), {**curve, "kept_step": best_step, "kept_validation_agreement": best_agree}


def _training_rows(rows: list[dict], hold_prompts: set[int], n: int, seed: int) -> list[dict]:
    """``n`` rows whose prompt is not held out (corpus rows have prompt -1), fixed by the seed."""
    pool = [r for r in rows if r["prompt"] not in hold_prompts]
    random.Random(seed).shuffle(pool)
    return pool[:n]


def run(args, model, tok, rows: list[dict], hold_prompts: set[int]) -> int:
    """Stages 1-4 for every layer of ``--exit-layers``; stats into ``--work``/exit/stats.json."""

    layers = sorted({int(x) for x in str(args.exit_layers).split(",") if x.strip()})
    n_layers = num_layers(model)
    if not layers or any(not 1 <= k < n_layers for k in layers):
        raise SystemExit(f"--exit-layers must be between 1 and {n_layers - 1}, got {args.exit_layers}")
    work = Path(args.work) / "exit"
    work.mkdir(parents=True, exist_ok=True)
    stats: dict = {"layers": layers, "args": {k: v for k, v in vars(args).items() if k.startswith("exit")}}
    t = time.perf_counter()
    train_rows = _training_rows(rows, hold_prompts, args.exit_rows, args.seed)
    feats = _cached(
        work / f"features_{'-'.join(map(str, layers))}_{args.exit_rows}_s{args.seed}.pt",
        lambda: collect(model, train_rows, layers),
    )
    stats["features"] = {
        "rows": len(train_rows),
        "positions": len(feats.top_ids),
        "by_source": _by_source(train_rows),
        "seconds": round(time.perf_counter() - t, 1),
    }
    t = time.perf_counter()
    held = collect(model, mtp_eval.heldout_rows(model, tok, Path(args.work), args.seed), layers, "continuation")
    stats["heldout"] = {"positions": len(held.top_ids), "seconds": round(time.perf_counter() - t, 1)}
    print("exit features:", json.dumps(stats["features"]), json.dumps(stats["heldout"]), flush=True)
    adapters, stats["per_layer"] = {}, {}
    for k in layers:
        t = time.perf_counter()
        adapter, curve = train_adapter(model, feats, k, args, args.seed)
        adapters[k] = adapter
        stats["per_layer"][k] = {
            "untrained": agreement(model, None, held, k),
            "trained": agreement(model, adapter, held, k),
            "curve": curve,
            "seconds": round(time.perf_counter() - t, 1),
        }
        print(f"exit layer {k}:", json.dumps(stats["per_layer"][k]), flush=True)
        (work / "stats.json").write_text(json.dumps(stats, indent=1))
    # an adapter that kept step 0 is the identity: the untrained exit, so it is not shipped as "trained"
    kept = {k: a for k, a in adapters.items() if stats["per_layer"][k]["curve"]["kept_step"] > 0}
    if not kept:
        print("no trained exit beat the untrained one on validation: nothing written")
        return 0
    out = save_adapters(kept, args.exit_out, args.preset, {str(k): v for k, v in stats["per_layer"].items()})
    write_card(out, stats)
    print(f"exit adapters for layers {sorted(kept)} written to {out}")
    return 0


def _cached(path: Path, build) -> ExitFeatures:
    """``build()``, saved to ``path`` on first use and read back on a rerun (prefilling the
    rows is the slow part: ~15 minutes for 500 rows on a busy 2-core CPU)."""
    if path.exists():
        return ExitFeatures(**torch.load(path))
    feats = build()
    torch.save(vars(feats), path)
    return feats


def _by_source(rows: list[dict]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in rows:
        src = r.get("source") or "generated by the target"
        counts[src] = counts.get(src, 0) + min(len(r["ids"]), MAX_LEN)
    return dict(sorted(counts.items()))


def write_card(out: Path, stats: dict) -> None:
    """MODEL_CARD.md: what the adapters are, the data, the held-out agreement per layer."""
    per = stats["per_layer"]
    cats = [c for c in next(iter(per.values()))["trained"] if c != "all"]
    a = stats["args"]
    lines = [
        "# Early-exit adapters for Gemma 3 270M",
        "",
        "One bf16 matrix A per exit layer k: the early-exit drafter proposes from "
        "lm_head(final_norm(A h_k)) instead of lm_head(final_norm(h_k)); verification runs the unchanged "
        "target, so output is unchanged. Trained by `tools/training/exit_train.py` (soft cross-entropy to the "
        f"target's top-{TOPK} next-token probabilities over the full vocabulary, Adam lr {a['exit_lr']}, "
        f"{a['exit_steps']} steps of {a['exit_batch']} positions per layer, keeping the step with the best greedy "
        "agreement on the last 10 % of the training rows; kept step 0 = the identity, i.e. the untrained exit, "
        "which is then not saved).",
        "",
        f"Training text: {stats['features']['positions']:,} positions from {stats['features']['rows']} rows of the "
        "MTP run's text (its sources and licences: `playground/weights/gemma3-270m-mtp/MODEL_CARD.md`); "
        "tokens per source: " + ", ".join(f"{s} {n:,}" for s, n in stats["features"]["by_source"].items()) + ".",
        "",
        "## Greedy agreement with the full model, held out",
        f"On the target's continuations of `playground/data/heldout_prompts.json` ({stats['heldout']['positions']:,} "
        "positions; prompts in no training source): the share of positions where the exit's argmax is the "
        "target's, i.e. the acceptance of a greedy early-exit draft whose prefix is right.",
        "",
        "| exit layer | exit | all | " + " | ".join(cats) + " | training s | kept step |",
        "|---|---|---:|" + "---:|" * len(cats) + "---:|---:|",
    ]
    for k, r in per.items():
        for kind in ("untrained", "trained"):
            row = r[kind]
            extra = f"{r['seconds']:.0f} | {r['curve']['kept_step']}" if kind == "trained" else " | "
            label = (
                "trained (the identity kept: not saved)" if kind == "trained" and not r["curve"]["kept_step"] else kind
            )
            lines.append(
                f"| {k} | {label} | {row['all']:.2f} | " + " | ".join(f"{row[c]:.2f}" for c in cats) + f" | {extra} |"
            )
    lines += [
        "",
        "## Reproduce",
        "```",
        "python -m tools train-drafter --drafter early-exit --stages train "
        f"--exit-layers {','.join(str(k) for k in stats['layers'])} --exit-rows {a['exit_rows']} "
        f"--exit-steps {a['exit_steps']} --exit-batch {a['exit_batch']} --seed {stats.get('seed', 0)} --threads 2",
        "```",
        "(after the MTP run's `corpus` and `gen` stages have written the text into `--work`).",
        "",
    ]
    (out / "MODEL_CARD.md").write_text("\n".join(lines))
