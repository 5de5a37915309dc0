"""Train the MTP drafter (``playground.drafters.mtp``) by self-distillation on this CPU.

``python -m playground train-drafter --preset gemma3-270m [--minutes M] [--seed S] [--out DIR]``

Stages (each resumable; results live in ``--work`` and are reused on a rerun):

1. gen      — the target (bf16) writes its own training text: for every prompt in
               ``playground/data/train_prompts.json`` one greedy and ``--samples`` sampled
               continuations (T=0.8, top-k 64), batched, left-padded.  One shard per batch.
2. features — one bf16 prefill per sequence (right-padded batches) caches what the drafter
               sees at inference: the final-norm hidden state h_t, the target KV of the
               drafter's attention layer (the last full-attention layer), and the target's
               top-k next-token distribution at every position.
3. vocab    — the candidate vocabulary: tokens ranked by the target's soft next-token mass
               over the training split (then by id), top N.
4. train    — KL(target top-k || drafter) + CE(target argmax) + a regression of the drafter's
               state onto the target's final hidden state, for draft steps 1..k, the drafter
               fed its *own* predicted states (as at inference); bf16 autocast.  Checkpoints
               every ``--ckpt-every`` optimiser steps; a rerun resumes from the newest one.
5. eval     — greedy acceptance by draft position on the held-out prompts (prompts are
               split, never sequences), written into the model card.
6. export   — bf16 drafter weights + config.json + MODEL_CARD.md into ``--out``.
   bench    — (opt-in: ``--stages bench``) the decoding loop on prompts outside the
               training list: autoregressive vs speculative, acceptance by position, cost.

Runs on one torch thread by default: on the shared 2-core machine two threads made
every small op wait for the busy second core (a batched decode step took 5.5 s on two
threads, 0.17 s on one).

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

    from playground.convert import load_packaged

    if target_dir:
        tok = AutoTokenizer.from_pretrained(target_dir)
        model = AutoModelForCausalLM.from_pretrained(target_dir, dtype=dtype)
        return model.eval(), tok
    model, tok = load_packaged(preset, dtype)
    return model.eval(), tok


def split_prompts(prompts: list[str], seed: int, holdout_frac: float) -> tuple[list[int], list[int]]:
    """Prompt indices (train, held-out); the split is by prompt, fixed by the seed."""
    idx = list(range(len(prompts)))
    random.Random(seed).shuffle(idx)
    n_hold = max(1, int(round(len(prompts) * holdout_frac)))
    return sorted(idx[n_hold:]), sorted(idx[:n_hold])


# --------------------------------------------------------------------------------------
# stage 1: generation


SAMPLE_TEMPERATURE = 0.8
SAMPLE_TOP_K = 64


@torch.inference_mode()
def sample_batch(model, ids, mask, new_tokens: int, pad: int, eos_set: set, greedy: bool, generator,
                 temperature: float = SAMPLE_TEMPERATURE, top_k: int | None = SAMPLE_TOP_K) -> torch.Tensor:
    """Batched decoding with a KV cache (left-padded prompts): greedy, or sampling (default
    T=0.8 over the top 64; top_k None: the full vocabulary).

    A lean loop instead of ``model.generate``: on this CPU generate's full-vocabulary
    top-p sort dominated a batched step.  Returns [B, new_tokens] (pad after an EOS)."""
    from transformers import DynamicCache

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
        out = model(input_ids=nxt.unsqueeze(-1), attention_mask=mask, position_ids=next_pos, cache=cache,
                    use_cache=True, logits_to_keep=1)
        next_pos = next_pos + 1
    return result


def stage_gen(args, model, tok, prompts: list[str]) -> list[dict]:
    from tqdm import tqdm

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
    return _load_rows(Path(args.work))


# --------------------------------------------------------------------------------------
# stage 2: features


def stage_features(args, model, rows: list[dict]) -> dict:
    """Prefill every sequence once (bf16) and cache what the drafter needs, flat over tokens.

    Cached per generation shard under ``work/features/`` (a rerun after more generation only
    prefills the new shards), then concatenated in row order."""
    from tqdm import tqdm

    from playground.drafters.mtp_head import MTPConfig

    fdir = Path(args.work) / "features"
    fdir.mkdir(parents=True, exist_ok=True)
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(r["shard"], []).append(r)
    mcfg = MTPConfig.from_target(model.config)
    parts = []
    todo = [name for name in groups if not (fdir / f"{name}.pt").exists()]
    bar = tqdm(total=sum(len(groups[n]) for n in todo), desc="features (prefill with hidden states)", unit="seq")
    for name, grp in groups.items():
        path = fdir / f"{name}.pt"
        if not path.exists():
            part = _prefill_features(args, model, grp, mcfg, bar)
            torch.save(part, path)
        parts.append(torch.load(path, weights_only=False))
    bar.close()
    offsets = [0]
    for p in parts:
        for a, b in zip(p["offsets"][:-1].tolist(), p["offsets"][1:].tolist()):
            offsets.append(offsets[-1] + (b - a))
    return dict(
        n_seqs=len(rows),
        offsets=torch.tensor(offsets),
        **{k: torch.cat([p[k] for p in parts]) for k in ("tokens", "hidden", "keys", "values", "top_ids", "top_p")},
        meta=[m for p in parts for m in p["meta"]],
        seconds=sum(p["seconds"] for p in parts),
        attn_layer=mcfg.attn_layer,
    )


def target_topk(h: torch.Tensor, E: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The target's top-k next-token probabilities and ids for final-norm states h [n, H].

    The full-vocabulary logits are one bf16 matmul (n x 262k); the softmax runs on them in
    bf16 (relative error ~0.4 %, below the fp16 the values are stored in).  Measured here on
    256 positions: a float32 logsumexp over the logits ran at 283 rows/s, the bf16 softmax at
    5,200 rows/s, so the matmul (~850 rows/s) is now the whole cost.  Returns ([n, k], [n, k])."""
    probs = torch.softmax(h @ E.t(), dim=-1)  # [n, V] bf16
    return torch.topk(probs, k, dim=-1)


