"""The distribution check: N short continuations with speculative sampling (any rule) and with the target alone.

``distribution_check`` takes a frozen ``DistributionSettings`` (what to draw) and the runtime
services as keywords (models, progress, a reference check, the time budget).  It validates
the settings, draws both samples with ``sample_continuations`` (the engine loop
per sample, a generator per sample, memoised models: fast), computes the target's exact
outcome probabilities where that is cheap (``playground.lab.exact``), and compares them
with ``lab.stats``: total variation and its noise floor, chi-square p-values, a reading in
plain words.  The result is a frozen ``DistributionCheck``; ``display_bins`` shapes it for
a histogram.  Under a ``Budget`` a check stops early and is marked partial.

This module does not implement the rules (``playground.decoding.engine`` does), compute the exact
probabilities (``playground.lab.exact`` does) or render anything (``visual.lab`` does).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

from playground.api import run_settings
from playground.config import load_config
from playground.decoding.engine import run as engine_run
from playground.decoding.sampling import SamplingParams
from playground.decoding.target import Prefill
from playground.decoding.text import token_label
from playground.errors import Message
from playground.lab.budget import Budget, Progress, default_wall_s, is_builtin
from playground.lab.context import LabContext
from playground.lab.draws import draw_in_order
from playground.lab.exact import exact_probabilities
from playground.lab.memo import MemoModel
from playground.lab.stats import (
    ChiSquare,
    chi_square_goodness_of_fit,
    chi_square_homogeneity,
    plain_reading,
    total_variation,
    tv_noise_floor,
)
from playground.rules import DEFAULT_RULE, RULES
from playground.settings import RunSettings
from playground.validate import bounds, whole_number
from playground.validate import temperature as check_temperature

MAX_SAMPLES = 50_000
MAX_SAMPLES_SLOW = 2000  # presets with real LMs: tens of continuations a second on a 2-core CPU (drawn together)
MAX_CONT_TOKENS = 3
DISPLAY_BINS = 30


def sample_cap(preset: Any) -> int:
    """The largest N a check may ask for on ``preset`` (name or Preset): ``MAX_SAMPLES`` on the
    built-in tiny models, ``MAX_SAMPLES_SLOW`` on real ones (and on a name that is not a
    preset: the check itself then says so)."""
    return MAX_SAMPLES if is_builtin(preset) else MAX_SAMPLES_SLOW


def outcome_label(ids: Sequence[int], tokenizer, eos_ids: Iterable[int] = ()) -> str:
    eos = set(eos_ids)
    parts = []
    for t in ids:
        if t in eos:
            parts.append("<eos>")
            continue
        text = tokenizer.decode([int(t)], skip_special_tokens=False, clean_up_tokenization_spaces=False)
        parts.append(token_label(text))
    return "·".join(parts)


@dataclass(frozen=True)
class SampleStats:
    n: int
    seconds: float
    judged: int
    accepted: int
    drafted: int
    target_calls: int  # decode-phase verify passes (prefill excluded)
    new_tokens: int
    memo_hits: int
    memo_misses: int

    @property
    def acceptance_rate(self) -> float | None:
        return self.accepted / self.judged if self.judged else None

    @property
    def tokens_per_target_call(self) -> float | None:
        return self.new_tokens / self.target_calls if self.target_calls else None


@dataclass(frozen=True)
class DistributionCheck:
    """A check's result: what was drawn (the prompt, N and the speculative run's settings as
    drawn: the preset's models, dtype and γ resolved), both samples and their statistics."""

    prompt: str
    settings: RunSettings  # each speculative continuation's (max_new_tokens: its length)
    n_samples: int
    category: str  # the rule's (playground.rules)
    outcomes: tuple[tuple[int, ...], ...]  # every outcome seen, most frequent (pooled) first
    labels: tuple[str, ...]
    spec_counts: tuple[int, ...]
    target_counts: tuple[int, ...]
    exact_probs: tuple[float, ...] | None  # the target's exact probability of each outcome
    tv: float  # speculative histogram vs target-only histogram
    tv_noise: float  # typical TV of two same-distribution samples of these sizes
    tv_exact: float | None  # speculative histogram vs the target's exact distribution
    chi2: ChiSquare  # two-sample homogeneity test
    chi2_exact: ChiSquare | None  # speculative vs exact target probabilities
    spec: SampleStats
    target: SampleStats
    reading: str
    notes: tuple[str, ...] = ()
    stopped: str = ""  # why the sample is smaller than asked ("" when complete)

    @property
    def n_tokens(self) -> int:
        """Tokens per continuation."""
        return self.settings.max_new_tokens

    def same_draw(self, other: DistributionCheck) -> bool:
        """``other`` is this check under another rule (or this rule again): the same prompt, N and
        run settings but for the rule and the argmax drafts a rule may ask for."""
        return (self.prompt, self.n_samples, _but_rule(self.settings)) == (
            other.prompt,
            other.n_samples,
            _but_rule(other.settings),
        )

    @property
    def partial(self) -> bool:
        """The time limit cut the sample short: the statistics describe what was collected."""
        return bool(self.stopped)

    @property
    def p_value(self) -> float:
        return self.chi2.p_value

    @property
    def speedup_tokens_per_call(self) -> float | None:
        """Target passes saved: target-only calls per token / speculative calls per token."""
        s, t = self.spec.tokens_per_target_call, self.target.tokens_per_target_call
        return (s / t) if s and t else None

    @property
    def measured_speedup(self) -> float | None:
        if self.spec.seconds > 0 and self.target.seconds > 0 and self.spec.memo_hits == 0:
            return self.target.seconds / self.spec.seconds
        return None


