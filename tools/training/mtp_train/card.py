"""MODEL_CARD.md of the exported MTP head, written from the run's statistics (``stats.json``).

Sections: architecture, training data by source, training, held-out acceptance (by
category from ``--eval-only``; on the held-out training prompts from stage 5) and the
command that reproduces the run.

This module formats; it measures nothing and writes no weights.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from safetensors import safe_open

from tools.training.mtp_eval import format_profile
from tools.training.mtp_train.dist_loss import DEFAULT_LOSS, parse_loss
from tools.training.mtp_train.gen import DEFAULT_GEN_TEMPS, parse_gen_temps

UNRECORDED_MACHINE = "the 2-core CPU"  # runs from before stats recorded the machine ran there


def _acceptance_table(ev: dict) -> list[str]:
    """Markdown rows: conditional and cumulative acceptance by draft position."""
    cond, cum = ev.get("conditional_by_position", []), ev.get("cumulative_by_position", [])
    return [
        "| position | " + " | ".join(str(i + 1) for i in range(len(cond))) + " |",
        "|---|" + "---|" * len(cond),
        "| conditional | " + " | ".join(f"{x:.3f}" for x in cond) + " |",
        "| cumulative | " + " | ".join(f"{x:.3f}" for x in cum) + " |",
    ]


def _heldout_tables(ev: dict) -> list[str]:
    """Markdown: position-1 acceptance by category (T=0 conditional, T=1 expected) per weights,
    and how much the target's held-out text repeats (the last two columns pool every
    category's repetitive and non-repetitive continuations)."""
    lines = []
    for w, res in ev.items():
        cats = list(res["t0"])
        lines += [
            f"`{w}`:",
            "",
            "| | " + " | ".join(cats) + " |",
            "|---|" + "---:|" * len(cats),
            "| T=0, position 1 | " + " | ".join(f"{res['t0'][c]['conditional'][0]:.2f}" for c in cats) + " |",
            "| T=0, positions 1-4 (cumulative) | "
            + " | ".join(" / ".join(f"{x:.2f}" for x in res["t0"][c]["cumulative"][:4]) for c in cats)
            + " |",
            "| T=1, position 1 (expected) | "
            + " | ".join(f"{res['t1'][c]['alpha'][0]:.2f}" if c in res["t1"] else "–" for c in cats)
            + " |",
        ]
        for key, label in (("t0", "T=0"), ("t1", "T=1")):  # evaluations before the repetition columns lack them
            if any("repeated_4gram_share" in r for r in res[key].values()):
                lines.append(
                    f"| {label} text: repeated 4-grams (repetitive / continuations) | "
                    + " | ".join(
                        f"{r['repeated_4gram_share']:.2f} ({r['repetitive']}/{r['seqs']})"
                        if (r := res[key].get(c)) and "seqs" in r
                        else "–"
                        for c in cats
                    )
                    + " |"
                )
        lines.append("")
    return lines


def _target_table(ev: dict) -> list[str]:
    """The target alone on the held-out text (``mtp_eval.target_profile``): what no drafter
    with this support can beat.  It depends on the head's candidates, so heads with different
    ones get a table each; heads that share them, one."""

    profiles = {w: res["target"] for w, res in ev.items() if "target" in res}
    if not profiles:
        return []
    first = next(iter(profiles.values()))
    if all(prof == first for prof in profiles.values()):
        lines = [format_profile(first)]
    else:
        lines = [x for w, prof in profiles.items() for x in (f"`{w}`:", "", format_profile(prof))]
    return [
        *lines,
        "The last two columns are ceilings for any drafter that scores these candidates and the context: "
        "at T=0 it cannot draft a token outside them; at T=1 its acceptance is at most the target's mass on them.",
        "",
    ]


