"""Stage 2 (features): one bf16 prefill per sequence caches what the drafter sees.

At every position: the target's final-norm hidden state, the K/V of the drafter's attention
layer (the target's last full-attention layer) and the target's top-k next-token
distribution (``top_ids`` / ``top_p`` at T = 1, and ``top_p@T`` for every other training
temperature of ``--loss-temps``: the same tokens' probabilities under the full softmax at
T), flat over tokens, cached per generation shard under ``work/features/``.  A temperature
asked for after a shard was cached is added from its cached hidden states (no new prefill).

This module does not generate text (``gen``) and does not choose candidates (``vocab``).
"""

from __future__ import annotations

import time
from pathlib import Path

import torch
from tqdm import tqdm
from transformers import DynamicCache

from playground.drafters.mtp_head import MTPConfig, text_model


def stage_features(args, model, rows: list[dict]) -> dict:
    """Prefill every sequence once (bf16) and cache what the drafter needs, flat over tokens.

    Cached per generation shard under ``work/features/`` (a rerun after more generation only
    prefills the new shards), then concatenated in row order."""

    fdir = Path(args.work) / "features"
    fdir.mkdir(parents=True, exist_ok=True)
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(r["shard"], []).append(r)
    mcfg = MTPConfig.from_target(model.config)
    temps = extra_temps(args)
    parts = []
    todo = [name for name in groups if not (fdir / f"{name}.pt").exists()]
    bar = tqdm(total=sum(len(groups[n]) for n in todo), desc="features (prefill with hidden states)", unit="seq")
    for name, grp in groups.items():
        path = fdir / f"{name}.pt"
        if not path.exists():
            part = prefill_features(args, model, grp, mcfg, bar)
            add_temps(part, output_head(model), temps)
            torch.save(part, path)
        part = torch.load(path, weights_only=False)
        missing = [t for t in temps if temp_key(t) not in part]
        if missing:  # a temperature asked for after this shard was cached: from its hidden states
            add_temps(part, output_head(model), missing)
            torch.save(part, path)
        parts.append(part)
    bar.close()
    offsets = [0]
    for p in parts:
        for a, b in zip(p["offsets"][:-1].tolist(), p["offsets"][1:].tolist()):
            offsets.append(offsets[-1] + (b - a))
    return dict(
        n_seqs=len(rows),
        offsets=torch.tensor(offsets),
        **{
            k: torch.cat([p[k] for p in parts])
            for k in ("tokens", "hidden", "keys", "values", "top_ids", "top_p", *map(temp_key, temps))
        },
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


def target_probs_at(h: torch.Tensor, E: torch.Tensor, top_ids: torch.Tensor, temperature: float) -> torch.Tensor:
    """The target's probabilities of ``top_ids`` [n, k] under its full softmax at ``temperature``
    (h [n, H] final-norm states, bf16 as ``target_topk``).  Returns [n, k]."""
    probs = torch.softmax((h @ E.t()) / temperature, dim=-1)  # [n, V]
    return probs.gather(-1, top_ids.long())


def output_head(model) -> torch.Tensor:
    """The target's output projection [V, H] (Gemma 3 ties it to the input embedding)."""
    return model.get_output_embeddings().weight


def extra_temps(args) -> list[float]:
    """The training temperatures besides 1 whose top-k probabilities the features must hold."""
    temps = [float(t) for t in str(getattr(args, "loss_temps", "1")).split(",") if t.strip()]
    return sorted({t for t in temps if t != 1.0})


def temp_key(t: float) -> str:
    return f"top_p@{t:g}"


@torch.inference_mode()
def add_temps(part: dict, E: torch.Tensor, temps: list[float], chunk: int = 256) -> None:
    """Add ``top_p@T`` [N, k] (float16) to a features part, from its cached hidden states."""
    h_all, ids_all = part["hidden"], part["top_ids"]
    for t in temps:
        out = torch.empty(ids_all.shape, dtype=torch.float16)
        for c in range(0, h_all.shape[0], chunk):
            h = h_all[c : c + chunk].to(device=E.device, dtype=E.dtype)
            out[c : c + h.shape[0]] = target_probs_at(h, E, ids_all[c : c + h.shape[0]].to(E.device), t).cpu()
        part[temp_key(t)] = out


@torch.inference_mode()
def prefill_features(args, model, rows: list[dict], mcfg, bar) -> dict:

    base = text_model(model)
    E = output_head(model)  # [V, H] (Gemma: the tied embedding)
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
    bs = int(getattr(args, "features_batch", 8))
    for b in range(0, len(order), bs):
        idx = order[b : b + bs]
        T = max(lens[i] for i in idx)
        ids = torch.zeros(len(idx), T, dtype=torch.long)  # right padding: causal attention never sees it
        for r, i in enumerate(idx):
            ids[r, : lens[i]] = torch.tensor(rows[i]["ids"])
        cache = DynamicCache(config=model.config)
        out = base(input_ids=ids.to(E.device), cache=cache, use_cache=True)
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
        offsets=torch.tensor(offsets),
        tokens=tokens,
        hidden=hidden,
        keys=keys,
        values=values,
        top_ids=top_ids,
        top_p=top_p,
        meta=[
            {**{k: r[k] for k in ("prompt", "variant", "n_prompt")}, "source": r.get("source", "generated")}
            for r in rows
        ],
        seconds=time.perf_counter() - t0,
    )


def data_by_source(feats: dict) -> dict[str, dict[str, int]]:
    """Sequences and tokens per data source (``generated`` or a corpus name)."""
    offs = feats["offsets"]
    out: dict[str, dict[str, int]] = {}
    for i, m in enumerate(feats["meta"]):
        d = out.setdefault(m.get("source", "generated"), {"sequences": 0, "tokens": 0})
        d["sequences"] += 1
        d["tokens"] += int(offs[i + 1] - offs[i])
    return out
