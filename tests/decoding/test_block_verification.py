"""Block verification (rule "block", ``playground.decoding.block_verify``): exact, never worse, and wired in.

1. Exact enumeration.  A tiny vocabulary with context-dependent target and drafter laws
   (a function prefix -> distribution, seeded, with zeros and near-equal rows): every draft
   block is enumerated with its probability, every verdict with its probability (the
   verdict depends on each η_i only through η_i < h_i, independent events, so the 2^γ
   outcomes are enumerated with η_i = 0 for "passes" and η_i = h_i for "fails"), and the
   emitted tokens are extended by the target's own continuation to γ+1 tokens.  That law
   must equal the target's joint law of γ+1 tokens to 1e-9, for "block" and, as the
   reference, for "lossless".  With an EOS token the block ends at the EOS draft.
2. The paper's theorem on every enumerated case: E[kept drafts] under block >= under token
   verification, strictly more somewhere; point-mass rows give token verification's verdict.
3. Mutants (patched into ``playground.decoding.block_verify``) must make the enumeration fail:
   the residual without the weight, h_i = w_i, and a token-style scan that stops at the
   first failed η.
4. Through the loop: greedy equality with transformers on the tiny models, a chi-square of
   the first three tokens at T = 1 with a model drafter, and the recorded fields
   (u = η, accept_prob = h, weight = w, accepted iff inside the kept prefix).
5. Trees refuse the rule; the bench accepts ``--rules lossless,block``.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import replace

import pytest
import torch

from playground.decoding import block_verify
from playground.decoding.engine import run, verify
from playground.decoding.rows import PointRows
from playground.decoding.sampling import SamplingParams, logits_to_probs
from playground.drafters.model import ModelDrafter
from playground.drafters.prompt_lookup import PromptLookupDrafter
from playground.models.tiny import EOS as CHAR_EOS
from playground.settings import RunSettings
from tests.contract import assert_greedy_equals_target, seeded
from tests.fakes import TABLE_V, BigramLM, LetterTokenizer, disagreeing_tables
from tests.laws import V, laws, step_law, target_law, tv
from tests.stats import assert_does_not_follow, assert_follows

SEEDS = [0, 1, 2, 3, 4]
EOS = 0  # the EOS cases: token 0 ends the sequence


# ---------------------------------------------------------------- 1. exactness


@pytest.mark.parametrize("eos", [None, EOS])
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("gamma", [1, 2, 3])
@pytest.mark.parametrize("rule", ["block", "lossless"])
def test_one_step_emits_the_targets_joint_law_exactly(rule, gamma, seed, eos):
    target, draft = laws(seed)
    law, _ = step_law(rule, target, draft, gamma, eos)
    assert abs(sum(law.values()) - 1.0) < 1e-9
    assert tv(law, target_law(target, gamma + 1, eos)) < 1e-9


# ---------------------------------------------------------------- 2. never fewer drafts kept


def test_block_keeps_at_least_as_many_drafts_as_token_verification():
    """Sun et al.'s theorem on every enumerated case, and a strict gain on some."""
    gains = []
    for gamma, seed in itertools.product([1, 2, 3], SEEDS):
        target, draft = laws(seed)
        _, kept_block = step_law("block", target, draft, gamma)
        _, kept_token = step_law("lossless", target, draft, gamma)
        assert kept_block >= kept_token - 1e-12, (gamma, seed, kept_block, kept_token)
        gains.append(kept_block - kept_token)
    assert max(gains) > 1e-3


def test_point_mass_rows_give_token_verifications_verdict():
    """Greedy rows (PointRows, and the same rows dense): every h is 0 or 1, the verdict is lossless's."""
    g = torch.Generator().manual_seed(0)
    for _ in range(200):
        k = int(torch.randint(1, 6, (), generator=g))
        argmax = torch.randint(V, (k + 1,), generator=g).tolist()
        drafts = [a if float(torch.rand((), generator=g)) < 0.7 else (a + 1) % V for a in argmax[:k]]
        for rows in (
            (PointRows(drafts, V), PointRows(argmax, V)),
            (torch.eye(V)[drafts], torch.eye(V)[argmax]),  # [k, V], [k+1, V] dense one-hot
        ):
            etas = torch.rand(k, generator=g).tolist()
            got = [
                verify(drafts, *rows, rule=rule, uniform=iter(etas).__next__, draw=lambda d: int(d.argmax()))
                for rule in ("block", "lossless")
            ]
            assert got[0].n_accepted == got[1].n_accepted
            assert (got[0].correction_kind, got[0].correction_token) == (
                got[1].correction_kind,
                got[1].correction_token,
            )
            assert set(got[0].accept_probs) <= {0.0, 1.0}


