"""tools.training.mtp_eval.target_profile: the held-out ceilings that need no drafter, on hand-built features."""

from __future__ import annotations

import math

import pytest
import torch

from tools.training import mtp_eval

V = 6  # vocabulary 0..5; candidates {0, 1}


def _feats():
    # One greedy sequence of category "a": tokens 3 4 0 1, prompt = first 2 tokens, so the
    # distributions at positions 1 and 2 judge drafts (position 3 has no next token).
    #   pos 1: target top-2 = (4: 0.9, 5: 0.1) -> its choice 4 is in the context (position 1)
    #   pos 2: target top-2 = (5: 0.5, 0: 0.5) -> its choice 5 is neither candidate nor context
    # One sampled sequence of category "a": tokens 2 2 2, prompt 1 token, judged at positions 0, 1:
    #   pos 0: (1: 0.6, 3: 0.4) -> candidate mass 0.6;  pos 1: (2: 0.7, 5: 0.3) -> 2 is in context: 0.7
    tokens = torch.tensor([3, 4, 0, 1, 2, 2, 2])
    top_ids = torch.tensor([[0, 1], [4, 5], [5, 0], [0, 1], [1, 3], [2, 5], [0, 1]])
    top_p = torch.tensor([[0.5, 0.5], [0.9, 0.1], [0.5, 0.5], [0.5, 0.5], [0.6, 0.4], [0.7, 0.3], [0.5, 0.5]])
    return {
        "offsets": torch.tensor([0, 4, 7]),
        "tokens": tokens,
        "top_ids": top_ids,
        "top_p": top_p,
        "meta": [
            {"variant": 0, "category": "a", "n_prompt": 2},
            {"variant": 1, "category": "a", "n_prompt": 1},
        ],
    }


def test_profile_by_hand():
    prof = mtp_eval.target_profile(_feats(), torch.tensor([0, 1]), V)
    a = prof["a"]
    h = lambda ps: -sum(x * math.log(x) for x in ps)  # noqa: E731
    assert a["top1"] == pytest.approx((0.9 + 0.5) / 2)
    assert a["entropy"] == pytest.approx((h([0.9, 0.1]) + h([0.5, 0.5])) / 2)
    assert a["reachable"] == pytest.approx(0.5)  # 4 from the context yes, 5 no
    assert a["reachable_mass"] == pytest.approx((0.6 + 0.7) / 2)
    assert prof["all"] == pytest.approx(a)


def test_a_token_seen_only_later_in_the_text_is_not_reachable():
    # the mutant "any token of the sequence counts as context" would make 5 reachable at pos 2
    f = _feats()
    f["tokens"] = torch.tensor([3, 4, 0, 5, 2, 2, 2])
    assert mtp_eval.target_profile(f, torch.tensor([0, 1]), V)["a"]["reachable"] == pytest.approx(0.5)
    f["tokens"] = torch.tensor([5, 4, 0, 1, 2, 2, 2])  # now 5 is in the prompt
    assert mtp_eval.target_profile(f, torch.tensor([0, 1]), V)["a"]["reachable"] == pytest.approx(1.0)


def test_profile_table_names_every_category():
    text = mtp_eval.format_profile(mtp_eval.target_profile(_feats(), torch.tensor([0, 1]), V))
    assert "| a | 0.70 |" in text and "| all |" in text


def test_without_a_candidate_set_every_token_is_draftable():
    # a head with clusters: its choice is always draftable, and at T=1 all the cached top-k mass
    a = mtp_eval.target_profile(_feats(), None, V)["a"]
    assert a["reachable"] == pytest.approx(1.0)
    assert a["reachable_mass"] == pytest.approx(1.0)  # both sampled positions' top-2 sum to 1
    assert a["top1"] == pytest.approx(0.7)  # the target's own figures do not depend on the drafter


def test_acceptance_reports_repetition_by_category_and_pools_repetitive_and_fresh_text():
    """Two greedy continuations on a tiny Gemma 3: prompt 5 6 7 8 -> 5 6 7 8 5 6 7 8 (5 of 8
    tokens complete a 4-gram seen before: repetitive; distinct-2 4/7) and prompt 10..13 ->
    20..27 (nothing repeats).  The pooled rows are not summed into "all" (mutant: chains
    counted twice)."""
    from types import SimpleNamespace

    from playground.drafters.mtp_head import MTPConfig
    from tests.tiny_models import tiny_head, tiny_target
    from tools.training.mtp_train.features import prefill_features

    model = tiny_target()
    head = tiny_head(model)
    rows = [
        {"prompt": 0, "variant": 0, "ids": [5, 6, 7, 8] + [5, 6, 7, 8] * 2, "n_prompt": 4},
        {"prompt": 1, "variant": 0, "ids": [10, 11, 12, 13] + list(range(20, 28)), "n_prompt": 4},
    ]
    bar = SimpleNamespace(update=lambda n: None)
    feats = prefill_features(SimpleNamespace(topk=5), model, rows, MTPConfig.from_target(model.config), bar)
    feats["meta"] = [{**m, "category": c} for m, c in zip(feats["meta"], ("x", "y"))]
    E = model.model.embed_tokens.weight.detach()
    res = mtp_eval.acceptance(head, feats, E, 1.0, steps=2)["t0"]
    assert res["x"]["repeated_4gram_share"] == pytest.approx(5 / 8) and res["x"]["distinct_2"] == pytest.approx(4 / 7)
    assert res["y"]["repeated_4gram_share"] == 0.0 and res["y"]["repetitive"] == 0
    assert res["repetitive outputs"]["seqs"] == 1 and res["repetitive outputs"]["chains"] == res["x"]["chains"]
    pooled, y = res["non-repetitive outputs"]["conditional"], res["y"]["conditional"]
    torch.testing.assert_close(torch.tensor(pooled), torch.tensor(y), equal_nan=True)
    assert res["all"]["seqs"] == 2 and res["all"]["chains"] == res["x"]["chains"] + res["y"]["chains"]
    assert res["all"]["repeated_4gram_share"] == pytest.approx(5 / 16) and res["all"]["repetitive"] == 1
    text = mtp_eval.format_report({"t0": res, "t1": {}}, "w")
    assert "| repetitive outputs |" in text and "| 0.62 | 0.57 | 1/1 |" in text
