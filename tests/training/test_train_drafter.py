"""The drafter-training pipeline's data generation (tools.training.mtp_train.gen.stage_gen).

Tiny random target, a handful of prompts: fast, and the same code paths as the real run."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest
import torch

from tools.paths import DATA
from tools.training import train_drafter
from tools.training.mtp_train import features, gen, train, vocab


class _Tok:
    """CharTokenizer with the attribute-style ``tok(text).input_ids`` the pipeline uses."""

    def __init__(self, inner):
        self.inner = inner
        self.pad_token_id = inner.pad_token_id
        self.eos_token_id = inner.eos_token_id

    def __call__(self, text):
        return SimpleNamespace(input_ids=self.inner(text)["input_ids"])


# the tiny pipeline runs of these tests: a few short sequences, a tiny head, a few steps
TINY = dict(new_tokens=12, topk=5, candidates=20, batch=2, minutes=5.0, steps_ahead=2, intermediate=64)

PROMPTS = ["Once upon", "The rain", "A robot", "Hello there", "In 1999", "Why is the sky"]


def _args(work, worker="0/1", **kw):
    a = train_drafter.build_parser().parse_args(
        ["--work", str(work), "--samples", "2", "--new-tokens", "3", "--gen-batch", "2", "--gen-minutes", "0"]
    )
    a.gen_worker = worker
    for k, v in kw.items():
        setattr(a, k, v)
    return a


def _pairs(work):
    out = []
    for shard in sorted((work / "gen").glob("shard*.json")):
        out += [(r["prompt"], r["variant"]) for r in json.loads(shard.read_text())]
    return out


@pytest.mark.parametrize("n_workers", [1, 2, 3])
def test_gen_workers_split_the_work_exactly_once(tmp_path, tiny_pair, n_workers):
    target, _, tok = tiny_pair
    tok = _Tok(tok)
    for k in range(n_workers):
        gen.stage_gen(_args(tmp_path, f"{k}/{n_workers}"), target, tok, PROMPTS)
    pairs = _pairs(tmp_path)
    expected = sorted((i, v) for i in range(len(PROMPTS)) for v in range(3))  # greedy + 2 samples each
    assert sorted(pairs) == expected  # every (prompt, variant) once: no gap, no duplicate
    # a rerun (any worker layout) finds nothing left to do
    before = sorted(p.name for p in (tmp_path / "gen").glob("shard*.json"))
    gen.stage_gen(_args(tmp_path), target, tok, PROMPTS)
    assert sorted(p.name for p in (tmp_path / "gen").glob("shard*.json")) == before


def test_gen_is_deterministic_and_greedy_variant_is_greedy(tmp_path, tiny_pair):
    target, _, tok = tiny_pair
    tok = _Tok(tok)
    a, b = tmp_path / "a", tmp_path / "b"
    gen.stage_gen(_args(a), target, tok, PROMPTS)
    gen.stage_gen(_args(b, "1/2"), target, tok, PROMPTS)
    gen.stage_gen(_args(b, "0/2"), target, tok, PROMPTS)
    rows = lambda w: {(r["prompt"], r["variant"]): r["ids"] for r in gen.load_rows(w)}
    assert rows(a) == rows(b)  # same text whichever process wrote it
    # variant 0 is the target's own greedy continuation
    for (i, v), ids in rows(a).items():
        if v != 0:
            continue
        n = len(tok(PROMPTS[i]).input_ids)
        want = target.generate(
            torch.tensor([ids[:n]]), do_sample=False, max_new_tokens=3, pad_token_id=tok.pad_token_id
        )[0, n:].tolist()
        got = ids[n:]
        assert got == want[: len(got)] and len(got) >= 1


def test_pipeline_with_clusters_trains_exports_int8_and_evaluates(tmp_path, tiny_pair):
    """gen -> features -> vocab -> clusters -> a few training steps -> int8 export -> held-out
    style evaluation, end to end on the tiny pair: the same code paths as the real run."""
    from playground.drafters.mtp_head import text_model
    from playground.drafters.mtp_weights import load_head, save_head
    from tools.training import mtp_eval

    target, _, tok = tiny_pair
    tok = _Tok(tok)
    args = _args(tmp_path, **TINY, clusters=4, clusters_per_step=1, max_steps=3)
    gen.stage_gen(args, target, tok, PROMPTS)
    rows = gen.load_rows(tmp_path)
    feats = features.stage_features(args, target, rows)
    assert feats["top_p"].shape[1] == 5 and bool((feats["top_p"][:, 0] >= feats["top_p"][:, 1]).all())
    seqs = list(range(len(rows)))
    E = text_model(target).embed_tokens.weight.detach()
    voc = vocab.stage_vocab(args, feats, seqs[2:], seqs[:2], E.shape[0], tok.eos_token_id)
    tc = vocab.stage_clusters(args, voc["candidates"], E)
    assert int((tc >= 0).sum()) == E.shape[0] - 20
    head, tr = train.stage_train(
        args, feats, seqs[2:], seqs[:2], voc["candidates"], target.config, E, 1.0, token_cluster=tc
    )
    assert tr["steps"] == 3 and all(torch.isfinite(torch.tensor([h[1] for h in tr["history"]] or [0.0])))
    assert head.cluster_proj.weight.abs().sum() > 0 and torch.equal(head.token_cluster, tc)
    save_head(head, tmp_path / "out", int8=True)
    loaded = load_head(tmp_path / "out")
    feats["meta"] = [{**m, "category": "tiny"} for m in feats["meta"]]
    res = mtp_eval.acceptance(loaded, feats, E, 1.0, steps=3)
    for key in ("t0", "t1"):
        pooled = {mtp_eval.REPETITIVE, mtp_eval.NON_REPETITIVE}
        assert set(res[key]) - pooled == {"tiny", "all"} and set(res[key]) & pooled  # + the pooled rows
    t0 = res["t0"]["all"]
    assert t0["chains"] > 0 and all(0.0 <= x <= 1.0 for x in t0["conditional"] if x == x)
    assert all(0.0 <= a <= 1.0 for a in res["t1"]["all"]["alpha"] if a == a)
    assert "| tiny |" in mtp_eval.format_report(res, "x")


@pytest.mark.parametrize("share,batch", [(0.5, 6), (0.25, 4), (0.9, 3)])
def test_gen_share_fixes_the_generated_part_of_every_batch(share, batch):
    import random

    from tools.training.mtp_train.batches import pick_batch

    generated, other = list(range(0, 50)), list(range(100, 400))
    for step in range(20):
        which = pick_batch(random.Random(step), generated, other, batch, share)
        assert len(which) == len(set(which)) == batch
        assert sum(i < 100 for i in which) == max(1, round(share * batch))
    # share 0: uniform over both pools, so over many draws generated text appears in its own proportion
    draws = [i for s in range(400) for i in pick_batch(random.Random(s), generated, other, 4, 0.0)]
    assert abs(sum(i < 100 for i in draws) / len(draws) - 50 / 350) < 0.03


def test_init_head_fine_tunes_the_given_weights_and_keeps_their_candidates(tmp_path, tiny_pair):
    """--init-head: training starts from saved weights (a head with clusters adds fresh cluster
    scores), the checkpoint name records it, and --gen-share alone names a valid checkpoint."""
    from playground.drafters.mtp_head import text_model
    from playground.drafters.mtp_weights import load_head, save_head

    target, _, tok = tiny_pair
    tok = _Tok(tok)
    base = _args(tmp_path, **TINY, clusters=0, max_steps=2)
    gen.stage_gen(base, target, tok, PROMPTS)
    feats = features.stage_features(base, target, gen.load_rows(tmp_path))
    seqs = list(range(feats["n_seqs"]))
    E = text_model(target).embed_tokens.weight.detach()
    voc = vocab.stage_vocab(base, feats, seqs[2:], seqs[:2], E.shape[0], tok.eos_token_id)
    first, _ = train.stage_train(base, feats, seqs[2:], seqs[:2], voc["candidates"], target.config, E, 1.0)
    save_head(first, tmp_path / "first")
    start = load_head(tmp_path / "first")

    more = _args(tmp_path, **TINY, clusters=4, clusters_per_step=1, max_steps=1, lr=1e-9, gen_share=0.5)
    tc = vocab.stage_clusters(more, start.candidates, E)
    head, tr = train.stage_train(
        more,
        feats,
        seqs[2:],
        seqs[:2],
        start.candidates.clone(),
        target.config,
        E,
        1.0,
        token_cluster=tc,
        init_head=str(tmp_path / "first"),
    )
    assert f"_h{'first'}_g0.5" in tr["tag"]
    assert torch.equal(head.candidates, start.candidates)
    # lr 1e-9: one step leaves the loaded weights where they were (a fresh init would not match)
    for name, p in start.state_dict().items():
        if p.is_floating_point():
            assert torch.allclose(head.state_dict()[name].float(), p.float(), atol=1e-5), name
    assert head.cluster_proj.weight.abs().sum() > 0

    alone = _args(tmp_path, **TINY, clusters=0, max_steps=1, gen_share=0.5)
    _, tr = train.stage_train(alone, feats, seqs[2:], seqs[:2], voc["candidates"], target.config, E, 1.0)
    assert "_h-_g0.5" in tr["tag"]


def test_corpus_openings_are_seeded_prompts_from_every_corpus_shard(tmp_path, tiny_pair):
    from tools.training import mtp_corpus

    _, _, tok = tiny_pair
    (tmp_path / "corpus_a.json").write_text(
        json.dumps(
            [
                {"prompt": -1, "variant": -1, "source": "a", "ids": tok.encode(f"text number {i} of a"), "n_prompt": 1}
                for i in range(10)
            ]
        )
    )
    (tmp_path / "corpus_b.json").write_text(
        json.dumps(
            [
                {"prompt": -1, "variant": -1, "source": "b", "ids": tok.encode(f"other {i}"), "n_prompt": 1}
                for i in range(3)
            ]
        )
    )
    got = mtp_corpus.openings(tok, tmp_path, 4, seed=0, n_tokens=6)
    assert len(got) == 4 + 3 and got == mtp_corpus.openings(tok, tmp_path, 4, seed=0, n_tokens=6)
    assert all(len(tok.encode(t)) <= 6 + 1 for t in got)
    assert sum(t.startswith("text n") for t in got) == 4 and sum(t.startswith("other ") for t in got) == 3


def test_copy_tasks_hold_a_corpus_passage_in_a_template_unlike_the_heldout_copy_prompts(tmp_path, tiny_pair):
    from tools.training import mtp_corpus

    _, _, tok = tiny_pair
    lines = [f"line {i} has enough words to be worth copying here" for i in range(12)]
    rows = [
        {"prompt": -1, "variant": -1, "source": "a", "ids": [tok.bos_token_id, *tok.encode(t)], "n_prompt": 1}
        for t in lines
    ]
    (tmp_path / "corpus_a.json").write_text(json.dumps(rows))
    got = mtp_corpus.copy_tasks(tok, tmp_path, 5, seed=0)
    assert len(got) == 5 and got == mtp_corpus.copy_tasks(tok, tmp_path, 5, seed=0)
    for prompt in got:  # each holds one whole passage, in one of the templates
        held = [t for t in lines if t in prompt]
        assert len(held) == 1
        assert prompt in {tpl.format(s=held[0]) for tpl in mtp_corpus.COPY_TEMPLATES}
    heldout = json.loads((DATA / "heldout_prompts.json").read_text())
    heads = {p.split("\n")[0] for p in heldout["categories"]["copy"]}
    assert not heads & {tpl.split("\n")[0].split("{")[0] for tpl in mtp_corpus.COPY_TEMPLATES}


@pytest.mark.parametrize(
    "line, kept",
    [
        ("too short to copy", False),  # 4 words
        ("this line has exactly eight words in it", True),
        ("春天来了，公园里的樱花都开了，孩子们在草地上奔跑。", True),  # no spaces: counted in characters
        ("短句。", False),
        (" ".join(["word"] * 61), False),
    ],
)
def test_copy_passages_are_lines_worth_copying(line, kept):
    from tools.training import mtp_corpus

    assert (mtp_corpus.passages("header\n" + line + "\n") == [line]) is kept


@pytest.mark.parametrize("fine_tuned", [False, True])
def test_model_card_says_how_the_head_was_trained(tmp_path, fine_tuned):
    from tools.training.mtp_train.card import write_model_card

    args = _args(tmp_path, clusters=1024, corpus_prompts=150 if fine_tuned else 0, copy_prompts=40 if fine_tuned else 0)
    if fine_tuned:
        args.init_head, args.gen_share, args.lr = "playground/weights/gemma3-270m-mtp", 0.5, 5e-4
    stats = {
        "data": {"generated": {"sequences": 3, "tokens": 300}, "python-docs": {"sequences": 2, "tokens": 1000}},
        "corpus": {"python-docs": {"licence": "PSF License"}},
        "train": {"steps": 10, "train_seconds": 60.0, "max_steps": 10},
        "features": {"positions": 1300, "seconds": 30.0},
        "vocab": {"train_top1_coverage": 0.9},
    }
    (tmp_path / "config.json").write_text(json.dumps({"num_candidates": 8192, "num_clusters": 1024}))
    write_model_card(tmp_path, stats, args)
    card = (tmp_path / "MODEL_CARD.md").read_text()
    assert "| python-docs | PSF License | 2 | 1000 | yes |" in card
    assert ("fine-tuned from the weights in `gemma3-270m-mtp`" in card) == fine_tuned
    assert ("--init-head playground/weights/gemma3-270m-mtp --gen-share 0.5" in card) == fine_tuned
    assert ("first 40 tokens of 150 seeded chunks" in card) == fine_tuned
    assert ("and 40 copy tasks per corpus source" in card) == fine_tuned
    assert ("the cluster scores start fresh" in card) == fine_tuned
    args.gen_share, args.clusters = 1.0, 0  # every batch generated text: the corpus only gave prompts
    write_model_card(tmp_path, stats, args)
    card = (tmp_path / "MODEL_CARD.md").read_text()
    assert "| python-docs | PSF License | 2 | 1000 | no: its openings and passages are prompts |" in card
    assert "| generated | the target's own output (Gemma terms) | 3 | 300 | yes |" in card
    assert "cluster scores" not in card and "every batch is the target's generated text" in card
    assert "stored: 0.0 MB (bf16)" in card  # no weight files here: nothing int8
    from safetensors.torch import save_file

    save_file({"layer.weight.q8": torch.zeros(2, 2, dtype=torch.int8)}, str(tmp_path / "model.safetensors"))
    row = {"top1": 0.8, "entropy": 0.5, "reachable": 0.9, "reachable_mass": 0.7}
    res = {"t0": {"x": {"conditional": [0.5] * 4, "cumulative": [0.5] * 4}}, "t1": {"x": {"alpha": [0.3] * 4}}}
    stats["heldout_eval"] = {"old": res, "new": {**res, "target": {"x": row}}}
    write_model_card(tmp_path, stats, args)
    card = (tmp_path / "MODEL_CARD.md").read_text()
    assert "(matrices as int8 rows" in card
    assert "## The target on the held-out text" in card and "| x | 0.80 | 0.50 | 0.90 | 0.70 |" in card
    assert card.count("## The target on the held-out text") == 1  # one profile (only "new" has it): one table
    other = {**row, "reachable": 1.0}  # a head with other candidates gets its own, labelled table
    stats["heldout_eval"] = {"old": {**res, "target": {"x": other}}, "new": {**res, "target": {"x": row}}}
    write_model_card(tmp_path, stats, args)
    card = (tmp_path / "MODEL_CARD.md").read_text()
    assert card.count("## The target on the held-out text") == 2
    assert "| x | 0.80 | 0.50 | 1.00 | 0.70 |" in card and "| x | 0.80 | 0.50 | 0.90 | 0.70 |" in card
    assert ("--corpus-prompts 150 --copy-prompts 40" in card) == fine_tuned


def test_full_distribution_loss_caches_the_targets_topk_at_each_temperature_and_trains(tmp_path, tiny_pair):
    """--loss kl-topk,tv,ce --loss-temps 1,0.7: the features hold the target's probabilities of
    its top-k tokens under its full softmax at 0.7 (recomputed here from its logits), a cache
    written without them gains them, training runs on them and the checkpoint name says so."""
    from playground.drafters.mtp_head import text_model

    target, _, tok = tiny_pair
    tok = _Tok(tok)
    plain = _args(tmp_path, **TINY, clusters=0, max_steps=2)
    gen.stage_gen(plain, target, tok, PROMPTS)
    rows = gen.load_rows(tmp_path)
    assert "top_p@0.7" not in features.stage_features(plain, target, rows)
    args = _args(tmp_path, **TINY, clusters=0, max_steps=2, loss="kl-topk,tv:0.5,ce", loss_temps="1,0.7")
    feats = features.stage_features(args, target, rows)  # the cached shards gain T = 0.7
    ids = torch.tensor([rows[0]["ids"]])
    with torch.no_grad():
        logits = target(input_ids=ids).logits[0].float()
    n = ids.shape[1]
    got = feats["top_p@0.7"][:n].float()
    want = torch.softmax(logits / 0.7, -1).gather(-1, feats["top_ids"][:n].long())
    torch.testing.assert_close(got, want, atol=2e-3, rtol=1e-2)
    # mutant: the T = 1 probabilities are not the T = 0.7 ones
    assert (feats["top_p"][:n].float() - want).abs().max() > 1e-2
    seqs = list(range(feats["n_seqs"]))
    E = text_model(target).embed_tokens.weight.detach()
    voc = vocab.stage_vocab(args, feats, seqs[2:], seqs[:2], E.shape[0], tok.eos_token_id)
    _, tr = train.stage_train(args, feats, seqs[2:], seqs[:2], voc["candidates"], target.config, E, 1.0)
    assert tr["steps"] == 2 and "_losskl-topk+tv:0.5+ce_T1+0.7" in tr["tag"]
    assert all(math.isfinite(h["loss1"]) for h in tr["history"]) or not tr["history"]
    _, tr0 = train.stage_train(plain, feats, seqs[2:], seqs[:2], voc["candidates"], target.config, E, 1.0)
    assert "_loss" not in tr0["tag"]  # the default loss keeps the old checkpoint names
    with pytest.raises(SystemExit):
        train_drafter.build_parser().parse_args(["--loss", "kl,nope"])


def _gen_prompts(n=5, seed=0):
    from tests.tiny_models import rand_ids

    return [rand_ids(3 + 2 * i, seed=seed + i) for i in range(n)]  # lengths 3..11: left padding differs per row


@pytest.mark.parametrize("sampling", [None, (1.0, None), (0.7, None), (0.8, 64)])
def test_batched_generation_equals_one_row_at_a_time(sampling):
    """sample_batch over 5 left-padded prompts of different lengths (a tiny Gemma 3 with a
    sliding window of 6, crossed here) == each prompt alone: greedy, and sampled with one
    generator per row (seeded by prompt and variant) at T = 1, 0.7 and 0.8 over the top 64."""
    from tests.tiny_models import EOS, tiny_target

    model = tiny_target()
    enc = _gen_prompts()
    kw = {} if sampling is None else {"temperature": sampling[0], "top_k": sampling[1]}

    def run(rows):
        ids, mask = gen.left_pad([enc[i] for i in rows], 0)
        gens = gen.row_generators(7, rows, 1, "x")
        out = gen.sample_batch(model, ids, mask, 12, 0, {EOS}, greedy=sampling is None, generator=gens, **kw)
        return [gen.trim(r, {EOS}, 0) for r in out.tolist()]

    together = run(list(range(5)))
    alone = [run([i])[0] for i in range(5)]
    assert together == alone
    assert len({tuple(r) for r in together}) > 1 and all(len(r) >= 1 for r in together)
    if sampling is None:  # greedy rows are transformers' greedy decoding
        for i, row in enumerate(together):
            want = model.generate(torch.tensor([enc[i]]), do_sample=False, max_new_tokens=12, pad_token_id=0)
            assert row == want[0, len(enc[i]) :].tolist()[: len(row)]


def test_row_generators_make_sampled_rows_independent_of_their_batch_and_seeded():
    """A sampled row depends on (seed, prompt, variant, setting) only: the same in another
    batch, different for another seed or variant; the old shared generator is not."""
    from tests.tiny_models import EOS, tiny_target

    model = tiny_target()
    enc = _gen_prompts()

    def row0(rows, seed=7, variant=1, shared=False):
        ids, mask = gen.left_pad([enc[i] for i in rows], 0)
        g = torch.Generator().manual_seed(seed) if shared else gen.row_generators(seed, rows, variant, "T1")
        out = gen.sample_batch(model, ids, mask, 12, 0, {EOS}, greedy=False, generator=g, temperature=1.0, top_k=None)
        return out[0].tolist()

    assert row0([2, 0, 4]) == row0([2, 1]) == row0([2])
    assert row0([2], seed=8) != row0([2]) and row0([2], variant=2) != row0([2])
    assert row0([2, 0, 4], shared=True) != row0([2], shared=True)  # mutant: one generator for the batch


def test_draw_by_inverse_cdf_follows_the_softmax_at_the_temperature():
    """Per-row inverse-CDF draws: frequencies over 4,000 rows match softmax(logits / T) (top-k
    renormalised), a chi-square test; the mutant that ignores T fails it."""
    from scipy.stats import chisquare

    logits = torch.log(torch.tensor([0.5, 0.25, 0.15, 0.1]))
    n = 4000
    for temperature, top_k in ((1.0, None), (0.7, None), (0.7, 3)):
        gens = [torch.Generator().manual_seed(s) for s in range(n)]
        draws = gen._draw(logits.expand(n, 4).clone(), temperature, top_k, gens)
        counts = torch.bincount(draws, minlength=4).double()
        probs = torch.softmax(logits.double() / temperature, -1)
        if top_k:
            probs[top_k:] = 0
            probs /= probs.sum()
        keep = probs > 0
        assert int(counts[~keep].sum()) == 0
        assert chisquare(counts[keep].numpy(), (probs[keep] * n).numpy()).pvalue > 1e-3
        if temperature != 1.0 and not top_k:
            wrong = torch.softmax(logits.double(), -1) * n
            assert chisquare(counts.numpy(), wrong.numpy()).pvalue < 1e-6


def test_gen_temps_write_greedy_and_each_setting_and_old_shards_keep_their_names(tmp_path, tiny_pair):
    target, _, tok = tiny_pair
    tok = _Tok(tok)
    gen.stage_gen(_args(tmp_path, samples=1, gen_temps="1,0.7"), target, tok, PROMPTS[:2])
    rows = gen.load_rows(tmp_path)
    assert sorted((r["prompt"], r["variant"], r["sampling"]) for r in rows) == sorted(
        (i, v, t) for i in range(2) for v, t in ((0, "greedy"), (1, "T1"), (2, "T0.7"))
    )
    names = sorted(p.name for p in (tmp_path / "gen").glob("shard*.json"))
    assert any("_T0.7_" in n for n in names) and any(n.startswith("shard_v0_p") for n in names)
    # the default setting writes the names the shipped head's cache has (shard_v1_p..., no tag)
    gen.stage_gen(_args(tmp_path / "d", samples=1), target, tok, PROMPTS[:2])
    assert all("_T" not in p.name for p in (tmp_path / "d" / "gen").glob("shard*.json"))
    assert {gen.row_tag(r) for r in gen.load_rows(tmp_path / "d")} == {"greedy", "T0.8k64"}
    with pytest.raises(SystemExit):
        train_drafter.build_parser().parse_args(["--gen-temps", "0"])


def test_model_card_heldout_table_carries_the_repetition_rows_and_dashes_for_missing_cells(tmp_path):
    from tools.training.mtp_train.card import _heldout_tables

    rep = {"repeated_4gram_share": 0.76, "repetitive": 3, "seqs": 5}
    res = {
        "t0": {
            "x": {"conditional": [0.5] * 4, "cumulative": [0.5] * 4, **rep},
            "repetitive outputs": {"conditional": [0.9] * 4, "cumulative": [0.9] * 4, **rep},
        },
        "t1": {"x": {"alpha": [0.3] * 4, "repeated_4gram_share": 0.1, "repetitive": 0, "seqs": 5}},
    }
    text = "\n".join(_heldout_tables({"w": res}))
    assert "| T=1, position 1 (expected) | 0.30 | – |" in text  # no repetitive T=1 text: a dash keeps the columns
    assert "| T=0 text: repeated 4-grams (repetitive / continuations) | 0.76 (3/5) | 0.76 (3/5) |" in text
    assert "| T=1 text: repeated 4-grams (repetitive / continuations) | 0.10 (0/5) | – |" in text
    old = {"t0": {"x": {"conditional": [0.5] * 4, "cumulative": [0.5] * 4}}, "t1": {"x": {"alpha": [0.3] * 4}}}
    assert "repeated 4-grams" not in "\n".join(_heldout_tables({"w": old}))  # evaluations from before


def test_a_batch_may_hold_several_sampled_continuations_of_a_prompt_and_the_text_is_the_same(tmp_path, tiny_pair):
    """--gen-batch larger than the prompt list: a batch holds several variants of a prompt;
    the rows equal those written one continuation per batch (per-row generators)."""
    target, _, tok = tiny_pair
    tok = _Tok(tok)
    wide, narrow = tmp_path / "w", tmp_path / "n"
    gen.stage_gen(_args(wide, samples=3, gen_batch=7, gen_temps="1"), target, tok, PROMPTS[:2])
    gen.stage_gen(_args(narrow, samples=3, gen_batch=1, gen_temps="1"), target, tok, PROMPTS[:2])
    rows = lambda w: {(r["prompt"], r["variant"], r["sampling"]): r["ids"] for r in gen.load_rows(w)}  # noqa: E731
    assert rows(wide) == rows(narrow) and len(rows(wide)) == 2 * 4
    assert len(list((wide / "gen").glob("shard*.json"))) == 2  # greedy: 2 rows; T1: 6 rows in one batch of 6
    assert len({tuple(ids) for (p, v, t), ids in rows(wide).items() if p == 0 and v > 0}) == 3  # 3 different samples


def test_model_card_names_the_sampling_settings_and_the_loss_when_they_are_not_the_old_ones(tmp_path):
    from tools.training.mtp_train.card import write_model_card

    stats = {"data": {"generated": {"sequences": 3, "tokens": 300}}, "train": {"steps": 1, "max_steps": 1}}
    (tmp_path / "config.json").write_text(json.dumps({"num_candidates": 8192, "num_clusters": 0}))
    old = _args(tmp_path, clusters=0)
    write_model_card(tmp_path, stats, old)
    card = (tmp_path / "MODEL_CARD.md").read_text()
    assert "sampled at T=0.8, top-k 64" in card and "--loss" not in card and "--gen-temps" not in card
    new = _args(tmp_path, clusters=0, gen_temps="1,0.7", loss="kl-topk,tv", loss_temps="1,0.7", device="cuda")
    write_model_card(tmp_path, stats, new)
    card = (tmp_path / "MODEL_CARD.md").read_text()
    assert "sampled at T=1 (full vocabulary) and at T=0.7 (full vocabulary) each" in card
    assert "--gen-temps 1,0.7 --loss kl-topk,tv --loss-temps 1,0.7 --device cuda" in card