@torch.inference_mode()
def _prefill_features(args, model, rows: list[dict], mcfg, bar) -> dict:
    from transformers import DynamicCache

    from playground.drafters.mtp_head import text_model

    base = text_model(model)
    E = base.embed_tokens.weight  # [V, H] bf16 (tied output head)
    lens = [len(r["ids"]) for r in rows]
    offsets = [0]
    for n in lens:
        offsets.append(offsets[-1] + n)
    N = offsets[-1]
    H = mcfg.hidden_size
    kvd = mcfg.num_key_value_heads * mcfg.head_dim
    hidden = torch.empty(N, H, dtype=torch.bfloat16)
    keys = torch.empty(N, kvd, dtype=torch.bfloat16)
    values = torch.empty(N, kvd, dtype=torch.bfloat16)
    top_ids = torch.empty(N, args.topk, dtype=torch.int32)
    top_p = torch.empty(N, args.topk, dtype=torch.float16)
    tokens = torch.tensor([t for r in rows for t in r["ids"]], dtype=torch.int32)
    order = sorted(range(len(rows)), key=lambda i: lens[i])
    t0 = time.perf_counter()
    bs = 8
    for b in range(0, len(order), bs):
        idx = order[b : b + bs]
        T = max(lens[i] for i in idx)
        ids = torch.zeros(len(idx), T, dtype=torch.long)  # right padding: causal attention never sees it
        for r, i in enumerate(idx):
            ids[r, : lens[i]] = torch.tensor(rows[i]["ids"])
        cache = DynamicCache(config=model.config)
        out = base(input_ids=ids, cache=cache, use_cache=True)
        h = out.last_hidden_state  # final-norm state [B, T, H]
        lay = cache.layers[mcfg.attn_layer]
        k = lay.keys.transpose(1, 2).reshape(len(idx), T, kvd)
        v = lay.values.transpose(1, 2).reshape(len(idx), T, kvd)
        for r, i in enumerate(idx):
            a, n = offsets[i], lens[i]
            hidden[a : a + n] = h[r, :n]
            keys[a : a + n] = k[r, :n]
            values[a : a + n] = v[r, :n]
            for c in range(0, n, 256):
                pv, pi = target_topk(h[r, c : min(n, c + 256)], E, args.topk)
                top_ids[a + c : a + c + pv.shape[0]] = pi.to(torch.int32)
                top_p[a + c : a + c + pv.shape[0]] = pv.to(torch.float16)
        bar.update(len(idx))
    return dict(
        offsets=torch.tensor(offsets), tokens=tokens, hidden=hidden, keys=keys, values=values,
        top_ids=top_ids, top_p=top_p,
        meta=[{**{k: r[k] for k in ("prompt", "variant", "n_prompt")}, "source": r.get("source", "generated")} for r in rows],
        seconds=time.perf_counter() - t0,
    )


# --------------------------------------------------------------------------------------
# stage 3: candidate vocabulary


def stage_vocab(args, feats: dict, train_seqs: list[int], hold_seqs: list[int], vocab_size: int, eos: int) -> dict:
    offs = feats["offsets"]
    mass = torch.zeros(vocab_size, dtype=torch.float64)
    for i in train_seqs:
        a, b = int(offs[i]), int(offs[i + 1])
        mass.index_add_(0, feats["top_ids"][a:b].reshape(-1).long(), feats["top_p"][a:b].reshape(-1).double())
        mass.index_add_(0, feats["tokens"][a:b].long(), torch.ones(b - a, dtype=torch.float64))  # the text itself
    mass[eos] += 1e9  # always draftable
    n = min(args.candidates, vocab_size)
    ranked = torch.argsort(-mass, stable=True)  # ties (zero mass) fall back to ascending id
    cand = ranked[:n].clone()
    inset = torch.zeros(vocab_size, dtype=torch.bool)
    inset[cand] = True

    def coverage(seqs):
        if not seqs:
            return float("nan"), float("nan")
        top1 = torch.cat([feats["top_ids"][int(offs[i]) : int(offs[i + 1]), 0] for i in seqs]).long()
        ids = torch.cat([feats["top_ids"][int(offs[i]) : int(offs[i + 1])] for i in seqs]).long()
        p = torch.cat([feats["top_p"][int(offs[i]) : int(offs[i + 1])] for i in seqs]).float()
        return float(inset[top1].float().mean()), float((p * inset[ids]).sum() / p.sum())

    tr1, trm = coverage(train_seqs)
    ho1, hom = coverage(hold_seqs)
    stats = {
        "candidates": n,
        "distinct_tokens_with_mass": int((mass > 0).sum()) - 0,
        "train_top1_coverage": tr1,
        "train_topk_mass_coverage": trm,
        "heldout_top1_coverage": ho1,
        "heldout_topk_mass_coverage": hom,
    }
    print("vocab:", json.dumps(stats))
    return {"candidates": cand, "stats": stats}


def stage_clusters(args, cand: torch.Tensor, embed_weight: torch.Tensor) -> torch.Tensor | None:
    """Cluster id per token (``playground.mtp_clusters``), cached in the work dir; None without clusters."""
    if not args.clusters:
        return None
    from playground.mtp_clusters import balanced_clusters

    path = Path(args.work) / f"clusters_{args.clusters}_{int(cand.numel())}.pt"
    if path.exists():
        saved = torch.load(path, weights_only=False)
        if torch.equal(saved["candidates"], cand):
            return saved["token_cluster"]
    t0 = time.perf_counter()
    static = torch.zeros(embed_weight.shape[0], dtype=torch.bool)
    static[cand] = True
    tc = balanced_clusters(embed_weight, static, args.clusters)
    torch.save({"candidates": cand, "token_cluster": tc}, path)
    print(f"clusters: {args.clusters} over {int((~static).sum())} tokens in {time.perf_counter() - t0:.0f} s")
    return tc


# --------------------------------------------------------------------------------------
# stage 4: training


class _Data:
    """Per-sequence views of the cached features, padded into batches on demand."""

    def __init__(self, feats: dict, seqs: list[int], cand: torch.Tensor, vocab_size: int, embed_weight, scale):
        self.f = feats
        self.seqs = seqs
        self.offs = feats["offsets"]
        lut = torch.full((vocab_size,), -1, dtype=torch.long)
        lut[cand] = torch.arange(cand.numel())
        self.lut = lut
        self.E = embed_weight  # [V, H] (bf16 is fine: we upcast rows)
        self.scale = scale

    def batch(self, which: list[int], steps: int, max_len: int = 0):
        f = self.f
        lens = [int(self.offs[i + 1] - self.offs[i]) for i in which]
        T = max(lens) if not max_len else min(max(lens), max_len)
        B = len(which)
        H = f["hidden"].shape[1]
        kvd = f["keys"].shape[1]
        tok = torch.zeros(B, T, dtype=torch.long)
        hid = torch.zeros(B, T, H)
        K = torch.zeros(B, T, kvd)
        Vv = torch.zeros(B, T, kvd)
        tid = torch.zeros(B, T, f["top_ids"].shape[1], dtype=torch.long)
        tp = torch.zeros(B, T, f["top_p"].shape[1])
        valid = torch.zeros(B, T, dtype=torch.bool)
        for r, i in enumerate(which):
            a = int(self.offs[i])
            n = min(lens[r], T)
            tok[r, :n] = f["tokens"][a : a + n].long()
            hid[r, :n] = f["hidden"][a : a + n].float()
            K[r, :n] = f["keys"][a : a + n].float()
            Vv[r, :n] = f["values"][a : a + n].float()
            tid[r, :n] = f["top_ids"][a : a + n].long()
            tp[r, :n] = f["top_p"][a : a + n].float()
            valid[r, :n] = True
        emb = self.E[tok].float() * self.scale
        return dict(tok=tok, emb=emb, hid=hid, K=K, V=Vv, tid=tid, tp=tp, valid=valid, cidx=self.lut[tid])


