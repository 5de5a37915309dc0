"""The training loss of the MTP head: distillation from the target's cached distributions.

Per draft step j (the head fed its own predicted states and the text's own tokens, i.e. the
tokens the target actually sampled, as at inference after acceptances): a mix of terms
chosen by ``--loss`` (``dist_loss``; default KL(target top-k || drafter) renormalised over
the chain's candidate set + CE(target argmax)), a regression of the state onto the target's
final hidden state and, with clusters, a cross-entropy of the cluster scores against the
target's mass per cluster.  ``kl-topk`` and ``tv`` compare the target's full distribution at
each temperature of ``--loss-temps`` with the drafter's softmax at the same temperature.

This module does not build batches (``batches``) or run the optimiser (``train``).
"""

from __future__ import annotations

import torch

from playground.drafters.mtp_head import unrolled_states
from tools.training.mtp_train.batches import shift
from tools.training.mtp_train.dist_loss import DEFAULT_LOSS, kl_topk_rest, parse_loss, tv_topk


def drafter_loss(
    head,
    batch: dict,
    cand_emb: torch.Tensor,
    steps: int,
    kv_shape,
    step_weights,
    reg_weight=1.0,
    terms: dict[str, float] | None = None,
    temps: tuple[float, ...] = (1.0,),
):
    """Sum over draft steps j of w_j * [the ``terms`` mix (default: KL(target top-k | drafter)
    + CE(target argmax)) + the state regression], plus per-step top-1 agreement
    (teacher-forced chains).  ``kl-topk`` / ``tv`` average over ``temps``; the target's
    top-k probabilities at T come from ``batch["tp_at"][T]`` (T = 1: ``batch["tp"]``)."""
    terms = parse_loss(DEFAULT_LOSS) if terms is None else terms

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
        cidx = shift(cv["cidx"], j - 1, -1)  # target dist at position n+j-1 (predicts x_{n+j})
        tp = shift(batch["tp"], j - 1, 0.0)
        valid = shift(batch["valid"], j - 1, False)
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
        h_t = shift(batch["hid"], j - 1, 0.0)
        reg = ((s.float() - h_t) ** 2).mean(-1) / batch["hid_ms"]
        loss_j = 0.0
        if "kl" in terms:
            loss_j = loss_j + terms["kl"] * ((soft * ok).sum() / n_ok)
        if "ce" in terms:
            loss_j = loss_j + terms["ce"] * ((hard * hard_ok).sum() / hard_ok.sum().clamp_min(1))
        if "kl-topk" in terms or "tv" in terms:
            loss_j = loss_j + _full_terms(logits, logq, cidx, inc, valid, batch, j, terms, temps)
        loss_j = loss_j + reg_weight * (reg * ok).sum() / n_ok
        if "token_cluster" in batch:
            loss_j = loss_j + cluster_loss(head, s, shift(batch["tid"], j - 1, 0), tp, valid, batch["token_cluster"])
        total = total + step_weights[j - 1] * loss_j
        with torch.no_grad():
            agree = (logits.argmax(-1) == cidx[..., 0]) & hard_ok
            logs.append((float(loss_j), float(agree.sum()), float(ok.sum())))
    return total, logs


def _full_terms(logits, logq, cidx, inc, valid, batch, j: int, terms: dict, temps) -> torch.Tensor:
    """kl-topk and tv of draft step j, each the mean over valid positions and over ``temps``.

    logits, logq: [B, T, N+X] the masked drafter logits and their log-softmax (T = 1);
    cidx, inc: [B, T, k] the target's top-k as table indices and whether each is draftable."""
    n_valid = valid.sum().clamp_min(1)
    total = 0.0
    for t in temps:
        tp = shift(batch["tp"] if t == 1.0 else batch["tp_at"][t], j - 1, 0.0)  # [B, T, k]
        lq_t = logq if t == 1.0 else torch.log_softmax(logits / t, dim=-1)
        lq = torch.gather(lq_t, -1, cidx.clamp_min(0))  # [B, T, k]
        if "kl-topk" in terms:
            total = total + terms["kl-topk"] * (kl_topk_rest(tp, lq, inc) * valid).sum() / n_valid
        if "tv" in terms:
            total = total + terms["tv"] * (tv_topk(tp, torch.exp(lq), inc) * valid).sum() / n_valid
    return total / len(temps)


def cluster_loss(head, s, tid, tp, valid, token_cluster) -> torch.Tensor:
    """Cross-entropy of the cluster scores against the target's mass per cluster (its top-k
    entries outside the static set), weighted by that mass: positions whose next token is
    a static candidate teach the scorer nothing."""
    cl = token_cluster[tid]  # [B, T, k] cluster of each top-k token (-1: static)
    K = head.cfg.num_clusters
    mass = torch.zeros(*cl.shape[:2], K, dtype=torch.float32, device=tp.device)
    mass.scatter_add_(-1, cl.clamp_min(0), tp * (cl >= 0) * valid[..., None])
    w = mass.sum(-1)  # [B, T] target mass outside the static set
    logp = torch.log_softmax(head.cluster_proj(s).float(), dim=-1)
    ce = -(mass * logp).sum(-1)  # = w * CE(mass / w, scores)
    return ce.sum() / w.sum().clamp_min(1e-9)
