"""The classroom lab: statistics, the distribution check against every rule, the
equality check, theory bench, predict-then-reveal scoring, trace import
validation, URL prefill and classroom presets, and the lab UI wiring.

The distribution checks run on the built-in tiny-random models (float32, one
thread) with a fixed prompt and seeds, so they are deterministic: the numbers
in the asserts are what those seeds give.
"""

from __future__ import annotations

import builtins
import json
import math
import pickle
from types import SimpleNamespace

import pytest
import torch
from scipy import stats as sps

from playground.api import run_settings
from playground.config import load_config
from playground.decoding.engine import run
from playground.decoding.records import Correction, DraftDecision, GenerationResult, RunStats, StepRecord
from playground.decoding.sampling import predicted_speedup
from playground.lab.context import LabContext
from playground.lab.distribution import MAX_SAMPLES, DistributionSettings, display_bins, distribution_check
from playground.lab.equality import (
    Divergence,
    EqualityCheck,
    TokenLogit,
    diff_tokens,
    divergence_logits,
    equality_check,
)
from playground.lab.quiz import Question, Scoreboard, question, question_steps, reveal, score_rate_guess
from playground.lab.stats import (
    chi_square_goodness_of_fit,
    chi_square_homogeneity,
    format_p,
    plain_reading,
    total_variation,
    tv_noise_floor,
)
from playground.lab.theory import MeasuredPoint, measured_point, theory_curve
from playground.settings import RunSettings
from playground.trace_io import TraceImportError, load_trace_file, parse_trace, trace_to_json
from playground.validate import MAX_GAMMA
from visual.classroom import classroom_presets
from visual.share import prefill_from_query, share_query, validate_query

PROMPT = "Once upon a time"  # on tiny-random: ~70 % acceptance, every wrong rule drifts visibly
N = 1000  # continuations per side
ALPHA = 1e-3


# --------------------------------------------------------------------------------------------
# statistics against known cases
# --------------------------------------------------------------------------------------------


def test_total_variation_known_cases():
    assert total_variation([0.5, 0.5], [1.0, 0.0]) == pytest.approx(0.5)
    assert total_variation([1, 0], [0, 1]) == pytest.approx(1.0)
    assert total_variation([3, 1], [30, 10]) == pytest.approx(0.0)  # counts are normalised
    assert total_variation({"a": 2, "b": 2}, {"b": 1, "c": 1}) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        total_variation([0, 0], [1])
    with pytest.raises(ValueError):
        total_variation([float("nan")], [1])


def test_homogeneity_matches_scipy_contingency():
    a, b = [120, 80, 55, 45], [100, 95, 60, 45]
    ours = chi_square_homogeneity(a, b)
    ref = sps.chi2_contingency([a, b], correction=False)
    assert ours.statistic == pytest.approx(ref.statistic)
    assert ours.dof == ref.dof
    assert ours.p_value == pytest.approx(ref.pvalue)
    assert ours.pooled == 0


def test_homogeneity_identical_and_unequal_sizes():
    same = chi_square_homogeneity([50, 30, 20], [50, 30, 20])
    assert same.statistic == pytest.approx(0.0) and same.p_value == pytest.approx(1.0)
    scaled = chi_square_homogeneity([50, 30, 20], [100, 60, 40])  # same shape, different N
    assert scaled.p_value == pytest.approx(1.0)
    far = chi_square_homogeneity([90, 10], [10, 90])
    assert far.p_value < 1e-20


def test_homogeneity_pools_sparse_bins():
    a = {"x": 400, "y": 300, "r1": 3, "r2": 3, "r3": 2}
    b = {"x": 410, "y": 290, "r1": 2, "r2": 3, "r3": 3}
    res = chi_square_homogeneity(a, b)
    assert res.pooled == 3 and res.bins == 3  # x, y and the pooled rare tail (16 >= 10: its own bin)
    assert res.p_value > 0.5
    small = chi_square_homogeneity({"x": 400, "y": 300, "r": 1}, {"x": 410, "y": 290, "r": 2})
    assert small.pooled == 1 and small.bins == 2  # a tail too small for its own bin joins the smallest kept bin


def test_goodness_of_fit_matches_scipy():
    counts, probs = [18, 22, 30, 30], [0.2, 0.2, 0.3, 0.3]
    ours = chi_square_goodness_of_fit(counts, probs)
    ref = sps.chisquare(counts, [100 * p for p in probs])
    assert ours.statistic == pytest.approx(ref.statistic)
    assert ours.p_value == pytest.approx(ref.pvalue)