def pick_batch(rng: random.Random, generated: list[int], other: list[int], batch: int, gen_share: float) -> list[int]:
    """Sequence indices for one optimiser step: uniform over all training sequences, or
    (gen_share > 0) round(gen_share * batch) of them from the target's generated text."""
    if gen_share <= 0 or not generated or not other:
        pool = generated + other
        return rng.sample(pool, min(batch, len(pool)))
    n_gen = min(len(generated), max(1, round(gen_share * batch)))
    return rng.sample(generated, n_gen) + rng.sample(other, min(batch - n_gen, len(other)))


def _shift(x: torch.Tensor, j: int, fill=0):
    """x[:, t + j] at t (fill past the end)."""
    if j == 0:
        return x
    pad = torch.full_like(x[:, :j], fill)
    return torch.cat([x[:, j:], pad], dim=1)


CLUSTER_TOPK = 8  # the target's top entries that join the training table through the clusters (cost: table width)
# at most this many of them per batch (by target mass): a batch of Chinese or code text otherwise made a
# table of ~30k columns whose float32 logits for 4 draft steps ran this 24 GB machine out of memory
CLUSTER_TABLE_CAP = 8192


def batch_candidates(batch: dict, static_lut: torch.Tensor, n_static: int, embed_weight,
                     clustered: bool = False) -> dict:
    """The candidate set of chain n, as at inference: the N static tokens plus every token of
    x_0..x_n outside them (``MTPDrafter`` adds the committed context's tokens).  With
    clusters (``clustered``) every token can be scored at inference, so the target's top-k
    tokens of the batch join the table as always allowed: the head learns to rank them
    too, and the cluster scorer learns when to reach for them.

    Returns ext_ids [X], ext_emb [X, H] (tied embedding rows), allowed [B, T, N+X] bool and
    cidx [B, T, k]: the target's top-k ids as indices into static+extra (-1: not a candidate)."""
    tok, valid = batch["tok"], batch["valid"]
    B, T = tok.shape
    is_ext = valid & (static_lut[tok] < 0)
    ext_ids = torch.unique(tok[is_ext])
    topk_ext = torch.empty(0, dtype=torch.long)
    if clustered:
        tid = batch["tid"][valid][:, :CLUSTER_TOPK]
        out = static_lut[tid] < 0
        topk_ext, inv = torch.unique(tid[out], return_inverse=True)
        if topk_ext.numel() > CLUSTER_TABLE_CAP:  # keep the tokens with the most target mass in the batch
            mass = torch.zeros(topk_ext.numel()).scatter_add_(0, inv, batch["tp"][valid][:, :CLUSTER_TOPK][out])
            topk_ext = topk_ext[torch.argsort(-mass, stable=True)[:CLUSTER_TABLE_CAP]].sort().values
        ext_ids = torch.unique(torch.cat([ext_ids, topk_ext]))
    X = int(ext_ids.numel())
    lut = static_lut.clone()
    lut[ext_ids] = n_static + torch.arange(X)
    first = torch.full((B, X), T, dtype=torch.long)
    if X:
        pos = torch.arange(T).expand(B, T)
        idx = (lut[tok] - n_static).clamp_min(0)
        first.scatter_reduce_(1, idx, torch.where(is_ext, pos, T), "amin")
    n = torch.arange(T)
    allowed_ext = first[:, None, :] <= n[None, :, None]  # [B, T, X]
    if topk_ext.numel():
        allowed_ext |= torch.isin(ext_ids, topk_ext)[None, None, :]
    allowed = torch.cat([torch.ones(B, T, n_static, dtype=torch.bool), allowed_ext], dim=-1)
    return {"ext_ids": ext_ids, "ext_emb": embed_weight[ext_ids].float(), "allowed": allowed, "cidx": lut[batch["tid"]]}


def drafter_loss(head, batch: dict, cand_emb: torch.Tensor, steps: int, kv_shape, step_weights, reg_weight=1.0):
    """Sum over draft steps j of w_j * [KL(target top-k | drafter) + CE(target argmax)], plus
    per-step top-1 agreement (teacher-forced chains)."""
    from playground.drafters.mtp_head import unrolled_states

    B, T = batch["tok"].shape
    nkv, D = kv_shape
    K = batch["K"].view(B, T, nkv, D).transpose(1, 2)
    V = batch["V"].view(B, T, nkv, D).transpose(1, 2)
    states = unrolled_states(head, batch["emb"], batch["hid"], K, V, steps)
    cv = batch["cand"]
    table = torch.cat([cand_emb, cv["ext_emb"]])  # [N+X, H]
    total = 0.0
    logs = []
    for j, s in enumerate(states, start=1):
        logits = head.logits(s, table).float().masked_fill(~cv["allowed"], float("-inf"))  # [B, T, N+X]
        logq = torch.log_softmax(logits, dim=-1)
        cidx = _shift(cv["cidx"], j - 1, -1)  # target dist at position n+j-1 (predicts x_{n+j})
        tp = _shift(batch["tp"], j - 1, 0.0)
        valid = _shift(batch["valid"], j - 1, False)
        inc = (cidx >= 0) & torch.gather(cv["allowed"], -1, cidx.clamp_min(0))  # chain n's candidate set
        p = tp * inc
        mass = p.sum(-1, keepdim=True)
        ok = valid & (mass[..., 0] > 0)
        p = p / mass.clamp_min(1e-9)
        lq = torch.gather(logq, -1, cidx.clamp_min(0)).masked_fill(~inc, 0.0)  # [B, T, k]
        soft = -(p * lq).sum(-1)
        hard_ok = ok & inc[..., 0]
        hard = -lq[..., 0]
        n_ok = ok.sum().clamp_min(1)
        # feature regression (as EAGLE): s_j should be the target's final hidden state h_{n+j-1}
        h_t = _shift(batch["hid"], j - 1, 0.0)
        reg = ((s.float() - h_t) ** 2).mean(-1) / batch["hid_ms"]
        loss_j = (soft * ok).sum() / n_ok + (hard * hard_ok).sum() / hard_ok.sum().clamp_min(1)
        loss_j = loss_j + reg_weight * (reg * ok).sum() / n_ok
        if "token_cluster" in batch:
            loss_j = loss_j + cluster_loss(head, s, _shift(batch["tid"], j - 1, 0), tp, valid, batch["token_cluster"])
        total = total + step_weights[j - 1] * loss_j
        with torch.no_grad():
            agree = (logits.argmax(-1) == cidx[..., 0]) & hard_ok
            logs.append((float(loss_j), float(agree.sum()), float(ok.sum())))
    return total, logs


