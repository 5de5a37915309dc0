"""Stage 4 (train): the optimisation loop of the MTP head, with resumable checkpoints.

AdamW over the head's own weights, a linear warm-up then a cosine schedule (fitted to
``--minutes`` after ``AUTO_AFTER`` timed steps unless ``--max-steps`` fixes it), bf16
autocast for the matmuls.  A checkpoint (``ckpt_<tag>.pt`` in the work dir, the tag naming
every setting that changes the run) is written every ``--ckpt-every`` steps and at the
end; a rerun with the same settings resumes from it.  Every step seeds its own batch choice
from ``--seed`` and the step number.

This module does not define the loss (``loss``) or the batches (``batches``).
"""

from __future__ import annotations

import math
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tqdm import tqdm

from playground.drafters.mtp_head import MTPConfig, MTPHead
from playground.drafters.mtp_weights import load_head
from tools.training.mtp_train.batches import FeatureBatches, batch_candidates, pick_batch
from tools.training.mtp_train.dist_loss import DEFAULT_LOSS, parse_loss
from tools.training.mtp_train.loss import drafter_loss

AUTO_AFTER = 20  # steps timed before an automatic schedule is fixed


@dataclass
class TrainRun:
    """The schedule and progress of one training run: what a checkpoint keeps besides the weights."""

    step: int
    total_steps: int
    auto: bool  # the schedule is still to be fitted to the time budget
    warm: int  # warm-up steps, fixed from the schedule first asked for
    history: list[dict] = field(default_factory=list)
    elapsed_before: float = 0.0  # seconds earlier runs spent on this checkpoint

    def lr(self, base_lr: float, step: int) -> float:
        """Linear warm-up, then cosine from base_lr down to a tenth of it at total_steps."""
        if step < self.warm:
            return base_lr * (step + 1) / self.warm
        prog = min(1.0, (step - self.warm) / max(1, self.total_steps - self.warm))
        return base_lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * prog)))


@dataclass
class StepInputs:
    """What every optimiser step reads besides the head and the optimiser."""

    data: FeatureBatches
    cand: torch.Tensor  # the static candidate ids [N]
    cand_emb: torch.Tensor  # their tied embedding rows [N, H], float32
    embed_weight: torch.Tensor
    token_cluster: torch.Tensor | None  # cluster id per token (long), None without clusters
    hid_ms: float  # scale of the regression target
    kv_shape: tuple[int, int]  # (KV heads, head dim) of the target layer the head reads
    step_weights: list[float]  # loss weight of each draft step
    generated: list[int]  # training sequences the target wrote
    other: list[int]  # the other training sequences (corpus text)


def build_head(args, cand, target_cfg, init_from=None, token_cluster=None, init_head=None):
    """A fresh head (seeded by ``--seed``) for the target's geometry, optionally warm-started,
    holding the candidate vocabulary and clusters.  Returns (head, config)."""

    mcfg = MTPConfig.from_target(
        target_cfg,
        num_layers=args.layers,
        attend=args.attend,
        num_candidates=int(cand.numel()),
        num_clusters=args.clusters,
        clusters_per_step=args.clusters_per_step,
        **({"intermediate_size": args.intermediate} if args.intermediate else {}),
    )
    torch.manual_seed(args.seed)
    head = MTPHead(mcfg)
    if init_from is not None:
        head.init_from_target(init_from)
    if init_head:
        start = {k: v for k, v in load_head(init_head).state_dict().items() if k not in ("candidates", "token_cluster")}
        missing, unexpected = head.load_state_dict(start, strict=False)
        if unexpected:
            raise SystemExit(f"--init-head {init_head}: parameters this head lacks: {unexpected}")
        print(
            f"train: started from {init_head}; fresh: {[k for k in missing if k not in ('candidates', 'token_cluster')]}"
        )
    head.candidates.copy_(cand)
    if token_cluster is not None:
        head.token_cluster.copy_(token_cluster)
    return head, mcfg


def make_optimizer(head, lr: float) -> torch.optim.AdamW:
    """AdamW; matrices decay, norms and vectors do not."""
    decay, no_decay = [], []
    for n_, p in head.named_parameters():
        (no_decay if p.dim() < 2 else decay).append(p)
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}], lr=lr, betas=(0.9, 0.98)
    )


