"""The MTP head's training run in phases (tools.training.recipe).

The tiny profile runs every phase of the GPU recipe on the CPU: gen (greedy, T = 1 and 0.7),
features with the T = 0.7 top-k, the full-distribution loss, export, held-out eval."""

from __future__ import annotations

import json

import pytest
import torch

from tools.training import recipe, train_drafter


def _byte_tokenizer():
    """A byte-level fast tokenizer (ids 3..258 are the bytes; 0 pad, 1 eos, 2 bos) for tiny_target."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {"<pad>": 0, "<eos>": 1, "<bos>": 2, **{c: i + 3 for i, c in enumerate(alphabet)}}
    tk = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", eos_token="<eos>", bos_token="<bos>")


def test_tiny_profile_runs_every_phase(tmp_path):
    from tests.tiny_models import tiny_target

    target = tmp_path / "target"
    tiny_target().save_pretrained(target)
    _byte_tokenizer().save_pretrained(target)
    work, out = tmp_path / "w", tmp_path / "o"
    argv = ["--profile", "tiny", "--work", str(work), "--out", str(out), "--target-dir", str(target)]
    assert recipe.main(argv) == 0
    rec = json.loads((work / "recipe.json").read_text())
    assert set(rec["phases"]) == {"gen", "train", "tune", "eval"} and rec["gen"]["new_tokens"] > 0
    rows = [r for s in (work / "gen").glob("shard*.json") for r in json.loads(s.read_text())]
    assert {r["sampling"] for r in rows} == {"greedy", "T1", "T0.7"} and len(rows) == 336 * 3
    part = torch.load(next((work / "features").glob("*.pt")), weights_only=False)
    assert "top_p@0.7" in part  # the loss at T = 0.7 reads the target's top-k at T = 0.7
    stats = json.loads((work / "stats.json").read_text())
    # tune fine-tuned train's head (1 step at its own rate); the card and stats keep train's run as history
    assert "_losskl-topk+tv+ce_T1+0.7" in stats["train"]["tag"] and stats["train"]["steps"] == 1
    assert stats["train"]["init_head"] == str(out) and stats["train"]["lr"] == 0.0003
    assert [h["steps"] for h in stats["train_history"]] == [2] and stats["train"]["machine"].startswith("the CPU")
    head = recipe.final_head(out)
    assert (recipe.tuned(out) / "config.json").exists() and head == recipe.tuned(out)
    assert {"model-00001-of-00001.safetensors", "config.json", "MODEL_CARD.md"} <= {p.name for p in head.iterdir()}
    card = (head / "MODEL_CARD.md").read_text()
    assert "before this run: 2 steps" in card
    assert "python -m tools.training.recipe" not in card  # a CPU run's card gives train-drafter commands
    assert "repeated 4-grams" in (work / "heldout" / "eval.md").read_text()
    # a rerun of gen finds its text written and generates nothing
    before = sorted(p.name for p in (work / "gen").glob("shard*.json"))
    recipe.main([*argv, "--phase", "gen"])
    assert sorted(p.name for p in (work / "gen").glob("shard*.json")) == before


def test_gpu_profile_parses_and_is_sized_for_four_million_tokens():
    parser = train_drafter.build_parser()
    for phase in recipe.PHASES:
        args = parser.parse_args(recipe.phase_argv("gpu", phase, "w", "o", None))
        assert args.device == "cuda"
    args = parser.parse_args(recipe.phase_argv("gpu", "train", "w", "o", None))
    assert args.max_steps == 1934 and args.gen_minutes == 0  # fixed steps: the same run on any GPU
    tune = parser.parse_args(recipe.phase_argv("gpu", "tune", "w", "o", None))
    assert tune.max_steps == 1215 and tune.lr == 0.0003 and tune.init_head == "o" and tune.out == "o-tune"
    from tools.training.mtp_train.paths import PROMPTS

    n_prompts = len(json.loads(PROMPTS.read_text()))
    continuations = n_prompts * (1 + args.samples * len(args.gen_temps.split(",")))
    assert continuations * args.new_tokens >= 4_000_000  # at most, if no continuation stops early at an EOS
    assert args.loss_temps == "1,0.7" and "kl-topk" in args.loss and "tv" in args.loss


def test_recipe_phases_are_checked():
    with pytest.raises(SystemExit):
        recipe.main(["--profile", "tiny", "--phase", "gen,nope"])
    assert recipe.phase_argv("tiny", "eval", "w", "o", None)[-2:] == ["--topk", "5"]  # the features' top-k


def test_arguments_after_a_double_dash_reach_every_phase_and_tune_keeps_its_start():
    parser = train_drafter.build_parser()
    extra = ["--gen-batch", "256", "--features-batch", "16", "--init-head", "earlier"]
    train = parser.parse_args(recipe.phase_argv("gpu", "train", "w", "o", None, extra))
    assert train.gen_batch == 256 and train.features_batch == 16 and train.init_head == "earlier"
    tune = parser.parse_args(recipe.phase_argv("gpu", "tune", "w", "o", None, extra))
    assert tune.gen_batch == 256 and tune.init_head == "o"  # tune fine-tunes train's head, whatever came after --
