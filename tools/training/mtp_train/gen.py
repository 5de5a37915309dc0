"""Stage 1 (gen): the target writes its own training text, batched, one JSON shard per batch.

For every prompt, one greedy continuation and ``--samples`` sampled ones at each sampling
setting of ``--gen-temps`` (default ``0.8:64``: T = 0.8 over the top 64; ``1,0.7``: T = 1
and T = 0.7 over the whole vocabulary, as the decoding loop samples), in left-padded
batches of ``--gen-batch`` continuations of one setting and similar prompt length (one
forward pass per new token for the whole batch, with a KV cache; a batch may hold several
sampled continuations of a prompt, so it can be larger than the prompt list), in a seeded
random order; a rerun (or another worker,
``--gen-worker k/n``) skips what is already written.  Every sampled row draws from its own
generator, seeded by (``--seed``, prompt, variant): its text does not depend on the batch
it ran in (up to the numerics of a batched pass), and greedy rows equal unbatched greedy
decoding.  ``gen_parallel`` spreads the batches over one-thread processes, each a
``python -m tools.training.train_drafter`` of its own.

This module does not prefill features or train (``features``, ``train``).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm import tqdm
from transformers import DynamicCache

SAMPLE_TEMPERATURE = 0.8
SAMPLE_TOP_K = 64
DEFAULT_GEN_TEMPS = f"{SAMPLE_TEMPERATURE:g}:{SAMPLE_TOP_K}"  # what wrote the shipped head's text


@dataclass(frozen=True)
class Sampling:
    """One sampling setting of the gen stage: temperature and top-k (None: the full vocabulary)."""

    temperature: float
    top_k: int | None

    @property
    def tag(self) -> str:
        """How rows and shards name it ("T0.8k64", "T1")."""
        return f"T{self.temperature:g}" + (f"k{self.top_k}" if self.top_k else "")


DEFAULT_SAMPLING = Sampling(SAMPLE_TEMPERATURE, SAMPLE_TOP_K)


def parse_gen_temps(spec: str) -> list[Sampling]:
    """``"1,0.7"`` -> T = 1 and T = 0.7 over the full vocabulary; ``"0.8:64"`` -> T = 0.8, top 64."""
    out = []
    for part in spec.split(","):
        t, _, k = part.strip().partition(":")
        temp, top_k = float(t), (int(k) if k else None)
        if not temp > 0 or (top_k is not None and top_k < 1):
            raise ValueError(f"--gen-temps: {part!r} needs a temperature > 0 and a top-k >= 1")
        out.append(Sampling(temp, top_k))
    if len({s.tag for s in out}) != len(out):
        raise ValueError(f"--gen-temps: {spec!r} names a setting twice")
    return out


def variants(samples: int, settings: list[Sampling]) -> list[tuple[int, str, Sampling | None]]:
    """(variant number, sampling tag, setting) of every continuation of a prompt: 0 is greedy;
    the default setting keeps the numbers 1..samples the shipped head's text was written with."""
    out: list[tuple[int, str, Sampling | None]] = [(0, "greedy", None)]
    for i, st in enumerate(settings):
        out += [(1 + i * samples + s, st.tag, st) for s in range(samples)]
    return out


def row_tag(row: dict) -> str:
    """A row's sampling tag (rows written before tags existed: greedy or the default setting)."""
    return row.get("sampling") or ("greedy" if row["variant"] == 0 else DEFAULT_SAMPLING.tag)


def row_generators(seed: int, prompts: list[int], variant: int | list[int], tag: str) -> list[torch.Generator]:
    """One CPU generator per row, seeded by (seed, prompt, variant, sampling tag) only
    (``variant``: one for every row, or one per row)."""
    salt = sum((i + 1) * ord(c) for i, c in enumerate(tag))
    vs = variant if isinstance(variant, list) else [variant] * len(prompts)
    return [
        torch.Generator().manual_seed(((seed * 1_000_003 + p) * 1_009 + v) * 10_007 + salt) for p, v in zip(prompts, vs)
    ]


