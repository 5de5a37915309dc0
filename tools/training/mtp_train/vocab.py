"""Stage 3 (vocab, clusters): the candidate vocabulary and the clusters covering the rest.

The N static candidates are the tokens ranked by the target's soft next-token mass over the
training split (then by id); with ``--clusters`` the other tokens are grouped into balanced
clusters of their tied embeddings (``tools.training.mtp_clusters``), cached in the work dir.

This module does not train or evaluate the head (``train``, ``evaluate``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from tools.training.mtp_clusters import balanced_clusters


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
    """Cluster id per token (``tools.training.mtp_clusters``), cached in the work dir; None without clusters."""
    if not args.clusters:
        return None

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
