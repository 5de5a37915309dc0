"""playground/decoding/confidence.py: the target's own top-choice probability per verify row, on hand-built
logits, and what a traced run records with it (chain and tree, T = 0 and T > 0, old traces)."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
import torch

from playground.api import generate
from playground.decoding.confidence import top_probs, with_chain_confidence
from playground.decoding.records import Candidate, Correction, DraftDecision, GenerationResult
from playground.trace_io import TraceImportError, parse_trace, trace_to_json


def test_top_probs_by_hand():
    logits = torch.tensor([[0.0, 0.0], [math.log(3.0), 0.0], [5.0, 5.0 + math.log(4.0)]])
    got = top_probs(logits, [2, 0, 1, 7, -1])  # rows out of range are skipped
    assert got == pytest.approx({0: 0.5, 1: 0.75, 2: 0.8})


def _decision(j, judged, accepted, top=()):
    return DraftDecision(
        position=j + 1, token_id=1, text="x", draft_prob=1.0, target_prob=0.5, ratio=0.5, accept_prob=0.5,
        u=0.1 if judged else None, judged=judged, accepted=accepted, target_top=(), draft_top=top,
    )  # fmt: skip


def test_chain_rows_judged_only_and_the_correction_row():
    logits = torch.tensor([[0.0, 0.0], [math.log(3.0), 0.0], [9.0, 0.0]])
    ds = [_decision(0, True, True), _decision(1, True, False), _decision(2, False, False)]
    corr = Correction("resample", 2, 0, "y", 1.0, 0.75, (), (), ())
    out, c = with_chain_confidence(ds, corr, logits, correction_row=1)
    assert [d.target_conf for d in out] == [pytest.approx(0.5), pytest.approx(0.75), None]
    assert c.target_conf == pytest.approx(0.75)  # the rejected draft's row (a mutant using row 0 or 2 fails)
    # a copied draft (point-mass q) has no drafter probability; a sampled one reports q(x)
    assert out[0].draft_conf is None
    sampled = _decision(0, True, True, top=(Candidate(1, "x", 0.6), Candidate(2, "z", 0.4)))
    sampled = replace(sampled, draft_prob=0.6)
    (d,), _ = with_chain_confidence([sampled], None, logits, None)
    assert d.draft_conf == pytest.approx(0.6)
    soft = torch.tensor([[0.0, 0.3]])
    (d,), _ = with_chain_confidence([_decision(0, True, True)], None, logits, None, soft_probs=soft)
    assert d.draft_conf == pytest.approx(0.3)  # an argmax draft: the drafter's own softmax, not q = 1


@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("nodes", [1, 6])
def test_a_traced_run_records_how_sure_the_target_was(temperature, nodes):
    r = generate(
        "abc abd abe abc abd ab", preset="tiny-random", drafter="prompt-lookup", gamma=3, tree_nodes=nodes,
        max_new_tokens=16, temperature=temperature, seed=3,
    )  # fmt: skip
    judged = [d for s in r.steps for d in s.drafted if d.judged]
    assert judged and all(d.target_conf is not None and 0 < d.target_conf <= 1 for d in judged)
    assert all(d.target_conf is None for s in r.steps for d in s.drafted if not d.judged)
    corr = [s.correction for s in r.steps if s.correction is not None]
    assert corr and all(c.target_conf is not None for c in corr)
    # the model's own belief, not the verifier's p: a tiny random model is never sure (p is a point mass at T = 0)
    assert max(c.target_conf for c in corr) < 0.9
    # a trace keeps it, and a trace written before it existed still imports
    back = parse_trace(trace_to_json(r))
    assert [c.target_conf for c in (s.correction for s in back.steps) if c] == [c.target_conf for c in corr]
    old = r.to_dict()
    for s in old["steps"]:
        for d in s["drafted"]:
            d.pop("target_conf"), d.pop("draft_conf")
        if s["correction"]:
            s["correction"].pop("target_conf")
    assert parse_trace(json.dumps(old)).steps[0].correction.target_conf is None
    bad = r.to_dict()
    bad["steps"][0]["correction"]["target_conf"] = 1.5
    with pytest.raises(TraceImportError, match="outside"):
        parse_trace(json.dumps(bad))
    assert isinstance(GenerationResult.from_dict(old), GenerationResult)