def test_residual_mass_shortcuts_for_point_masses_agree_with_the_dense_sum():
    """r = Σ max(0, w·p − q) without a pass over V when p or q is a point mass (PointRows)."""
    g = torch.Generator().manual_seed(1)
    for _ in range(100):
        dense = torch.softmax(torch.randn(2, V, generator=g, dtype=torch.float64) * 2, -1)  # [2, V]
        ids = torch.randint(V, (2,), generator=g).tolist()
        w = float(torch.rand((), generator=g))
        for target_probs, draft_probs in (
            (dense, PointRows(ids, V)),
            (PointRows(ids, V), dense),
            (PointRows(ids, V), PointRows(ids[::-1], V)),
        ):
            want = torch.clamp(w * _rows(target_probs)[1] - _rows(draft_probs)[1], min=0.0).sum()
            assert block_verify.residual_mass(target_probs, draft_probs, 1, w) == pytest.approx(float(want), abs=1e-12)


def _rows(rows):
    return torch.stack([rows[i].double() for i in range(len(rows))]) if isinstance(rows, PointRows) else rows


# ---------------------------------------------------------------- 3. mutants


def _unweighted_residual(target_probs, draft_probs, weight):
    return _REAL_RESIDUAL(target_probs, draft_probs, 1.0)  # WRONG: norm(max(0, p − q)) at every τ


def _h_is_the_weight(drafts, draft_probs, target_probs):
    terms = _REAL_TERMS(drafts, draft_probs, target_probs)
    return block_verify.BlockTerms(terms.weights, terms.weights[1:])  # WRONG: ignores the residual mass


def _token_style_scan(etas, accept_probs):
    n = 0
    for eta, h in zip(etas, accept_probs):  # WRONG: stops at the first failed η
        if not eta < h:
            break
        n += 1
    return n


_REAL_RESIDUAL = block_verify.block_residual
_REAL_TERMS = block_verify.block_terms
MUTANTS = {
    "unweighted residual": ("block_residual", _unweighted_residual),
    "h = w": ("block_terms", _h_is_the_weight),
    "token-style scan": ("kept_length", _token_style_scan),
}


# The unweighted residual only shows where the kept prefix ends at τ < γ with w_τ < 1 and
# the residual there has two tokens or more.  Under seed 2 the only first draft with w < 1
# leads to a row whose residual is one token whatever the weight (the drafter gives that
# token 0), so that mutant is exactly lossless there: it is left out, not hidden.
MUTANT_CASES = [
    (mutant, gamma, seed)
    for mutant in MUTANTS
    for gamma in (2, 3)  # at γ = 1 every mutant is the real rule (τ < γ means τ = 0, w_0 = 1; h_γ = w_γ)
    for seed in SEEDS
    if not (mutant == "unweighted residual" and seed == 2)
]


@pytest.mark.parametrize("mutant,gamma,seed", MUTANT_CASES)
def test_mutants_fail_the_enumeration(monkeypatch, mutant, gamma, seed):
    target, draft = laws(seed)
    monkeypatch.setattr(block_verify, *MUTANTS[mutant])
    law, _ = step_law("block", target, draft, gamma)
    assert tv(law, target_law(target, gamma + 1)) > 1e-3


def test_the_unweighted_residual_is_invisible_under_seed_2():
    """The case left out above: the mutant changes nothing there (not a weak test elsewhere)."""
    target, draft = laws(2)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(block_verify, *MUTANTS["unweighted residual"])
        law, _ = step_law("block", target, draft, 3)
    assert tv(law, target_law(target, 4)) < 1e-9


# ---------------------------------------------------------------- 4. through the loop

PROMPTS = ["The capital of France is", "a", "def f(x):\n    return x * x\n\nprint(f(3))  # 9\nprint(f("]


