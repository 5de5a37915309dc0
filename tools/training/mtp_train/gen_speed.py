"""Tokens per second of the gen stage's batched decoding, by batch size (what ``--gen-batch`` buys).

``python -m tools.training.mtp_train.gen_speed --batches 1,16,32 --new-tokens 24``

For each batch size: ``sample_batch`` on that many copies-with-variations of the training
prompts (left-padded, KV cache, one pass per token for the batch), greedy and sampled at
T = 1 over the full vocabulary with one generator per row, after one unrecorded warm-up;
prints new tokens per second (rows that stopped at an EOS count only their tokens).

This module measures; the gen stage itself is ``gen``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from tools.training.mtp_train.gen import left_pad, row_generators, sample_batch, trim
from tools.training.mtp_train.paths import PROMPTS
from tools.training.train_drafter import load_target


def measure(model, tok, prompts: list[str], batch: int, new_tokens: int, greedy: bool) -> dict:
    """One timed ``sample_batch`` call over the first ``batch`` prompts: {"batch", "tokens", "seconds", "tokens_per_s"}."""
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    eos = model.generation_config.eos_token_id
    eos_set = set(eos) if isinstance(eos, (list, tuple)) else {eos}
    enc = [tok(p).input_ids for p in prompts[:batch]]
    ids, mask = left_pad(enc, pad)
    gens = row_generators(0, list(range(batch)), 1, "T1")
    t0 = time.perf_counter()
    out = sample_batch(model, ids, mask, new_tokens, pad, eos_set, greedy, gens, temperature=1.0, top_k=None)
    sec = time.perf_counter() - t0
    tokens = sum(len(trim(r, eos_set, pad)) for r in out.tolist())
    return {"batch": batch, "greedy": greedy, "tokens": tokens, "seconds": sec, "tokens_per_s": tokens / sec}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.training.mtp_train.gen_speed")
    p.add_argument("--batches", default="1,16,32")
    p.add_argument("--new-tokens", type=int, default=24)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu")
    p.add_argument("--target-dir", default=None)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    model, tok = load_target("gemma3-270m", torch.bfloat16, args.target_dir)
    model.to(args.device)
    prompts = json.loads(PROMPTS.read_text())
    sizes = [int(b) for b in args.batches.split(",")]
    measure(model, tok, prompts, 2, 4, True)  # warm-up
    for greedy in (True, False):
        for b in sizes:
            r = measure(model, tok, prompts, b, args.new_tokens, greedy)
            print(json.dumps({k: round(v, 2) if isinstance(v, float) else v for k, v in r.items()}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
