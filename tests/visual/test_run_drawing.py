"""What the Run handler draws while a run computes: the trace and the status line only; the
figures, the stats card, the table and the exports once, after the last run (tiny-random)."""

from __future__ import annotations

import gradio as gr
import plotly.graph_objects as go
import pytest

from playground import api
from tests import synthetic as syn
from visual import stats
from visual.playground_run import RunOutputs, RunState, _Generation

HEAVY = ("race_plot", "tpc_plot", "acc_plot", "len_plot", "time_plot", "stats", "table", "json_dl", "csv_dl", "text")
PLOTS = HEAVY[:5]


def _generation(race: bool = False, calibrate: bool = True) -> _Generation:
    settings = api.run_settings(preset="tiny-random", gamma=4, temperature=0.0, seed=5, max_new_tokens=12)
    state = RunState(run_id="r1", prompt="The capital of France is", gamma=settings.gamma,
                     mode="race" if race else "speculative", done=False, phase="starting")  # fmt: skip
    return _Generation("The capital of France is", settings, race, calibrate, state, None, lambda f, m: None)


def _outputs(race: bool = False, calibrate: bool = True) -> list[RunOutputs]:
    return [RunOutputs(*o) for o in _generation(race, calibrate).run(None)]


def _skipped(value) -> bool:
    return isinstance(value, dict) and value == gr.skip()


def test_the_first_yield_clears_the_last_runs_figures_and_card(tiny_default):
    first = _outputs()[0]
    assert all(getattr(first, k) is None for k in PLOTS)
    assert first.stats == stats.pending_card() and "once the run has finished" in first.stats
    assert all(_skipped(getattr(first, k)) for k in ("table", "json_dl", "csv_dl", "text"))


def test_nothing_heavy_is_drawn_until_the_run_has_finished(tiny_default):
    for race, calibrate in ((False, True), (True, False)):
        outs = _outputs(race=race, calibrate=calibrate)
        during = [o for o in outs[1:-1] if not _skipped(o.trace) and o.trace is not None]
        assert during, "the trace streams while the run computes"
        assert any(o.trace["spec_steps"] for o in during)
        for o in outs[1:-2]:
            assert all(_skipped(getattr(o, k)) for k in HEAVY), [k for k in HEAVY if not _skipped(getattr(o, k))]
        result = outs[-2]  # the text and "Done." come first; the figures need not hold them up
        assert result.trace["done"] and "Done." in result.status and result.text
        assert all(_skipped(getattr(result, k)) for k in HEAVY if k != "text")
        last = outs[-1]
        assert last.trace["done"] and all(isinstance(getattr(last, k), go.Figure) for k in PLOTS)
        assert "Run statistics" in last.stats and "median" in last.stats
        assert not _skipped(last.table) and last.text
        if race:  # the race's figure has both runs, drawn once both are timed
            assert last.trace["ar"] is not None and len(last.race_plot.data) >= 2


def test_the_first_step_starts_the_replay_timer_and_the_result_kicks_it(tiny_default):
    """Before a run's first step the step view's timer does not tick (a class's pages would poll
    the server together); the yield that carries the first step starts it, and the yield with
    the finished run's result starts it again at the pace it had, so one tick draws the
    finished run even in a paused view."""
    for race, calibrate in ((False, True), (True, False)):
        outs = _outputs(race=race, calibrate=calibrate)
        started = [i for i, o in enumerate(outs) if not _skipped(o.timer)]
        assert started == [started[0], len(outs) - 2], started
        first, result = outs[started[0]], outs[-2]
        assert isinstance(first.timer, gr.Timer) and first.timer.active
        assert len(first.trace["spec_steps"]) == 1
        assert all(not o.trace["spec_steps"] for o in outs[: started[0]] if isinstance(o.trace, dict))
        assert result.trace["done"] and result.timer.active and result.timer.constructor_args == {"active": True}


def test_a_run_that_fails_before_its_first_step_says_so_in_the_step_view(tiny_default, monkeypatch):
    """No step ever starts the timer; the final yield does, and its tick draws the error."""
    from visual import playground_replay as pt

    def fails(*args, **kwargs):
        raise ValueError("the prompt is too long")
        yield

    monkeypatch.setattr(api, "stream_run", fails)
    outs = []
    with pytest.raises(gr.Error):
        for o in _generation().run(None):
            outs.append(RunOutputs(*o))
    last = outs[-1]
    assert last.trace["done"] and not last.trace["spec_steps"] and last.timer.active
    view = {**pt.empty_view(), "run_id": "r1", "playing": True}
    view, html_out, timer, _ = pt.on_tick(last.trace, view, 0.5)
    assert "too long" in html_out and "Generating" not in html_out
    assert not view["playing"] and timer.active is False


def test_the_card_shows_the_median_verify_pass_of_the_run():
    steps = syn.spec_steps()
    m = stats.compute_metrics(steps, 3)
    ordered = sorted(s.verify_ms for s in steps)
    assert m["verify_passes"] == len(steps) and m["verify_median_ms"] == ordered[len(ordered) // 2]
    card = stats.stats_card(m)
    assert "median" in card and "<code>steps[].verify_ms</code>" in card and "<code>/speculate</code>" in card
    assert "verify_median" not in card  # the catalogue's text, not its key