@pytest.mark.parametrize("gamma", [2, 4])
@pytest.mark.parametrize("kind", ["model", "prompt-lookup"])
def test_greedy_block_equals_transformers_generate_and_token_verification(tiny_pair, kind, gamma):
    target, drafter_model, tok = tiny_pair

    def drafter():
        return PromptLookupDrafter() if kind == "prompt-lookup" else ModelDrafter(drafter_model, 100)

    for prompt in PROMPTS:
        ids = tok.encode(prompt)
        cfg = RunSettings(gamma=gamma, max_new_tokens=40, rule="block")
        r = assert_greedy_equals_target(target, tok, ids, cfg, drafter(), msg=prompt)
        token = run(target, tok, ids, replace(cfg, rule="lossless"), drafter=drafter(), eos_token_ids=[CHAR_EOS])
        assert [s.n_accepted for s in r.steps] == [s.n_accepted for s in token.steps]


def _triples(rule, gamma, n, params=SamplingParams(temperature=1.0)):
    """Counts [V^3] of the first three tokens over n seeded runs, and their exact law."""
    target_logits, drafter_logits = disagreeing_tables()
    target, drafter = BigramLM(target_logits), BigramLM(drafter_logits)
    config = RunSettings(gamma=gamma, temperature=params.temperature, max_new_tokens=3, trace=False, rule=rule)
    counts = torch.zeros(TABLE_V**3)
    for seed in range(n):
        r = run(target, LetterTokenizer(), [0], config, drafter=ModelDrafter(drafter, TABLE_V), generator=seeded(seed))
        y1, y2, y3 = r.token_ids
        counts[(y1 * TABLE_V + y2) * TABLE_V + y3] += 1
    rows = logits_to_probs(target_logits, params)  # [V, V]: row t = p(. | t)
    pmf = torch.einsum("a,ab,bc->abc", rows[0], rows, rows)  # P(y1, y2, y3) = p(y1|0) p(y2|y1) p(y3|y2)
    return counts, pmf.flatten()


def test_sampled_block_runs_follow_the_targets_law_of_three_tokens():
    """T = 1, a model drafter, γ = 2: the first step judges 2 drafts jointly (3 tokens at most)."""
    counts, pmf = _triples("block", 2, 4000)
    assert_follows(counts, pmf)


def test_a_block_mutant_through_the_loop_is_caught(monkeypatch):
    """The chi-square above has the power to see a wrong h (h_i = w_i) at this N."""
    monkeypatch.setattr(block_verify, *MUTANTS["h = w"])
    counts, pmf = _triples("block", 2, 4000)
    assert_does_not_follow(counts, pmf)


def _hand_block():
    """Two drafts, V = 3, where the first can be kept only because the second passes.

    d_1 = 0 has p/q = 0.5, so w_1 = 0.5; at row 1, 0.5·p_1 − q_1 = (−0.1, 0.15, −0.55), so
    r_1 = 0.15 and h_1 = 0.15 / (0.15 + 0.5) ≈ 0.23; d_2 = 0 has p/q = 1.5: w_2 = 0.75 = h_2."""
    draft_probs = torch.tensor([[0.5, 0.25, 0.25], [0.4, 0.05, 0.55]], dtype=torch.float64)  # [2, V]
    target_probs = torch.tensor([[0.25, 0.5, 0.25], [0.6, 0.4, 0.0], [0.2, 0.3, 0.5]], dtype=torch.float64)  # [3, V]
    return [0, 0], draft_probs, target_probs


def _block(etas, drafts=None, eos=frozenset()):
    hand, draft_probs, target_probs = _hand_block()
    return verify(
        hand if drafts is None else drafts, draft_probs, target_probs, rule="block", eos=eos,
        uniform=iter(etas).__next__, draw=lambda d: int(d.argmax()),
    )  # fmt: skip


def test_verdict_fields_a_draft_kept_although_its_own_u_failed():
    _, _, target_probs = _hand_block()
    v = _block([0.9, 0.5])  # η_1 = 0.9 ≥ h_1, η_2 = 0.5 < h_2 = 0.75: τ = 2
    assert v.n_accepted == 2 and v.accepted == (True, True) and v.us == (0.9, 0.5)
    assert v.accept_probs == pytest.approx((0.15 / 0.65, 0.75)) and v.weights == pytest.approx((0.5, 0.75))
    assert v.us[0] > v.accept_probs[0]  # kept anyway: the longer prefix passed
    assert (v.correction_kind, v.correction_row, v.rejected_at) == ("bonus", 2, None)
    assert torch.equal(v.correction_dist, target_probs[2])
    v = _block([0.9, 0.8])  # both fail: τ = 0, the usual residual norm(max(0, p_0 − q_0))
    assert (v.n_accepted, v.accepted, v.rejected_at, v.correction_kind) == (0, (False, False), 0, "resample")
    assert torch.allclose(v.correction_dist, torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64))
    v = _block([0.1, 0.8])  # τ = 1: the WEIGHTED residual norm(max(0, 0.5·p_1 − q_1)), not norm(max(0, p_1 − q_1))
    assert (v.n_accepted, v.accepted, v.rejected_at, v.correction_row) == (1, (True, False), 1, 1)
    assert torch.allclose(v.correction_dist, torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64))
    assert verify([0, 0], *_hand_block()[1:], uniform=iter([0.9]).__next__, draw=lambda d: 0).n_accepted == 0