def _draw(logits: torch.Tensor, temperature: float, top_k: int | None, generator) -> torch.Tensor:
    """One token per row from softmax(logits / T) (over the top_k if given): [B, V] -> [B].

    generator: one torch.Generator for the batch (multinomial, as the held-out eval has
    always drawn), or a list of one per row (inverse CDF in float64 of one uniform per row:
    a row's draw depends on its own generator only)."""
    if top_k is not None:
        vals, idx = torch.topk(logits / temperature, top_k, dim=-1)
    else:
        vals, idx = logits / temperature, None
    probs = torch.softmax(vals, -1)  # [B, V or top_k]
    if isinstance(generator, (list, tuple)):
        u = torch.cat([torch.rand(1, generator=g, dtype=torch.float64) for g in generator]).to(probs.device)
        cdf = probs.double().cumsum(-1)  # [B, V]
        pick = torch.searchsorted(cdf, (u * cdf[:, -1]).unsqueeze(-1), right=True).clamp_max(cdf.shape[-1] - 1)
    else:
        pick = torch.multinomial(probs, 1, generator=generator)
    pick = pick.squeeze(-1)
    return pick if idx is None else idx.gather(-1, pick.unsqueeze(-1)).squeeze(-1)


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
    """Batched decoding with a KV cache (left-padded prompts ids / mask [B, L]): greedy, or
    sampling (default T=0.8 over the top 64; top_k None: the full vocabulary; generator: one
    for the batch or one per row, see ``_draw``).  Runs on the model's device.

    A lean loop instead of ``model.generate``: on this CPU generate's full-vocabulary
    top-p sort dominated a batched step.  Returns [B, new_tokens] on the CPU (pad after an EOS)."""

    dev = model.device
    ids, mask = ids.to(dev), mask.to(dev)
    B = ids.shape[0]
    cache = DynamicCache(config=model.config)
    pos = (mask.cumsum(-1) - 1).clamp_min(0)
    out = model(input_ids=ids, attention_mask=mask, position_ids=pos, cache=cache, use_cache=True, logits_to_keep=1)
    done = torch.zeros(B, dtype=torch.bool, device=dev)
    eos_t = torch.tensor(sorted(eos_set), device=dev)
    result = torch.full((B, new_tokens), pad, dtype=torch.long, device=dev)
    next_pos = pos[:, -1:] + 1
    for t in range(new_tokens):
        logits = out.logits[:, -1].float()
        nxt = logits.argmax(-1) if greedy else _draw(logits, temperature, top_k, generator)
        nxt = torch.where(done, torch.full_like(nxt, pad), nxt)
        result[:, t] = nxt
        done |= torch.isin(nxt, eos_t)
        if bool(done.all()) or t == new_tokens - 1:
            break
        mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=-1)
        out = model(
            input_ids=nxt.unsqueeze(-1),
            attention_mask=mask,
            position_ids=next_pos,
            cache=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        next_pos = next_pos + 1
    return result.cpu()


def left_pad(enc: list[list[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token id lists -> (ids [B, L], attention mask [B, L]), padded on the left."""
    width = max(len(e) for e in enc)
    ids = torch.tensor([[pad] * (width - len(e)) + e for e in enc])
    mask = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in enc])
    return ids, mask


def trim(new: list[int], eos_set: set, pad: int) -> list[int]:
    """A row of ``sample_batch``'s output up to and with its first EOS, pads dropped."""
    stop = [k for k, t in enumerate(new) if t in eos_set]
    if stop:
        new = new[: stop[0] + 1]
    return [t for t in new if t != pad]


def stage_gen(args, model, tok, prompts: list[str]) -> list[dict]:

    gen_dir = Path(args.work) / "gen"
    gen_dir.mkdir(parents=True, exist_ok=True)
    # (prompt, variant, sampling) already written (a rerun, even with another batch size, skips them)
    done = set()
    for shard in gen_dir.glob("shard*.json"):
        done |= {(r["prompt"], r["variant"], row_tag(r)) for r in json.loads(shard.read_text())}
    settings = parse_gen_temps(getattr(args, "gen_temps", DEFAULT_GEN_TEMPS))
    # jobs (prompt, variant): variant 0 = greedy, then --samples per sampling setting.  A batch holds
    # jobs of one setting (several variants of a prompt may share it: a batch can be larger than the
    # prompt list), of similar prompt length
    length = {i: len(tok(prompts[i]).input_ids) for i in range(len(prompts))}
    batches = []
    for tag in dict.fromkeys(tg for _, tg, _ in variants(args.samples, settings)):
        vs = [(v, st) for v, tg, st in variants(args.samples, settings) if tg == tag]
        jobs = sorted(((i, v) for i in range(len(prompts)) for v, _ in vs), key=lambda j: (length[j[0]], j[0], j[1]))
        for b in range(0, len(jobs), args.gen_batch):
            batches.append((tag, vs[0][1], jobs[b : b + args.gen_batch]))
    # seeded random batch order: an early stop keeps prompts of every length, greedy and sampled
    random.Random(args.seed).shuffle(batches)
    # worker k of n (--gen-worker k/n, started by --gen-procs n) takes every n-th batch
    k, n = (int(x) for x in args.gen_worker.split("/"))
    batches = [(tg, st, [(i, v) for i, v in jobs if (i, v, tg) not in done]) for tg, st, jobs in batches[k::n]]
    batches = [b for b in batches if b[2]]
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    eos = tok.eos_token_id
    gen_eos = getattr(model.generation_config, "eos_token_id", None) or eos
    eos_set = set(gen_eos) if isinstance(gen_eos, (list, tuple)) else {gen_eos}
    bar = tqdm(batches, desc="gen (target writes its training text)", unit="batch")
    total_new = 0
    t_start = time.perf_counter()
    for tag, st, jobs in bar:
        pidx = [i for i, _ in jobs]
        infix = "" if st in (None, DEFAULT_SAMPLING) else f"{tag}_"  # the default keeps the old names
        shard = gen_dir / f"shard_v{jobs[0][1]}_{infix}p{pidx[0]:04d}_n{len(jobs)}.json"
        if shard.exists():
            continue
        if args.gen_minutes and (time.perf_counter() - t_start) > args.gen_minutes * 60:
            bar.write("gen: time budget reached")
            break
        enc = [tok(prompts[i]).input_ids for i in pidx]
        ids, mask = left_pad(enc, pad)
        out = sample_batch(
            model,
            ids,
            mask,
            args.new_tokens,
            pad,
            eos_set,
            greedy=st is None,
            generator=row_generators(args.seed, pidx, [v for _, v in jobs], tag),
            **({} if st is None else {"temperature": st.temperature, "top_k": st.top_k}),
        )
        rows = []
        for r, (i, v) in enumerate(jobs):
            new = trim(out[r].tolist(), eos_set, pad)
            rows.append({"prompt": i, "variant": v, "sampling": tag, "ids": enc[r] + new, "n_prompt": len(enc[r])})
            total_new += len(new)
        shard.write_text(json.dumps(rows))
        el = time.perf_counter() - t_start
        bar.set_postfix(tok_s=f"{total_new / max(el, 1e-9):.1f}")
    return load_rows(Path(args.work))


def gen_parallel(args, argv: list[str], model, tok, prompts: list[str]) -> list[dict]:
    """Run the gen stage as ``--gen-procs`` one-thread processes on disjoint batches.

    Batched decoding on one thread is dominated by small ops that do not scale to a
    second thread, so two processes generate ~2x the text of one two-thread process."""

    n = args.gen_procs
    base = [sys.executable, "-m", "tools.training.train_drafter", *argv]
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