def cluster_loss(head, s, tid, tp, valid, token_cluster) -> torch.Tensor:
    """Cross-entropy of the cluster scores against the target's mass per cluster (its top-k
    entries outside the static set), weighted by that mass: positions whose next token is
    a static candidate teach the scorer nothing."""
    cl = token_cluster[tid]  # [B, T, k] cluster of each top-k token (-1: static)
    K = head.cfg.num_clusters
    mass = torch.zeros(*cl.shape[:2], K, dtype=torch.float32)
    mass.scatter_add_(-1, cl.clamp_min(0), tp * (cl >= 0) * valid[..., None])
    w = mass.sum(-1)  # [B, T] target mass outside the static set
    logp = torch.log_softmax(head.cluster_proj(s).float(), dim=-1)
    ce = -(mass * logp).sum(-1)  # = w * CE(mass / w, scores)
    return ce.sum() / w.sum().clamp_min(1e-9)


AUTO_AFTER = 20  # steps timed before an automatic schedule is fixed


def stage_train(args, feats, train_seqs, hold_seqs, cand, target_cfg, embed_weight, scale, init_from=None,
                token_cluster=None, init_head=None):
    from tqdm import tqdm

    from playground.drafters.mtp_head import MTPConfig, MTPHead

    work = Path(args.work)
    mcfg = MTPConfig.from_target(
        target_cfg, num_layers=args.layers, attend=args.attend, num_candidates=int(cand.numel()),
        num_clusters=args.clusters, clusters_per_step=args.clusters_per_step,
        **({"intermediate_size": args.intermediate} if args.intermediate else {}),
    )
    torch.manual_seed(args.seed)
    head = MTPHead(mcfg)
    if init_from is not None:
        head.init_from_target(init_from)
    if init_head:
        from playground.drafters.mtp_weights import load_head

        start = {k: v for k, v in load_head(init_head).state_dict().items() if k not in ("candidates", "token_cluster")}
        missing, unexpected = head.load_state_dict(start, strict=False)
        if unexpected:
            raise SystemExit(f"--init-head {init_head}: parameters this head lacks: {unexpected}")
        print(f"train: started from {init_head}; fresh: {[k for k in missing if k not in ('candidates', 'token_cluster')]}")
    head.candidates.copy_(cand)
    if token_cluster is not None:
        head.token_cluster.copy_(token_cluster)
    cand_emb = embed_weight[cand].float()
    data = _Data(feats, train_seqs, cand, mcfg.vocab_size, embed_weight, scale)
    decay, no_decay = [], []
    for n_, p in head.named_parameters():
        (no_decay if p.dim() < 2 else decay).append(p)
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.98)
    )
    auto = args.max_steps <= 0  # fit the schedule to the time budget, measured after AUTO_AFTER steps
    total_steps = 100_000 if auto else args.max_steps
    warm = min(50, max(1, total_steps // 20))

    def lr_at(step):
        if step < warm:
            return args.lr * (step + 1) / warm
        prog = min(1.0, (step - warm) / max(1, total_steps - warm))
        return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * prog)))

    tc_long = None if token_cluster is None else token_cluster.long()
    generated = [i for i in train_seqs if feats["meta"][i].get("source", "generated") == "generated"]
    other = [i for i in train_seqs if feats["meta"][i].get("source", "generated") != "generated"]
    tag = f"{args.attend}_i{int(init_from is not None)}_L{args.layers}_I{mcfg.intermediate_size}_C{mcfg.num_clusters}_N{mcfg.num_candidates}_k{args.steps_ahead}_b{args.batch}_m{'auto' if auto else total_steps}_lr{args.lr:g}_r{args.reg_weight:g}_s{args.seed}" + (
        f"_h{Path(init_head).name}_g{args.gen_share:g}" if init_head or args.gen_share else "")
    ckpt = work / f"ckpt_{tag}.pt"
    step = 0
    history = []
    elapsed_before = 0.0
    if ckpt.exists():
        st = torch.load(ckpt, weights_only=False)
        head.load_state_dict(st["head"])
        opt.load_state_dict(st["opt"])
        step, history, elapsed_before = st["step"], st["history"], st["elapsed"]
        if auto and st.get("planned_steps"):  # the schedule fixed by the run that wrote the checkpoint
            total_steps, auto = st["planned_steps"], False
        print(f"train: resumed {ckpt.name} at step {step}")
    weights = [0.8 ** (j - 1) for j in range(1, args.steps_ahead + 1)]
    hid_ms = float(feats["hidden"][:20000].float().pow(2).mean())  # scale of the regression target
    kv_shape = (mcfg.num_key_value_heads, mcfg.head_dim)
    t0 = time.perf_counter()
    budget = args.minutes * 60
    bar = tqdm(total=total_steps, initial=step, desc=f"train {tag}", unit="step")
    head.train()

    def save():
        tmp = ckpt.with_suffix(".tmp")
        torch.save(
            {"head": head.state_dict(), "opt": opt.state_dict(), "step": step, "history": history,
             "elapsed": elapsed_before + time.perf_counter() - t0, "config": mcfg.to_dict(),
             "planned_steps": None if auto else total_steps},
            tmp,
        )
        os.replace(tmp, ckpt)

    agg = [[0.0, 0.0, 0.0] for _ in range(args.steps_ahead)]
    first_step = step
    while step < total_steps:
        if auto and step == first_step + AUTO_AFTER:
            spent = time.perf_counter() - t0
            total_steps = step + int((budget - elapsed_before - spent) / (spent / AUTO_AFTER))
            bar.total = total_steps
            bar.write(f"train: {spent / AUTO_AFTER:.2f} s/step -> {total_steps} steps in {args.minutes} min")
            auto = False  # planned: checkpoints keep this schedule
        if elapsed_before + time.perf_counter() - t0 > budget:
            bar.write(f"train: time budget ({args.minutes} min) reached at step {step}")
            break
        rng = random.Random(args.seed * 1_000_003 + step)
        which = pick_batch(rng, generated, other, args.batch, args.gen_share)
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        batch = data.batch(which, args.steps_ahead)
        batch["cand"] = batch_candidates(batch, data.lut, int(cand.numel()), embed_weight, clustered=tc_long is not None)
        batch["hid_ms"] = hid_ms
        if tc_long is not None:
            batch["token_cluster"] = tc_long
        # bf16 matmuls (fp32 master weights, fp32 softmax/loss): ~10x faster than fp32 on this CPU
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bool(args.bf16)):
            loss, logs = drafter_loss(head, batch, cand_emb, args.steps_ahead, kv_shape, weights, args.reg_weight)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(head.parameters(), 1.0)
        opt.step()
        step += 1
        for j, (l, a, n) in enumerate(logs):
            agg[j][0] += l
            agg[j][1] += a
            agg[j][2] += n
        bar.update(1)
        if step % 10 == 0:
            acc = [a / max(n, 1) for _, a, n in agg]
            bar.set_postfix(loss=f"{agg[0][0] / 10:.3f}", top1=" ".join(f"{x:.2f}" for x in acc))
            history.append({"step": step, "loss1": agg[0][0] / 10, "top1_by_step": acc})
            agg = [[0.0, 0.0, 0.0] for _ in range(args.steps_ahead)]
        if step % args.ckpt_every == 0:
            save()
    save()
    bar.close()
    head.eval()
    return head, {"steps": step, "planned_steps": total_steps, "train_seconds": elapsed_before + time.perf_counter() - t0,
                  "history": history, "tag": tag}


