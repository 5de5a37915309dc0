"""Continuations drawn together are the continuations drawn one at a time.

``sample_continuations(rows=k)`` keeps k continuations in flight, their target passes shared
through a private ``PassScheduler`` (``playground.lab.draws``).  On the built-in tiny models
(float32) the outcomes and every count are those drawn one at a time with the same seed:
each continuation's randomness is its own, and no load policy shortens its drafts (the app's
would turn speculation off at this load, and a wrong rule would then pass).  A wrong rule
still drifts detectably when drawn together.  ``draw_in_order`` starts a continuation only
while the budget has time left, so what it drew is always the first ones; Stop and errors
wait for the continuations in flight and are raised.
"""

from __future__ import annotations

import threading
import time

import pytest
import torch

from playground.lab.budget import Budget, LabCancelled
from playground.lab.context import LabContext
from playground.lab.distribution import DistributionSettings, distribution_check, sample_continuations
from playground.lab.draws import draw_in_order
from playground.settings import RunSettings
from tests.clock import Ticks

PROMPT = "Once upon a time"  # on tiny-random: ~70 % acceptance, every wrong rule drifts visibly


@pytest.fixture(scope="module")
def ctx():
    c = LabContext("tiny-random")
    torch.set_num_threads(1)
    return c


@pytest.mark.parametrize("rows", [3, 8])
@pytest.mark.parametrize("mode", ["speculative", "autoregressive"])
def test_drawn_together_the_outcomes_are_those_drawn_one_at_a_time(ctx, mode, rows):
    ids = ctx.encode(PROMPT)
    cfg = RunSettings(mode=mode, gamma=4, temperature=1.0, max_new_tokens=3, trace=False)
    alone, a = sample_continuations(ctx, ids, cfg, 120, 7, memo=False, rows=1)
    together, b = sample_continuations(ctx, ids, cfg, 120, 7, memo=False, rows=rows)
    assert together == alone and b.n == a.n == 120
    assert (b.drafted, b.judged, b.accepted, b.target_calls, b.new_tokens) == (
        a.drafted, a.judged, a.accepted, a.target_calls, a.new_tokens,
    )  # fmt: skip
    if mode == "speculative":
        assert b.drafted > 120  # full drafts: the load policy did not shorten them


def test_a_wrong_rule_still_drifts_when_drawn_together(ctx):
    settings = DistributionSettings.of(PROMPT, rule="target-sample", n_samples=1000, n_tokens=2, temperature=1.0,
                                    seed=0, memo=False)  # fmt: skip
    r = distribution_check(settings, ctx=ctx, rows=8)
    assert r.p_value < 1e-3 and r.chi2_exact.p_value < 1e-3, (r.tv, r.p_value)
    assert "NOT distributed like the target" in r.reading


def _slow_draw(finished: list[int], fail_at: int | None = None):
    def draw(i, scheduler):
        time.sleep(0.002 * (i % 3))  # out of order: later ones may finish first
        if i == fail_at:
            raise RuntimeError(f"draw {i} failed")
        finished.append(i)
        return i

    return draw


@pytest.mark.parametrize("rows", [1, 4])
def test_the_budget_stops_new_starts_and_what_ran_is_the_first_ones(ctx, rows):
    finished: list[int] = []
    seen: list[int] = []
    n = draw_in_order(ctx.pair.target, _slow_draw(finished), 50, rows, Budget(6.5, clock=Ticks(1.0)),
                      lambda i, r: seen.append(r))  # fmt: skip
    # the budget reads t = 1 when made; each start looks once: t = 2 … 7 are before 6.5 s, t = 8 is not
    assert n == 6 and sorted(seen) == sorted(finished) == list(range(6))


def test_a_side_always_draws_one_even_with_no_time(ctx):
    seen: list[int] = []
    assert draw_in_order(ctx.pair.target, _slow_draw([]), 50, 4, Budget(0.0), lambda i, r: seen.append(i)) == 1
    assert seen == [0]


def test_stop_and_errors_wait_for_the_draws_in_flight(ctx):
    looks = {"n": 0}

    def cancelled():
        looks["n"] += 1
        return looks["n"] > 5

    finished: list[int] = []
    with pytest.raises(LabCancelled):
        draw_in_order(ctx.pair.target, _slow_draw(finished), 50, 4, Budget(None, cancelled=cancelled),
                      lambda i, r: None)  # fmt: skip
    assert sorted(finished) == list(range(5))  # the five started all ended before the raise
    finished.clear()
    with pytest.raises(RuntimeError, match="draw 2 failed"):
        draw_in_order(ctx.pair.target, _slow_draw(finished, fail_at=2), 50, 4, Budget(None), lambda i, r: None)
    assert 2 not in finished and set(finished) <= set(range(50))
    assert not [t for t in threading.enumerate() if t.name.startswith("lab-draw")]  # no draw left running


def test_rows_must_be_positive(ctx):
    with pytest.raises(ValueError, match="rows"):
        draw_in_order(ctx.pair.target, _slow_draw([]), 5, 0, Budget(None), lambda i, r: None)


def test_memo_tables_answer_only_models_without_sliding_layers(ctx):
    """The check draws one at a time through memo tables only where they can answer; a model
    with sliding-window layers (Gemma 3) passes every call through, so it is drawn together."""
    from playground.lab.memo import MemoModel
    from tests.tiny_models import sliding_pair

    assert MemoModel(ctx.pair.target).memoises
    sliding, _ = sliding_pair(window=4)
    assert not MemoModel(sliding).memoises