def write_model_card(out: Path, stats: dict, args) -> None:
    """MODEL_CARD.md from the run's statistics (stats.json in the work directory)."""
    args = argparse.Namespace(**{**vars(args), **stats.get("args", {})})  # the training run's settings
    ev = stats.get("eval_heldout_greedy", {})
    lines = [*_architecture(out, stats, args), *_training_data(stats, args), *_training(stats, args)]
    held = stats.get("heldout_eval")
    if held:
        lines += [
            "## Held-out acceptance by category (`playground/data/heldout_prompts.json`)",
            "Acceptance at T=0 is measured on the target's greedy continuations (96 tokens) of prompts that are "
            "in no training source; T=1 is the expected acceptance sum_x min(p, q) along sampled continuations. "
            "`python -m tools train-drafter --eval-only` prints the full tables (positions 1-6).",
            "",
            *_heldout_tables(held),
            *_target_table(held),
        ]
    if ev:
        lines += [
            "## Acceptance on the held-out split of the training prompts (greedy text)",
            "",
            *_acceptance_table(ev),
            "",
        ]
    lines += _reproduce(stats, args)
    (out / "MODEL_CARD.md").write_text("\n".join(lines) + "\n")


def _stored_int8(out: Path) -> bool:
    """Whether the weight files hold int8 rows (``mtp_weights.save_head(int8=True)``)."""

    for f in out.glob("model*.safetensors"):
        with safe_open(str(f), "pt") as st:
            if any(k.endswith(".q8") for k in st.keys()):
                return True
    return False


def _architecture(out: Path, stats: dict, args) -> list[str]:
    """The card's title and architecture section (args: the training run's settings)."""
    tr = stats.get("train", {})
    clusters = getattr(args, "clusters", 0)
    mb = sum(f.stat().st_size for f in out.glob("model*.safetensors")) / 1e6
    return [
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
        + (
            "attention reads the target's K/V of that layer (committed context, read-only) plus the "
            "drafter's own keys of this call's draft steps"
            if args.attend == "target"
            else "attention over the drafter's own keys of this call's draft steps only"
        ),
        "- Linear(H->H) + RMSNorm -> the predicted target final hidden state, fed back as the next step's state",
        f"- output: state @ E^T over {stats.get('vocab', {}).get('candidates')} static candidate tokens (ranked by the "
        "target's next-token mass over the training data), the committed context's other tokens"
        + (
            f", and the tokens of the {getattr(args, 'clusters_per_step', 8)} best of {clusters} clusters that "
            "together cover every other token of the vocabulary (`tools/training/mtp_clusters.py`: balanced bisection "
            "of the tied embeddings; `cluster_proj` scores them)"
            if clusters
            else ""
        ),
        f"- stored: {mb:.1f} MB"
        + (
            " (matrices as int8 rows with a bf16 scale per row, the rest bf16; acceptance "
            "below is measured with these weights)"
            if _stored_int8(out)
            else " (bf16)"
        ),
        "",
    ]


def _training_data(stats: dict, args) -> list[str]:
    """The training-data table by source and where the generated text came from."""
    data = stats.get("data", {})
    corpus = stats.get("corpus", {})
    only_generated = getattr(args, "gen_share", 0) >= 1  # every batch drawn from generated text
    lines = [
        "## Training data (teacher forcing: one target prefill per sequence)",
        "| source | licence | sequences | tokens | trained on |",
        "|---|---|---:|---:|---|",
    ]
    for name, d in data.items():
        lic = corpus.get(name, {}).get(
            "licence", "the target's own output (Gemma terms)" if name == "generated" else ""
        )
        used = "yes" if name == "generated" or not only_generated else "no: its openings and passages are prompts"
        lines.append(f"| {name} | {lic} | {d['sequences']} | {d['tokens']} | {used} |")
    lines += [
        f"| all | | {sum(d['sequences'] for d in data.values())} | {sum(d['tokens'] for d in data.values())} | |",
        "",
        "`generated`: the target (bf16) continued the prompts of `playground/data/train_prompts.json` "
        + (
            f"and the first 40 tokens of {args.corpus_prompts} seeded chunks of every corpus source "
            "(`--corpus-prompts`: its own continuations of code, documentation and Chinese text) "
            if getattr(args, "corpus_prompts", 0)
            else ""
        )
        + (
            f"and {args.copy_prompts} copy tasks per corpus source (`--copy-prompts`: a passage of that "
            "corpus to repeat, in one of six wordings unlike the held-out copy prompts) "
            if getattr(args, "copy_prompts", 0)
            else ""
        )
        + f"(greedy and {args.samples} sampled {_sampling_words(args)}, up to {args.new_tokens} new tokens). "
        "The other sources are text shipped by Debian packages and the Python / Node installs "
        "(`tools/training/mtp_corpus.py` says which and how it is cut).",
        "",
    ]
    return lines


