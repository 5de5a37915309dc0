"""Train the MTP drafter (``playground.drafters.mtp``) by self-distillation on the target's own text.

``python -m tools train-drafter --preset gemma3-270m [--minutes M] [--seed S] [--out DIR]``

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

Runs on one torch thread by default: on a 2-core CPU shared with other work, two threads made
every small op wait for the busy second core (a batched decode step took 5.5 s on two
threads, 0.17 s on one).

Deterministic for a given ``--seed`` (data generation seeds per shard, training seeds per
step).  This module is the command line: it parses the options and runs the stages, which
live in ``tools.training.mtp_train`` (one module per stage).  It never runs in the app.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from playground.drafters.mtp_head import text_model
from playground.drafters.mtp_weights import load_head, save_head, weight_files
from playground.models.convert import load_packaged
from tools.training import exit_train, mtp_corpus
from tools.training.mtp_train.bench import stage_bench
from tools.training.mtp_train.card import write_model_card
from tools.training.mtp_train.dist_loss import DEFAULT_LOSS, parse_loss
from tools.training.mtp_train.evaluate import eval_only, greedy_acceptance
from tools.training.mtp_train.features import data_by_source, stage_features
from tools.training.mtp_train.gen import (
    DEFAULT_GEN_TEMPS,
    gen_parallel,
    load_rows,
    parse_gen_temps,
    stage_gen,
)
from tools.training.mtp_train.paths import DEFAULT_OUT, DEFAULT_WORK, PRESETS, PROMPTS
from tools.training.mtp_train.train import stage_train
from tools.training.mtp_train.vocab import stage_clusters, stage_vocab


def load_target(preset: str, dtype: torch.dtype, target_dir: str | None = None):
    """(model, tokenizer) for the preset; a local HF dir wins if given (skips conversion)."""

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
# CLI


def _temps(spec: str) -> str:
    try:
        temps = [float(t) for t in spec.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"temperatures must be numbers, got {spec!r}") from None
    if not temps or not all(t > 0 for t in temps):
        raise argparse.ArgumentTypeError(f"temperatures must be > 0, got {spec!r}")
    return spec


def _gen_temps(spec: str) -> str:
    try:
        parse_gen_temps(spec)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return spec


def _loss_spec(spec: str) -> str:
    try:
        parse_loss(spec)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return spec


def build_parser() -> argparse.ArgumentParser:
    """The command line, one group of options per part of the run (``--help`` lists them so)."""
    p = argparse.ArgumentParser(prog="python -m tools train-drafter", description=__doc__.split("\n\n")[0])
    _run_arguments(p)
    _gen_arguments(p)
    _head_arguments(p)
    _train_arguments(p)
    _eval_arguments(p)
    exit_train.add_arguments(p)
    return p


def _run_arguments(parser: argparse.ArgumentParser) -> None:
    """What is trained, where it goes, which stages run."""
    p = parser.add_argument_group("run")
    p.add_argument("--preset", default="gemma3-270m", choices=PRESETS)
    p.add_argument(
        "--drafter",
        default="mtp",
        choices=("mtp", "early-exit"),
        help="mtp: the MTP head; early-exit: linear adapters for early exits (tools.training.exit_train)",
    )
    p.add_argument("--minutes", type=float, default=45.0, help="training wall-clock budget (stage 4)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(DEFAULT_OUT), help="where the shipped weights go")
    p.add_argument("--work", default=str(DEFAULT_WORK), help="cache for generated text, features, checkpoints")
    p.add_argument("--target-dir", default=None, help="a local HF copy of the target (skips GGUF conversion)")
    p.add_argument("--stages", default="corpus,gen,features,vocab,train,eval,export")
    p.add_argument(
        "--device",
        default="cpu",
        help="where the target generates and prefills and the head trains (cpu, cuda); batches are built on the CPU",
    )


def _gen_arguments(parser: argparse.ArgumentParser) -> None:
    """Stage gen (and corpus): the target writes its training text."""
    p = parser.add_argument_group("gen")
    p.add_argument("--samples", type=int, default=1, help="sampled continuations per prompt (plus one greedy)")
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--gen-batch", type=int, default=24, help="gen stage: prompts decoded together (one pass per token)")
    p.add_argument(
        "--gen-temps",
        default=DEFAULT_GEN_TEMPS,
        type=_gen_temps,
        help="gen stage: sampling settings, each getting --samples continuations per prompt besides the greedy one: "
        "T or T:TOP_K, e.g. '1,0.7' (full vocabulary, as the decoding loop samples); default 0.8:64",
    )
    p.add_argument("--gen-procs", type=int, default=1, help="gen stage: this many one-thread processes")
    p.add_argument("--gen-worker", default="0/1", help=argparse.SUPPRESS)
    p.add_argument("--gen-minutes", type=float, default=40.0, help="stop generating after this long (0: no limit)")
    p.add_argument("--holdout", type=float, default=0.1, help="fraction of prompts held out for evaluation")
    p.add_argument(
        "--corpus-prompts",
        type=int,
        default=0,
        help="gen stage: also continue this many corpus-chunk openings per source (the target's own "
        "text on every kind of training text; always in the training split)",
    )
    p.add_argument(
        "--copy-prompts",
        type=int,
        default=0,
        help="gen stage: also this many copy tasks per corpus source (a passage to repeat; the target's "
        "own copies teach the head to draft from its context; always in the training split)",
    )


def _head_arguments(parser: argparse.ArgumentParser) -> None:
    """Stages features / vocab: what is cached per position and the head's shape."""
    p = parser.add_argument_group("head")
    p.add_argument("--topk", type=int, default=20, help="target distribution entries cached per position")
    p.add_argument("--features-batch", type=int, default=8, help="features stage: sequences per prefill pass")
    p.add_argument("--candidates", type=int, default=8192, help="candidate vocabulary size N")
    p.add_argument("--steps-ahead", type=int, default=4, help="draft steps trained (1..k)")
    p.add_argument("--layers", type=int, default=1)
    p.add_argument("--intermediate", type=int, default=0, help="drafter MLP width (0: the target's)")
    p.add_argument(
        "--clusters",
        type=int,
        default=1024,
        help="token clusters covering the non-candidate vocabulary (power of two; 0: none)",
    )
    p.add_argument("--clusters-per-step", type=int, default=8, help="clusters scored per draft step")
    p.add_argument("--int8", type=int, default=1, help="export large matrices as int8 rows (1/0)")
    p.add_argument("--reg-weight", type=float, default=1.0, help="weight of the hidden-state regression loss")