# --------------------------------------------------------------------------------------
# stage 5: evaluation


@torch.no_grad()
def greedy_acceptance(head, feats, seqs, cand, embed_weight, scale, steps: int, greedy_only=True) -> dict:
    """Greedy (temperature 0) acceptance by draft position on cached sequences.

    Chain n (committed = x_0..x_n, n in the generated part) accepts draft j iff it equals
    the target's argmax at position n+j-1; it goes on to draft j+1 only if the text's next
    token is that argmax too (always for greedy text; where it happens for sampled text),
    so every judged draft sees exactly the inputs it would see in the decoding loop."""
    from playground.drafters.mtp_head import unrolled_states

    head.eval()
    cand_emb = embed_weight[cand].float()
    data = _Data(feats, seqs, cand, head.cfg.vocab_size, embed_weight, scale)
    nkv, D = head.cfg.num_key_value_heads, head.cfg.head_dim
    reached = [0] * steps
    accepted = [0] * steps
    chains = 0
    use = [i for i in seqs if (feats["meta"][i]["variant"] == 0 or not greedy_only)]
    for b in range(0, len(use), 8):
        which = use[b : b + 8]
        batch = data.batch(which, steps)
        B, T = batch["tok"].shape
        K = batch["K"].view(B, T, nkv, D).transpose(1, 2)
        V = batch["V"].view(B, T, nkv, D).transpose(1, 2)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            states = unrolled_states(head, batch["emb"], batch["hid"], K, V, steps)
        cv = batch_candidates(batch, data.lut, int(cand.numel()), embed_weight)
        table = torch.cat([cand_emb, cv["ext_emb"]])
        all_ids = torch.cat([cand, cv["ext_ids"]])
        top1 = batch["tid"][..., 0]  # target argmax at each position (predicts the next token)
        # chain n counts if it starts in the generated part: n >= n_prompt - 1
        start_ok = torch.zeros(B, T, dtype=torch.bool)
        for r, i in enumerate(which):
            m = feats["meta"][i]
            n_len = int(batch["valid"][r].sum())
            start_ok[r, m["n_prompt"] - 1 : n_len - 1] = True
        alive = start_ok.clone()
        chains += int(alive.sum())
        for j, s in enumerate(states, start=1):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                lg = head.logits(s, table).float().masked_fill(~cv["allowed"], float("-inf"))
            draft = all_ids[lg.argmax(-1)]  # [B, T]
            tgt = _shift(top1, j - 1, -1)  # target argmax at position n+j-1
            nxt = _shift(batch["tok"], j, -1)  # the text's token x_{n+j} (fed at step j+1)
            valid = _shift(batch["valid"], j, False)
            alive = alive & valid
            reached[j - 1] += int(alive.sum())
            ok = alive & (draft == tgt)
            accepted[j - 1] += int(ok.sum())
            alive = ok & (nxt == tgt)  # the teacher-forced input matches the accepted draft
    cond = [a / r if r else float("nan") for a, r in zip(accepted, reached)]
    cum = []
    c = 1.0
    for x in cond:
        c *= x if x == x else 0.0
        cum.append(c)
    return {"chains": chains, "conditional_by_position": cond, "cumulative_by_position": cum,
            "reached": reached, "accepted": accepted}


# --------------------------------------------------------------------------------------
# stage 6: benchmark through the decoding loop (prompts NOT in the training list)

BENCH_PROMPTS = [
    "The three most important things to know about owning a bicycle are",
    "In the middle of the ocean there is a small island where",
    "def parse_date(text):\n    \"\"\"Parse a date in the format YYYY-MM-DD.\"\"\"\n",
    "Question: What is the largest desert in the world?\nAnswer:",
    "The history of the bicycle",
    "Dear team,\n\nI wanted to thank you all for",
]