def _training(stats: dict, args) -> list[str]:
    """The training section: features, loss, wall time per stage, optimiser, coverage."""
    tr = stats.get("train", {})
    clusters = getattr(args, "clusters", 0)
    machine = tr.get("machine") or UNRECORDED_MACHINE
    return [
        "## Training",
        *_history(stats),
        f"- features: target top-{args.topk} next-token distribution, final hidden state and layer-"
        f"{stats.get('attn_layer', 17)} K/V at every position "
        f"({stats.get('features', {}).get('positions')} positions, {stats.get('features', {}).get('seconds', 0) / 60:.0f} min)",
        f"- loss: sum over draft steps j=1..{args.steps_ahead} of 0.8^(j-1) x [{_loss_words(args)} + "
        f"{getattr(args, 'reg_weight', 1.0):g} x MSE(state, target final hidden) / mean(h^2)"
        + (" + CE(cluster scores, target mass per cluster)" if clusters else "")
        + "], the drafter fed its own states",
        f"- wall time of each stage on {machine}: "
        + ", ".join(
            f"{name} {sec / 60:.1f} min"
            for name, sec in (
                ("corpus", stats.get("corpus_seconds")),
                ("generation", stats.get("gen", {}).get("seconds_this_run")),
                ("features", stats.get("features", {}).get("seconds")),
                ("clusters", stats.get("clusters", {}).get("seconds")),
                ("training", tr.get("train_seconds")),
            )
            if sec and sec >= 30
        ),
        f"- optimiser: AdamW lr {args.lr}, batch {args.batch} sequences, {tr.get('steps')} steps, "
        f"{tr.get('train_seconds', 0) / 60:.1f} min wall time on {machine}, seed {args.seed}"
        + (
            (
                "; fine-tuned from the head of the run above"
                if stats.get("train_history")
                else f"; fine-tuned from the weights in `{Path(args.init_head).name}`"
            )
            + " (its candidate set kept"
            + ("; the cluster scores start fresh)" if clusters else ")")
            if getattr(args, "init_head", None)
            else ""
        )
        + (
            (
                "; every batch is the target's generated text"
                if args.gen_share >= 1
                else f"; {args.gen_share:g} of every batch is the target's generated text"
            )
            if getattr(args, "gen_share", 0)
            else ""
        ),
        f"- candidate coverage of the target argmax: train {stats.get('vocab', {}).get('train_top1_coverage', 0):.3f}"
        + (" (static set only; the clusters reach the rest)" if clusters else ""),
        "",
    ]


LOSS_WORDS = {
    "kl": "KL(target top-{k} renormalised over the candidates || drafter)",
    "ce": "CE(target argmax)",
    "kl-topk": "KL(target top-{k} + a rest bucket || drafter)",
    "tv": "TV(target top-{k}, drafter) (1 - acceptance, bounded)",
}


def _loss_words(args) -> str:
    """The ``--loss`` mix in words, with its temperatures ("KL(...) + 0.5 x CE(...) at T = 1 and 0.7")."""
    terms = parse_loss(getattr(args, "loss", DEFAULT_LOSS))
    words = " + ".join(
        ("" if w == 1 else f"{w:g} x ") + LOSS_WORDS[name].format(k=args.topk) for name, w in terms.items()
    )
    temps = [t.strip() for t in str(getattr(args, "loss_temps", "1")).split(",") if t.strip()]
    return words + ("" if temps == ["1"] else " at T = " + " and ".join(temps))


def _history(stats: dict) -> list[str]:
    """Earlier training runs on the same text whose head this one fine-tunes, oldest first."""
    return [
        f"- before this run: {h.get('steps')} steps (lr {h.get('lr')}, batch {h.get('batch')}, "
        f"{h.get('train_seconds', 0) / 60:.1f} min on {h.get('machine') or UNRECORDED_MACHINE}"
        + (f", from `{h['init_head']}`" if h.get("init_head") else "")
        + ")"
        for h in stats.get("train_history", [])
    ]