def _train_arguments(parser: argparse.ArgumentParser) -> None:
    """Stage train: the optimiser, its budget and its starting point."""
    p = parser.add_argument_group("train")
    p.add_argument(
        "--init-head",
        default=None,
        help="start from these drafter weights (and keep their candidate vocabulary); "
        "parameters they lack, e.g. cluster scores, start fresh",
    )
    p.add_argument(
        "--gen-share",
        type=float,
        default=0.0,
        help="fraction of each batch drawn from generated text (0: uniform over all sequences)",
    )
    p.add_argument(
        "--init-from-target",
        type=int,
        default=0,
        help="1: copy the target's last full-attention layer into the drafter (measured: learns far slower)",
    )
    p.add_argument("--attend", default="target", choices=("target", "none"), help="drafter attention source")
    p.add_argument("--batch", type=int, default=8, help="sequences per optimiser step")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--ckpt-every", type=int, default=100)
    p.add_argument(
        "--max-steps",
        type=int,
        default=0,
        help="optimiser steps (0: fit the cosine schedule to --minutes, timed over the first 20 steps)",
    )
    p.add_argument("--bf16", type=int, default=1, help="bf16 autocast for training matmuls (1/0)")
    p.add_argument(
        "--loss",
        default=DEFAULT_LOSS,
        type=_loss_spec,
        help="loss terms and weights, e.g. 'kl-topk:1,tv:1,ce:0.5': kl (top-k renormalised over the candidates), "
        "ce (target argmax), kl-topk (forward KL over the target's top-k plus a rest bucket), tv (1 - sum min(p, q) "
        "over the top-k); see tools/training/mtp_train/dist_loss.py",
    )
    p.add_argument(
        "--loss-temps",
        default="1",
        type=_temps,
        help="temperatures at which kl-topk and tv compare the target with the drafter (averaged), e.g. 1,0.7; "
        "the features stage caches the target's top-k probabilities at each",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (default 1: on a shared 2-core CPU, 2 threads made small ops ~30x slower)",
    )