def test_goodness_of_fit_bins_come_from_probabilities_not_the_sample():
    # "other" holds small-probability outcomes, unlisted outcomes and unlisted mass alike.
    probs = {"a": 0.5, "b": 0.3, "c": 0.001}  # 0.199 unlisted
    counts = {"a": 500, "b": 300, "c": 1, "zzz": 199}
    res = chi_square_goodness_of_fit(counts, probs)
    assert res.bins == 3 and res.p_value > 0.9
    # an observed outcome with probability exactly 0 is impossible under the target
    assert chi_square_goodness_of_fit({"a": 1}, {"a": 0.0, "b": 1.0}).p_value == 0.0


def test_tv_noise_floor_formula_and_simulation():
    # two fair bins, 200 draws per sample: TV = 0.5 * 2 bins * sqrt(2/pi) * sqrt(0.25 * (1/200 + 1/200))
    expect = math.sqrt(2 / math.pi) * math.sqrt(0.25 * 0.01)
    assert tv_noise_floor({0: 100, 1: 100}, {0: 100, 1: 100}) == pytest.approx(expect)
    g = torch.Generator().manual_seed(0)
    p = torch.tensor([0.5, 0.3, 0.15, 0.05])
    tvs = []
    for _ in range(300):
        a = torch.bincount(torch.multinomial(p, 400, replacement=True, generator=g), minlength=4).tolist()
        b = torch.bincount(torch.multinomial(p, 400, replacement=True, generator=g), minlength=4).tolist()
        tvs.append(total_variation(a, b))
    floor = tv_noise_floor(dict(enumerate((p * 400).tolist())), dict(enumerate((p * 400).tolist())))
    assert sum(tvs) / len(tvs) == pytest.approx(floor, rel=0.15)


def test_plain_reading_branches():
    clear = plain_reading(0.3, 0.05, 1e-9, 1000, "wrong")
    assert "NOT distributed like the target" in clear and "bug the rule demonstrates" in clear
    fine = plain_reading(0.05, 0.05, 0.6, 1000, "correct")
    assert "no detectable difference" in fine
    assert "fluke" in plain_reading(0.3, 0.05, 1e-5, 1000, "correct")
    assert "smaller than this N can see" in plain_reading(0.05, 0.05, 0.4, 1000, "wrong")
    assert "weak evidence" in plain_reading(0.05, 0.05, 0.02, 1000, "correct")
    assert format_p(0.0) == "< 1e-300" and format_p(2e-7) == "2.0e-07" and format_p(0.5) == "0.500"


# --------------------------------------------------------------------------------------------
# theory bench
# --------------------------------------------------------------------------------------------


def test_theory_curve_known_values():
    c = theory_curve(0.8, 0.07, 1.4, gammas=range(1, 17))
    six = next(p for p in c.points if p.gamma == 6)
    assert six.expected_tokens == pytest.approx((1 - 0.8**7) / 0.2)
    assert six.speedup == pytest.approx(2.17, abs=0.01)  # the cost model: α = 0.8, γ = 6, c = 0.07, v = 1.4 → ≈ 2.2
    assert c.best_speedup == max(p.speedup for p in c.points) and c.pays_off
    zero = theory_curve(0.0, 0.5, 1.0)
    assert all(p.expected_tokens == pytest.approx(1.0) for p in zero.points)
    assert not zero.pays_off and zero.best_gamma == 1
    assert theory_curve(1.0, 0.0, 1.0).best_gamma == MAX_GAMMA  # free perfect drafts: draft as many as allowed
    for bad in ((1.5, 0.1, 1.0), (0.5, -1, 1.0), (0.5, 0.1, float("nan"))):
        with pytest.raises(ValueError):
            theory_curve(*bad)


def _stats(**kw) -> RunStats:
    base = dict(
        mode="speculative",
        drafter="model",
        gamma=4,
        new_tokens=20,
        steps=8,
        target_calls=9,
        drafter_calls=32,
        drafted_tokens=32,
        judged_tokens=20,
        accepted_tokens=12,
        acceptance_rate=0.6,
        draft_efficiency=0.375,
        acceptance_by_position=(0.7, 0.6, 0.5, 0.5),
        accepted_length_hist=(2, 2, 2, 1, 1),
        mean_accepted_length=1.5,
        tokens_per_target_call=2.5,
        prefill_ms=10.0,
        draft_ms=64.0,
        verify_ms=240.0,
        wall_ms=320.0,
        tokens_per_s=62.5,
        draft_ms_per_token=2.0,
        verify_ms_per_call=30.0,
        single_token_ms=None,
        stopped="max_new_tokens",
    )
    base.update(kw)
    return RunStats(**base)


