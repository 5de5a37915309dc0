"""The theory bench: E(γ) and S(γ) over a grid of γ, the best γ, and the point a real run measures.

``theory_curve`` evaluates ``sampling.expected_tokens_per_step`` and
``sampling.predicted_speedup`` for given α, c and v_γ; ``measured_point`` reads α, c, v_γ
and the speedup off a run's ``RunStats``; ``measure_run`` makes the speculative and
target-only runs to read them from (under a ``Budget``).

This module holds no formula of its own (``playground.decoding.sampling`` does) and draws nothing
(``visual.lab`` does).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from playground.decoding.records import GenerationResult, RunStats
from playground.decoding.sampling import expected_tokens_per_step, predicted_speedup
from playground.errors import Message
from playground.lab.budget import Budget, Progress
from playground.lab.runs import STOPPED_TIME, run_within
from playground.rules import DEFAULT_RULE
from playground.settings import RunSettings
from playground.validate import MAX_GAMMA
from playground.validate import number as check_number


@dataclass(frozen=True)
class TheoryPoint:
    gamma: int
    expected_tokens: float  # E
    speedup: float  # S


@dataclass(frozen=True)
class TheoryCurve:
    alpha: float
    c: float
    v: float
    points: tuple[TheoryPoint, ...]
    best_gamma: int
    best_speedup: float

    @property
    def pays_off(self) -> bool:
        return self.best_speedup > 1.0


def theory_curve(alpha: float, c: float, v: float, gammas: Iterable[int] = range(1, MAX_GAMMA + 1)) -> TheoryCurve:
    """E(γ) = (1 − α^{γ+1})/(1 − α) and S(γ) = E/(γc + v_γ) over a grid; best γ by S."""
    alpha = check_number("α", alpha, 0.0, 1.0)
    c = check_number("c", c, 0.0, 100.0)
    v = check_number("v_γ", v, 0.01, 100.0)
    pts = tuple(TheoryPoint(g, expected_tokens_per_step(alpha, g), predicted_speedup(alpha, g, c, v)) for g in gammas)
    if not pts:
        raise ValueError("need at least one γ")
    best = max(pts, key=lambda p: (p.speedup, -p.gamma))
    return TheoryCurve(alpha, c, v, pts, best.gamma, best.speedup)


@dataclass(frozen=True)
class MeasuredPoint:
    gamma: int
    alpha: float | None
    c: float | None
    v: float | None
    predicted: float | None  # S from the measured α, c, v
    measured: float | None  # speculative tokens/s ÷ target-only tokens/s (if a baseline ran)
    mean_accepted_length: float | None
    note: str = ""  # e.g. the time limit cut the runs short


def measured_point(spec: RunStats, baseline: RunStats | None = None) -> MeasuredPoint:
    """The current run's α, c, v_γ and speedup, for the "you are here" point.

    c = drafter ms per drafted token / target ms per 1-token pass; v_γ = target ms per verify
    pass / target ms per 1-token pass.  The 1-token cost comes from the baseline run when
    there is one (its passes are all single-token), else from the run's own 1-token passes.
    """
    one = None
    if baseline is not None and baseline.verify_ms_per_call:
        one = baseline.verify_ms_per_call
    elif spec.single_token_ms:
        one = spec.single_token_ms
    c = (spec.draft_ms_per_token / one) if (one and spec.draft_ms_per_token is not None) else None
    if c is None and one and spec.drafted_tokens == 0:
        c = 0.0
    v = (spec.verify_ms_per_call / one) if (one and spec.verify_ms_per_call) else None
    alpha = spec.acceptance_rate
    predicted = None
    if alpha is not None and c is not None and v is not None and spec.gamma > 0:
        predicted = predicted_speedup(alpha, spec.gamma, c, v)
    measured = None
    if baseline is not None and baseline.tokens_per_s and spec.tokens_per_s and baseline.tokens_per_s > 0:
        measured = spec.tokens_per_s / baseline.tokens_per_s
    return MeasuredPoint(spec.gamma, alpha, c, v, predicted, measured, spec.mean_accepted_length)


MEASURE_TOKENS = 48  # new tokens per measured run (the theory tab's measurement)


def measure_run(
    prompt: str, settings: RunSettings, *, progress: Progress = None, budget: Budget | None = None
) -> tuple[GenerationResult, GenerationResult, MeasuredPoint]:
    """One speculative and one target-only run of ``settings`` (from ``api.run_settings``: a
    preset named; trace off here, for honest timings) and the measured point.

    ``budget`` (default ``Budget.for_preset``): each run stops between target passes once its
    share of the time is up; the point is then measured on the steps that ran and says so."""
    budget = budget if budget is not None else Budget.for_preset(settings.preset)
    settings = replace(settings, trace=False)
    max_new_tokens = settings.max_new_tokens
    if progress:
        progress(0.02, Message("progress.warmup"))
    run_within(prompt, replace(settings, rule=DEFAULT_RULE, max_new_tokens=min(4, max_new_tokens)), budget.share(0.2))
    if progress:
        progress(0.1, Message("progress.target"))
    base = run_within(prompt, settings.autoregressive(), budget.share(0.5))
    if progress:
        progress(0.5, Message("progress.speculative"))
    spec = run_within(prompt, settings, budget)
    if progress:
        progress(1.0, Message("progress.done"))
    point = measured_point(spec.stats, base.stats)
    if STOPPED_TIME in (spec.stats.stopped, base.stats.stopped):
        point = replace(
            point,
            note=(
                f"Partial: stopped after {budget.describe()} (the lab's time limit on this model) — target alone ran "
                f"{base.stats.new_tokens} and speculative {spec.stats.new_tokens} of {max_new_tokens} tokens; the point "
                "is measured on those."
            ),
        )
    return spec, base, point