def stage_bench(args, model, tok, out_dir: Path, gammas=(3, 5), new_tokens: int = 112) -> dict:
    """Autoregressive vs speculative (MTP) with the project's loop, bf16, temperature 0."""
    from playground import engine
    from playground.drafters.mtp import MTPDrafter

    prompts = json.loads(PROMPTS.read_text())
    assert not set(BENCH_PROMPTS) & set(prompts), "benchmark prompts must not be training prompts"
    drafter = MTPDrafter.from_pretrained(model, out_dir)
    eos = sorted(drafter.eos)
    res: dict = {"prompts": len(BENCH_PROMPTS), "new_tokens": new_tokens, "dtype": str(model.dtype)}
    ar_tps, ar_ms = [], []
    spec = {g: {"tps": [], "acc": [], "len": [], "draft_ms": [], "equal": 0} for g in gammas}
    for text in BENCH_PROMPTS:
        ids = tok(text).input_ids
        cfg = engine.GenerationConfig(mode="autoregressive", max_new_tokens=new_tokens, trace=False)
        ar = engine.run(model, tok, ids, cfg, eos_token_ids=eos)
        ar_tps.append(ar.stats.tokens_per_s)
        ar_ms.append(ar.stats.single_token_ms)
        for g in gammas:
            cfg = engine.GenerationConfig(mode="speculative", gamma=g, max_new_tokens=new_tokens, trace=False)
            r = engine.run(model, tok, ids, cfg, drafter=drafter, eos_token_ids=eos)
            d = spec[g]
            d["tps"].append(r.stats.tokens_per_s)
            d["acc"].append(r.stats.acceptance_by_position)
            d["len"].append(r.stats.mean_accepted_length)
            d["draft_ms"].append(r.stats.draft_ms_per_token)
            d["equal"] += int(tuple(r.token_ids) == tuple(ar.token_ids))
        print(f"bench: {text[:30]!r}: AR {ar_tps[-1]:.1f} tok/s; "
              + "; ".join(f"γ={g} {spec[g]['tps'][-1]:.1f} tok/s acc1 {spec[g]['acc'][-1][0]:.2f}" for g in gammas))
    mean = lambda xs: sum(x for x in xs if x is not None) / max(1, sum(1 for x in xs if x is not None))
    res["autoregressive_tokens_per_s"] = mean(ar_tps)
    res["target_single_token_ms"] = mean(ar_ms)
    for g in gammas:
        d = spec[g]
        by_pos = [mean([a[i] for a in d["acc"]]) for i in range(g)]
        res[f"gamma{g}"] = {
            "tokens_per_s": mean(d["tps"]),
            "speedup": mean(d["tps"]) / res["autoregressive_tokens_per_s"],
            "acceptance_by_position": by_pos,
            "mean_accepted_length": mean(d["len"]),
            "draft_ms_per_token": mean(d["draft_ms"]),
            "draft_cost_ratio_c": mean(d["draft_ms"]) / res["target_single_token_ms"],
            "outputs_equal_to_autoregressive": f"{d['equal']}/{len(BENCH_PROMPTS)}",
        }
    print("bench:", json.dumps(res, indent=1))
    return res


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
    p.add_argument("--stages", default="corpus,gen,features,vocab,train,eval,export")
    p.add_argument("--samples", type=int, default=1, help="sampled continuations per prompt (plus one greedy)")
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--gen-batch", type=int, default=24)
    p.add_argument("--gen-procs", type=int, default=1, help="gen stage: this many one-thread processes")
    p.add_argument("--gen-worker", default="0/1", help=argparse.SUPPRESS)
    p.add_argument("--gen-minutes", type=float, default=40.0, help="stop generating after this long (0: no limit)")
    p.add_argument("--holdout", type=float, default=0.1, help="fraction of prompts held out for evaluation")
    p.add_argument("--topk", type=int, default=20, help="target distribution entries cached per position")
    p.add_argument("--candidates", type=int, default=8192, help="candidate vocabulary size N")
    p.add_argument("--steps-ahead", type=int, default=4, help="draft steps trained (1..k)")
    p.add_argument("--layers", type=int, default=1)
    p.add_argument("--intermediate", type=int, default=0, help="drafter MLP width (0: the target's)")
    p.add_argument("--clusters", type=int, default=1024,
                   help="token clusters covering the non-candidate vocabulary (power of two; 0: none)")
    p.add_argument("--clusters-per-step", type=int, default=8, help="clusters scored per draft step")
    p.add_argument("--int8", type=int, default=1, help="export large matrices as int8 rows (1/0)")
    p.add_argument("--reg-weight", type=float, default=1.0, help="weight of the hidden-state regression loss")
    p.add_argument("--corpus-prompts", type=int, default=0,
                   help="gen stage: also continue this many corpus-chunk openings per source (the target's own "
                        "text on every kind of training text; always in the training split)")
    p.add_argument("--init-head", default=None,
                   help="start from these drafter weights (and keep their candidate vocabulary); "
                        "parameters they lack, e.g. cluster scores, start fresh")
    p.add_argument("--gen-share", type=float, default=0.0,
                   help="fraction of each batch drawn from generated text (0: uniform over all sequences)")
    p.add_argument("--init-from-target", type=int, default=0,
                   help="1: copy the target's last full-attention layer into the drafter (measured: learns far slower)")
    p.add_argument("--attend", default="target", choices=("target", "none"), help="drafter attention source")
    p.add_argument("--batch", type=int, default=8, help="sequences per optimiser step")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--ckpt-every", type=int, default=100)
    p.add_argument("--max-steps", type=int, default=0, help="optimiser steps (0: fit the cosine schedule to --minutes, timed over the first 20 steps)")
    p.add_argument("--bf16", type=int, default=1, help="bf16 autocast for training matmuls (1/0)")
    p.add_argument("--eval-only", action="store_true",
                   help="only evaluate on playground/data/heldout_prompts.json (acceptance by category, T=0 and T=1)")
    p.add_argument("--eval-weights", default=None, help="comma-separated weight directories to evaluate (default: --out)")
    p.add_argument("--eval-bench", default="mtp:4",
                   help="also one bench run on the held-out prompts, DRAFTERS:GAMMAS[:TREE_NODES] ('' to skip), "
                        "e.g. mtp,mtp+lookup:3,5:1,16")
    p.add_argument("--eval-bench-prompts", type=int, default=2, help="held-out prompts per category in that bench run")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads (default 1: on a shared 2-core CPU, 2 threads made small ops ~30x slower)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    stages = set(args.stages.split(","))
    prompts = json.loads(PROMPTS.read_text())
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    stats_path = work / "stats.json"
    stats = json.loads(stats_path.read_text()) if stats_path.exists() else {}
    t_all = time.perf_counter()
    model, tok = load_target(args.preset, torch.bfloat16, args.target_dir)
    from playground.drafters.mtp_head import text_model
    from playground.drafters.mtp_weights import load_head, save_head, weight_files

    base = text_model(model)
    embed_weight = base.embed_tokens.weight.detach()
    scale = float(getattr(base.embed_tokens, "embed_scale", 1.0))
    eos = tok.eos_token_id
    vocab_size = model.config.get_text_config().vocab_size

    if args.eval_only:
        return eval_only(args, model, tok, embed_weight, scale)
    if "corpus" in stages:
        from playground import mtp_corpus

        t_co = time.perf_counter()
        stats["corpus"] = mtp_corpus.write_shards(tok, work / "gen", args.seed)
        stats["corpus_seconds"] = time.perf_counter() - t_co
    n_listed = len(prompts)  # the split is over these; corpus openings always train
    if args.corpus_prompts:
        from playground import mtp_corpus

        prompts = prompts + mtp_corpus.openings(tok, work / "gen", args.corpus_prompts, args.seed)
    t = time.perf_counter()
    need_rows = "gen" in stages or stages & {"features", "vocab", "train", "eval", "export"}
    if "gen" in stages and args.gen_procs > 1 and args.gen_worker == "0/1":
        rows = gen_parallel(args, argv if argv is not None else sys.argv[1:], model, tok, prompts)
    elif "gen" in stages:
        rows = stage_gen(args, model, tok, prompts)
    else:
        rows = _load_rows(work) if need_rows else []
    if "gen" in stages:
        stats["gen"] = {"sequences": len(rows), "tokens": sum(len(r["ids"]) for r in rows),
                        "new_tokens": sum(len(r["ids"]) - r["n_prompt"] for r in rows),
                        "seconds_this_run": time.perf_counter() - t}
        print("gen:", json.dumps(stats["gen"]))
    if stages & {"features", "vocab", "train", "eval", "export"}:
        feats = stage_features(args, model, rows)
        stats["features"] = {"seconds": feats["seconds"], "positions": int(feats["offsets"][-1])}
        stats["data"] = data_by_source(feats)
        train_p, hold_p = split_prompts(prompts[:n_listed], args.seed, args.holdout)
        hold_set = set(hold_p)
        train_seqs = [i for i, m in enumerate(feats["meta"]) if m["prompt"] not in hold_set]
        hold_seqs = [i for i, m in enumerate(feats["meta"]) if m["prompt"] in hold_set]
        voc = stage_vocab(args, feats, train_seqs, hold_seqs, vocab_size, eos)
        stats["vocab"] = voc["stats"]
        stats["split"] = {"train_prompts": len(train_p), "heldout_prompts": len(hold_p),
                          "train_sequences": len(train_seqs), "heldout_sequences": len(hold_seqs),
                          "train_positions": sum(int(feats["offsets"][i + 1] - feats["offsets"][i]) for i in train_seqs)}
        cand = voc["candidates"]
        if args.init_head:
            cand = load_head(args.init_head).candidates.clone()
            stats["init_head"] = str(args.init_head)
        t_cl = time.perf_counter()
        token_cluster = stage_clusters(args, cand, embed_weight)
        stats.setdefault("clusters", {}).setdefault("seconds", time.perf_counter() - t_cl)  # a cached rerun keeps the first
        head = None
        if "train" in stages:
            head, tr = stage_train(args, feats, train_seqs, hold_seqs, cand, model.config, embed_weight, scale,
                                   init_from=model if args.init_from_target else None, token_cluster=token_cluster,
                                   init_head=args.init_head)
            stats["train"] = {k: v for k, v in tr.items() if k != "history"}
            stats["train"]["last"] = tr["history"][-1] if tr["history"] else None
            stats["train"]["max_steps"] = tr["planned_steps"]
            stats["train"].update({"batch": args.batch, "lr": args.lr, "steps_ahead": args.steps_ahead,
                                   "layers": args.layers, "attend": args.attend, "seed": args.seed})
            stats["args"] = {k: v for k, v in vars(args).items() if k not in ("stages", "work", "out", "target_dir")}
        if head is not None and "eval" in stages and head.cfg.num_clusters:
            print("eval: a clustered head is measured by --eval-only (playground/mtp_eval.py scores its clusters)")
        elif head is not None and "eval" in stages:
            ev = greedy_acceptance(head, feats, hold_seqs, cand, embed_weight, scale, steps=max(6, args.steps_ahead), greedy_only=False)
            stats["eval_heldout_greedy"] = ev
            print("held-out greedy acceptance by position:", " ".join(f"{x:.3f}" for x in ev["conditional_by_position"]))
            ev0 = greedy_acceptance(head, feats, hold_seqs, cand, embed_weight, scale, steps=max(6, args.steps_ahead), greedy_only=True)
            stats["eval_heldout_greedy_text_only"] = ev0
            print("  on the greedy continuations only:", " ".join(f"{x:.3f}" for x in ev0["conditional_by_position"]))
        stats_path.write_text(json.dumps(stats, indent=1))
        if head is not None and "export" in stages:
            out = save_head(head, args.out, int8=bool(args.int8))
            write_model_card(out, stats, args)
            print(f"exported to {out} ({sum(f.stat().st_size for f in weight_files(out)) / 1e6:.1f} MB)")
    stats_path.write_text(json.dumps(stats, indent=1))
    if "bench" in stages:
        stats["bench"] = stage_bench(args, model, tok, Path(args.out))
        stats_path.write_text(json.dumps(stats, indent=1))
        write_model_card(Path(args.out), stats, args)
    print(f"total {time.perf_counter() - t_all:.0f} s")
    return 0