def test_measured_point_uses_the_baseline_single_token_cost():
    spec = _stats()
    base = _stats(
        mode="autoregressive",
        drafter=None,
        gamma=0,
        verify_ms_per_call=20.0,
        tokens_per_s=50.0,
        drafted_tokens=0,
        draft_ms_per_token=None,
    )
    pt = measured_point(spec, base)
    assert pt.c == pytest.approx(0.1) and pt.v == pytest.approx(1.5) and pt.alpha == pytest.approx(0.6)
    assert pt.predicted == pytest.approx(predicted_speedup(0.6, 4, 0.1, 1.5))
    assert pt.measured == pytest.approx(1.25)
    assert measured_point(spec).c is None  # no 1-token timing at all: no c, no v


# --------------------------------------------------------------------------------------------
# predict, then reveal
# --------------------------------------------------------------------------------------------


def _decision(pos, accepted, judged=True, u=0.5):
    return DraftDecision(
        position=pos,
        token_id=pos,
        text=f"t{pos}",
        draft_prob=0.5,
        target_prob=0.4,
        ratio=0.8,
        accept_prob=0.8,
        u=u if judged else None,
        judged=judged,
        accepted=accepted,
        target_top=(),
        draft_top=(),
    )


def _result_with_step(n_acc: int, k: int = 3) -> GenerationResult:
    drafted = tuple(_decision(i + 1, i < n_acc, judged=i <= n_acc) for i in range(k))
    corr = Correction(
        kind="resample" if n_acc < k else "bonus",
        position=n_acc + 1,
        token_id=9,
        text="Z",
        prob=0.5,
        target_prob=0.4,
        distribution_top=(),
        target_top=(),
        draft_top=(),
    )
    emitted = tuple(range(1, n_acc + 1)) + (9,)
    step = StepRecord(
        index=0,
        mode="speculative",
        drafter="model",
        gamma=k,
        drafted=drafted,
        n_accepted=n_acc,
        correction=corr,
        emitted_ids=emitted,
        emitted_text="x" * len(emitted),
        draft_ms=1.0,
        verify_ms=2.0,
        step_ms=3.0,
        elapsed_ms=3.0,
        committed_tokens=len(emitted),
        target_cache_len=5,
        drafter_cache_len=5,
        eos=False,
    )
    st = _stats(
        steps=1,
        new_tokens=len(emitted),
        drafted_tokens=k,
        judged_tokens=min(n_acc + 1, k),
        accepted_tokens=n_acc,
        gamma=k,
    )
    return GenerationResult(
        prompt="Hi",
        prompt_ids=(1, 2),
        token_ids=emitted,
        text="x",
        steps=(step,),
        stats=st,
        config={"preset": "tiny-random"},
    )


def test_reveal_scores_each_draft_against_the_accepted_prefix():
    res = _result_with_step(n_acc=1)
    assert question_steps(res) == [0]
    q = question(res, 0)
    assert q.drafts == ("t1", "t2", "t3") and not q.deterministic and q.context == "Hi"
    r = reveal(res, 0, [True, False, False])
    assert r.outcome == ("accepted", "rejected", "not judged") and r.points == 3 and r.exact
    r2 = reveal(res, 0, [True, True, True])  # a draft after the rejection counts as not accepted
    assert r2.points == 1 and not r2.exact
    with pytest.raises(ValueError):
        reveal(res, 0, [True])
    board = Scoreboard().add_step(r).add_step(r2).add_rate(0.5, 0.55)
    assert (board.steps, board.step_points, board.step_max, board.exact_steps) == (2, 4, 6, 1)
    assert board.rate_points == 10 and board.total == 14 and board.total_max == 16
    assert len(board.history) == 3


