"""The bench's repetition columns (tools.bench.aggregate.repetition_columns) and its --wall-s budget.

Hand-built runs: one prompt whose output loops, one whose output does not; the speedup on
each class uses the autoregressive loop's time on the same prompts."""

from __future__ import annotations

import pytest

from playground.repetition import Repetition, measure
from tools.bench.aggregate import aggregate
from tools.bench.options import Run, Spec
from tools.bench.report import markdown_table

AR = Spec.of("autoregressive")
SPEC = Spec.of("speculative", drafter="prompt-lookup", gamma=4)
LOOP = Repetition(tokens=10, repeated=8, share=0.8, distinct2=0.3)
FRESH = Repetition(tokens=10, repeated=1, share=0.1, distinct2=1.0)


def _run(spec, prompt, wall_ms, rep, temperature=1.0):
    return Run(
        spec=spec, dtype="bfloat16", prompt_id=prompt, kind="held-out", temperature=temperature, rep=0,
        token_ids=tuple(range(10)), wall_ms=wall_ms, repetition=rep,
        judged_at=[0] * spec.gamma, accepted_at=[0] * spec.gamma, hist=[0] * (spec.gamma + 1),
    )  # fmt: skip


def _rows(runs):
    return {r["method"]: r for r in aggregate(runs, {})}


def test_speedups_are_split_by_whether_each_runs_output_repeats():
    # ms/token: autoregressive 100 (loop prompt) and 120 (fresh prompt); speculative 25 and 80.
    # At T = 1 the autoregressive outputs differ from the speculative ones: here neither repeats.
    runs = [
        _run(AR, "a", 1000.0, FRESH),
        _run(AR, "b", 1200.0, FRESH),
        _run(SPEC, "a", 250.0, LOOP),
        _run(SPEC, "b", 800.0, FRESH),
    ]
    rows = _rows(runs)
    sp = rows["speculative"]
    assert sp["repeated_4gram_share"] == pytest.approx(9 / 20)  # token-weighted
    assert sp["distinct_2"] == pytest.approx(0.65)
    assert sp["repetitive_runs"] == 1 and sp["n_runs"] == 2
    assert sp["speedup_repetitive"] == pytest.approx(100 / 25)  # the loop prompt, against AR on that prompt
    assert sp["speedup_non_repetitive"] == pytest.approx(120 / 80)
    assert sp["speedup_vs_autoregressive"] == pytest.approx(110 / 52.5)
    # mutants: one class against the AR mean over every prompt, or the overall speedup
    assert abs(110 / 80 - sp["speedup_non_repetitive"]) > 0.05
    assert abs(sp["speedup_vs_autoregressive"] - sp["speedup_non_repetitive"]) > 0.05
    ar = rows["autoregressive"]
    assert ar["repetitive_runs"] == 0 and ar["speedup_non_repetitive"] == pytest.approx(1.0)
    assert ar["speedup_repetitive"] is None
    md = markdown_table(aggregate(runs, {}))
    assert "speedup, non-repetitive" in md and "1.50×" in md and "4.00×" in md and "repetitive when" in md


def test_a_share_at_the_threshold_is_repetitive_and_just_below_is_not():
    at = Repetition(tokens=10, repeated=5, share=0.5, distinct2=0.5)
    below = Repetition(tokens=10, repeated=4, share=0.4, distinct2=0.5)
    runs = [_run(AR, "a", 1000.0, below), _run(SPEC, "a", 500.0, at)]
    assert _rows(runs)["speculative"]["repetitive_runs"] == 1
    runs = [_run(AR, "a", 1000.0, below), _run(SPEC, "a", 500.0, below)]
    assert _rows(runs)["speculative"]["repetitive_runs"] == 0


def test_the_bench_measures_each_runs_output_after_its_prompt(tiny_pair):
    """A real tiny run: every row carries the columns, and a run's repetition is
    repetition.measure(prompt ids, output ids)."""
    from tools.bench import BenchOptions, BenchPrompt
    from tools.bench.run import iter_bench

    opts = BenchOptions(
        preset="tiny-random",
        prompts=(BenchPrompt("p", "custom", "abcabcabcabc"),),
        max_new_tokens=12,
        gammas=(2,),
        drafters=("prompt-lookup",),
        methods=("autoregressive", "speculative"),
        repeats=1,
        temperatures=(0.0,),
        cost_reps=1,
        warmup=False,
    )
    report = [x for x in iter_bench(opts) if hasattr(x, "rows")][0]
    for row in report.rows:
        assert row["repeated_4gram_share"] is not None and row["distinct_2"] is not None
    from playground.api import encode_prompt

    _, _, tok = tiny_pair
    ids = encode_prompt("abcabcabcabc", tok, 10_000, 10_000)
    assert len(ids) == report.meta["prompts"][0]["tokens"]
    for run in report.runs:
        assert run.repetition == measure(ids, run.token_ids)


def test_cli_wall_time_budget_reaches_the_options_and_a_partial_run_says_so_in_markdown():
    from tools.bench.cli import build_parser, options_from_args

    assert options_from_args(build_parser().parse_args(["--wall-s", "570"])).wall_s == 570.0
    assert options_from_args(build_parser().parse_args([])).wall_s is None
    meta = {"machine": {}, "partial": "stopped after 570 s of wall time: 40 of 64 runs"}
    assert "Partial: stopped after 570 s" in markdown_table([], meta)
    assert "Partial" not in markdown_table([], {"machine": {}, "partial": None})