def eval_only(args, model, tok, embed_weight, scale) -> int:
    """``--eval-only``: held-out acceptance by category (``playground.mtp_eval``) for each
    weights directory, then (``--eval-bench``) one bench run of the shipped preset on the
    same prompts: our autoregressive loop vs the MTP drafter, bf16, temperature 0."""
    import subprocess

    from playground import mtp_eval

    weights = (args.eval_weights or args.out).split(",")
    results = mtp_eval.run_eval(args, model, tok, weights, embed_weight, scale)
    out = Path(args.work) / "heldout"
    (out / "eval.json").write_text(json.dumps(results, indent=1))
    (out / "eval.md").write_text("".join(mtp_eval.format_report(r, w) for w, r in results.items()))
    stats_path = Path(args.work) / "stats.json"
    if stats_path.exists() and (Path(args.out) / "config.json").exists():  # the card of --out gets the tables
        stats = json.loads(stats_path.read_text())
        stats["heldout_eval"] = {str(Path(w).resolve().relative_to(HERE.parent)) if Path(w).resolve().is_relative_to(
            HERE.parent) else w: r for w, r in results.items()}
        stats_path.write_text(json.dumps(stats, indent=1))
        write_model_card(Path(args.out), stats, args)
    if args.eval_bench:
        drafters, _, rest = args.eval_bench.partition(":")
        gammas, _, trees = rest.partition(":")
        prompts = mtp_eval.write_bench_prompts(out / "bench_prompts.json", args.eval_bench_prompts)
        cmd = [sys.executable, "-m", "playground", "bench", "--preset", "gemma3-270m-mtp", "--prompts", str(prompts),
               "--drafters", drafters, "--gammas", gammas or "4", "--tree-nodes", trees or "1", "--temperatures", "0",
               "--dtype", "bfloat16",
               "--max-new-tokens", str(mtp_eval.NEW_TOKENS), "--methods", "autoregressive,speculative",
               "--repeats", "1", "--out", str(out / "bench"), "--no-progress"]
        print("bench:", " ".join(cmd[1:]), flush=True)
        subprocess.run(cmd, check=False)
        md = out / "bench" / "bench.md"
        if md.exists():
            print(md.read_text())
    print(f"written to {out}/eval.md, eval.json")
    return 0


def gen_parallel(args, argv: list[str], model, tok, prompts: list[str]) -> list[dict]:
    """Run the gen stage as ``--gen-procs`` one-thread processes on disjoint batches.

    Batched decoding on one thread is dominated by small ops that do not scale to a
    second thread, so two processes generate ~2x the text of one two-thread process."""
    import subprocess

    n = args.gen_procs
    base = [sys.executable, "-m", "playground.train_drafter", *argv]
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
    return _load_rows(Path(args.work))


def _load_rows(work: Path) -> list[dict]:
    rows = []
    for shard in sorted((work / "gen").glob("*.json")):  # shard_*: generated, corpus_*: teacher-forcing text
        rows.extend({**r, "shard": shard.stem} for r in json.loads(shard.read_text()))
    if not rows:
        raise SystemExit(f"no generated text under {work / 'gen'}: run the gen stage first")
    return rows


def _acceptance_table(ev: dict) -> list[str]:
    """Markdown rows: conditional and cumulative acceptance by draft position."""
    cond, cum = ev.get("conditional_by_position", []), ev.get("cumulative_by_position", [])
    return [
        "| position | " + " | ".join(str(i + 1) for i in range(len(cond))) + " |",
        "|---|" + "---|" * len(cond),
        "| conditional | " + " | ".join(f"{x:.3f}" for x in cond) + " |",
        "| cumulative | " + " | ".join(f"{x:.3f}" for x in cum) + " |",
    ]


def data_by_source(feats: dict) -> dict[str, dict[str, int]]:
    """Sequences and tokens per data source (``generated`` or a corpus name)."""
    offs = feats["offsets"]
    out: dict[str, dict[str, int]] = {}
    for i, m in enumerate(feats["meta"]):
        d = out.setdefault(m.get("source", "generated"), {"sequences": 0, "tokens": 0})
        d["sequences"] += 1
        d["tokens"] += int(offs[i + 1] - offs[i])
    return out