@pytest.mark.parametrize(
    ("lang", "words"),
    [("en", ["step 1: 3/3 ✓ all right", "step 1: 1/3", "acceptance guess 50% vs 55%: 10/10"]),
     ("zh", ["第 1 步：3/3 ✓ 全对", "第 1 步：1/3", "接受率猜测 50%，实际 55%：10/10"])],
)  # fmt: skip
def test_the_score_history_is_in_the_visitors_language(lang, words):
    from visual.i18n import use_lang
    from visual.lab import score_card

    res = _result_with_step(n_acc=1)
    board = Scoreboard().add_step(reveal(res, 0, [True, False, False])).add_step(reveal(res, 0, [True, True, True]))
    board = board.add_rate(0.5, 0.55)
    with use_lang(lang):
        card = score_card(board)
    assert all(w in card for w in words), card
    if lang == "zh":
        assert "step" not in card and "guess" not in card


@pytest.mark.parametrize(("lang", "kind"), [("en", "resampled"), ("zh", "重新采样")])
def test_the_token_the_target_added_is_named_in_the_visitors_language(lang, kind):
    from visual.i18n import use_lang
    from visual.lab import reveal_html

    res = _result_with_step(n_acc=1)
    r = reveal(res, 0, [True, False, False])
    with use_lang(lang):
        html = reveal_html(r, question(res, 0))
    assert f"{kind}: " in html and "resample:" not in html


def test_rate_guess_points():
    assert score_rate_guess(0.5, 0.52) == 10
    assert score_rate_guess(0.0, 1.0) == 0
    assert 0 < score_rate_guess(0.3, 0.5) < 10
    assert score_rate_guess(0.5, None) == 0
    with pytest.raises(ValueError):
        score_rate_guess(1.5, 0.5)


# --------------------------------------------------------------------------------------------
# tiny-random: distribution check, equality check (shared models, one thread)
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ctx():
    c = LabContext("tiny-random")
    torch.set_num_threads(1)  # load_pair configures all cores; tiny models are fastest on one
    return c


@pytest.fixture(scope="module")
def reference(ctx):
    settings = DistributionSettings.of(PROMPT, rule="lossless", n_samples=N, n_tokens=2, temperature=1.0, seed=0)
    return distribution_check(settings, ctx=ctx)


def test_memoised_models_change_nothing(ctx):
    ids = ctx.encode(PROMPT)
    cfg = RunSettings(mode="speculative", gamma=4, temperature=1.0, max_new_tokens=3, trace=False)
    make_memo, target_memo = ctx.drafter_factory(False, memo=True)
    make_real, target_real = ctx.drafter_factory(False, memo=False)
    for seed in range(40):
        a = run(
            target_memo, ctx.tokenizer, ids, cfg, drafter=make_memo(), generator=torch.Generator().manual_seed(seed)
        )
        b = run(
            target_real, ctx.tokenizer, ids, cfg, drafter=make_real(), generator=torch.Generator().manual_seed(seed)
        )
        assert a.token_ids == b.token_ids and a.stats.accepted_tokens == b.stats.accepted_tokens
    assert target_memo.hits > target_memo.misses  # and it did answer from the table


def test_lossless_rule_passes(reference):
    r = reference
    assert r.p_value > ALPHA and r.chi2_exact is not None and r.chi2_exact.p_value > ALPHA
    assert r.tv < 2 * r.tv_noise
    assert sum(r.spec_counts) == sum(r.target_counts) == N
    assert r.spec.acceptance_rate > 0.5 and r.spec.tokens_per_target_call > 1.3
    assert r.exact_probs is not None and sum(r.exact_probs) <= 1 + 1e-6


@pytest.mark.parametrize("rule", ["softmax-q", "target-sample", "bonus-wrong-position", "typical"])
def test_each_wrong_or_lossy_rule_drifts_detectably(ctx, reference, rule):
    r = distribution_check(
        DistributionSettings.of(PROMPT, rule=rule, n_samples=N, n_tokens=2, temperature=1.0, seed=0),
        ctx=ctx,
        reference=reference,
    )
    assert r.target is reference.target  # the target-only sample was reused, not redrawn
    assert r.p_value < ALPHA, (rule, r.tv, r.p_value)
    assert r.chi2_exact.p_value < ALPHA
    assert r.tv > r.tv_noise + 0.05
    assert "NOT distributed like the target" in r.reading
    if rule == "softmax-q":
        assert r.settings.draft_argmax  # the bug needs argmax drafts; chosen automatically


