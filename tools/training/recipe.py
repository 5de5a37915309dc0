"""The MTP head's training run in phases: fixed ``train-drafter`` settings per profile.

``python -m tools.training.recipe --profile gpu [--phase gen,train,tune,eval] [--work DIR --out DIR] [-- EXTRA]``

Profiles (``PROFILES``): ``gpu`` is the run that made the shipped head, on any machine with
CUDA and the repository's requirements installed: the target writes about 4.3M tokens of its
own text (greedy plus 50 samples at T = 1 and 50 at T = 0.7 of each of the 336 training
prompts, 128 new tokens, batches of 1,024 continuations), then the shipped head is fine-tuned
on it for 1,934 steps with the full-distribution loss (forward KL over the target's top-20
plus a rest bucket and the total-variation term, at T = 1 and 0.7, plus CE on the argmax) and
evaluated on the held-out prompts; ``tune`` fine-tunes that head for 1,215 more steps on the
same text at a lower rate (into ``--out``-tune: the head that shipped), and ``eval`` measures
the last head by category.  ``tiny`` runs the same phases on a tiny model on the CPU in
seconds (the test).
Each phase is one ``train-drafter`` call with the profile's settings, then the arguments
after ``--`` (later flags win: e.g. ``-- --gen-batch 256 --features-batch 16`` for a GPU with
less memory than the 141 GB the profile was sized on); a rerun resumes from what was
written.  ``recipe.json`` in ``--work`` records each phase's wall time and the tokens per
second of generation.

This module chooses settings and times phases; the stages themselves are
``tools.training.train_drafter``'s.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from tools.training import train_drafter

# gen: the target's own text; train: its features, the candidate set, training, eval, export
PROFILES: dict[str, dict[str, list[str]]] = {
    "gpu": {
        "common": ["--device", "cuda", "--threads", "8", "--samples", "50", "--gen-temps", "1,0.7"],
        "gen": ["--new-tokens", "128", "--gen-batch", "1024", "--gen-minutes", "0"],
        "train": [
            "--features-batch", "64", "--topk", "20",
            "--loss", "kl-topk:1,tv:1,ce:0.5", "--loss-temps", "1,0.7",
            "--init-head", "playground/weights/gemma3-270m-mtp", "--gen-share", "1", "--clusters", "0",
            "--int8", "1", "--batch", "64", "--lr", "0.0005", "--max-steps", "1934", "--minutes", "600",
            "--ckpt-every", "200",
        ],
        # a second fine-tune of train's head on the same text and features, at a lower rate
        "tune": ["--lr", "0.0003", "--max-steps", "1215"],
    },
    "tiny": {
        "common": ["--device", "cpu", "--threads", "1", "--samples", "1", "--gen-temps", "1,0.7"],
        "gen": ["--new-tokens", "6", "--gen-batch", "128", "--gen-minutes", "0"],
        "train": [
            "--features-batch", "16", "--topk", "5", "--candidates", "50",
            "--loss", "kl-topk,tv,ce", "--loss-temps", "1,0.7", "--clusters", "0", "--int8", "1",
            "--batch", "2", "--steps-ahead", "2", "--intermediate", "32", "--max-steps", "2", "--minutes", "1",
        ],
        "tune": ["--lr", "0.0003", "--max-steps", "1"],
    },
}  # fmt: skip
PHASES = ("gen", "train", "tune", "eval")


def tuned(out: str | Path) -> Path:
    """Where the tune phase writes its head (``--out`` + ``-tune``)."""
    return Path(f"{Path(out)}-tune")


def final_head(out: str | Path) -> Path:
    """The head a run ends with: the tune phase's where it ran, else train's."""
    return tuned(out) if (tuned(out) / "config.json").exists() else Path(out)


def phase_argv(
    profile: str, phase: str, work: str, out: str, target_dir: str | None, extra: list[str] | None = None
) -> list[str]:
    """The ``train-drafter`` arguments of one phase (``extra`` after the profile's: its flags win,
    except that ``tune`` always starts from train's head)."""
    argv = [*_profile_argv(profile, phase, work, out, target_dir), *(extra or [])]
    return [*argv, "--init-head", out] if phase == "tune" else argv


def _profile_argv(profile: str, phase: str, work: str, out: str, target_dir: str | None) -> list[str]:
    """The profile's own ``train-drafter`` arguments of one phase."""
    prof = PROFILES[profile]
    base = ["--work", work, "--out", out, *(["--target-dir", target_dir] if target_dir else []), *prof["common"]]
    if phase == "gen":
        return [*base, "--stages", "gen", *prof["gen"]]
    if phase == "train":
        return [*base, "--stages", "features,vocab,train,eval,export", *prof["gen"], *prof["train"]]
    if phase == "tune":  # later flags win: from train's head into its own folder
        base[base.index("--out") + 1] = str(tuned(out))
        return [*base, "--stages", "features,vocab,train,eval,export", *prof["gen"], *prof["train"],
                "--init-head", out, *prof["tune"]]  # fmt: skip
    if phase == "eval":
        train = prof["train"]
        topk = train[train.index("--topk") + 1]
        return [*base, "--eval-only", "--eval-weights", str(final_head(out)), "--eval-bench", "", "--topk", topk]
    raise ValueError(f"unknown phase {phase!r}")


def run(
    profile: str, phases: list[str], work: Path, out: Path, target_dir: str | None, extra: list[str] | None = None
) -> dict:
    """Run the phases in order; returns {"phases": {phase: seconds}, "gen": {...}} (also
    written to ``work/recipe.json``)."""
    path = work / "recipe.json"
    record = json.loads(path.read_text()) if path.exists() else {"profile": profile, "phases": {}}
    for phase in phases:
        argv = phase_argv(profile, phase, str(work), str(out), target_dir, extra)
        print("train-drafter " + " ".join(argv), flush=True)
        t0 = time.perf_counter()
        code = train_drafter.main(argv)
        record["phases"][phase] = time.perf_counter() - t0
        if code:
            raise SystemExit(f"phase {phase} failed ({code})")
        stats = json.loads((work / "stats.json").read_text()) if (work / "stats.json").exists() else {}
        if phase == "gen" and "gen" in stats:
            g = stats["gen"]
            record["gen"] = {**g, "new_tokens_per_s": g["new_tokens"] / max(g["seconds_this_run"], 1e-9)}
        work.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record, indent=1))
    return record


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m tools.training.recipe",
        description=__doc__.split("\n\n")[0],
        epilog="Arguments after -- are added to every phase's train-drafter call (later flags win), "
        "e.g. -- --gen-batch 256 --features-batch 16 on a GPU with less memory.",
    )
    p.add_argument("--profile", choices=tuple(PROFILES), default="gpu")
    p.add_argument("--phase", default="all", help="all, or phases in order, comma-separated: gen,train,tune,eval")
    p.add_argument("--work", default="mtp_work_gpu", help="generated text, features, checkpoints")
    p.add_argument("--out", default="mtp_out_gpu", help="the trained head")
    p.add_argument("--target-dir", default=None, help="a local HF copy of the target (default: the packaged GGUF)")
    argv = sys.argv[1:] if argv is None else list(argv)
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    args = p.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    phases = list(PHASES) if args.phase == "all" else args.phase.split(",")
    if not set(phases) <= set(PHASES):
        p.error(f"--phase: choose from all, {', '.join(PHASES)}")
    work, out = Path(args.work), Path(args.out)
    record = run(args.profile, phases, work, out, args.target_dir, extra)
    print(json.dumps(record, indent=1))
    print(f"the trained head: {final_head(out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