def _eval_arguments(parser: argparse.ArgumentParser) -> None:
    """Stage eval: held-out acceptance and the bench run."""
    p = parser.add_argument_group("eval")
    p.add_argument(
        "--eval-only",
        action="store_true",
        help="only evaluate on playground/data/heldout_prompts.json (acceptance by category, T=0 and T=1)",
    )
    p.add_argument(
        "--eval-weights", default=None, help="comma-separated weight directories to evaluate (default: --out)"
    )
    p.add_argument(
        "--eval-bench",
        default="mtp:4",
        help="also one bench run on the held-out prompts, DRAFTERS:GAMMAS[:TREE_NODES] ('' to skip), "
        "e.g. mtp,mtp+lookup:3,5:1,16",
    )
    p.add_argument(
        "--eval-bench-temps", default="0,1", help="temperatures of that bench run (T = 1 is the headline, issue 23)"
    )
    p.add_argument("--eval-bench-prompts", type=int, default=2, help="held-out prompts per category in that bench run")


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
    model.to(args.device)  # gen, features (and the held-out text) run there; so does training

    base = text_model(model)
    embed_weight = base.embed_tokens.weight.detach().cpu()  # training batches are built on the CPU
    scale = float(getattr(base.embed_tokens, "embed_scale", 1.0))

    if args.eval_only:
        return eval_only(args, model, tok, embed_weight, scale)
    if args.drafter == "early-exit":  # its own stages, on the text the corpus / gen stages wrote
        prompts, rows = text_stages(args, argv, stages, model, tok, prompts, stats)
        _, hold_p = split_prompts(prompts, args.seed, args.holdout)
        return exit_train.run(args, model, tok, rows, set(hold_p))
    n_listed = len(prompts)  # the split is over these; corpus openings always train
    prompts, rows = text_stages(args, argv, stages, model, tok, prompts, stats)
    if stages & {"features", "vocab", "train", "eval", "export"}:
        data = prepare_data(args, model, tok, rows, prompts[:n_listed], embed_weight, stats)
        train_and_export(args, stages, model, data, embed_weight, scale, stats, stats_path)
    stats_path.write_text(json.dumps(stats, indent=1))
    if "bench" in stages:
        stats["bench"] = stage_bench(args, model, tok, Path(args.out))
        stats_path.write_text(json.dumps(stats, indent=1))
        write_model_card(Path(args.out), stats, args)
    print(f"total {time.perf_counter() - t_all:.0f} s")
    return 0


def text_stages(args, argv, stages: set[str], model, tok, prompts: list[str], stats: dict):
    """The corpus and gen stages (or the rows they wrote before): returns (prompts with the
    corpus openings asked for, rows of text)."""
    work = Path(args.work)
    if "corpus" in stages:
        t_co = time.perf_counter()
        stats["corpus"] = mtp_corpus.write_shards(tok, work / "gen", args.seed)
        stats["corpus_seconds"] = time.perf_counter() - t_co
    if args.corpus_prompts:
        prompts = prompts + mtp_corpus.openings(tok, work / "gen", args.corpus_prompts, args.seed)
    if args.copy_prompts:  # after the openings, so their prompt numbers (and cached shards) stay
        prompts = prompts + mtp_corpus.copy_tasks(tok, work / "gen", args.copy_prompts, args.seed)
    t = time.perf_counter()
    need_rows = "gen" in stages or stages & {"features", "vocab", "train", "eval", "export"}
    if "gen" in stages and args.gen_procs > 1 and args.gen_worker == "0/1":
        rows = gen_parallel(args, argv if argv is not None else sys.argv[1:], model, tok, prompts)
    elif "gen" in stages:
        rows = stage_gen(args, model, tok, prompts)
    else:
        rows = load_rows(work) if need_rows else []
    if "gen" in stages:
        stats["gen"] = {
            "sequences": len(rows),
            "tokens": sum(len(r["ids"]) for r in rows),
            "new_tokens": sum(len(r["ids"]) - r["n_prompt"] for r in rows),
            "seconds_this_run": time.perf_counter() - t,
        }
        print("gen:", json.dumps(stats["gen"]))
    return prompts, rows


@dataclass
class TrainData:
    """What the training, evaluation and export stages read (the output of features -> clusters)."""

    feats: dict
    train_seqs: list[int]
    hold_seqs: list[int]
    cand: torch.Tensor  # the static candidate ids
    token_cluster: torch.Tensor | None