def test_exact_match_is_lossless_but_wastes_drafts(ctx, reference):
    settings = DistributionSettings.of(PROMPT, rule="exact-match", n_samples=N, n_tokens=2, temperature=1.0, seed=0)
    r = distribution_check(settings, ctx=ctx, reference=reference)
    assert r.p_value > ALPHA and r.chi2_exact.p_value > ALPHA
    assert r.spec.acceptance_rate < 0.6 * reference.spec.acceptance_rate


def test_distribution_check_rejects_bad_settings(ctx):
    with pytest.raises(ValueError, match="equality check"):
        distribution_check(DistributionSettings.of(PROMPT, temperature=0.0, n_samples=100), ctx=ctx)
    with pytest.raises(ValueError, match="rule"):
        distribution_check(DistributionSettings.of(PROMPT, rule="yolo", n_samples=100), ctx=ctx)
    with pytest.raises(ValueError, match="N"):
        distribution_check(DistributionSettings.of(PROMPT, n_samples=MAX_SAMPLES + 1), ctx=ctx)
    with pytest.raises(ValueError, match="tokens per continuation"):
        distribution_check(DistributionSettings.of(PROMPT, n_tokens=4, n_samples=100), ctx=ctx)


def test_distribution_check_progress_and_one_token_note(ctx):
    seen = []
    r = distribution_check(
        DistributionSettings.of(PROMPT, n_samples=200, n_tokens=1), ctx=ctx, progress=lambda f, m: seen.append(f)
    )
    assert seen and seen[-1] == 1.0 and all(0 <= f <= 1 for f in seen) and seen == sorted(seen)
    assert any("1-token" in n for n in r.notes)
    rows = display_bins(r, max_bins=5)
    assert len(rows) <= 5 and sum(x["speculative"] for x in rows) == pytest.approx(1.0)


def test_equality_check_float32_is_identical_and_replay_reproduces_logits(ctx):
    eq = equality_check("The capital of France is", run_settings(preset="tiny-random", gamma=4, max_new_tokens=16))
    torch.set_num_threads(1)
    assert eq.identical and eq.divergence is None and eq.ar.token_ids == eq.spec.token_ids
    assert all(r.status == "same" for r in eq.rows) and "Identical" in eq.summary
    # the replay of both paths at a position gives the token each path chose as the argmax
    ids = ctx.encode("The capital of France is")
    d = divergence_logits(ctx, ids, eq.ar, eq.spec, 5, ("a", "a"))
    assert d.ar[0].logit == pytest.approx(d.spec[0].logit, abs=1e-4)
    assert d.spec_rows >= 1


def test_diff_tokens_marks_first_divergence():
    rows, first = diff_tokens([1, 2, 3, 4], list("abcd"), [1, 2, 9, 4, 5], list("abXde"))
    assert first == 2
    assert [r.status for r in rows] == ["same", "same", "diverged", "after", "after"]
    assert diff_tokens([1], ["a"], [1], ["a"])[1] is None


# --------------------------------------------------------------------------------------------
# trace import
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def trace_json(ctx):
    from playground.api import generate

    res = generate("Hello there", preset="tiny-random", gamma=3, temperature=1.0, seed=3, max_new_tokens=12)
    torch.set_num_threads(1)
    return res, trace_to_json(res)


def test_trace_round_trip_and_app_export_format(trace_json):
    res, text = trace_json
    back = parse_trace(text)
    assert back.token_ids == res.token_ids and len(back.steps) == len(res.steps) and back.stats == res.stats
    # the Playground's export: to_dict plus extra keys, non-finite floats written as null
    from visual.tables import clean_json, trace_payload

    payload = clean_json(trace_payload(res, res, {"t1_ms": 3.0}))
    payload["stats"]["tokens_per_s"] = None
    again = parse_trace(json.dumps(payload).encode("utf-8"))
    assert math.isnan(again.stats.tokens_per_s) and again.token_ids == res.token_ids


def _mutate(text: str, fn) -> str:
    obj = json.loads(text)
    fn(obj)
    return json.dumps(obj)