def checkpoint_tag(args, mcfg, init_from, auto: bool, total_steps: int, init_head) -> str:
    """The checkpoint's name: every setting that changes the run (a rerun with them resumes)."""
    return (
        f"{args.attend}_i{int(init_from is not None)}_L{args.layers}_I{mcfg.intermediate_size}_C{mcfg.num_clusters}_N{mcfg.num_candidates}_k{args.steps_ahead}_b{args.batch}_m{'auto' if auto else total_steps}_lr{args.lr:g}_r{args.reg_weight:g}_s{args.seed}"
        + (f"_h{Path(init_head).name if init_head else '-'}_g{args.gen_share:g}" if init_head or args.gen_share else "")
        + (f"_loss{args.loss.replace(',', '+')}_T{args.loss_temps.replace(',', '+')}" if _new_loss(args) else "")
    )


def _new_loss(args) -> bool:
    """Not the loss that trained the shipped head (its checkpoints keep their old names)."""
    return parse_loss(args.loss) != parse_loss(DEFAULT_LOSS) or loss_temps(args) != (1.0,)


def loss_temps(args) -> tuple[float, ...]:
    """The temperatures of the kl-topk / tv terms (``--loss-temps``)."""
    return tuple(float(t) for t in args.loss_temps.split(",") if t.strip())


def resume(ckpt: Path, head, opt, run: TrainRun) -> None:
    """Load the checkpoint into head, optimiser and run, if there is one."""
    if not ckpt.exists():
        return
    st = torch.load(ckpt, weights_only=False, map_location="cpu")
    head.load_state_dict(st["head"])
    opt.load_state_dict(st["opt"])
    run.step, run.history, run.elapsed_before = st["step"], st["history"], st["elapsed"]
    if run.auto and st.get("planned_steps"):  # the schedule fixed by the run that wrote the checkpoint
        run.total_steps, run.auto = st["planned_steps"], False
    print(f"train: resumed {ckpt.name} at step {run.step}")


def save_checkpoint(ckpt: Path, head, opt, run: TrainRun, mcfg, t0: float) -> None:
    """Write the checkpoint atomically (t0: when this process started training)."""
    tmp = ckpt.with_suffix(".tmp")
    torch.save(
        {
            "head": head.state_dict(),
            "opt": opt.state_dict(),
            "step": run.step,
            "history": run.history,
            "elapsed": run.elapsed_before + time.perf_counter() - t0,
            "config": mcfg.to_dict(),
            "planned_steps": None if run.auto else run.total_steps,
        },
        tmp,
    )
    os.replace(tmp, ckpt)


def optimiser_step(args, head, opt, inp: StepInputs, run: TrainRun) -> list[tuple[float, float, float]]:
    """One optimiser step on the batch seeded by (``--seed``, step); returns the loss's
    per-draft-step logs (loss, agreements, positions)."""
    rng = random.Random(args.seed * 1_000_003 + run.step)
    which = pick_batch(rng, inp.generated, inp.other, args.batch, args.gen_share)
    for g in opt.param_groups:
        g["lr"] = run.lr(args.lr, run.step)
    batch = inp.data.batch(which, args.steps_ahead)
    batch["cand"] = batch_candidates(
        batch, inp.data.lut, int(inp.cand.numel()), inp.embed_weight, clustered=inp.token_cluster is not None
    )
    batch["hid_ms"] = inp.hid_ms
    if inp.token_cluster is not None:
        batch["token_cluster"] = inp.token_cluster
    dev = inp.cand_emb.device
    batch = to_device(batch, dev)  # built on the CPU, trained where the head is (--device)
    # bf16 matmuls (fp32 master weights, fp32 softmax/loss): ~10x faster than fp32 on this CPU
    with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bool(args.bf16)):
        loss, logs = drafter_loss(
            head,
            batch,
            inp.cand_emb,
            args.steps_ahead,
            inp.kv_shape,
            inp.step_weights,
            args.reg_weight,
            terms=parse_loss(args.loss),
            temps=loss_temps(args),
        )
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(head.parameters(), 1.0)
    opt.step()
    return logs


def to_device(x, device: torch.device):
    """Tensors in nested dicts moved to ``device`` (a no-op on their own device)."""
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, dict):
        return {k: to_device(v, device) for k, v in x.items()}
    return x