def prepare_data(args, model, tok, rows: list[dict], listed_prompts: list[str], embed_weight, stats: dict) -> TrainData:
    """The features, vocab and clusters stages, and the train / held-out split by prompt."""

    eos = tok.eos_token_id
    vocab_size = model.config.get_text_config().vocab_size
    feats = stage_features(args, model, rows)
    stats["features"] = {"seconds": feats["seconds"], "positions": int(feats["offsets"][-1])}
    stats["data"] = data_by_source(feats)
    train_p, hold_p = split_prompts(listed_prompts, args.seed, args.holdout)
    hold_set = set(hold_p)
    train_seqs = [i for i, m in enumerate(feats["meta"]) if m["prompt"] not in hold_set]
    hold_seqs = [i for i, m in enumerate(feats["meta"]) if m["prompt"] in hold_set]
    voc = stage_vocab(args, feats, train_seqs, hold_seqs, vocab_size, eos)
    stats["vocab"] = voc["stats"]
    stats["split"] = {
        "train_prompts": len(train_p),
        "heldout_prompts": len(hold_p),
        "train_sequences": len(train_seqs),
        "heldout_sequences": len(hold_seqs),
        "train_positions": sum(int(feats["offsets"][i + 1] - feats["offsets"][i]) for i in train_seqs),
    }
    cand = voc["candidates"]
    if args.init_head:
        cand = load_head(args.init_head).candidates.clone()
        stats["init_head"] = str(args.init_head)
    t_cl = time.perf_counter()
    token_cluster = stage_clusters(args, cand, embed_weight)
    stats.setdefault("clusters", {}).setdefault("seconds", time.perf_counter() - t_cl)  # a cached rerun keeps the first
    return TrainData(feats, train_seqs, hold_seqs, cand, token_cluster)


def machine_name(device: str) -> str:
    """Where training ran, for the model card ("NVIDIA H200", "the CPU (2 cores)")."""
    if str(device).startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.get_device_name(torch.device(device))
    return f"the CPU ({os.cpu_count()} cores)"


def train_and_export(
    args, stages: set[str], model, data: TrainData, embed_weight, scale, stats: dict, stats_path: Path
) -> None:
    """The train, eval and export stages (each only if asked for); stats.json is written
    before the export so the model card reads this run's figures."""

    head = None
    if "train" in stages:
        head, tr = stage_train(
            args,
            data.feats,
            data.train_seqs,
            data.hold_seqs,
            data.cand,
            model.config,
            embed_weight,
            scale,
            init_from=model if args.init_from_target else None,
            token_cluster=data.token_cluster,
            init_head=args.init_head,
        )
        earlier = stats.get("train")
        if earlier and earlier.get("tag") != tr.get("tag"):  # this run fine-tunes on an earlier run's text
            stats.setdefault("train_history", []).append(earlier)
        stats["train"] = {k: v for k, v in tr.items() if k != "history"}
        stats["train"]["last"] = tr["history"][-1] if tr["history"] else None
        stats["train"]["max_steps"] = tr["planned_steps"]
        stats["train"].update(
            {
                "batch": args.batch,
                "lr": args.lr,
                "steps_ahead": args.steps_ahead,
                "layers": args.layers,
                "attend": args.attend,
                "seed": args.seed,
                "init_head": str(args.init_head) if args.init_head else None,
                "machine": machine_name(args.device),
            }
        )
        stats["args"] = {k: v for k, v in vars(args).items() if k not in ("stages", "work", "out", "target_dir")}
    if head is not None and "eval" in stages and head.cfg.num_clusters:
        print("eval: a clustered head is measured by --eval-only (tools/training/mtp_eval.py scores its clusters)")
    elif head is not None and "eval" in stages:
        steps = max(6, args.steps_ahead)
        ev = greedy_acceptance(
            head, data.feats, data.hold_seqs, data.cand, embed_weight, scale, steps=steps, greedy_only=False
        )
        stats["eval_heldout_greedy"] = ev
        print("held-out greedy acceptance by position:", " ".join(f"{x:.3f}" for x in ev["conditional_by_position"]))
        ev0 = greedy_acceptance(
            head, data.feats, data.hold_seqs, data.cand, embed_weight, scale, steps=steps, greedy_only=True
        )
        stats["eval_heldout_greedy_text_only"] = ev0
        print("  on the greedy continuations only:", " ".join(f"{x:.3f}" for x in ev0["conditional_by_position"]))
    stats_path.write_text(json.dumps(stats, indent=1))
    if head is not None and "export" in stages:
        out = save_head(head.cpu(), args.out, int8=bool(args.int8))
        write_model_card(out, stats, args)
        print(f"exported to {out} ({sum(f.stat().st_size for f in weight_files(out)) / 1e6:.1f} MB)")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