BAD_TRACES = {
    "empty": (lambda t: b"", "empty"),
    "not utf-8": (lambda t: b"\xff\xfe\x00garbage", "UTF-8"),
    "not json": (lambda t: "steps: [1, 2]", "not valid JSON"),
    "truncated": (lambda t: t[: len(t) // 2], "not valid JSON"),
    "NaN": (lambda t: t.replace('"prefill_ms": ', '"prefill_ms": NaN, "x": ', 1), "NaN"),
    "duplicate keys": (lambda t: '{"text": "a", "text": "b"}', "repeats the key"),
    "top-level list": (lambda t: "[1, 2, 3]", "JSON object"),
    "missing keys": (lambda t: '{"text": "hi"}', "not a playground trace"),
    "deep nesting": (lambda t: '{"steps": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested"),
    "deep nesting, top-level list": (lambda t: "[" * 100_000 + "]" * 100_000, "JSON object"),
    "moderate nesting": (
        lambda t: (
            '{"text": "", "token_ids": [], "stats": {}, "steps": []'
            + ', "config": '
            + '{"a": ' * 40
            + "1"
            + "}" * 40
            + "}"
        ),
        "nested",
    ),
    "huge integer": (lambda t: '{"token_ids": [' + "9" * 5000 + "]}", "invalid number"),
    "string token ids": (lambda t: _mutate(t, lambda o: o.__setitem__("token_ids", ["1", "2"])), "integers"),
    "steps not a list": (lambda t: _mutate(t, lambda o: o.__setitem__("steps", "os.system('rm -rf /')")), "list"),
    "step missing a field": (lambda t: _mutate(t, lambda o: o["steps"][0].pop("n_accepted")), "missing n_accepted"),
    "wrong field type": (lambda t: _mutate(t, lambda o: o["steps"][0].__setitem__("verify_ms", "fast")), "wrong type"),
    "probability > 1": (
        lambda t: _mutate(t, lambda o: o["steps"][0]["drafted"][0].__setitem__("target_prob", 7.5)),
        "outside [0, 1]",
    ),
    "inconsistent tokens": (
        lambda t: _mutate(t, lambda o: o.__setitem__("token_ids", o["token_ids"][:-1] + [0, 1])),
        "do not add up",
    ),
    "deep drafter_info": (
        lambda t: _mutate(
            t, lambda o: o["steps"][0].__setitem__("drafter_info", {"x": json.loads("[" * 20 + "]" * 20)})
        ),
        "nested",
    ),
    "pickle": (lambda t: pickle.dumps({"steps": []}), "UTF-8"),
}


@pytest.mark.parametrize("name", list(BAD_TRACES))
def test_trace_import_rejects_bad_files(trace_json, monkeypatch, name):
    res, text = trace_json
    assert res.steps[0].drafted, "fixture needs a step with drafts"
    make, message = BAD_TRACES[name]

    def forbidden(*a, **k):
        raise AssertionError("trace import must never execute or unpickle anything")

    parse_trace(text)  # warm up lazy imports (the import system itself uses exec)
    monkeypatch.setattr(builtins, "eval", forbidden)
    monkeypatch.setattr(pickle, "loads", forbidden)
    monkeypatch.setattr(pickle, "load", forbidden)
    with pytest.raises(TraceImportError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_trace(make(text))


def test_hostile_looking_content_stays_inert_data(trace_json, monkeypatch):
    from visual import lab as vlab  # imported first: library imports may use eval themselves

    _, text = trace_json
    payload = "__import__('os').system('touch /tmp/pwned') <script>alert(1)</script>"

    def poison(o):
        o["text"] = payload
        o["prompt"] = payload
        o["steps"][0]["drafter_info"] = {"__reduce__": {"py/object": "os.system"}, "cmd": payload}
        o["config"]["__class__"] = payload

    monkeypatch.setattr(builtins, "eval", lambda *a, **k: pytest.fail("eval called"))
    res = parse_trace(_mutate(text, poison))
    assert res.text == payload and res.steps[0].drafter_info["cmd"] == payload  # just strings
    html = vlab.replay_html(res, 0) + vlab.trace_summary_html(res)
    assert "<script>" not in html


def test_trace_import_size_limit(trace_json, tmp_path):
    _, text = trace_json
    with pytest.raises(TraceImportError, match="limit"):
        parse_trace(text, max_bytes=100)
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:  # sparse: the limit is checked before reading
        fh.truncate(load_config().limits.max_trace_bytes + 1)
    with pytest.raises(TraceImportError, match="limit is 20.0 MB"):
        load_trace_file(big)
    ok = tmp_path / "ok.json"
    ok.write_text(text, encoding="utf-8")
    assert load_trace_file(ok).text
    with pytest.raises(TraceImportError, match="could not be read"):
        load_trace_file(tmp_path / "missing.json")


# --------------------------------------------------------------------------------------------
# URL parameters and classroom presets
# --------------------------------------------------------------------------------------------


def test_query_prefill_valid_values():
    pf = validate_query(
        {"preset": "tiny-random", "prompt": "Hi\x00 there\r\n", "gamma": "6", "temperature": "0.7", "seed": "42"}
    )
    assert pf.values() == {"preset": "tiny-random", "prompt": "Hi there\n", "gamma": 6, "temperature": 0.7, "seed": 42}
    assert pf.errors == ()
    assert validate_query({}).values() == {} and validate_query(None).errors == ()


@pytest.mark.parametrize(
    "params,bad",
    [
        ({"preset": "../../etc/passwd"}, "unknown preset"),
        ({"gamma": "0"}, "gamma must be between"),
        ({"gamma": "99"}, "gamma must be between"),
        ({"gamma": "4.5"}, "whole number"),
        ({"gamma": "1e3"}, "whole number"),
        ({"temperature": "nan"}, "number like"),
        ({"temperature": "inf"}, "number like"),
        ({"temperature": "9"}, "between 0.01 and 2.0"),
        ({"temperature": "-0.5"}, "between"),
        ({"seed": "-1"}, "whole number"),
        ({"seed": "1" * 40}, "whole number"),
        ({"prompt": "   "}, "empty"),
        ({"prompt": "x" * 5000}, "too long"),
        ({"classroom": "nope"}, "no preset called"),
        ({"evil": "<script>"}, "unknown parameter"),
    ],
)
def test_query_prefill_drops_bad_values_with_a_reason(params, bad):
    pf = validate_query(params)
    assert pf.values() == {}
    assert any(bad in e for e in pf.errors), pf.errors


def test_classroom_presets_are_valid_and_shareable():
    cfg = load_config()
    presets = classroom_presets(cfg)
    assert len(presets) >= 4
    labels = " ".join(c.label.lower() for c in presets)
    for phrase in ("easy text", "hard text", "temperature", "slower"):
        assert phrase in labels
    names = {p.name for p in cfg.presets}
    for i, cp in enumerate(presets, 1):
        assert cp.preset in names and cp.explanation
        by_slug = validate_query({"classroom": cp.slug})
        by_index = validate_query({"classroom": str(i)})
        assert by_slug.classroom == by_index.classroom == cp.slug and by_slug.errors == ()
        assert by_slug.values() == {
            "preset": cp.preset,
            "prompt": cp.prompt,
            "gamma": cp.gamma,
            "temperature": cp.temperature,
            "seed": cp.seed,
        }
    over = validate_query({"classroom": presets[0].slug, "gamma": "2"})  # explicit values win
    assert over.get("gamma") == 2 and over.get("prompt") == presets[0].prompt


def test_classroom_preset_validation_catches_mistakes():
    from dataclasses import replace

    cfg = load_config()
    good = dict(label="X", preset="tiny-random", prompt="hi", gamma=4, temperature=0.5, seed=0, explanation="why")
    for bad, msg in [
        ({"preset": "nope"}, "unknown preset"),
        ({"gamma": 0}, "gamma"),
        ({"temperature": 7}, "temperature"),
        ({"extra": 1}, "unknown keys"),
        ({"explanation": ""}, "must not be empty"),
    ]:
        with pytest.raises(ValueError, match=msg):
            classroom_presets(replace(cfg, classroom=({**good, **bad},)))
    with pytest.raises(ValueError, match="missing"):
        classroom_presets(replace(cfg, classroom=({k: v for k, v in good.items() if k != "prompt"},)))


def test_share_query_round_trips_through_validation():
    from urllib.parse import parse_qsl, urlsplit

    q = share_query(dict(preset="tiny-random", prompt="a & b = c?", gamma=3, temperature=0.25, seed=7))
    params = dict(parse_qsl(urlsplit(q).query))
    assert validate_query(params).values() == {
        "preset": "tiny-random",
        "prompt": "a & b = c?",
        "gamma": 3,
        "temperature": 0.25,
        "seed": 7,
    }


# --------------------------------------------------------------------------------------------
# renderers and UI wiring (no server)
# --------------------------------------------------------------------------------------------


def test_renderers_escape_and_style(reference):
    from visual import lab as vlab

    fig = vlab.distribution_figure(reference)
    assert fig.layout.paper_bgcolor == "rgba(0, 0, 0, 0)" and fig.layout.font.color
    assert len(fig.data) == 3  # target, speculative, exact markers
    html = vlab.distribution_html(reference)
    assert "✓ Correct" in html and "TV distance" in html
    table = vlab.rules_table([reference])
    assert list(table.columns) == vlab.RULES_COLUMNS and table.iloc[0]["verdict"] == "no drift detected"
    curve = theory_curve(0.7, 0.1, 1.3)
    pt = MeasuredPoint(4, 0.6, 0.1, 1.5, 1.4, 1.3, 1.5)
    tf = vlab.theory_figure(curve, pt)
    assert any("you are here" in (t.name or "") for t in tf.data)
    res = _result_with_step(1)
    evil = "<script>alert(1)</script>"
    q = Question(0, evil, (evil,), (0.5,), False)
    assert "<script>" not in vlab.question_html(q) and "&lt;script&gt;" in vlab.question_html(q)
    r = reveal(res, 0, [True, False, False])
    assert "3 / 3" in vlab.reveal_html(r, question(res, 0))
    assert "session score" in vlab.score_card(Scoreboard().add_step(r))
    assert "Step 1" in vlab.replay_html(res, 2)
    note = vlab.prefill_note(validate_query({"gamma": "0", "seed": "5"}))
    assert "seed" in note and "Ignored" in note


def test_equality_html_shows_divergence_with_escaped_tokens():
    from visual import lab as vlab

    res = _result_with_step(1)
    tl = TokenLogit
    div = Divergence(
        position=2,
        ar=(tl(1, "<script>", 15.125, 0.4), tl(2, "&", 15.0625, 0.38)),
        spec=(tl(1, "<script>", 15.0625, 0.38), tl(2, "&", 15.125, 0.4)),
        spec_rows=5,
        explanation="near tie",
    )
    rows, _ = diff_tokens([5, 6, 1], ["x", "y", "<script>"], [5, 6, 2], ["x", "y", "&"])
    eq = EqualityCheck(
        prompt="p",
        preset="tiny-random",
        drafter="model",
        dtype="bfloat16",
        gamma=4,
        ar=res,
        spec=res,
        rows=rows,
        identical=False,
        divergence=div,
        summary="diverge",
    )
    html = vlab.equality_html(eq)
    assert "<script>" not in html
    assert "&lt;script&gt;" in html and "+0.0625" in html and "-0.0625" in html and "near tie" in html


def test_lab_ui_builds_and_handlers_work(tmp_path, trace_json):
    import gradio as gr

    from visual import lab_tab

    with gr.Blocks() as demo:
        with gr.Tab("Classroom lab"):
            tabs = lab_tab.build_lab_tabs()
        tabs.wire(demo)
    assert tabs.on_load is not None and len(tabs.load_outputs) > 10
    rule_radio = tabs.components["d_rule"]
    assert rule_radio.value == "lossless"
    from visual.i18n import text_of

    labels = [text_of(c[0]) for c in rule_radio.choices]  # catalogue keys (visual.i18n), shown in English here
    assert labels[0].startswith("✓")
    assert sum(1 for lab_ in labels if "WRONG" in lab_) == 3 and any("LOSSY" in lab_ for lab_ in labels)

    # URL prefill through a fake request (a hostile one must not break page load)
    req = SimpleNamespace(query_params={"classroom": "2", "seed": "5", "gamma": "x"})
    pf = prefill_from_query(req)
    assert pf.get("seed") == 5 and pf.classroom and pf.errors
    assert prefill_from_query(SimpleNamespace(query_params=None)).values() == {}
    out = tabs.on_load(SimpleNamespace(query_params={"preset": "tiny-random", "prompt": "Hi"}))
    assert len(out) == len(tabs.load_outputs) and "Settings loaded" in out[0]

    # import: a bad file gives a clear message and keeps the current trace
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    kept = object()
    state, *_, msg = lab_tab.import_trace(str(bad), kept)
    assert state is kept and msg.startswith("⛔") and "not valid JSON" in msg
    good = tmp_path / "good.json"
    good.write_text(trace_json[1], encoding="utf-8")
    state, _, html, _, msg = lab_tab.import_trace(str(good), None)
    assert isinstance(state, GenerationResult) and "Imported" in msg
    assert lab_tab.share_link(
        "tiny-random", "Hi", 4, 0.5, 1, SimpleNamespace(headers={"referer": "https://x.hf.space/?old=1"})
    ).startswith("https://x.hf.space/?preset=tiny-random")
    path = lab_tab.export_trace(state)
    assert load_trace_file(path).token_ids == state.token_ids