def _sampling_words(args) -> str:
    """How the sampled continuations were drawn, in words ("at T=0.8, top-k 64 each")."""
    settings = parse_gen_temps(getattr(args, "gen_temps", DEFAULT_GEN_TEMPS))
    words = [f"T={st.temperature:g}" + (f", top-k {st.top_k}" if st.top_k else " (full vocabulary)") for st in settings]
    return "at " + " and at ".join(words) + (" each" if len(words) > 1 else "")


def _new_flags(args, gen_only: bool = False) -> str:
    """The sampling, loss and device settings, where they differ from the defaults."""
    out = ""
    if getattr(args, "gen_temps", DEFAULT_GEN_TEMPS) != DEFAULT_GEN_TEMPS:
        out += f" --gen-temps {args.gen_temps}"
    if gen_only:
        return out
    if getattr(args, "loss", DEFAULT_LOSS) != DEFAULT_LOSS or getattr(args, "loss_temps", "1") != "1":
        out += f" --loss {args.loss} --loss-temps {args.loss_temps}"
    if getattr(args, "device", "cpu") != "cpu":
        out += f" --device {args.device}"
    return out


def _reproduce(stats: dict, args) -> list[str]:
    """The commands that reproduce the run."""
    tr = stats.get("train", {})
    clusters = getattr(args, "clusters", 0)
    if getattr(args, "device", "cpu") != "cpu":
        return _reproduce_device(stats, args)
    if getattr(args, "init_head", None):  # two runs: the text, then fine-tuning the earlier head
        return [
            "## Reproduce",
            "```",
            "apt-get install python3-doc debian-reference-en debian-reference-zh-cn fortunes-zh",
            f"python -m tools train-drafter --stages corpus,gen --samples {args.samples} "
            f"--corpus-prompts {getattr(args, 'corpus_prompts', 0)} --copy-prompts {getattr(args, 'copy_prompts', 0)} "
            "--gen-procs 2 --gen-minutes 0 --threads 2" + _new_flags(args, gen_only=True),
            f"python -m tools train-drafter --stages features,vocab,train,eval,export --samples {args.samples} "
            f"--corpus-prompts {getattr(args, 'corpus_prompts', 0)} --copy-prompts {getattr(args, 'copy_prompts', 0)} "
            f"--init-head {args.init_head} "
            f"--gen-share {args.gen_share:g} --lr {args.lr:g} --batch {args.batch} --minutes {args.minutes:g} "
            f"--clusters {clusters} --clusters-per-step {getattr(args, 'clusters_per_step', 8)} --threads {args.threads} "
            f"--seed {args.seed}" + _new_flags(args),
            "python -m tools train-drafter --eval-only",
            "```",
            f"(`{args.init_head}` at the commit before this head replaced it: the earlier head, trained "
            "from scratch on generated text only.)",
        ]
    return [
        "## Reproduce",
        "```",
        "apt-get install python3-doc debian-reference-en debian-reference-zh-cn fortunes-zh",
        f"python -m tools train-drafter --preset {args.preset} --samples {args.samples} "
        f"--gen-procs {getattr(args, 'gen_procs', 1)} --gen-minutes {args.gen_minutes:g} --threads {args.threads} "
        f"--batch {args.batch} --max-steps {tr.get('max_steps', args.max_steps)} --minutes {args.minutes:g} "
        f"--clusters {clusters} --seed {args.seed}" + _new_flags(args),
        "python -m tools train-drafter --eval-only",
        "```",
    ]


def _reproduce_device(stats: dict, args) -> list[str]:
    """A GPU run: the recipe (``tools.training.recipe``), whose ``tune`` phase is the second
    fine-tune when the run has one."""
    phases = "gen,train,tune" if stats.get("train_history") else "gen,train"
    return [
        "## Reproduce",
        "On any machine with CUDA and the repository's requirements installed:",
        "```",
        f"python -m tools.training.recipe --profile gpu --phase {phases},eval",
        "```",
        f"(Its settings: `tools/training/recipe.py`; this run: {_settings(stats, args)}.)",
    ]


def _settings(stats: dict, args) -> str:
    steps = stats.get("train", {}).get("max_steps") or args.max_steps
    return (
        f"--samples {args.samples} --new-tokens {args.new_tokens} --topk {args.topk} --batch {args.batch} "
        f"--lr {args.lr:g} --max-steps {steps} --seed {args.seed}" + _new_flags(args)
    )
