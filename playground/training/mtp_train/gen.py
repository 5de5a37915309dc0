"""Stage 1 (gen): the target writes its own training text, batched, one JSON shard per batch.

For every prompt, one greedy and ``--samples`` sampled continuations (T=0.8, top-k 64),
left-padded batches of similar prompt length in a seeded random order; a rerun (or another
worker, ``--gen-worker k/n``) skips what is already written.  ``gen_parallel`` spreads the
batches over one-thread processes, each a ``python -m playground.training.train_drafter`` of its own.

This module does not prefill features or train (``features``, ``train``).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from pathlib import Path

import torch
from tqdm import tqdm
from transformers import DynamicCache

SAMPLE_TEMPERATURE = 0.8
SAMPLE_TOP_K = 64


@torch.inference_mode()
def sample_batch(
    model,
    ids,
    mask,
    new_tokens: int,
    pad: int,
    eos_set: set,
    greedy: bool,
    generator,
    temperature: float = SAMPLE_TEMPERATURE,
    top_k: int | None = SAMPLE_TOP_K,
) -> torch.Tensor:
    """Batched decoding with a KV cache (left-padded prompts): greedy, or sampling (default
    T=0.8 over the top 64; top_k None: the full vocabulary).

    A lean loop instead of ``model.generate``: on this CPU generate's full-vocabulary
    top-p sort dominated a batched step.  Returns [B, new_tokens] (pad after an EOS)."""

    B = ids.shape[0]
    cache = DynamicCache(config=model.config)
    pos = (mask.cumsum(-1) - 1).clamp_min(0)
    out = model(input_ids=ids, attention_mask=mask, position_ids=pos, cache=cache, use_cache=True, logits_to_keep=1)
    done = torch.zeros(B, dtype=torch.bool)
    eos_t = torch.tensor(sorted(eos_set))
    result = torch.full((B, new_tokens), pad, dtype=torch.long)
    next_pos = pos[:, -1:] + 1
    for t in range(new_tokens):
        logits = out.logits[:, -1].float()
        if greedy:
            nxt = logits.argmax(-1)
        else:
            if top_k is None:
                nxt = torch.multinomial(torch.softmax(logits / temperature, -1), 1, generator=generator).squeeze(-1)
            else:
                v, i = torch.topk(logits / temperature, top_k, dim=-1)
                nxt = i.gather(-1, torch.multinomial(torch.softmax(v, -1), 1, generator=generator)).squeeze(-1)
        nxt = torch.where(done, torch.full_like(nxt, pad), nxt)
        result[:, t] = nxt
        done |= torch.isin(nxt, eos_t)
        if bool(done.all()) or t == new_tokens - 1:
            break
        mask = torch.cat([mask, (~done).long().unsqueeze(-1) | 1], dim=-1)
        out = model(
            input_ids=nxt.unsqueeze(-1),
            attention_mask=mask,
            position_ids=next_pos,
            cache=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        next_pos = next_pos + 1
    return result


def stage_gen(args, model, tok, prompts: list[str]) -> list[dict]:

    gen_dir = Path(args.work) / "gen"
    gen_dir.mkdir(parents=True, exist_ok=True)
    # (prompt, variant) pairs already written (a rerun, even with another batch size, skips them)
    done = set()
    for shard in gen_dir.glob("shard*.json"):
        done |= {(r["prompt"], r["variant"]) for r in json.loads(shard.read_text())}
    # jobs: variant 0 = greedy, 1.. = sampled; batches of similar prompt length
    order = sorted(range(len(prompts)), key=lambda i: (len(tok(prompts[i]).input_ids), i))
    batches = []
    for variant in range(1 + args.samples):
        for b in range(0, len(order), args.gen_batch):
            batches.append((variant, order[b : b + args.gen_batch]))
    # seeded random batch order: an early stop keeps prompts of every length, greedy and sampled
    random.Random(args.seed).shuffle(batches)
    # worker k of n (--gen-worker k/n, started by --gen-procs n) takes every n-th batch
    k, n = (int(x) for x in args.gen_worker.split("/"))
    batches = [(v, [i for i in pidx if (i, v) not in done]) for v, pidx in batches[k::n]]
    batches = [(v, pidx) for v, pidx in batches if pidx]
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    eos = tok.eos_token_id
    gen_eos = getattr(model.generation_config, "eos_token_id", None) or eos
    eos_set = set(gen_eos) if isinstance(gen_eos, (list, tuple)) else {gen_eos}
    bar = tqdm(batches, desc="gen (target writes its training text)", unit="batch")
    total_new = 0
    t_start = time.perf_counter()
    for variant, pidx in bar:
        shard = gen_dir / f"shard_v{variant}_p{pidx[0]:04d}_n{len(pidx)}.json"
        if shard.exists():
            continue
        if args.gen_minutes and (time.perf_counter() - t_start) > args.gen_minutes * 60:
            bar.write("gen: time budget reached")
            break
        enc = [tok(prompts[i]).input_ids for i in pidx]
        width = max(len(e) for e in enc)
        ids = torch.tensor([[pad] * (width - len(e)) + e for e in enc])
        mask = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in enc])
        g = torch.Generator().manual_seed(args.seed * 100_003 + pidx[0] * 101 + variant)
        out = sample_batch(model, ids, mask, args.new_tokens, pad, eos_set, greedy=(variant == 0), generator=g)
        rows = []
        for r, i in enumerate(pidx):
            new = out[r].tolist()
            stop = [k for k, t in enumerate(new) if t in eos_set]
            if stop:
                new = new[: stop[0] + 1]
            new = [t for t in new if t != pad]
            rows.append({"prompt": i, "variant": variant, "ids": enc[r] + new, "n_prompt": len(enc[r])})
            total_new += len(new)
        shard.write_text(json.dumps(rows))
        el = time.perf_counter() - t_start
        bar.set_postfix(tok_s=f"{total_new / max(el, 1e-9):.1f}")
    rows = []
    return load_rows(Path(args.work))


def gen_parallel(args, argv: list[str], model, tok, prompts: list[str]) -> list[dict]:
    """Run the gen stage as ``--gen-procs`` one-thread processes on disjoint batches.

    Batched decoding on one thread is dominated by small ops that do not scale to a
    second thread, so two processes generate ~2x the text of one two-thread process."""

    n = args.gen_procs
    base = [sys.executable, "-m", "playground.training.train_drafter", *argv]
    children = [
        subprocess.Popen([*base, "--stages", "gen", "--gen-procs", "1", "--gen-worker", f"{k}/{n}", "--threads", "1"])
        for k in range(1, n)
    ]
    args.gen_worker = f"0/{n}"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        stage_gen(args, model, tok, prompts)
    finally:
        torch.set_num_threads(threads)
        for c in children:
            c.wait()
        args.gen_worker = "0/1"
    return load_rows(Path(args.work))


def load_rows(work: Path) -> list[dict]:
    """Every row of text under ``work/gen`` (generated and corpus shards), each tagged with its shard."""
    rows = []
    for shard in sorted((work / "gen").glob("*.json")):  # shard_*: generated, corpus_*: teacher-forcing text
        rows.extend({**r, "shard": shard.stem} for r in json.loads(shard.read_text()))
    if not rows:
        raise SystemExit(f"no generated text under {work / 'gen'}: run the gen stage first")
    return rows