def test_an_eos_draft_ends_the_block_and_the_step():
    v = _block([0.0, 0.0], drafts=[0, 1], eos=frozenset([1]))  # d_2 = EOS kept (h_2 = w_2 = 1)
    assert v.accepted == (True, True) and v.eos_accepted and v.correction_token is None
    v = _block([0.0], drafts=[1, 0], eos=frozenset([1]))  # an EOS first draft: the block is cut after it
    assert len(v.accepted) == 1 and len(v.us) == 1 and v.eos_accepted and v.n_accepted == 1


def _sampled_block_runs(n=12, gamma=4):
    target_logits, drafter_logits = disagreeing_tables()
    target, drafter = BigramLM(target_logits), BigramLM(drafter_logits)
    cfg = RunSettings(gamma=gamma, temperature=1.0, max_new_tokens=24, rule="block")
    for seed in range(n):
        yield run(target, LetterTokenizer(), [0], cfg, drafter=ModelDrafter(drafter, TABLE_V), generator=seeded(seed))


def test_recorded_decisions_are_the_block_verdict():
    """u = η, accept_prob = h, weight = w (its recursion on the recorded p and q), accepted iff
    inside the kept prefix τ = the largest i with u_i < h_i; the correction sits at τ+1."""
    kept_despite_u = 0
    for r in _sampled_block_runs():
        for s in r.steps:
            d = s.drafted
            if not d:
                continue
            assert all(x.judged and x.u is not None and x.weight is not None for x in d)
            tau = max((x.position for x in d if x.u < x.accept_prob), default=0)
            assert s.n_accepted == tau and [x.accepted for x in d] == [x.position <= tau for x in d]
            w = 1.0
            for x in d:
                w = min(1.0, w * x.target_prob / x.draft_prob)
                assert x.weight == pytest.approx(w, rel=1e-5, abs=1e-7)
            assert d[-1].accept_prob == pytest.approx(d[-1].weight)  # h_γ = w_γ
            kept_despite_u += sum(x.accepted and x.u >= x.accept_prob for x in d)
            if s.correction is not None:
                assert s.correction.position == tau + 1
                assert s.correction.kind == ("bonus" if tau == len(d) else "resample")
    assert kept_despite_u > 0  # the block rule really kept drafts a token-by-token scan would not


def test_block_traces_round_trip_and_old_traces_still_import():
    from playground.trace_io import TraceImportError, parse_trace, trace_to_json

    r = next(_sampled_block_runs(1))
    back = parse_trace(trace_to_json(r))
    assert back.steps == r.steps and any(d.weight is not None for s in back.steps for d in s.drafted)
    old = json.loads(trace_to_json(r))
    for s in old["steps"]:
        for d in s["drafted"]:
            del d["weight"]  # a trace written before block verification existed
    assert all(d.weight is None for s in parse_trace(json.dumps(old)).steps for d in s.drafted)
    bad = json.loads(trace_to_json(r))
    bad["steps"][0]["drafted"][0]["weight"] = 1.5
    with pytest.raises(TraceImportError, match="outside"):
        parse_trace(json.dumps(bad))


# ---------------------------------------------------------------- 5. trees, the bench


def test_trees_refuse_block_verification():
    with pytest.raises(ValueError, match="block verification judges a chain of drafts, not a tree"):
        RunSettings(tree_nodes=4, rule="block")
    RunSettings(tree_nodes=1, rule="block")  # a chain is fine


