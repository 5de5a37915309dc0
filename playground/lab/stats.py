"""Statistics for the distribution check: total variation, its noise floor, chi-square tests, a reading.

Pure functions of counts or probabilities (mappings by outcome, or sequences by index):
``total_variation``, ``tv_noise_floor`` (the TV two same-distribution samples typically
show), the two-sample ``chi_square_homogeneity`` and the one-sample
``chi_square_goodness_of_fit`` (sparse outcomes pooled), ``plain_reading`` (what the
numbers mean, in words a student can repeat) and ``format_p``.

This module does not sample, load models or render anything; scipy is imported only
when a p-value is computed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


def _as_dist(x: Mapping[Any, float] | Sequence[float]) -> dict[Any, float]:
    items = x.items() if isinstance(x, Mapping) else enumerate(x)
    out: dict[Any, float] = {}
    for k, v in items:
        v = float(v)
        if not math.isfinite(v) or v < 0:
            raise ValueError(f"counts/probabilities must be finite and >= 0, got {v!r}")
        out[k] = out.get(k, 0.0) + v
    return out


def total_variation(a: Mapping[Any, float] | Sequence[float], b: Mapping[Any, float] | Sequence[float]) -> float:
    """TV(a, b) = ½ Σ |a(x) − b(x)| after normalising each (counts or probabilities).

    Sequences are indexed by position, mappings by key (missing keys are 0).
    """
    da, db = _as_dist(a), _as_dist(b)
    sa, sb = sum(da.values()), sum(db.values())
    if sa <= 0 or sb <= 0:
        raise ValueError("total_variation needs two non-empty distributions")
    keys = set(da) | set(db)
    return 0.5 * sum(abs(da.get(k, 0.0) / sa - db.get(k, 0.0) / sb) for k in keys)


def tv_noise_floor(counts_a: Mapping[Any, float], counts_b: Mapping[Any, float]) -> float:
    """Typical TV between two samples of these sizes drawn from the *same* distribution.

    Normal approximation: per outcome f_a − f_b has sd sqrt(p(1−p)(1/N_a + 1/N_b)) with p the
    pooled frequency, and E|X| = sd·sqrt(2/π); TV is half the sum.
    """
    da, db = _as_dist(counts_a), _as_dist(counts_b)
    na, nb = sum(da.values()), sum(db.values())
    if na <= 0 or nb <= 0:
        return float("nan")
    total = na + nb
    acc = 0.0
    for k in set(da) | set(db):
        p = (da.get(k, 0.0) + db.get(k, 0.0)) / total
        acc += math.sqrt(max(p * (1 - p), 0.0) * (1 / na + 1 / nb))
    return 0.5 * math.sqrt(2 / math.pi) * acc


@dataclass(frozen=True)
class ChiSquare:
    statistic: float
    dof: int
    p_value: float
    bins: int  # bins after pooling
    pooled: int  # original outcomes merged into the pooled "other" bin


def _chi2_sf(stat: float, dof: int) -> float:
    from scipy.stats import chi2  # scipy is slow to import; only the chi-square test needs it

    if dof <= 0:
        return 1.0
    return float(chi2.sf(stat, dof))


def chi_square_homogeneity(
    counts_a: Mapping[Any, float] | Sequence[float],
    counts_b: Mapping[Any, float] | Sequence[float],
    min_expected: float = 5.0,
) -> ChiSquare:
    """Two-sample chi-square test: were both histograms drawn from the same distribution?

    Outcomes whose expected count is below ``min_expected`` in either sample are pooled
    (smallest first) into one "other" bin, which is itself dropped into its neighbour if it
    stays too small — the usual rule for the chi-square approximation to hold.
    """
    da, db = _as_dist(counts_a), _as_dist(counts_b)
    na, nb = sum(da.values()), sum(db.values())
    if na <= 0 or nb <= 0:
        raise ValueError("chi_square_homogeneity needs two non-empty samples")
    keys = sorted(set(da) | set(db), key=lambda k: -(da.get(k, 0.0) + db.get(k, 0.0)))
    frac_a = na / (na + nb)
    need = min_expected / min(frac_a, 1 - frac_a)  # pooled count giving expected >= min in both rows
    rows: list[tuple[float, float]] = []
    other_a = other_b = 0.0
    pooled = 0
    for k in keys:
        a, b = da.get(k, 0.0), db.get(k, 0.0)
        if a + b >= need:
            rows.append((a, b))
        else:
            other_a += a
            other_b += b
            pooled += 1
    if other_a + other_b > 0:
        if other_a + other_b >= need or not rows:
            rows.append((other_a, other_b))
        else:  # too small on its own: merge into the smallest kept bin
            a, b = rows[-1]
            rows[-1] = (a + other_a, b + other_b)
    if len(rows) < 2:
        return ChiSquare(0.0, 0, 1.0, len(rows), pooled)
    stat = 0.0
    for a, b in rows:
        tot = a + b
        ea, eb = tot * frac_a, tot * (1 - frac_a)
        stat += (a - ea) ** 2 / ea + (b - eb) ** 2 / eb
    dof = len(rows) - 1
    return ChiSquare(stat, dof, _chi2_sf(stat, dof), len(rows), pooled)


def chi_square_goodness_of_fit(
    counts: Mapping[Any, float] | Sequence[float],
    probs: Mapping[Any, float] | Sequence[float],
    min_expected: float = 5.0,
) -> ChiSquare:
    """One-sample chi-square test of observed counts against known probabilities.

    The bins must not depend on the sample: every outcome whose expected count N·p reaches
    ``min_expected`` is a bin, and everything else (outcomes with small p, outcomes missing
    from ``probs``, the probability mass not listed) forms one "other" bin.  (Choosing bins
    from the outcomes that happened to be observed would bias the test.)  An observed outcome
    listed with probability 0 gives p-value 0.
    """
    dc, dp = _as_dist(counts), _as_dist(probs)
    n = sum(dc.values())
    if n <= 0:
        raise ValueError("chi_square_goodness_of_fit needs a non-empty sample")
    mass = sum(dp.values())
    if mass > 1 + 1e-6:
        raise ValueError(f"probabilities sum to {mass:.6f} > 1")
    if any(c > 0 and k in dp and dp[k] <= 0 for k, c in dc.items()):
        return ChiSquare(float("inf"), max(len(dp), 1), 0.0, len(dp) + 1, 0)  # an impossible outcome occurred
    rows = [(dc.get(k, 0.0), n * p) for k, p in dp.items() if n * p >= min_expected]
    pooled = len(dp) - len(rows)
    other_o = n - sum(o for o, _ in rows)
    other_e = n - sum(e for _, e in rows)
    if other_e >= min_expected or not rows:
        rows.append((other_o, other_e))
    elif other_e > 1e-9 or other_o > 0:
        rows.sort(key=lambda oe: oe[1])
        o, e = rows[0]
        rows[0] = (o + other_o, e + other_e)
    if len(rows) < 2:
        return ChiSquare(0.0, 0, 1.0, len(rows), pooled)
    if any(e <= 0 and o > 0 for o, e in rows):
        return ChiSquare(float("inf"), len(rows) - 1, 0.0, len(rows), pooled)
    stat = sum((o - e) ** 2 / e for o, e in rows if e > 0)
    dof = len(rows) - 1
    return ChiSquare(stat, dof, _chi2_sf(stat, dof), len(rows), pooled)


def plain_reading(
    tv: float, noise: float, p_value: float, n: int, category: str = "correct", n_other: int | None = None
) -> str:
    """What the numbers mean, in words a student can repeat.

    ``n_other``: the target-only sample's size when it differs from the speculative one's
    (a check stopped by the time limit, or a reused target-only sample)."""
    ptxt = format_p(p_value)
    sizes = (
        f"N = {n:,} continuations per side"
        if n_other is None or n_other == n
        else f"N = {n:,} speculative and {n_other:,} target-only continuations"
    )
    base = (
        f"With {sizes}, the two histograms differ by TV = {tv:.3f}; sampling noise "
        f"alone typically gives about {noise:.3f}. "
    )
    if p_value < 0.001:
        verdict = (
            f"The chi-square test says p = {ptxt}: if both came from the same distribution, a difference this "
            "large would happen less than once in a thousand repeats. The speculative output is NOT distributed "
            "like the target's."
        )
        if category in ("correct", "wasteful"):
            verdict += (
                " This rule is lossless, so this is either a one-in-a-thousand fluke (re-run with another seed) "
                "or a bug."
            )
        elif category == "lossy":
            verdict += " That is the price of this rule's extra acceptance."
        else:
            verdict += " This is the bug the rule demonstrates."
        return base + verdict
    if p_value < 0.05:
        return base + (
            f"p = {ptxt}: weak evidence of a difference — not conclusive at this N. Increase N (or re-run with "
            "another seed) to settle it."
        )
    verdict = (
        f"p = {ptxt}: no detectable difference — a gap like this is what chance produces. "
        "At this N, drifts much smaller than the noise level would go unnoticed; a larger N sees finer."
    )
    if category in ("wrong", "lossy"):
        verdict += (
            " This rule is known to be wrong, so the drift is smaller than this N can see here: raise N, the "
            "temperature, or use more tokens per continuation."
        )
    return base + verdict


def format_p(p: float) -> str:
    if p != p:
        return "n/a"
    if p == 0.0:
        return "< 1e-300"
    if p < 1e-4:
        return f"{p:.1e}"
    return f"{p:.4f}" if p < 0.1 else f"{p:.3f}"