def _but_rule(settings: RunSettings) -> RunSettings:
    return replace(settings, rule=DEFAULT_RULE, draft_argmax=False)


def _sample_seed(seed: int, index: int, stream: int) -> int:
    return ((seed % (2**40)) << 22 | (index % (2**21)) << 1 | stream) % (2**63)


def sample_continuations(
    ctx: LabContext,
    prompt_ids: list[int],
    config: RunSettings,
    n: int,
    seed: int,
    *,
    draft_argmax: bool = False,
    progress: Progress = None,
    progress_span: tuple[float, float] = (0.0, 1.0),
    memo: bool = True,
    budget: Budget | None = None,
    cache_bytes: int | None = None,
    rows: int | None = None,
) -> tuple[Counter, SampleStats]:
    """Run the engine loop up to n times (config.max_new_tokens tokens each) and count the outcomes.

    ``budget`` is asked before every continuation starts (the first always starts, so a side
    always has at least one): when it runs out no new one starts and ``SampleStats.n`` says
    how many were drawn; Stop raises ``LabCancelled`` between continuations.  Sample i always
    uses the generator for (seed, i), so a stopped run's outcomes are exactly the first ones
    of a full run.

    Where memo tables can answer (a memoisable drafter on a model without sliding-window
    layers), the continuations are drawn one at a time through them: the tables key a call on
    the tokens a cache was fed, are not shared between threads, and answer a repeated prefill
    anyway.  Otherwise every continuation starts from a copy of one prefill of the prompt
    (``Prefill``: the cache its own prefill would have left, computed once), and ``rows``
    continuations are drawn at once, their target passes shared (``playground.lab.draws``);
    default ``draw_rows``."""
    speculative = config.mode == "speculative"
    stream_id = 0 if speculative else 1
    budget = budget or Budget(None)
    make, target = ctx.drafter_factory(draft_argmax, memo, cache_bytes)
    memoised = isinstance(target, MemoModel)
    rows = 1 if memoised else draw_rows(ctx) if rows is None else rows
    prefill = None
    if not memoised and len(prompt_ids) > 1:
        hidden = speculative and make().needs_target_hidden
        prefill = Prefill.of(target, prompt_ids, rollback=speculative, hidden=hidden)
    counts: Counter = Counter()
    totals = Counter()
    t0 = time.perf_counter()
    lo, hi = progress_span
    every = max(1, n // 100)
    line = "progress.speculative_continuations" if speculative else "progress.target_continuations"

    def draw(i: int, scheduler=None):
        gen = torch.Generator().manual_seed(_sample_seed(seed, i, stream_id))
        return engine_run(target, ctx.tokenizer, prompt_ids, config, drafter=make() if speculative else None,
                          eos_token_ids=ctx.pair.eos_token_ids, generator=gen, scheduler=scheduler,
                          prefill=prefill)  # fmt: skip

    def count(i: int, res) -> None:
        counts[tuple(res.token_ids)] += 1
        st = res.stats
        totals.update(judged=st.judged_tokens, accepted=st.accepted_tokens, drafted=st.drafted_tokens,
                      calls=st.steps, new=st.new_tokens, done=1)  # fmt: skip
        done = totals["done"]
        if progress is not None and (done % every == 0 or done == n):
            progress(lo + (hi - lo) * done / n, Message(line, done=f"{done:,}", n=f"{n:,}"))

    if rows > 1:
        draw_in_order(target, draw, n, rows, budget, count)
    else:
        for i in range(n):
            if budget.expired() and i > 0:
                break
            count(i, draw(i))
    return counts, _sample_stats(totals, time.perf_counter() - t0, target)


def _sample_stats(totals: Counter, seconds: float, target) -> SampleStats:
    """``sample_continuations``' totals as ``SampleStats`` (the memo tables' hits where ``target`` has them)."""
    return SampleStats(
        n=totals["done"],
        seconds=seconds,
        judged=totals["judged"],
        accepted=totals["accepted"],
        drafted=totals["drafted"],
        target_calls=totals["calls"],
        new_tokens=totals["new"],
        memo_hits=getattr(target, "hits", 0),
        memo_misses=getattr(target, "misses", 0),
    )


def draw_rows(ctx: LabContext) -> int:
    """Continuations drawn at once: one on the built-in tiny models (a pass there costs
    microseconds, threads would only add overhead), ``limits.lab_rows`` on real ones."""
    return 1 if ctx.fast else load_config().limits.lab_rows


@dataclass(frozen=True)
class DistributionSettings:
    """What a distribution check draws: the prompt, one speculative run's settings and the lab's own numbers.

    ``run``: each continuation's settings (preset, drafter, dtype, rule, γ, sampling, seed;
    ``max_new_tokens`` is the continuation's length, ``n_tokens``), from ``api.run_settings``
    (``of`` builds them with the lab's defaults).  ``n_samples``: continuations per side;
    ``exact=None`` computes the target's exact probabilities only where cheap; ``memo``
    memoises the models' forward passes.  The lab's own bounds are checked by
    ``distribution_check``, not here.
    """

    prompt: str
    run: RunSettings
    n_samples: int = 2000
    exact: bool | None = None
    memo: bool = True

    @property
    def n_tokens(self) -> int:
        return self.run.max_new_tokens

    @classmethod
    def of(
        cls,
        prompt: str,
        *,
        n_samples: int = 2000,
        n_tokens: int = 2,
        exact: bool | None = None,
        memo: bool = True,
        **values: Any,
    ) -> DistributionSettings:
        """``values`` (``RunSettings``' fields) over the lab's defaults — tiny-random, temperature
        1, chain drafts, argmax drafts for rule "softmax-q" (that bug needs them) — resolved
        once by ``api.run_settings`` (the preset's γ, drafter and dtype where not given).  The
        rule is set after the app's checks: the lab checks rules the app does not offer."""
        n_tokens = whole_number("tokens per continuation", n_tokens, 1, MAX_CONT_TOKENS)
        values = {"preset": "tiny-random", "temperature": 1.0, "tree_nodes": 1, **values}
        rule = values.pop("rule", None) or DEFAULT_RULE
        if values.get("draft_argmax") is None:
            values["draft_argmax"] = getattr(RULES.get(rule), "argmax_drafts", False)
        run = run_settings(**{**values, "mode": "speculative", "max_new_tokens": n_tokens, "trace": False})
        return cls(prompt, replace(run, rule=rule), n_samples, exact, memo)


@dataclass(frozen=True)
class _TargetSampleKey:
    """Everything the target-only sample depends on: equal keys, interchangeable samples (the
    target-only run's settings, less the drafter and γ it never reads)."""

    prompt: str
    n_samples: int
    settings: RunSettings

    @classmethod
    def of(cls, prompt: str, n_samples: int, spec: RunSettings) -> _TargetSampleKey:
        return cls(prompt, n_samples, spec.autoregressive(drafter=None, gamma=1))


@dataclass(frozen=True)
class _Plan:
    """A validated check: the settings with every value resolved (``run``: the speculative side's,
    on the loaded models), the prompt's ids, notes."""

    settings: DistributionSettings
    prompt_ids: list[int]
    notes: tuple[str, ...]

    @property
    def spec_cfg(self) -> RunSettings:
        return self.settings.run

    @property
    def ar_cfg(self) -> RunSettings:
        return self.settings.run.autoregressive()

    def target_key(self) -> _TargetSampleKey:
        return _TargetSampleKey.of(self.settings.prompt, self.settings.n_samples, self.settings.run)


def distribution_check(
    settings: DistributionSettings,
    *,
    ctx: LabContext | None = None,
    progress: Progress = None,
    reference: DistributionCheck | None = None,
    budget: Budget | None = None,
    cache_bytes: int | None = None,
    rows: int | None = None,
) -> DistributionCheck:
    """Speculative (with ``settings.rule``) vs target-only: N continuations of ``n_tokens`` tokens each.

    ``ctx``: the loaded models (default: a ``LabContext`` for the settings' preset, drafter, dtype).
    ``reference``: an earlier check whose target-only sample is reused when
    it was drawn with the same prompt, preset, sampling settings, N, length and seed (so
    comparing rules costs one target-only sample).
    ``budget``: the wall-time limit and Stop (default ``Budget.for_preset``: ``limits.lab_wall_s``
    on real models, none on the built-in tiny ones).  The speculative side gets half the time
    when a target-only sample must be drawn too, which then draws as many continuations as the
    speculative side got; a stopped check is marked ``partial`` and says so in ``stopped`` and
    its reading.  ``cache_bytes``: the memo tables' cap (default ``limits.lab_cache_bytes``).
    ``rows``: continuations drawn at once (default ``draw_rows``; see ``sample_continuations``).
    """
    _check_model_free(settings)
    ctx = ctx or LabContext(settings.run.preset, settings.run.drafter, settings.run.dtype)
    budget = budget if budget is not None else Budget(default_wall_s(ctx.preset))
    plan = _plan(settings, ctx)
    s = plan.settings
    reuse = (
        reference is not None
        and _TargetSampleKey.of(reference.prompt, reference.n_samples, reference.settings) == plan.target_key()
    )
    spec_counts, spec_stats = sample_continuations(
        ctx,
        plan.prompt_ids,
        plan.spec_cfg,
        s.n_samples,
        s.run.seed,
        draft_argmax=s.run.draft_argmax,
        progress=progress,
        progress_span=(0.0, 0.96 if reuse else 0.48),
        memo=s.memo,
        budget=budget if reuse else budget.share(0.5),
        cache_bytes=cache_bytes,
        rows=rows,
    )
    if reuse:
        tgt_counts = Counter({o: c for o, c in zip(reference.outcomes, reference.target_counts) if c})
        tgt_stats = reference.target
    else:
        tgt_counts, tgt_stats = sample_continuations(
            ctx,
            plan.prompt_ids,
            plan.ar_cfg,
            spec_stats.n,
            s.run.seed,
            draft_argmax=False,
            progress=progress,
            progress_span=(0.48, 0.96),
            memo=s.memo,
            budget=budget,
            cache_bytes=cache_bytes,
            rows=rows,
        )
    stopped = ""
    if spec_stats.n < s.n_samples or tgt_stats.n < s.n_samples:
        stopped = stopped_message(budget, spec_stats.n, tgt_stats.n, s.n_samples)
    budget.expired()  # raises if Stop was pressed meanwhile: nobody waits for the statistics
    if progress is not None:
        progress(0.97, Message("progress.statistics"))
    check = _compare(ctx, plan, spec_counts, spec_stats, tgt_counts, tgt_stats, stopped, progress)
    if progress is not None:
        progress(1.0, Message("progress.done"))
    return check


def _check_model_free(s: DistributionSettings) -> None:
    """The lab's own checks that need no model (the length, a sampling temperature), before any model loads."""
    whole_number("tokens per continuation", s.n_tokens, 1, MAX_CONT_TOKENS)
    lim = load_config().limits
    if check_temperature(s.run.temperature, lim.max_temperature) == 0.0:
        raise ValueError(
            f"the distribution check needs sampling: temperature must be in (0, {lim.max_temperature}] "
            "(at temperature 0 use the greedy equality check)"
        )


def _plan(settings: DistributionSettings, ctx: LabContext) -> _Plan:
    """Resolve and check what depends on the models (N's cap, the loaded preset), encode the prompt.

    ``settings`` have passed ``_check_model_free``."""
    lim = load_config().limits
    n_samples = whole_number("N", settings.n_samples, 10, sample_cap(ctx.preset))
    whole_number("gamma", settings.run.gamma, 1, bounds(lim).max_gamma)
    s = replace(
        settings.run,
        mode="speculative",
        preset=ctx.preset.name,
        drafter=ctx.drafter_kind,
        dtype=ctx.pair.dtype,
        trace=False,
    )
    notes: list[str] = []
    if s.max_new_tokens == 1:
        notes.append(
            "With 1-token continuations no draft is ever made (a step always adds one token of its own), so "
            "every rule is trivially exact: use 2 or 3 tokens to see the rules at work."
        )
    if RULES[s.rule].argmax_drafts and (ctx.drafter_kind != "model" or not s.draft_argmax):
        notes.append(
            "Rule (a) only differs from the correct rule when a model drafter drafts its argmax at T > 0 "
            "(the drafter's softmax is then available to misuse); here it behaves like the correct rule."
        )
    resolved = replace(settings, run=s, n_samples=n_samples)
    return _Plan(resolved, ctx.encode(settings.prompt), tuple(notes))


def _compare(
    ctx: LabContext,
    plan: _Plan,
    spec_counts: Counter,
    spec_stats: SampleStats,
    tgt_counts: Counter,
    tgt_stats: SampleStats,
    stopped: str,
    progress: Progress,
) -> DistributionCheck:
    """The statistics of the two samples (and the exact probabilities), read in plain words."""
    s = plan.settings
    outcomes = sorted(set(spec_counts) | set(tgt_counts), key=lambda o: (-(spec_counts[o] + tgt_counts[o]), o))
    probs, table = exact_probabilities(
        ctx,
        plan.prompt_ids,
        SamplingParams.of(plan.spec_cfg),
        outcomes,
        exact=s.exact,
        n_tokens=s.n_tokens,
        n_spec=spec_stats.n,
        progress=progress,
    )
    chi = chi_square_homogeneity(spec_counts, tgt_counts)
    tv = total_variation(spec_counts, tgt_counts)
    noise = tv_noise_floor(spec_counts, tgt_counts)
    tv_exact = chi_exact = None
    if probs is not None:
        n = sum(spec_counts.values())
        seen = sum(probs.values())
        tv_exact = 0.5 * (sum(abs(spec_counts[o] / n - probs[o]) for o in outcomes) + max(0.0, 1.0 - seen))
    if table is not None:
        chi_exact = chi_square_goodness_of_fit(spec_counts, table)
    info = RULES[s.run.rule]
    reading = plain_reading(tv, noise, chi.p_value, spec_stats.n, info.category, n_other=tgt_stats.n)
    if stopped:
        reading = f"PARTIAL RESULT — {stopped} " + reading
    sa = spec_stats.acceptance_rate
    if sa is not None:
        reading += f" Acceptance rate of this rule here: {sa:.0%} of judged drafts."
    return DistributionCheck(
        prompt=s.prompt,
        settings=s.run,
        n_samples=int(s.n_samples),
        category=info.category,
        outcomes=tuple(outcomes),
        labels=tuple(outcome_label(o, ctx.tokenizer, ctx.pair.eos_token_ids) for o in outcomes),
        spec_counts=tuple(spec_counts[o] for o in outcomes),
        target_counts=tuple(tgt_counts[o] for o in outcomes),
        exact_probs=tuple(probs[o] for o in outcomes) if probs is not None else None,
        tv=tv,
        tv_noise=noise,
        tv_exact=tv_exact,
        chi2=chi,
        chi2_exact=chi_exact,
        spec=spec_stats,
        target=tgt_stats,
        reading=reading,
        notes=plan.notes,
        stopped=stopped,
    )


def stopped_message(budget: Budget, n_spec: int, n_target: int, n_asked: int) -> str:
    """'Stopped after 60 s (the time limit): 143 of 500 continuations ...' for a cut-short check."""
    return (
        f"Stopped after {budget.describe()} (the lab's time limit on this model): {n_spec:,} of {n_asked:,} "
        f"continuations speculative, {n_target:,} of {n_asked:,} target alone. Every number here is computed "
        "on those — a smaller sample, so the test sees less; use fewer tokens, a smaller N, or the tiny model "
        "for large N."
    )


def display_bins(check: DistributionCheck, max_bins: int = DISPLAY_BINS) -> list[dict[str, Any]]:
    """Rows for a histogram: the most frequent outcomes, the rest pooled as "(other)"."""
    ns, nt = max(sum(check.spec_counts), 1), max(sum(check.target_counts), 1)
    rows = []
    for i, label in enumerate(check.labels):
        rows.append(
            {
                "label": label,
                "speculative": check.spec_counts[i] / ns,
                "target": check.target_counts[i] / nt,
                "exact": check.exact_probs[i] if check.exact_probs is not None else None,
            }
        )
    if len(rows) <= max_bins:
        return rows
    head, tail = rows[: max_bins - 1], rows[max_bins - 1 :]
    other = {
        "label": f"(other {len(tail)})",
        "speculative": sum(r["speculative"] for r in tail),
        "target": sum(r["target"] for r in tail),
        "exact": None,
    }
    if check.exact_probs is not None:
        other["exact"] = max(0.0, 1.0 - sum(r["exact"] for r in head))
    return head + [other]