def test_bench_takes_lossless_and_block_side_by_side():
    from tools import bench
    from tools.bench.run import _specs

    opts = bench.options_from_args(
        bench.build_parser().parse_args(["--rules", "lossless,block", "--tree-nodes", "1,4"])
    )
    assert opts.rules == ("lossless", "block")
    specs = [s for s in _specs(opts, ("model",), False) if s.method == "speculative"]
    assert {(s.run.rule, s.run.tree_nodes) for s in specs} == {("lossless", 1), ("lossless", 4), ("block", 1)}

    opts = bench.BenchOptions(
        preset="tiny-random", prompts=(bench.BenchPrompt("copy", "grounded", "abc abc abc abc"),), max_new_tokens=8,
        gammas=(3,), temperatures=(0.0, 1.0), drafters=("model",), methods=("autoregressive", "speculative"),
        repeats=1, cost_reps=1, warmup=False, rules=("lossless", "block"), threads=1,
    )  # fmt: skip
    rows = [e for e in bench.iter_bench(opts) if isinstance(e, bench.BenchReport)][0].rows
    block = [r for r in rows if r["method"] == "speculative" and r["rule"] == "block"]
    assert {r["temperature"] for r in block} == {0.0, 1.0}
    for r in block:
        # no E(α, γ) prediction (token verification's law), the step-mix one from tokens per call
        assert r["predicted_speedup"] is None and r["predicted_speedup_steps"] is not None
        if r["temperature"] == 0:
            assert r["identical_to_autoregressive"] is True
        else:
            assert r["quality"] == "lossless (exact sampling)"
    assert "(block)" in bench.markdown_table(rows)


def test_the_step_view_tells_a_block_step_as_one():
    """Narration, table, tooltips and bars of block steps: h instead of min(1, p/q), the weight,
    drafts kept although their own u failed, the weighted residual; every text escaped."""
    from visual.replay import VERIFY, Frame
    from visual.tokens import is_block_step, narration, step_view

    steps = [s for r in _sampled_block_runs() for s in r.steps if s.drafted]
    anyway = next(s for s in steps if any(d.accepted and not d.u < d.accept_prob for d in s.drafted))
    resample = next(s for s in steps if s.correction is not None and s.correction.kind == "resample" and s.n_accepted)
    for step in (anyway, resample):
        assert is_block_step(step)
        hostile = replace(step, index=0, drafted=tuple(replace(d, text="<b>x</b>") for d in step.drafted))
        html = step_view("", [hostile], Frame(0, VERIFY))
        assert "<b>x</b>" not in html and "&lt;b&gt;x&lt;/b&gt;" in html
        assert "Block verification: the longest prefix" in html and "h (weight w)" in html
        assert "Block verification judges every draft" in html  # the table's caption
        assert "first rejection ends the step" not in html and "min(1, p/q) =" not in html
    said = narration(anyway, VERIFY)
    assert "Block verification" in said and "kept although" in said
    html = step_view("", [replace(anyway, index=0)], Frame(0, VERIFY))
    assert "kept anyway: a later draft passed" in html and "\u2713 kept" in html
    html = step_view("", [replace(resample, index=0)], Frame(0, VERIFY))
    assert "norm(max(0, w\u00b7p \u2212 q)), w = " in html and "weighted residual" in narration(resample, VERIFY)
    # a token-rule step is told as before
    target_logits, drafter_logits = disagreeing_tables()
    r = run(
        BigramLM(target_logits), LetterTokenizer(), [0], RunSettings(gamma=2, temperature=1.0, max_new_tokens=8),
        drafter=ModelDrafter(BigramLM(drafter_logits), TABLE_V), generator=seeded(0),
    )  # fmt: skip
    assert not any(is_block_step(s) for s in r.steps)
    assert "Block verification" not in step_view("", list(r.steps), Frame(0, VERIFY))


def test_the_lab_checks_block_as_a_correct_rule():
    """The classroom lab's distribution check (tiny-random, 3-token continuations so that a
    step judges 2 drafts jointly): no drift, read as a correct rule."""
    from playground.lab.context import LabContext
    from playground.lab.distribution import DistributionSettings, distribution_check
    from playground.rules import RULES

    assert RULES["block"].category == "correct" and list(RULES)[1] == "block"  # the lab lists it second
    ctx = LabContext("tiny-random")
    torch.set_num_threads(1)  # load_pair configures all cores; tiny models are fastest on one
    settings = DistributionSettings.of("Once upon a time", rule="block", n_samples=800, n_tokens=3, temperature=1.0)
    r = distribution_check(settings, ctx=ctx)
    assert r.category == "correct" and r.p_value > 1e-3 and r.chi2_exact.p_value > 1e-3
    assert "NOT distributed" not in r.reading