def _heldout_tables(ev: dict) -> list[str]:
    """Markdown: position-1 acceptance by category (T=0 conditional, T=1 expected) per weights."""
    lines = []
    for w, res in ev.items():
        cats = list(res["t0"])
        lines += [f"`{w}`:", "", "| | " + " | ".join(cats) + " |", "|---|" + "---:|" * len(cats),
                  "| T=0, position 1 | " + " | ".join(f"{res['t0'][c]['conditional'][0]:.2f}" for c in cats) + " |",
                  "| T=0, positions 1-4 (cumulative) | " + " | ".join(
                      " / ".join(f"{x:.2f}" for x in res["t0"][c]["cumulative"][:4]) for c in cats) + " |",
                  "| T=1, position 1 (expected) | " + " | ".join(
                      f"{res['t1'][c]['alpha'][0]:.2f}" for c in cats if c in res["t1"]) + " |", ""]
    return lines


def write_model_card(out: Path, stats: dict, args) -> None:
    """MODEL_CARD.md from the run's statistics (stats.json in the work directory)."""
    args = argparse.Namespace(**{**vars(args), **stats.get("args", {})})  # the training run's settings
    ev = stats.get("eval_heldout_greedy", {})
    tr = stats.get("train", {})
    data = stats.get("data", {})
    corpus = stats.get("corpus", {})
    clusters = getattr(args, "clusters", 0)
    mb = sum(f.stat().st_size for f in out.glob("model*.safetensors")) / 1e6
    lines = [
        "# gemma3-270m-mtp — a Gemma-4-style MTP drafter for Gemma 3 270M",
        "",
        "Drafter kind `mtp` of the speculative-decoding playground (`playground/drafters/mtp.py`).",
        "Only the drafter's own weights are stored here; the output head is the target's tied embedding.",
        "",
        "## Architecture",
        f"- input: concat(RMSNorm(target embedding of the newest token), RMSNorm(target final-norm hidden "
        f"state at the previous position)) -> Linear(2H->H), H = {tr.get('hidden_size', 640)}",
        f"- {args.layers} Gemma 3-style decoder layer(s) (attention geometry of the target's layer "
        f"{stats.get('attn_layer', 17)}, MLP width {getattr(args, 'intermediate', 0) or 2048}, random init); "
        + ("attention reads the target's K/V of that layer (committed context, read-only) plus the "
           "drafter's own keys of this call's draft steps" if args.attend == "target" else
           "attention over the drafter's own keys of this call's draft steps only"),
        "- Linear(H->H) + RMSNorm -> the predicted target final hidden state, fed back as the next step's state",
        f"- output: state @ E^T over {stats.get('vocab', {}).get('candidates')} static candidate tokens (ranked by the "
        "target's next-token mass over the training data), the committed context's other tokens"
        + (f", and the tokens of the {getattr(args, 'clusters_per_step', 8)} best of {clusters} clusters that "
           "together cover every other token of the vocabulary (`playground/mtp_clusters.py`: balanced bisection "
           "of the tied embeddings; `cluster_proj` scores them)" if clusters else ""),
        f"- stored: {mb:.1f} MB" + (" (matrices as int8 rows with a bf16 scale per row, the rest bf16; acceptance "
                                    "below is measured with these weights)" if getattr(args, "int8", 0) else " (bf16)"),
        "",
        "## Training data (teacher forcing: one target prefill per sequence)",
        "| source | licence | sequences | tokens |",
        "|---|---|---:|---:|",
    ]
    for name, d in data.items():
        lic = corpus.get(name, {}).get("licence", "the target's own output (Gemma terms)" if name == "generated" else "")
        lines.append(f"| {name} | {lic} | {d['sequences']} | {d['tokens']} |")
    lines += [
        f"| all | | {sum(d['sequences'] for d in data.values())} | {sum(d['tokens'] for d in data.values())} |",
        "",
        "`generated`: the target (bf16) continued the prompts of `playground/data/train_prompts.json` "
        f"(greedy and {args.samples} sampled at T=0.8, top-k 64, up to {args.new_tokens} new tokens). "
        "The other sources are text shipped by Debian packages and the Python / Node installs "
        "(`playground/mtp_corpus.py` says which and how it is cut).",
        "",
        "## Training",
        f"- features: target top-{args.topk} next-token distribution, final hidden state and layer-"
        f"{stats.get('attn_layer', 17)} K/V at every position "
        f"({stats.get('features', {}).get('positions')} positions, {stats.get('features', {}).get('seconds', 0) / 60:.0f} min)",
        f"- loss: sum over draft steps j=1..{args.steps_ahead} of 0.8^(j-1) x [KL(target top-{args.topk} "
        "|| drafter) + CE(target argmax) + "
        f"{getattr(args, 'reg_weight', 1.0):g} x MSE(state, target final hidden) / mean(h^2)"
        + (" + CE(cluster scores, target mass per cluster)" if clusters else "") + "], the drafter fed its own states",
        "- wall time of each stage on the 2-core CPU: "
        + ", ".join(f"{name} {sec / 60:.1f} min" for name, sec in (
            ("corpus", stats.get("corpus_seconds")), ("generation", stats.get("gen", {}).get("seconds_this_run")),
            ("features", stats.get("features", {}).get("seconds")), ("clusters", stats.get("clusters", {}).get("seconds")),
            ("training", tr.get("train_seconds"))) if sec),
        f"- optimiser: AdamW lr {args.lr}, batch {args.batch} sequences, {tr.get('steps')} steps, "
        f"{tr.get('train_seconds', 0) / 60:.1f} min wall time on the 2-core CPU, seed {args.seed}",
        f"- candidate coverage of the target argmax: train {stats.get('vocab', {}).get('train_top1_coverage', 0):.3f}"
        + (" (static set only; the clusters reach the rest)" if clusters else ""),
        "",
    ]
    held = stats.get("heldout_eval")
    if held:
        lines += ["## Held-out acceptance by category (`playground/data/heldout_prompts.json`)",
                  "Acceptance at T=0 is measured on the target's greedy continuations (96 tokens) of prompts that are "
                  "in no training source; T=1 is the expected acceptance sum_x min(p, q) along sampled continuations. "
                  "`python -m playground train-drafter --eval-only` prints the full tables (positions 1-6).", "",
                  *_heldout_tables(held)]
    if ev:
        lines += ["## Acceptance on the held-out split of the training prompts (greedy text)", "",
                  *_acceptance_table(ev), ""]
    lines += [
        "## Reproduce",
        "```",
        "apt-get install python3-doc debian-reference-en debian-reference-zh-cn fortunes-zh",
        f"python -m playground train-drafter --preset {args.preset} --samples {args.samples} "
        f"--gen-procs {getattr(args, 'gen_procs', 1)} --gen-minutes {args.gen_minutes:g} --threads {args.threads} "
        f"--batch {args.batch} --max-steps {tr.get('max_steps', args.max_steps)} --minutes {args.minutes:g} "
        f"--clusters {clusters} --seed {args.seed}",
        "python -m playground train-drafter --eval-only",
        "```",
    ]
    (out / "MODEL_CARD.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