def train_loop(args, head, opt, inp: StepInputs, run: TrainRun, save, bar, t0: float) -> None:
    """Optimiser steps until the schedule or the time budget ends; every 10 steps a history
    entry, every ``--ckpt-every`` a checkpoint (``save()``)."""
    budget = args.minutes * 60
    agg = [[0.0, 0.0, 0.0] for _ in range(args.steps_ahead)]
    first_step = run.step
    while run.step < run.total_steps:
        if run.auto and run.step == first_step + AUTO_AFTER:
            spent = time.perf_counter() - t0
            run.total_steps = run.step + int((budget - run.elapsed_before - spent) / (spent / AUTO_AFTER))
            bar.total = run.total_steps
            bar.write(f"train: {spent / AUTO_AFTER:.2f} s/step -> {run.total_steps} steps in {args.minutes} min")
            run.auto = False  # planned: checkpoints keep this schedule
        if run.elapsed_before + time.perf_counter() - t0 > budget:
            bar.write(f"train: time budget ({args.minutes} min) reached at step {run.step}")
            break
        logs = optimiser_step(args, head, opt, inp, run)
        run.step += 1
        for j, (l, a, n) in enumerate(logs):
            agg[j][0] += l
            agg[j][1] += a
            agg[j][2] += n
        bar.update(1)
        if run.step % 10 == 0:
            acc = [a / max(n, 1) for _, a, n in agg]
            bar.set_postfix(loss=f"{agg[0][0] / 10:.3f}", top1=" ".join(f"{x:.2f}" for x in acc))
            run.history.append({"step": run.step, "loss1": agg[0][0] / 10, "top1_by_step": acc})
            agg = [[0.0, 0.0, 0.0] for _ in range(args.steps_ahead)]
        if run.step % args.ckpt_every == 0:
            save()


def stage_train(
    args,
    feats,
    train_seqs,
    hold_seqs,
    cand,
    target_cfg,
    embed_weight,
    scale,
    init_from=None,
    token_cluster=None,
    init_head=None,
):
    """Train a head on the training sequences (resuming a matching checkpoint); returns
    (head in eval mode, {"steps", "planned_steps", "train_seconds", "history", "tag"})."""

    head, mcfg = build_head(args, cand, target_cfg, init_from, token_cluster, init_head)
    device = torch.device(getattr(args, "device", "cpu"))
    head.to(device)
    embed_weight = embed_weight.cpu()  # batches are built on the CPU
    cand_emb = embed_weight[cand].float().to(device)
    data = FeatureBatches(feats, train_seqs, cand, mcfg.vocab_size, embed_weight, scale)
    opt = make_optimizer(head, args.lr)
    auto = args.max_steps <= 0  # fit the schedule to the time budget, measured after AUTO_AFTER steps
    total_steps = 100_000 if auto else args.max_steps
    run = TrainRun(step=0, total_steps=total_steps, auto=auto, warm=min(50, max(1, total_steps // 20)))
    tag = checkpoint_tag(args, mcfg, init_from, auto, total_steps, init_head)
    ckpt = Path(args.work) / f"ckpt_{tag}.pt"
    resume(ckpt, head, opt, run)
    inp = StepInputs(
        data=data,
        cand=cand,
        cand_emb=cand_emb,
        embed_weight=embed_weight,
        token_cluster=None if token_cluster is None else token_cluster.long().to(device),
        hid_ms=float(feats["hidden"][:20000].float().pow(2).mean()),
        kv_shape=(mcfg.num_key_value_heads, mcfg.head_dim),
        step_weights=[0.8 ** (j - 1) for j in range(1, args.steps_ahead + 1)],
        generated=[i for i in train_seqs if feats["meta"][i].get("source", "generated") == "generated"],
        other=[i for i in train_seqs if feats["meta"][i].get("source", "generated") != "generated"],
    )
    t0 = time.perf_counter()
    bar = tqdm(total=run.total_steps, initial=run.step, desc=f"train {tag}", unit="step")
    head.train()

    def save():
        save_checkpoint(ckpt, head, opt, run, mcfg, t0)

    train_loop(args, head, opt, inp, run, save, bar, t0)
    save()
    bar.close()
    head.eval()
    return head, {
        "steps": run.step,
        "planned_steps": run.total_steps,
        "train_seconds": run.elapsed_before + time.perf_counter() - t0,
        "history": run.history,
        "tag": tag,
    }
