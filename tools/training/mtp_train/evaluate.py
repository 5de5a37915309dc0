"""Stage 5 (eval) and ``--eval-only``: acceptance of a trained head on text it did not train on.

``greedy_acceptance`` measures greedy acceptance by draft position on the held-out split of
the training prompts (cached features, no clusters); ``eval_only`` runs the by-category
evaluation of ``tools.training.mtp_eval`` on weight directories, puts its tables into the model
card and (``--eval-bench``) starts one ``python -m tools bench`` run.

This module does not train or export weights.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch

from playground.drafters.mtp_head import unrolled_states
from tools.training import mtp_eval
from tools.training.mtp_train.batches import FeatureBatches, batch_candidates, shift
from tools.training.mtp_train.card import write_model_card
from tools.training.mtp_train.paths import PLAYGROUND
from tools.training.mtp_train.train import to_device


@torch.no_grad()
def greedy_acceptance(head, feats, seqs, cand, embed_weight, scale, steps: int, greedy_only=True) -> dict:
    """Greedy (temperature 0) acceptance by draft position on cached sequences.

    Chain n (committed = x_0..x_n, n in the generated part) accepts draft j iff it equals
    the target's argmax at position n+j-1; it goes on to draft j+1 only if the text's next
    token is that argmax too (always for greedy text; where it happens for sampled text),
    so every judged draft sees exactly the inputs it would see in the decoding loop."""

    head.eval()
    dev = head.start_state.device  # batches are built on the CPU and scored where the head is
    embed_weight = embed_weight.cpu()
    cand_emb = embed_weight[cand].float().to(dev)
    data = FeatureBatches(feats, seqs, cand, head.cfg.vocab_size, embed_weight, scale)
    nkv, D = head.cfg.num_key_value_heads, head.cfg.head_dim
    reached = [0] * steps
    accepted = [0] * steps
    chains = 0
    use = [i for i in seqs if (feats["meta"][i]["variant"] == 0 or not greedy_only)]
    for b in range(0, len(use), 8):
        which = use[b : b + 8]
        batch = data.batch(which, steps)
        cv = to_device(batch_candidates(batch, data.lut, int(cand.numel()), embed_weight), dev)
        batch = to_device(batch, dev)
        B, T = batch["tok"].shape
        K = batch["K"].view(B, T, nkv, D).transpose(1, 2)
        V = batch["V"].view(B, T, nkv, D).transpose(1, 2)
        with torch.autocast(dev.type, dtype=torch.bfloat16):
            states = unrolled_states(head, batch["emb"], batch["hid"], K, V, steps)
        table = torch.cat([cand_emb, cv["ext_emb"]])
        all_ids = torch.cat([cand.to(dev), cv["ext_ids"]])
        top1 = batch["tid"][..., 0]  # target argmax at each position (predicts the next token)
        # chain n counts if it starts in the generated part: n >= n_prompt - 1
        start_ok = torch.zeros(B, T, dtype=torch.bool, device=dev)
        for r, i in enumerate(which):
            m = feats["meta"][i]
            n_len = int(batch["valid"][r].sum())
            start_ok[r, m["n_prompt"] - 1 : n_len - 1] = True
        alive = start_ok.clone()
        chains += int(alive.sum())
        for j, s in enumerate(states, start=1):
            with torch.autocast(dev.type, dtype=torch.bfloat16):
                lg = head.logits(s, table).float().masked_fill(~cv["allowed"], float("-inf"))
            draft = all_ids[lg.argmax(-1)]  # [B, T]
            tgt = shift(top1, j - 1, -1)  # target argmax at position n+j-1
            nxt = shift(batch["tok"], j, -1)  # the text's token x_{n+j} (fed at step j+1)
            valid = shift(batch["valid"], j, False)
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
    return {
        "chains": chains,
        "conditional_by_position": cond,
        "cumulative_by_position": cum,
        "reached": reached,
        "accepted": accepted,
    }


def eval_only(args, model, tok, embed_weight, scale) -> int:
    """``--eval-only``: held-out acceptance by category (``tools.training.mtp_eval``) for each
    weights directory, then (``--eval-bench``) one bench run of the shipped preset on the
    same prompts: our autoregressive loop vs the MTP drafter, bf16, at ``--eval-bench-temps``
    (default 0 and 1: the rows split repetitive from non-repetitive outputs)."""

    weights = (args.eval_weights or args.out).split(",")
    results = mtp_eval.run_eval(args, model, tok, weights, embed_weight, scale)
    out = Path(args.work) / "heldout"
    (out / "eval.json").write_text(json.dumps(results, indent=1))
    (out / "eval.md").write_text(
        "".join(mtp_eval.format_report(r, w) + "\n" + mtp_eval.format_profile(r["target"]) for w, r in results.items())
    )
    stats_path = Path(args.work) / "stats.json"
    if stats_path.exists() and (Path(args.out) / "config.json").exists():  # the card of --out gets the tables
        stats = json.loads(stats_path.read_text())
        root = PLAYGROUND.parent  # weights inside the repository are named relative to it
        stats["heldout_eval"] = {
            str(Path(w).resolve().relative_to(root)) if Path(w).resolve().is_relative_to(root) else w: r
            for w, r in results.items()
        }
        stats_path.write_text(json.dumps(stats, indent=1))
        write_model_card(Path(args.out), stats, args)
    if args.eval_bench:
        drafters, _, rest = args.eval_bench.partition(":")
        gammas, _, trees = rest.partition(":")
        prompts = mtp_eval.write_bench_prompts(out / "bench_prompts.json", args.eval_bench_prompts)
        cmd = [
            sys.executable,
            "-m",
            "playground",
            "bench",
            "--preset",
            "gemma3-270m-mtp",
            "--prompts",
            str(prompts),
            "--drafters",
            drafters,
            "--gammas",
            gammas or "4",
            "--tree-nodes",
            trees or "1",
            "--temperatures",
            getattr(args, "eval_bench_temps", "0,1"),
            "--dtype",
            "bfloat16",
            "--max-new-tokens",
            str(mtp_eval.NEW_TOKENS),
            "--methods",
            "autoregressive,speculative",
            "--repeats",
            "1",
            "--out",
            str(out / "bench"),
            "--no-progress",
        ]
        print("bench:", " ".join(cmd[1:]), flush=True)
        subprocess.run(cmd, check=False)
        md = out / "bench" / "bench.md"
        if md.exists():
            print(md.read_text())
    print(f"written to {out}/eval.md, eval.json")
    return 0
