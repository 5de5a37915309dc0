"""Training batches from the cached features, and each chain's candidate set as at inference.

``FeatureBatches`` pads per-sequence views of the features into batches; ``pick_batch``
chooses a step's sequences; ``batch_candidates`` builds the candidate table the loss scores
(the static candidates, the context's other tokens and, with clusters, the target's top
tokens); ``shift`` aligns a per-position tensor with draft step j.

This module does not compute the loss or step the optimiser (``loss``, ``train``).
"""

from __future__ import annotations

import random

import torch


class FeatureBatches:
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
        temps = [k for k in f if k.startswith("top_p@")]  # the target's top-k at other temperatures
        tp_at = {k: torch.zeros(B, T, f["top_p"].shape[1]) for k in temps}
        for r, i in enumerate(which):
            a = int(self.offs[i])
            n = min(lens[r], T)
            tok[r, :n] = f["tokens"][a : a + n].long()
            hid[r, :n] = f["hidden"][a : a + n].float()
            K[r, :n] = f["keys"][a : a + n].float()
            Vv[r, :n] = f["values"][a : a + n].float()
            tid[r, :n] = f["top_ids"][a : a + n].long()
            tp[r, :n] = f["top_p"][a : a + n].float()
            for k in temps:
                tp_at[k][r, :n] = f[k][a : a + n].float()
            valid[r, :n] = True
        emb = self.E[tok].float() * self.scale
        return dict(
            tok=tok,
            emb=emb,
            hid=hid,
            K=K,
            V=Vv,
            tid=tid,
            tp=tp,  # [B, T, k] the target's top-k probabilities at T = 1
            tp_at={float(k.split("@")[1]): v for k, v in tp_at.items()},  # {T: [B, T, k]}
            valid=valid,
            cidx=self.lut[tid],
        )


def pick_batch(rng: random.Random, generated: list[int], other: list[int], batch: int, gen_share: float) -> list[int]:
    """Sequence indices for one optimiser step: uniform over all training sequences, or
    (gen_share > 0) round(gen_share * batch) of them from the target's generated text."""
    if gen_share <= 0 or not generated or not other:
        pool = generated + other
        return rng.sample(pool, min(batch, len(pool)))
    n_gen = min(len(generated), max(1, round(gen_share * batch)))
    return rng.sample(generated, n_gen) + rng.sample(other, min(batch - n_gen, len(other)))


def shift(x: torch.Tensor, j: int, fill=0):
    """x[:, t + j] at t (fill past the end)."""
    if j == 0:
        return x
    pad = torch.full_like(x[:, :j], fill)
    return torch.cat([x[:, j:], pad], dim=1)


CLUSTER_TOPK = 8  # the target's top entries that join the training table through the clusters (cost: table width)
# at most this many of them per batch (by target mass): a batch of Chinese or code text otherwise made a
# table of ~30k columns whose float32 logits for 4 draft steps ran this 24 GB machine out of memory
CLUSTER_TABLE_CAP = 8192


def batch_candidates(
    batch: dict, static_lut: torch.Tensor, n_static: int, embed_weight, clustered: bool = False
) -> dict:
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
