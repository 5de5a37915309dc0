"""Token clusters that make the whole vocabulary reachable for a sparse MTP head.

The MTP head scores N static candidate tokens (the most frequent ones) instead of all
262k: that keeps a draft step cheap, but a token outside the set can never be drafted,
and text unlike the training text (Chinese, code identifiers) lives mostly outside it.
Gemma 4's assistant solves this with token *clusters*: the vocabulary is cut into
equal groups, the head scores the groups (one small matmul), and each draft step also
scores the tokens of its best few groups.  Together the groups cover every token.

``balanced_clusters`` cuts the tokens outside the static set into ``k`` groups whose
sizes differ by at most one, by recursive bisection of the normalised tied embeddings
at the median of their first principal component: tokens with similar embeddings (and
so similar logits under any state) share a group, and every group costs the same to
score.  The head learns which groups to score (``MTPHead.cluster_proj``).

This module only builds the assignment; it does not score or train anything (the drafter's
lookup of each cluster's tokens, ``cluster_members``, lives with the head: ``drafters.mtp_head``).
"""

from __future__ import annotations

import torch


def _principal_direction(x: torch.Tensor, iters: int = 12) -> torch.Tensor:
    """First principal component of the rows of x [n, H] (centred), by power iteration
    from a fixed start: deterministic for the same input and BLAS."""
    v = torch.linspace(1.0, 2.0, x.shape[1], dtype=x.dtype)
    v = v / v.norm()
    for _ in range(iters):
        v = x.t() @ (x @ v)
        v = v / v.norm().clamp_min(1e-12)
    return v


def balanced_clusters(embeddings: torch.Tensor, exclude: torch.Tensor, k: int) -> torch.Tensor:
    """Cluster id per token [V] (int16; -1 for the excluded tokens).

    embeddings: [V, H] the tied embedding (any float dtype); exclude: [V] bool, the
    static candidates (always scored, so in no cluster); k: number of clusters, a power
    of two.  Clusters of the remaining tokens differ in size by at most one."""
    if k < 1 or k & (k - 1):
        raise ValueError(f"the number of clusters must be a power of two, got {k}")
    V = embeddings.shape[0]
    ids = torch.nonzero(~exclude).squeeze(-1)
    if ids.numel() < k:
        raise ValueError(f"{ids.numel()} tokens cannot fill {k} clusters")
    x = embeddings[ids].float()
    x = x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    groups = [torch.arange(ids.numel())]
    while len(groups) < k:
        nxt = []
        for g in groups:
            xg = x[g] - x[g].mean(0)
            proj = xg @ _principal_direction(xg)
            order = torch.argsort(proj, stable=True)
            half = g.numel() // 2
            nxt += [g[order[:half]], g[order[half:]]]
        groups = nxt
    out = torch.full((V,), -1, dtype=torch.int16)
    for c, g in enumerate(groups):
        out[ids[g]] = c
    return out
