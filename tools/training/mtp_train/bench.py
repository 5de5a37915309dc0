"""Stage ``bench`` (opt-in): the exported head in the project's decoding loop.

Autoregressive vs speculative (MTP) generation, bf16, temperature 0, on prompts that are
not in the training list: tokens per second, acceptance by position, draft cost and
whether the outputs equal the autoregressive ones.

This module does not train or evaluate on cached features (``train``, ``evaluate``).
"""

from __future__ import annotations

import json
from pathlib import Path

from playground.decoding import engine
from playground.drafters.mtp import MTPDrafter
from playground.settings import RunSettings
from tools.training.mtp_train.paths import PROMPTS

BENCH_PROMPTS = [
    "The three most important things to know about owning a bicycle are",
    "In the middle of the ocean there is a small island where",
    'def parse_date(text):\n    """Parse a date in the format YYYY-MM-DD."""\n',
    "Question: What is the largest desert in the world?\nAnswer:",
    "The history of the bicycle",
    "Dear team,\n\nI wanted to thank you all for",
]


def stage_bench(args, model, tok, out_dir: Path, gammas=(3, 5), new_tokens: int = 112) -> dict:
    """Autoregressive vs speculative (MTP) with the project's loop, bf16, temperature 0."""
    prompts = json.loads(PROMPTS.read_text())
    assert not set(BENCH_PROMPTS) & set(prompts), "benchmark prompts must not be training prompts"
    drafter = MTPDrafter.from_pretrained(model, out_dir)
    eos = sorted(drafter.eos)
    res: dict = {"prompts": len(BENCH_PROMPTS), "new_tokens": new_tokens, "dtype": str(model.dtype)}
    ar_tps, ar_ms = [], []
    spec = {g: {"tps": [], "acc": [], "len": [], "draft_ms": [], "equal": 0} for g in gammas}
    for text in BENCH_PROMPTS:
        ids = tok(text).input_ids
        cfg = RunSettings(mode="autoregressive", max_new_tokens=new_tokens, trace=False)
        ar = engine.run(model, tok, ids, cfg, eos_token_ids=eos)
        ar_tps.append(ar.stats.tokens_per_s)
        ar_ms.append(ar.stats.single_token_ms)
        for g in gammas:
            cfg = RunSettings(mode="speculative", gamma=g, max_new_tokens=new_tokens, trace=False)
            r = engine.run(model, tok, ids, cfg, drafter=drafter, eos_token_ids=eos)
            d = spec[g]
            d["tps"].append(r.stats.tokens_per_s)
            d["acc"].append(r.stats.acceptance_by_position)
            d["len"].append(r.stats.mean_accepted_length)
            d["draft_ms"].append(r.stats.draft_ms_per_token)
            d["equal"] += int(tuple(r.token_ids) == tuple(ar.token_ids))
        print(
            f"bench: {text[:30]!r}: AR {ar_tps[-1]:.1f} tok/s; "
            + "; ".join(f"γ={g} {spec[g]['tps'][-1]:.1f} tok/s acc1 {spec[g]['acc'][-1][0]:.2f}" for g in gammas)
        )
    mean = lambda xs: sum(x for x in xs if x is not None) / max(1, sum(1 for x in xs if x is not None))
    res["autoregressive_tokens_per_s"] = mean(ar_tps)
    res["target_single_token_ms"] = mean(ar_ms)
    for g in gammas:
        d = spec[g]
        by_pos = [mean([a[i] for a in d["acc"]]) for i in range(g)]
        res[f"gamma{g}"] = {
            "tokens_per_s": mean(d["tps"]),
            "speedup": mean(d["tps"]) / res["autoregressive_tokens_per_s"],
            "acceptance_by_position": by_pos,
            "mean_accepted_length": mean(d["len"]),
            "draft_ms_per_token": mean(d["draft_ms"]),
            "draft_cost_ratio_c": mean(d["draft_ms"]) / res["target_single_token_ms"],
            "outputs_equal_to_autoregressive": f"{d['equal']}/{len(BENCH_PROMPTS)}",
        }
    print("bench:", json.dumps(res, indent=1))
    return res
