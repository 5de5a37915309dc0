"""The classroom lab: check losslessness, break it on purpose, reason about speed.

Pure logic (no gradio, plotly or ``visual``); the renderers live in
``visual/lab.py`` and the tabs in ``visual/lab_ui.py``.

* **Equality check** (greedy): target-only vs speculative greedy decoding,
  token by token; at the first divergence, both tokens' logits *as each path
  computed them* (the speculative pass is replayed with the same chunking), so
  a bfloat16 near-tie flip can be shown rather than asserted.
* **Distribution check** (sampling): N short continuations with speculative
  sampling (any verification rule from ``engine.RULES``) and with the target
  alone, total-variation distance, chi-square p-values, a plain-words reading.
  Fast: the engine loop runs per sample with a per-sample generator, and a
  memoising view of each model answers *identical* network calls from a table
  (same cached tokens, same new tokens -> same logits), so only the decisions
  (drafts, u, accept/reject, resample) are recomputed per sample.
* **Theory bench**: E and S over a grid of γ, best γ, the measured point.
* **Predict, then reveal**: questions from a recorded step, scoring, a score card.
* **Replay and share**: trace import validation (size, JSON, shape, types and value ranges,
  every refusal naming its field; never ``eval``/pickle), URL query-parameter validation
  (messages quote at most a short excerpt of what a link said), classroom presets.
* **Limits**: the heavy actions take a ``Budget`` (``limits.lab_wall_s`` on real models, none on
  the built-in tiny ones, a fake clock in tests): out of time they stop and return a result
  labelled partial; Stop raises ``LabCancelled`` between continuations.  ``MemoModel`` tables
  hold at most ``limits.lab_cache_bytes``.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
import typing
import weakref
from collections import Counter
from dataclasses import dataclass, fields, replace
from types import SimpleNamespace
from typing import Any, Callable, Iterable, Mapping, Sequence

import torch

from playground.config import AppConfig, load_config
from playground.engine import MAX_GAMMA, MAX_TREE_NODES, MODES, RULES, GenerationConfig, logits_to_keep_arg
from playground.engine import run as engine_run
from playground.records import Candidate, Correction, DraftDecision, GenerationResult, RunStats, StepRecord
from playground.validate import temperature as check_temperature
from playground.sampling import SamplingParams, expected_tokens_per_step, logits_to_probs, predicted_speedup

Progress = Callable[[float, str], None] | None

# --------------------------------------------------------------------------------------------
# Time budget and Stop (heavy actions on real models)
# --------------------------------------------------------------------------------------------


class LabCancelled(RuntimeError):
    """The user pressed Stop: the action ends at once, without a result (nobody is waiting for it)."""


class Budget:
    """How long a heavy lab action may run, and whether its user pressed Stop.

    Gradio's ``cancels=`` only abandons an event: a function already running in a worker
    thread goes on to the end and keeps its slot.  So the loops themselves ask
    ``expired()`` between continuations (and between generation steps): it raises
    ``LabCancelled`` once ``cancelled()`` says so, and returns True once ``wall_s``
    seconds have passed (``None``: no limit), after which the action stops and reports
    what it collected.  ``clock`` is injectable so tests can run out of time on purpose.
    """

    def __init__(self, wall_s: float | None, cancelled: Callable[[], bool] | None = None,
                 clock: Callable[[], float] = time.monotonic, _start: float | None = None) -> None:
        if wall_s is not None and (isinstance(wall_s, bool) or not isinstance(wall_s, (int, float)) or wall_s != wall_s
                                   or wall_s < 0):
            raise ValueError(f"wall_s must be a number of seconds >= 0 or None, got {wall_s!r}")
        self.wall_s = None if wall_s is None or math.isinf(wall_s) else float(wall_s)
        self.cancelled = cancelled or (lambda: False)
        self.clock = clock
        self.start = clock() if _start is None else _start

    @classmethod
    def for_preset(cls, preset: str | None, cancelled: Callable[[], bool] | None = None,
                   cfg: AppConfig | None = None) -> "Budget":
        """The configured budget: ``limits.lab_wall_s`` on real models, none on the built-in tiny ones."""
        return cls(default_wall_s(preset, cfg), cancelled)

    def elapsed(self) -> float:
        return self.clock() - self.start

    def remaining(self) -> float:
        return math.inf if self.wall_s is None else max(0.0, self.wall_s - self.elapsed())

    def expired(self) -> bool:
        """True once the time is up; raises LabCancelled once Stop was pressed."""
        if self.cancelled():
            raise LabCancelled("stopped by the user")
        return self.wall_s is not None and self.elapsed() >= self.wall_s

    def share(self, fraction: float) -> "Budget":
        """A budget for one part of the action: ``fraction`` of the time left now, the same Stop."""
        if self.wall_s is None:
            return Budget(None, self.cancelled, self.clock)
        return Budget(self.remaining() * max(0.0, min(1.0, fraction)), self.cancelled, self.clock)

    def describe(self) -> str:
        """'60 s' — the limit, as the reports name it."""
        return "no limit" if self.wall_s is None else f"{self.wall_s:g} s"


def default_wall_s(preset: Any, cfg: AppConfig | None = None) -> float | None:
    """``limits.lab_wall_s`` for a preset (name or Preset); None (no limit) for the built-in tiny models.

    Tiny-random draws 5,000 continuations in seconds, so its runs keep their old behaviour;
    an unknown name gets the limit (the action will refuse the name itself)."""
    cfg = cfg or load_config()
    source = getattr(preset, "source", None)
    if source is None:
        try:
            source = cfg.preset(str(preset if preset is not None else cfg.default_preset)).source
        except (KeyError, ValueError):
            source = None
    return None if source == "builtin" else float(cfg.limits.lab_wall_s)

# --------------------------------------------------------------------------------------------
# Rules, as the lab presents them
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RuleInfo:
    key: str
    label: str  # selector label: the category tag comes first
    category: str  # "correct" | "wrong" | "wasteful" | "lossy"
    what: str  # one sentence: what the rule does
    expect: str  # what the distribution check should show


RULE_INFO: dict[str, RuleInfo] = {
    "lossless": RuleInfo(
        "lossless",
        "✓ Correct: lossless speculative sampling",
        "correct",
        "Accept d with probability min(1, p(d)/q(d)); after a rejection resample from norm(max(0, p − q)); "
        "after all drafts, a bonus token from p at position γ+1.",
        "No drift: the speculative histogram matches the target's up to sampling noise.",
    ),
    "softmax-q": RuleInfo(
        "softmax-q",
        "✗ WRONG (a): argmax drafts checked against the drafter's softmax q — transformers #32867",
        "wrong",
        "The drafter drafts its argmax (q is really a point mass) but the verifier plugs in the drafter's softmax "
        "as q. The draft is accepted too often, and the residual wrongly excludes it.",
        "Drift towards the drafter's favourite tokens. Needs a model drafter at temperature > 0.",
    ),
    "exact-match": RuleInfo(
        "exact-match",
        "≈ Wasteful (b): exact-match acceptance at T > 0 — lossless, but rejects good drafts",
        "wasteful",
        "Draw a fresh token from p and accept the draft only if it is the same token; on a mismatch emit that "
        "sample. When p = q a draft survives with probability Σp² instead of 1.",
        "By the math this is lossless: no drift (p-value not small), but the acceptance rate drops — "
        "compare it with the correct rule's.",
    ),
    "target-sample": RuleInfo(
        "target-sample",
        "✗ WRONG (c): on rejection emit a plain target sample instead of the residual",
        "wrong",
        "After a rejection the token is drawn from p instead of norm(max(0, p − q)), so tokens the drafter "
        "already proposes often are counted twice.",
        "Drift towards tokens both models like (overlap of p and q is over-represented).",
    ),
    "bonus-wrong-position": RuleInfo(
        "bonus-wrong-position",
        "✗ WRONG (d): bonus token drawn from the wrong position (γ instead of γ+1)",
        "wrong",
        "When every draft is accepted, the bonus token is sampled from the distribution of the last draft's "
        "position (which does not see that draft) instead of the next position.",
        "Drift in the token after a fully accepted step: visible in 2- and 3-token continuations.",
    ),
    "typical": RuleInfo(
        "typical",
        "~ LOSSY but faster: Medusa typical acceptance",
        "lossy",
        "Accept d if p(d) > min(ε, δ·exp(−H(p))) (ε = 0.09, δ = 0.3); on rejection emit a sample from p.",
        "Higher acceptance (faster) and a measurable drift: the trade-off a serving system may choose.",
    ),
}
assert set(RULE_INFO) == set(RULES), "RULE_INFO must describe every engine rule"
DEFAULT_RULE = "lossless"


def rule_choices() -> list[tuple[str, str]]:
    """(label, key) pairs for a selector; the correct rule first (and the default)."""
    return [(info.label, key) for key, info in RULE_INFO.items()]


# --------------------------------------------------------------------------------------------
# Statistics
# --------------------------------------------------------------------------------------------


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
    from scipy.stats import chi2

    if dof <= 0:
        return 1.0
    return float(chi2.sf(stat, dof))


def chi_square_homogeneity(
    counts_a: Mapping[Any, float] | Sequence[float], counts_b: Mapping[Any, float] | Sequence[float], min_expected: float = 5.0
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
    counts: Mapping[Any, float] | Sequence[float], probs: Mapping[Any, float] | Sequence[float], min_expected: float = 5.0
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


def plain_reading(tv: float, noise: float, p_value: float, n: int, category: str = "correct",
                  n_other: int | None = None) -> str:
    """What the numbers mean, in words a student can repeat.

    ``n_other``: the target-only sample's size when it differs from the speculative one's
    (a check stopped by the time limit, or a reused target-only sample)."""
    ptxt = format_p(p_value)
    sizes = (f"N = {n:,} continuations per side" if n_other is None or n_other == n
             else f"N = {n:,} speculative and {n_other:,} target-only continuations")
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


# --------------------------------------------------------------------------------------------
# Memoised models (speed for the distribution check)
# --------------------------------------------------------------------------------------------


class ByteBudget:
    """Bytes a group of memo tables may hold together (the target's and the drafter's in one action)."""

    def __init__(self, limit: int) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ValueError(f"the memo byte limit must be a whole number >= 0, got {limit!r}")
        self.limit = limit
        self.used = 0

    def take(self, n: int) -> bool:
        """Reserve n bytes if they fit (True), else leave everything as it is (False)."""
        if self.used + n > self.limit:
            return False
        self.used += n
        return True


def _nbytes(t: torch.Tensor | None) -> int:
    return 0 if t is None else t.numel() * t.element_size()


def _owned(t: torch.Tensor | None) -> torch.Tensor | None:
    """``t`` itself if it owns exactly its memory, else a compact copy.

    A slice of the KV cache is a view that keeps the whole (ever-growing) cache tensor alive;
    storing it would hold far more memory than the slice's own bytes, and the byte cap
    would count the wrong thing."""
    if t is None:
        return None
    if t.is_contiguous() and t.storage_offset() == 0 and t.untyped_storage().nbytes() == _nbytes(t):
        return t
    return t.clone(memory_format=torch.contiguous_format)


class MemoModel:
    """A memoising view of a causal LM for the engine loop.

    The engine (and ``ModelDrafter``) call ``model(input_ids=[[...]], cache=c, use_cache=True,
    logits_to_keep=k, output_hidden_states=h)``.  The output is a function of the tokens already
    in ``c`` plus ``input_ids``; we key the table on exactly that, so a hit returns the same
    logits the network returned for the same call before, and appends the stored K/V of the
    new tokens to ``c`` so the cache stays exactly what a real pass would have left.  Only
    plain ``DynamicLayer`` caches are memoised (sliding-window layers are passed through).

    Memory: a real model's logits row is ~1 MB (Gemma's 262k vocabulary in float32), so the
    table holds at most ``max_bytes`` (default ``limits.lab_cache_bytes``) of stored tensors —
    logits, hidden states and K/V, each stored compact (``_owned``) so the count is the memory
    really held.  ``budget`` shares one cap between several tables (target and drafter).  Once
    full, new calls simply run the model: slower, never different.
    """

    def __init__(self, model, max_entries: int = 100_000, max_bytes: int | None = None,
                 budget: ByteBudget | None = None) -> None:
        self.model = model
        self.config = model.config
        self.device = getattr(model, "device", torch.device("cpu"))
        self.max_entries = max_entries
        if budget is None:
            budget = ByteBudget(load_config().limits.lab_cache_bytes if max_bytes is None else max_bytes)
        self.budget = budget
        self.stored_bytes = 0  # this table's share of the budget
        self.hits = 0
        self.misses = 0
        self.not_stored = 0  # misses the cap (or max_entries) kept out of the table
        self._table: dict[tuple, tuple] = {}
        self._tokens: "weakref.WeakKeyDictionary[Any, list[int]]" = weakref.WeakKeyDictionary()
        self._plain: bool | None = None

    def __getattr__(self, name: str):  # anything else (generation_config, dtype...) from the model
        if name == "model":
            raise AttributeError(name)
        return getattr(self.model, name)

    def _plain_cache(self, cache) -> bool:
        from transformers.cache_utils import DynamicLayer

        layers = getattr(cache, "layers", None)
        return bool(layers) and all(type(layer) is DynamicLayer for layer in layers)

    def _store(self, key: tuple, logits, hidden, cache, n: int) -> None:
        """Keep this call's answer if the byte cap allows (sizes are known before any copy)."""
        if len(self._table) >= self.max_entries:
            self.not_stored += 1
            return
        kv_views = [(layer.keys[..., -n:, :], layer.values[..., -n:, :]) for layer in cache.layers]
        size = _nbytes(logits) + _nbytes(hidden) + sum(_nbytes(k) + _nbytes(v) for k, v in kv_views)
        if not self.budget.take(size):
            self.not_stored += 1
            return
        kv = tuple((_owned(k), _owned(v)) for k, v in kv_views)
        self._table[key] = (_owned(logits), _owned(hidden), kv)
        self.stored_bytes += size

    def __call__(self, input_ids=None, cache=None, use_cache=True, logits_to_keep=0, output_hidden_states=False, **kw):
        if cache is None or kw or self._plain is False or input_ids is None or input_ids.shape[0] != 1:
            return self.model(
                input_ids=input_ids,
                cache=cache,
                use_cache=use_cache,
                logits_to_keep=logits_to_keep,
                output_hidden_states=output_hidden_states,
                **kw,
            )
        new = tuple(int(t) for t in input_ids[0].tolist())
        seen = self._tokens.get(cache)
        length = cache.get_seq_length()
        if seen is None:
            seen = []
        if length > len(seen):  # filled by someone else: cannot key it, run for real
            out = self.model(input_ids=input_ids, cache=cache, use_cache=True, logits_to_keep=logits_to_keep,
                             output_hidden_states=output_hidden_states)
            self._tokens.pop(cache, None)
            return out
        del seen[length:]  # the engine cropped rejected drafts
        key = (tuple(seen), new, int(logits_to_keep), bool(output_hidden_states))
        hit = self._table.get(key)
        if hit is not None:
            self.hits += 1
            logits, hidden, kv = hit
            for i, (k, v) in enumerate(kv):
                cache.update(k, v, i)
        else:
            self.misses += 1
            out = self.model(input_ids=input_ids, cache=cache, use_cache=True, logits_to_keep=logits_to_keep,
                             output_hidden_states=output_hidden_states)
            logits = out.logits
            hidden = out.hidden_states[-1] if output_hidden_states else None
            if self._plain is None:
                self._plain = self._plain_cache(cache)
            if self._plain:
                self._store(key, logits, hidden, cache, len(new))
        seen.extend(new)
        self._tokens[cache] = seen
        return SimpleNamespace(logits=logits, hidden_states=(hidden,) if hidden is not None else None)


# --------------------------------------------------------------------------------------------
# Distribution check
# --------------------------------------------------------------------------------------------

MAX_SAMPLES = 50_000
MAX_SAMPLES_SLOW = 500  # presets with real LMs: ~1-7 s per continuation on a 2-core CPU
MAX_CONT_TOKENS = 3
DISPLAY_BINS = 30


def token_label(text: str) -> str:
    """A visible form of a token's text (spaces and newlines shown)."""
    return text.replace("\n", "⏎").replace("\t", "⇥").replace(" ", "␣") or "∅"


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
    prompt: str
    preset: str
    drafter: str
    rule: str
    category: str
    temperature: float
    top_k: int
    top_p: float
    gamma: int
    n_tokens: int
    n_samples: int
    seed: int
    draft_argmax: bool
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
    dtype: str = "float32"
    stopped: str = ""  # why the sample is smaller than asked ("" when complete)

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


class LabContext:
    """A loaded preset ready for lab runs: models, tokenizer, drafter factory."""

    def __init__(self, preset: str | None = None, drafter: str | None = None, dtype: str | None = None, progress=None):
        from playground.api import resolve
        from playground.models import load_pair

        self.preset, self.drafter_kind = resolve(preset, drafter)
        self.pair = load_pair(self.preset, dtype, progress=progress)
        self.tokenizer = self.pair.tokenizer
        self.vocab = self.pair.target.config.get_text_config().vocab_size

    def encode(self, prompt: str) -> list[int]:
        from playground.api import encode_prompt

        lim = load_config().limits
        return encode_prompt(prompt, self.tokenizer, lim.max_prompt_chars, lim.max_prompt_tokens)

    @property
    def fast(self) -> bool:
        return self.preset.source == "builtin"

    def drafter_factory(self, argmax: bool, memo: bool, cache_bytes: int | None = None) -> tuple[Callable[[], Any], Any]:
        """(make a fresh drafter, the target model to use) — memoised views when possible.

        The target's and the drafter's memo tables share one cap of ``cache_bytes``
        (default ``limits.lab_cache_bytes``)."""
        from playground.drafters.model import ModelDrafter
        from playground.drafters.prompt_lookup import PromptLookupDrafter

        kind = self.drafter_kind
        use_memo = memo and kind in ("model", "prompt-lookup")
        cap = ByteBudget(load_config().limits.lab_cache_bytes if cache_bytes is None else cache_bytes)
        target = MemoModel(self.pair.target, budget=cap) if use_memo else self.pair.target
        if kind == "model":
            dm = MemoModel(self.pair.drafter_model, budget=cap) if use_memo else self.pair.drafter_model
            return (lambda: ModelDrafter(dm, self.vocab, argmax=argmax)), target
        if kind == "prompt-lookup":
            return PromptLookupDrafter, target
        from playground.api import make_drafter

        return (lambda: make_drafter(kind, self.pair, self.preset, argmax=argmax)), target


def _sample_seed(seed: int, index: int, stream: int) -> int:
    return ((seed % (2**40)) << 22 | (index % (2**21)) << 1 | stream) % (2**63)


def sample_continuations(
    ctx: LabContext,
    prompt_ids: list[int],
    config: GenerationConfig,
    n: int,
    seed: int,
    draft_argmax: bool = False,
    progress: Progress = None,
    progress_span: tuple[float, float] = (0.0, 1.0),
    memo: bool = True,
    budget: Budget | None = None,
    cache_bytes: int | None = None,
) -> tuple[Counter, SampleStats]:
    """Run the engine loop up to n times (config.max_new_tokens tokens each) and count the outcomes.

    ``budget`` is asked before every continuation after the first (so a side always has at
    least one): when it runs out the loop stops and ``SampleStats.n`` says how many were drawn;
    Stop raises ``LabCancelled`` between continuations.  Sample i always uses the generator
    for (seed, i), so a stopped run's outcomes are exactly the first ones of a full run."""
    speculative = config.mode == "speculative"
    stream_id = 0 if speculative else 1
    budget = budget or Budget(None)
    make, target = ctx.drafter_factory(draft_argmax, memo, cache_bytes)
    counts: Counter = Counter()
    judged = accepted = drafted = calls = new = done = 0
    t0 = time.perf_counter()
    lo, hi = progress_span
    every = max(1, n // 100)
    label = "speculative" if speculative else "target only"
    for i in range(n):
        if budget.expired() and i > 0:
            break
        gen = torch.Generator().manual_seed(_sample_seed(seed, i, stream_id))
        res = engine_run(
            target,
            ctx.tokenizer,
            prompt_ids,
            config,
            drafter=make() if speculative else None,
            eos_token_ids=ctx.pair.eos_token_ids,
            generator=gen,
        )
        counts[tuple(res.token_ids)] += 1
        done += 1
        st = res.stats
        judged += st.judged_tokens
        accepted += st.accepted_tokens
        drafted += st.drafted_tokens
        calls += st.steps
        new += st.new_tokens
        if progress is not None and (i % every == 0 or i == n - 1):
            progress(lo + (hi - lo) * (i + 1) / n, f"{label}: {i + 1:,} / {n:,} continuations")
    hits = getattr(target, "hits", 0)
    misses = getattr(target, "misses", 0)
    stats = SampleStats(
        n=done,
        seconds=time.perf_counter() - t0,
        judged=judged,
        accepted=accepted,
        drafted=drafted,
        target_calls=calls,
        new_tokens=new,
        memo_hits=hits,
        memo_misses=misses,
    )
    return counts, stats


class TargetDistributions:
    """p(· | prompt, prefix) for many prefixes, computed in batches and cached.

    Uses the engine's logits processing (``logits_to_probs``), one batched forward per group of
    same-length prefixes (no padding needed), no KV cache.
    """

    def __init__(self, ctx: "LabContext", prompt_ids: Sequence[int], params: SamplingParams, batch: int = 128) -> None:
        self.model = ctx.pair.target
        self.prompt_ids = list(prompt_ids)
        self.params = params
        self.batch = batch
        self.eos = frozenset(ctx.pair.eos_token_ids)
        self._rows: dict[tuple[int, ...], torch.Tensor] = {}

    @torch.inference_mode()
    def ensure(self, prefixes: Iterable[tuple[int, ...]]) -> None:
        todo = sorted({tuple(p) for p in prefixes if tuple(p) not in self._rows}, key=len)
        by_len: dict[int, list[tuple[int, ...]]] = {}
        for pre in todo:
            by_len.setdefault(len(pre), []).append(pre)
        for _, group in sorted(by_len.items()):
            for s in range(0, len(group), self.batch):
                chunk = group[s : s + self.batch]
                ids = torch.tensor([self.prompt_ids + list(pre) for pre in chunk], device=self.model.device)
                out = self.model(input_ids=ids, use_cache=False, logits_to_keep=logits_to_keep_arg(ids.shape[-1], 1, ids.device))
                probs = logits_to_probs(out.logits[:, -1], self.params)  # [B, V]
                for pre, row in zip(chunk, probs):
                    self._rows[pre] = row

    def __getitem__(self, prefix: tuple[int, ...]) -> torch.Tensor:
        self.ensure([prefix])
        return self._rows[prefix]

    def prob(self, outcome: tuple[int, ...]) -> float:
        """Probability that target-only decoding emits exactly ``outcome`` first."""
        self.ensure(outcome[:j] for j in range(len(outcome)))
        p = 1.0
        for j, tok in enumerate(outcome):
            p *= float(self._rows[outcome[:j]][tok])
        return p

    def table(self, n_tokens: int, min_prob: float, max_prefixes: int = 20_000) -> dict[tuple[int, ...], float] | None:
        """Every outcome (n_tokens tokens, or fewer ending in EOS) with probability >= min_prob.

        Independent of any sample (a prefix is expanded only if its own probability reaches
        min_prob), so its outcomes can serve as chi-square bins.  None if too many prefixes.
        """
        frontier: dict[tuple[int, ...], float] = {(): 1.0}
        table: dict[tuple[int, ...], float] = {}
        expanded = 0
        for depth in range(n_tokens):
            expanded += len(frontier)
            if expanded > max_prefixes:
                return None
            self.ensure(frontier)
            nxt: dict[tuple[int, ...], float] = {}
            for pre, pp in frontier.items():
                row = self._rows[pre] * pp
                for t in torch.nonzero(row >= min_prob).flatten().tolist():
                    o = pre + (int(t),)
                    if int(t) in self.eos or depth == n_tokens - 1:
                        table[o] = float(row[t])
                    else:
                        nxt[o] = float(row[t])
            frontier = nxt
        return table


def distribution_check(
    prompt: str,
    *,
    preset: str | None = "tiny-random",
    drafter: str | None = None,
    rule: str = DEFAULT_RULE,
    n_samples: int = 2000,
    n_tokens: int = 2,
    gamma: int | None = None,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    seed: int = 0,
    draft_argmax: bool | None = None,
    dtype: str | None = None,
    exact: bool | None = None,
    memo: bool = True,
    progress: Progress = None,
    ctx: LabContext | None = None,
    reference: DistributionCheck | None = None,
    budget: Budget | None = None,
    cache_bytes: int | None = None,
) -> DistributionCheck:
    """Speculative (with ``rule``) vs target-only: N continuations of ``n_tokens`` tokens each.

    draft_argmax=None picks True for rule "softmax-q" (that bug needs argmax drafts) and
    False otherwise.  exact=None computes the target's exact probabilities (for the "p vs exact"
    test and the histogram's markers) only where cheap: tiny models, or few distinct prefixes.
    ``reference``: an earlier check whose target-only sample is reused when
    it was drawn with the same prompt, preset, sampling settings, N, length and seed (so
    comparing rules costs one target-only sample).
    ``budget``: the wall-time limit and Stop (default ``Budget.for_preset``: ``limits.lab_wall_s``
    on real models, none on the built-in tiny ones).  The speculative side gets half the time
    when a target-only sample must be drawn too, which then draws as many continuations as the
    speculative side got; a stopped check is marked ``partial`` and says so in ``stopped`` and
    its reading.  ``cache_bytes``: the memo tables' cap (default ``limits.lab_cache_bytes``).
    """
    if rule not in RULE_INFO:
        raise ValueError(f"rule must be one of {', '.join(RULE_INFO)}, got {rule!r}")
    n_tokens = _check_int("tokens per continuation", n_tokens, 1, MAX_CONT_TOKENS)
    seed = _check_int("seed", seed, 0, 2**63 - 1)
    lim = load_config().limits
    if check_temperature(temperature, lim.max_temperature) == 0.0:
        raise ValueError(
            f"the distribution check needs sampling: temperature must be in (0, {lim.max_temperature}] "
            "(at temperature 0 use the greedy equality check)"
        )
    ctx = ctx or LabContext(preset, drafter, dtype)
    budget = budget if budget is not None else Budget(default_wall_s(ctx.preset))
    cap = MAX_SAMPLES if ctx.fast else MAX_SAMPLES_SLOW
    n_samples = _check_int("N", n_samples, 10, cap)
    g = _check_int("gamma", ctx.preset.gamma if gamma is None else gamma, 1, min(MAX_GAMMA, lim.max_gamma))
    if draft_argmax is None:
        draft_argmax = rule == "softmax-q"
    ids = ctx.encode(prompt)
    notes: list[str] = []
    if n_tokens == 1:
        notes.append(
            "With 1-token continuations no draft is ever made (a step always adds one token of its own), so "
            "every rule is trivially exact: use 2 or 3 tokens to see the rules at work."
        )
    if rule == "softmax-q" and (ctx.drafter_kind != "model" or not draft_argmax):
        notes.append(
            "Rule (a) only differs from the correct rule when a model drafter drafts its argmax at T > 0 "
            "(the drafter's softmax is then available to misuse); here it behaves like the correct rule."
        )
    spec_cfg = GenerationConfig(
        mode="speculative", gamma=int(g), temperature=float(temperature), top_k=int(top_k), top_p=float(top_p),
        seed=int(seed), max_new_tokens=int(n_tokens), trace=False, rule=rule,
    )
    ar_cfg = replace(spec_cfg, mode="autoregressive", rule=DEFAULT_RULE)
    reuse = reference is not None and _same_reference(reference, prompt, ctx, float(temperature), int(top_k),
                                                      float(top_p), n_tokens, n_samples, seed)
    spec_counts, spec_stats = sample_continuations(
        ctx, ids, spec_cfg, n_samples, seed, draft_argmax, progress, (0.0, 0.96 if reuse else 0.48), memo,
        budget if reuse else budget.share(0.5), cache_bytes,
    )
    if reuse:
        tgt_counts = Counter({o: c for o, c in zip(reference.outcomes, reference.target_counts) if c})
        tgt_stats = reference.target
    else:
        span = (0.48, 0.96)
        tgt_counts, tgt_stats = sample_continuations(ctx, ids, ar_cfg, spec_stats.n, seed, False, progress, span, memo,
                                                     budget, cache_bytes)
    stopped = ""
    if spec_stats.n < n_samples or tgt_stats.n < n_samples:
        stopped = stopped_message(budget, spec_stats.n, tgt_stats.n, n_samples)
    budget.expired()  # raises if Stop was pressed meanwhile: nobody waits for the statistics
    if progress is not None:
        progress(0.97, "statistics")
    outcomes = sorted(set(spec_counts) | set(tgt_counts), key=lambda o: (-(spec_counts[o] + tgt_counts[o]), o))
    probs = table = None
    n_prefixes = len({o[:j] for o in outcomes for j in range(len(o))})
    if exact is None:
        exact = ctx.fast or n_prefixes <= 32
    if exact:
        dists = TargetDistributions(ctx, ids, spec_cfg.sampling)
        if n_prefixes <= 20_000:
            if progress is not None:
                progress(0.97, "the target's exact probabilities")
            dists.ensure(o[:j] for o in outcomes for j in range(len(o)))  # batched
            probs = {o: dists.prob(o) for o in outcomes}
            table = dists.table(n_tokens, 5.0 / max(spec_stats.n, 1))
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
    info = RULE_INFO[rule]
    reading = plain_reading(tv, noise, chi.p_value, spec_stats.n, info.category, n_other=tgt_stats.n)
    if stopped:
        reading = f"PARTIAL RESULT — {stopped} " + reading
    sa = spec_stats.acceptance_rate
    if sa is not None:
        reading += f" Acceptance rate of this rule here: {sa:.0%} of judged drafts."
    if progress is not None:
        progress(1.0, "done")
    return DistributionCheck(
        prompt=prompt,
        preset=ctx.preset.name,
        drafter=ctx.drafter_kind,
        rule=rule,
        category=info.category,
        temperature=float(temperature),
        top_k=int(top_k),
        top_p=float(top_p),
        gamma=int(g),
        n_tokens=int(n_tokens),
        n_samples=int(n_samples),
        seed=int(seed),
        draft_argmax=bool(draft_argmax),
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
        notes=tuple(notes),
        dtype=ctx.pair.dtype,
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


def _same_reference(ref: DistributionCheck, prompt: str, ctx: LabContext, temperature: float, top_k: int, top_p: float,
                    n_tokens: int, n_samples: int, seed: int) -> bool:
    return (ref.prompt, ref.preset, ref.dtype, ref.temperature, ref.top_k, ref.top_p, ref.n_tokens, ref.n_samples,
            ref.seed) == (prompt, ctx.preset.name, ctx.pair.dtype, temperature, top_k, top_p, n_tokens, n_samples, seed)


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


# --------------------------------------------------------------------------------------------
# Runs that may stop early (equality check, theory bench measurement)
# --------------------------------------------------------------------------------------------

STOPPED_TIME = "time limit"  # RunStats.stopped of a run the lab's budget cut short


def partial_result(prompt: str, prompt_ids: Sequence[int], steps: Sequence[StepRecord], *, mode: str, gamma: int,
                   config: Mapping[str, Any] | None = None, stopped: str = STOPPED_TIME) -> GenerationResult:
    """A GenerationResult for the steps a run managed before it was stopped.

    The engine builds RunStats only at the end of a run; this rebuilds them from the step
    records (the same sums), so a stopped run can still be compared and measured.  What the
    records do not hold is estimated and documented here: the prefill is one target call when
    the prompt has more than one token, its time is the first step's elapsed time minus the
    step's own, and ``drafter_calls`` counts steps that drafted (a model drafter makes one
    call per draft, so this is a lower bound).
    """
    steps = tuple(steps)
    speculative = mode == "speculative"
    g = int(gamma) if speculative else 0
    new_ids = [t for s in steps for t in s.emitted_ids]
    prefill_calls = 1 if len(prompt_ids) > 1 else 0
    drafted = sum(len(s.drafted) for s in steps)
    judged = sum(1 for s in steps for d in s.drafted if d.judged)
    accepted = sum(s.n_accepted for s in steps)
    judged_at = [0] * g
    accepted_at = [0] * g
    hist = [0] * (g + 1)
    for s in steps:
        for j, d in enumerate(s.drafted[:g]):
            if d.judged:
                judged_at[j] += 1
                accepted_at[j] += int(d.accepted)
        if speculative and s.n_accepted <= g:
            hist[s.n_accepted] += 1
    draft_ms = sum(s.draft_ms for s in steps)
    verify_ms = sum(s.verify_ms for s in steps)
    wall_ms = steps[-1].elapsed_ms if steps else 0.0
    prefill_ms = max(0.0, steps[0].elapsed_ms - steps[0].step_ms) if steps and prefill_calls else 0.0
    single = [s.verify_ms for s in steps if not s.drafted]
    stats = RunStats(
        mode=mode,
        drafter=next((s.drafter for s in steps if s.drafter), None) if speculative else None,
        gamma=g,
        new_tokens=len(new_ids),
        steps=len(steps),
        target_calls=len(steps) + prefill_calls,
        drafter_calls=sum(1 for s in steps if s.drafted),
        drafted_tokens=drafted,
        judged_tokens=judged,
        accepted_tokens=accepted,
        acceptance_rate=(accepted / judged) if judged else None,
        draft_efficiency=(accepted / drafted) if drafted else None,
        acceptance_by_position=tuple((a / j) if j else None for a, j in zip(accepted_at, judged_at)),
        accepted_length_hist=tuple(hist),
        mean_accepted_length=(sum(n * c for n, c in enumerate(hist)) / sum(hist)) if sum(hist) else None,
        tokens_per_target_call=len(new_ids) / max(len(steps), 1),
        prefill_ms=prefill_ms,
        draft_ms=draft_ms,
        verify_ms=verify_ms,
        wall_ms=wall_ms,
        tokens_per_s=len(new_ids) / (wall_ms / 1000.0) if wall_ms > 0 else float("nan"),
        draft_ms_per_token=(draft_ms / drafted) if drafted else None,
        verify_ms_per_call=(verify_ms / len(steps)) if steps else None,
        single_token_ms=(sum(single) / len(single)) if single else None,
        stopped=stopped,
    )
    return GenerationResult(
        prompt=prompt, prompt_ids=tuple(int(t) for t in prompt_ids), token_ids=tuple(new_ids),
        text="".join(s.emitted_text for s in steps), steps=steps, stats=stats, config=dict(config or {}),
    )


def run_within(prompt: str, budget: Budget, *, prompt_ids: Sequence[int] | None = None, **kwargs) -> GenerationResult:
    """``api.generate`` that stops between target passes when ``budget`` runs out.

    Returns the finished result, or ``partial_result`` of the steps so far
    (``stats.stopped == STOPPED_TIME``); Stop raises LabCancelled between steps.  The
    generator is closed on the way out, so a stopped run frees what it held at once."""
    from playground.api import stream_generate

    it = stream_generate(prompt, **kwargs)
    steps: list[StepRecord] = []
    try:
        for item in it:
            if isinstance(item, GenerationResult):
                return item
            steps.append(item)
            last = item.eos or item.committed_tokens >= kwargs.get("max_new_tokens", 64)
            if budget.expired() and not last:  # the last step is in: take the real result instead
                break
    finally:
        it.close()
    if prompt_ids is None:  # only a stopped run needs them; the pair is loaded by now
        from playground.api import encode_prompt, resolve
        from playground.models import load_pair

        lim = load_config().limits
        pair = load_pair(resolve(kwargs.get("preset"), kwargs.get("drafter"))[0], kwargs.get("dtype"))
        prompt_ids = encode_prompt(prompt, pair.tokenizer, lim.max_prompt_chars, lim.max_prompt_tokens)
    mode = kwargs.get("mode", "speculative")
    cfg = {k: kwargs[k] for k in ("preset", "drafter", "gamma", "temperature", "seed", "max_new_tokens", "dtype", "rule")
           if k in kwargs}
    gamma = kwargs.get("gamma")
    if gamma is None:
        from playground.api import resolve

        gamma = resolve(kwargs.get("preset"), kwargs.get("drafter"))[0].gamma
    return partial_result(prompt, prompt_ids, steps, mode=mode, gamma=int(gamma), config=cfg)


# --------------------------------------------------------------------------------------------
# Greedy equality check
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DiffRow:
    position: int  # 0-based index among the new tokens
    ar_id: int | None
    ar_text: str
    spec_id: int | None
    spec_text: str
    status: str  # "same" | "diverged" | "after" (after the first divergence)


@dataclass(frozen=True)
class TokenLogit:
    token_id: int
    text: str
    logit: float
    prob: float  # softmax at temperature 1 over that path's logits


@dataclass(frozen=True)
class Divergence:
    position: int
    ar: tuple[TokenLogit, TokenLogit]  # (target-only's token, speculative's token) as target-only computed them
    spec: tuple[TokenLogit, TokenLogit]  # the same two tokens as the speculative verify pass computed them
    spec_rows: int  # tokens in the verify pass that produced it
    explanation: str

    @property
    def ar_gap(self) -> float:
        return self.ar[0].logit - self.ar[1].logit

    @property
    def spec_gap(self) -> float:
        return self.spec[0].logit - self.spec[1].logit


@dataclass(frozen=True)
class EqualityCheck:
    prompt: str
    preset: str
    drafter: str
    dtype: str
    gamma: int
    ar: GenerationResult
    spec: GenerationResult
    rows: tuple[DiffRow, ...]
    identical: bool
    divergence: Divergence | None
    summary: str
    stopped: str = ""  # why fewer tokens than asked were compared ("" when complete)


def _token_texts(ids: Sequence[int], tokenizer, prompt_ids: Sequence[int]) -> list[str]:
    from playground.text import TokenTexts

    tt = TokenTexts(tokenizer)
    ctx = list(prompt_ids)
    out = []
    for t in ids:
        out.append(tt.in_context(ctx, int(t)))
        ctx.append(int(t))
    return out


def diff_tokens(ar_ids: Sequence[int], ar_texts: Sequence[str], spec_ids: Sequence[int], spec_texts: Sequence[str]) -> tuple[tuple[DiffRow, ...], int | None]:
    """Token-by-token comparison; returns the rows and the first diverging position (or None)."""
    rows = []
    first = None
    for i in range(max(len(ar_ids), len(spec_ids))):
        a = ar_ids[i] if i < len(ar_ids) else None
        s = spec_ids[i] if i < len(spec_ids) else None
        if first is None and a != s:
            first = i
        status = "same" if first is None else ("diverged" if i == first else "after")
        rows.append(
            DiffRow(
                position=i,
                ar_id=a,
                ar_text=ar_texts[i] if i < len(ar_texts) else "",
                spec_id=s,
                spec_text=spec_texts[i] if i < len(spec_texts) else "",
                status=status,
            )
        )
    return tuple(rows), first


@torch.inference_mode()
def _replay(model, prompt_ids: Sequence[int], passes: Sequence[tuple[list[int], int]]) -> list[torch.Tensor]:
    """Feed a cache with exactly the passes a run made: (input ids, tokens to crop afterwards).

    Returns each pass's logits [n, V] (float32).  The prompt prefill (all but the newest
    prompt token) comes first, as in the engine.
    """
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    cache.activate_past_recording()
    if len(prompt_ids) > 1:
        model(input_ids=torch.tensor([list(prompt_ids[:-1])], device=model.device), cache=cache, use_cache=True,
              logits_to_keep=logits_to_keep_arg(len(prompt_ids) - 1, 1, model.device))
    outs = []
    for ids, crop in passes:
        out = model(input_ids=torch.tensor([ids], device=model.device), cache=cache, use_cache=True,
                    logits_to_keep=len(ids))
        outs.append(out.logits[0].float())
        if crop:
            cache.crop(-crop)
    return outs


def _logit_pair(row: torch.Tensor, a: int, b: int, texts: tuple[str, str]) -> tuple[TokenLogit, TokenLogit]:
    probs = torch.softmax(row.float(), dim=-1)
    return (
        TokenLogit(a, texts[0], float(row[a]), float(probs[a])),
        TokenLogit(b, texts[1], float(row[b]), float(probs[b])),
    )


def divergence_logits(ctx: LabContext, prompt_ids: list[int], ar: GenerationResult, spec: GenerationResult, pos: int,
                      texts: tuple[str, str]) -> Divergence:
    """Both tokens' logits at the first divergence, as each path computed them."""
    a_tok, s_tok = ar.token_ids[pos], spec.token_ids[pos]
    model = ctx.pair.target
    # Target-only: one single-token pass per new token (the last committed token each time).
    seq = list(prompt_ids) + list(ar.token_ids[:pos])
    ar_passes = [([t], 0) for t in seq[len(prompt_ids) - 1 :]]
    ar_row = _replay(model, prompt_ids, ar_passes)[-1][-1]
    # Speculative: replay every verify pass (rejected drafts included, then cropped).
    passes: list[tuple[list[int], int]] = []
    committed = list(prompt_ids)
    where = None
    for step in spec.steps:
        drafts = [d.token_id for d in step.drafted]
        passes.append(([committed[-1]] + drafts, len(drafts) - step.n_accepted))
        start = len(committed) - len(prompt_ids)
        if start <= pos < start + len(step.emitted_ids):
            where = (len(passes) - 1, pos - start, len(drafts) + 1)
            break
        committed.extend(step.emitted_ids)
    assert where is not None, "divergence position not found in the speculative trace"
    outs = _replay(model, prompt_ids, passes)
    spec_row = outs[where[0]][where[1]]
    ar_pair = _logit_pair(ar_row, a_tok, s_tok, texts)
    spec_pair = _logit_pair(spec_row, a_tok, s_tok, texts)
    gap_a = ar_pair[0].logit - ar_pair[1].logit
    gap_s = spec_pair[0].logit - spec_pair[1].logit
    dtype = str(next(model.parameters()).dtype).replace("torch.", "")
    tie = ""
    if gap_a == 0.0 or gap_s == 0.0:
        tie = (
            " An exact tie in bfloat16 goes to the lower token id (that is what argmax does), so the slightest "
            "rounding difference decides it."
        )
    if dtype == "bfloat16":
        expl = (
            f"A near tie, broken differently by rounding. Target-only computed this position in a pass over 1 "
            f"token; speculative decoding computed it inside a verify pass over {where[2]} tokens. In bfloat16 "
            f"(8 significant bits) matrix products of different shapes sum in different orders and round "
            f"differently. Target-only saw {token_label(texts[0])!r} ahead by {gap_a:+.4f} logits; the verify "
            f"pass saw {token_label(texts[0])!r} ahead by {gap_s:+.4f}. When the top two logits are this close, "
            "the argmax flips and everything after it differs." + tie + " Nothing is wrong with the algorithm: "
            "verification compared the draft with the argmax it computed. Re-run in float32, where ties this close "
            "are far rarer, to see the two paths agree."
        )
    else:
        expl = (
            f"In {dtype} the two paths should agree token for token (a 1-token pass vs a {where[2]}-token verify "
            f"pass still round slightly differently: gaps {gap_a:+.6f} vs {gap_s:+.6f}). A divergence here means "
            "an exact tie or a bug: report it with this trace."
        )
    return Divergence(position=pos, ar=ar_pair, spec=spec_pair, spec_rows=where[2], explanation=expl)


def equality_check(
    prompt: str,
    *,
    preset: str | None = None,
    drafter: str | None = None,
    gamma: int | None = None,
    max_new_tokens: int = 32,
    dtype: str | None = None,
    progress: Progress = None,
    budget: Budget | None = None,
) -> EqualityCheck:
    """Target-only greedy vs speculative greedy on the same prompt, token by token.

    ``budget`` (default ``Budget.for_preset``): target alone gets half the time, speculative
    the rest; a run the limit stops is compared on the tokens both runs produced (greedy
    decoding is a prefix: the first k tokens do not depend on how many follow), and the
    divergence replay is skipped once the time is up."""
    ctx = LabContext(preset, drafter, dtype)
    budget = budget if budget is not None else Budget(default_wall_s(ctx.preset))
    dtype = ctx.pair.dtype
    ids = ctx.encode(prompt)
    common = dict(preset=ctx.preset.name, drafter=ctx.drafter_kind, temperature=0.0, seed=0,
                  max_new_tokens=max_new_tokens, dtype=dtype, prompt_ids=ids)
    g = ctx.preset.gamma if gamma is None else gamma
    if progress:
        progress(0.1, "target alone (greedy)")
    ar = run_within(prompt, budget.share(0.5), mode="autoregressive", gamma=g, **common)
    if progress:
        progress(0.5, "speculative (greedy)")
    spec = run_within(prompt, budget, mode="speculative", gamma=g, **common)
    stopped = ""
    cut = (ar.stats.stopped == STOPPED_TIME, spec.stats.stopped == STOPPED_TIME)
    ar_ids, spec_ids = ar.token_ids, spec.token_ids
    if any(cut):
        shorter_was_cut = cut[0] if len(ar_ids) <= len(spec_ids) else cut[1]
        if shorter_was_cut:  # else the shorter one really ended (EOS) and the length difference is real
            k = min(len(ar_ids), len(spec_ids))
            ar_ids, spec_ids = ar_ids[:k], spec_ids[:k]
        stopped = (
            f"Stopped after {budget.describe()} (the lab's time limit on this model): target alone produced "
            f"{len(ar.token_ids)} and speculative {len(spec.token_ids)} of {max_new_tokens} tokens; the first "
            f"{len(ar_ids)} are compared. Ask for fewer tokens to compare all of them."
        )
    ar_texts = _token_texts(ar_ids, ctx.tokenizer, ids)
    spec_texts = _token_texts(spec_ids, ctx.tokenizer, ids)
    rows, first = diff_tokens(ar_ids, ar_texts, spec_ids, spec_texts)
    div = None
    skipped_replay = False
    if first is not None and first < len(ar_ids) and first < len(spec_ids):
        if budget.expired():
            skipped_replay = True
        else:
            if progress:
                progress(0.8, "replaying both passes at the divergence")
            div = divergence_logits(ctx, ids, ar, spec, first, (ar_texts[first], spec_texts[first]))
    n = len(ar_ids)
    if first is None:
        summary = (
            f"Identical: all {n} tokens {'compared ' if stopped else ''}match ({dtype}, γ = {g}, "
            f"{ctx.drafter_kind} drafter). Speculative decoding used {spec.stats.target_calls} target passes "
            f"instead of {ar.stats.target_calls}."
        )
    elif div is None:
        summary = f"The outputs have different lengths from token {first} (one run stopped at EOS)."
    else:
        summary = (
            f"The outputs agree for {first} token(s), then diverge at token {first}: target alone chose "
            f"{token_label(ar_texts[first])!r}, speculative chose {token_label(spec_texts[first])!r}."
        )
    if skipped_replay:
        summary += " (The logits at the divergence were not replayed: the time limit was reached.)"
    if stopped:
        summary = f"PARTIAL RESULT — {stopped} {summary}"
    if progress:
        progress(1.0, "done")
    return EqualityCheck(
        prompt=prompt, preset=ctx.preset.name, drafter=ctx.drafter_kind, dtype=dtype, gamma=int(g), ar=ar, spec=spec,
        rows=rows, identical=first is None, divergence=div, summary=summary, stopped=stopped,
    )


# --------------------------------------------------------------------------------------------
# Theory bench
# --------------------------------------------------------------------------------------------


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


def _check_unit(name: str, x: float, lo: float, hi: float) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        raise ValueError(f"{name} must be a number, got {x!r}")
    if not lo <= x <= hi:
        raise ValueError(f"{name} must be between {lo} and {hi}, got {x}")
    return float(x)


def theory_curve(alpha: float, c: float, v: float, gammas: Iterable[int] = range(1, MAX_GAMMA + 1)) -> TheoryCurve:
    """E(γ) = (1 − α^{γ+1})/(1 − α) and S(γ) = E/(γc + v_γ) over a grid; best γ by S."""
    alpha = _check_unit("α", alpha, 0.0, 1.0)
    c = _check_unit("c", c, 0.0, 100.0)
    v = _check_unit("v_γ", v, 0.01, 100.0)
    pts = tuple(
        TheoryPoint(g, expected_tokens_per_step(alpha, g), predicted_speedup(alpha, g, c, v)) for g in gammas
    )
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


def measure_run(
    prompt: str, *, preset: str | None = None, drafter: str | None = None, gamma: int | None = None,
    temperature: float = 0.0, seed: int = 0, max_new_tokens: int = 48, rule: str = DEFAULT_RULE, progress: Progress = None,
    budget: Budget | None = None,
) -> tuple[GenerationResult, GenerationResult, MeasuredPoint]:
    """One speculative and one target-only run (trace off, for honest timings) and the measured point.

    ``budget`` (default ``Budget.for_preset``): each run stops between target passes once its
    share of the time is up; the point is then measured on the steps that ran and says so."""
    budget = budget if budget is not None else Budget.for_preset(preset)
    kw = dict(preset=preset, drafter=drafter, gamma=gamma, temperature=temperature, seed=seed,
              max_new_tokens=max_new_tokens, trace=False)
    if progress:
        progress(0.02, "warming up (first passes are slower)")
    run_within(prompt, budget.share(0.2), mode="speculative", **{**kw, "max_new_tokens": min(4, max_new_tokens)})
    if progress:
        progress(0.1, "target alone")
    base = run_within(prompt, budget.share(0.5), mode="autoregressive", **kw)
    if progress:
        progress(0.5, "speculative")
    spec = run_within(prompt, budget, mode="speculative", rule=rule, **kw)
    if progress:
        progress(1.0, "done")
    point = measured_point(spec.stats, base.stats)
    if STOPPED_TIME in (spec.stats.stopped, base.stats.stopped):
        point = replace(point, note=(
            f"Partial: stopped after {budget.describe()} (the lab's time limit on this model) — target alone ran "
            f"{base.stats.new_tokens} and speculative {spec.stats.new_tokens} of {max_new_tokens} tokens; the point "
            "is measured on those."))
    return spec, base, point


# --------------------------------------------------------------------------------------------
# Predict, then reveal
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Question:
    step_index: int
    context: str  # text committed before this step (tail)
    drafts: tuple[str, ...]
    draft_probs: tuple[float, ...]  # q(d): how sure the drafter was
    deterministic: bool  # q is a point mass (greedy / argmax / copied drafts)


@dataclass(frozen=True)
class Reveal:
    step_index: int
    guess: tuple[bool, ...]
    outcome: tuple[str, ...]  # per draft: "accepted" | "rejected" | "not judged"
    target_probs: tuple[float, ...]
    accept_probs: tuple[float, ...]
    us: tuple[float | None, ...]
    correction: str  # the token the target added, with its kind
    points: int
    max_points: int

    @property
    def exact(self) -> bool:
        return self.points == self.max_points


def question_steps(result: GenerationResult) -> list[int]:
    """Indexes of steps that drafted at least one token (the ones worth guessing)."""
    return [s.index for s in result.steps if s.drafted]


def question(result: GenerationResult, step_index: int, context_chars: int = 160) -> Question:
    step = result.steps[step_index]
    if not step.drafted:
        raise ValueError(f"step {step_index} has no drafts to guess about")
    before = result.prompt + "".join(s.emitted_text for s in result.steps[:step_index])
    return Question(
        step_index=step_index,
        context=before[-context_chars:],
        drafts=tuple(d.text for d in step.drafted),
        draft_probs=tuple(d.draft_prob for d in step.drafted),
        deterministic=all(d.draft_prob >= 1.0 for d in step.drafted),
    )


def reveal(result: GenerationResult, step_index: int, guess: Sequence[bool]) -> Reveal:
    """Score a guess (accept? per draft) against what verification did.

    Acceptance is a prefix: drafts after the first rejection are discarded ("not judged") and
    count as not accepted.  One point per draft guessed right.
    """
    step = result.steps[step_index]
    k = len(step.drafted)
    g = tuple(bool(x) for x in guess)
    if len(g) != k:
        raise ValueError(f"need one guess per draft: {k} drafts, {len(g)} guesses")
    outcome = tuple(
        "accepted" if i < step.n_accepted else ("rejected" if d.judged else "not judged")
        for i, d in enumerate(step.drafted)
    )
    truth = [i < step.n_accepted for i in range(k)]
    points = sum(1 for a, b in zip(g, truth) if a == b)
    corr = step.correction
    ctext = "" if corr is None else f"{corr.kind}: {token_label(corr.text)!r}"
    return Reveal(
        step_index=step_index,
        guess=g,
        outcome=outcome,
        target_probs=tuple(d.target_prob for d in step.drafted),
        accept_probs=tuple(d.accept_prob for d in step.drafted),
        us=tuple(d.u for d in step.drafted),
        correction=ctext,
        points=points,
        max_points=k,
    )


def score_rate_guess(guess: float, actual: float | None) -> int:
    """0–10 points for guessing a run's acceptance rate (both in [0, 1]); 10 within 2.5 points."""
    guess = _check_unit("guess", guess, 0.0, 1.0)
    if actual is None:
        return 0
    err = abs(guess - actual)
    return max(0, min(10, round(10 * (1 - max(0.0, err - 0.025) / 0.5))))


@dataclass(frozen=True)
class Scoreboard:
    """A session's score (kept in gr.State; every update returns a new board)."""

    steps: int = 0
    step_points: int = 0
    step_max: int = 0
    exact_steps: int = 0
    rate_rounds: int = 0
    rate_points: int = 0
    history: tuple[str, ...] = ()

    def add_step(self, r: Reveal) -> "Scoreboard":
        line = f"step {r.step_index + 1}: {r.points}/{r.max_points}" + (" ✓ exact" if r.exact else "")
        return replace(
            self,
            steps=self.steps + 1,
            step_points=self.step_points + r.points,
            step_max=self.step_max + r.max_points,
            exact_steps=self.exact_steps + int(r.exact),
            history=(self.history + (line,))[-20:],
        )

    def add_rate(self, guess: float, actual: float | None) -> "Scoreboard":
        pts = score_rate_guess(guess, actual)
        act = "n/a" if actual is None else f"{actual:.0%}"
        line = f"acceptance guess {guess:.0%} vs {act}: {pts}/10"
        return replace(
            self, rate_rounds=self.rate_rounds + 1, rate_points=self.rate_points + pts, history=(self.history + (line,))[-20:]
        )

    @property
    def total(self) -> int:
        return self.step_points + self.rate_points

    @property
    def total_max(self) -> int:
        return self.step_max + 10 * self.rate_rounds


# --------------------------------------------------------------------------------------------
# Trace import (validated; never executes anything)
# --------------------------------------------------------------------------------------------


class TraceImportError(ValueError):
    """A trace file was rejected; the message is meant for the user."""


MAX_TRACE_STEPS = 10_000
MAX_TRACE_TOKENS = 100_000
MAX_STRING_CHARS = 100_000
MAX_JSON_DEPTH = 16


def _mb(n: int) -> str:
    return f"{n / 1_000_000:.1f} MB" if n >= 100_000 else f"{n:,} bytes"


def _reject_constant(name: str):
    raise TraceImportError(f"the file contains {name}, which is not valid JSON (numbers must be finite)")


def _no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise TraceImportError(f"the file repeats the key {excerpt(k)!r} inside one object")
        out[k] = v
    return out


def _check_depth(obj: Any, limit: int) -> None:
    stack = [(obj, 1)]
    while stack:
        o, d = stack.pop()
        if d > limit:
            raise TraceImportError(f"the JSON is nested more than {limit} levels deep; a trace never is")
        if isinstance(o, dict):
            stack.extend((v, d + 1) for v in o.values())
        elif isinstance(o, list):
            stack.extend((v, d + 1) for v in o)


def _type_ok(value: Any, hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if hint is Any:
        return True
    if hint is type(None):
        return value is None
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", ())):
        return any(_type_ok(value, h) for h in typing.get_args(hint))
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:  # NaN allowed (exports write it as null); infinities are not
        return isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isinf(value)
    if hint is str:
        return isinstance(value, str) and len(value) <= MAX_STRING_CHARS
    if origin is tuple:
        args = typing.get_args(hint)
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_type_ok(v, args[0]) for v in value)
        return len(args) == len(value) and all(_type_ok(v, a) for v, a in zip(value, args))
    if origin is dict:
        return isinstance(value, dict) and all(isinstance(k, str) for k in value)
    if isinstance(hint, type) and hasattr(hint, "__dataclass_fields__"):
        return isinstance(value, hint)
    return False


# Resolved once at import: typing.get_type_hints evaluates the (string) annotations of our own
# records, so doing it here keeps the import path free of any evaluation.
_HINTS = {cls: typing.get_type_hints(cls) for cls in (Candidate, DraftDecision, Correction, StepRecord, RunStats)}


def _check_record(obj: Any, where: str) -> None:
    hints = _HINTS[type(obj)]
    for f in fields(obj):
        v = getattr(obj, f.name)
        if not _type_ok(v, hints[f.name]):
            shown = type(v).__name__
            raise TraceImportError(f"{where}: field {f.name!r} has the wrong type ({shown})")
        if hasattr(v, "__dataclass_fields__"):
            _check_record(v, f"{where}.{f.name}")
        elif isinstance(v, tuple):
            for i, x in enumerate(v):
                if hasattr(x, "__dataclass_fields__"):
                    _check_record(x, f"{where}.{f.name}[{i}]")


def _prob(x: float | None) -> bool:
    return x is None or (-1e-6 <= x <= 1 + 1e-6)


MAX_TOKEN_ID = 2**31 - 1  # no vocabulary comes near; a bigger "token id" is not one
MAX_COUNT = 2**31 - 1  # counts, lengths, cache sizes
MAX_MS = 1e9  # 11.6 days: any timing beyond is not a measurement


def _in_range(x: float | None, lo: float, hi: float, nan_ok: bool = False) -> bool:
    if x is None:
        return True
    if x != x:
        return nan_ok
    return lo <= x <= hi


def _need(ok: bool, where: str, field: str, what: str, value: Any) -> None:
    if not ok:
        shown = excerpt(value) if isinstance(value, str) else (f"{value:.4g}" if isinstance(value, float)
                                                               else excerpt(repr(value)))
        raise TraceImportError(f"{where}: field {field!r} {what}, got {shown}")


def _list_of_objects(obj: Mapping[str, Any], key: str, where: str, required: bool = False) -> list:
    if key not in obj or (obj[key] is None and not required):
        if required:
            raise TraceImportError(f"{where}: field {key!r} is missing")
        return []
    v = obj[key]
    if not isinstance(v, list) or not all(isinstance(x, dict) for x in v):
        raise TraceImportError(f"{where}: field {key!r} must be a list of objects, got {type(v).__name__}")
    return v


def _check_shape(obj: Mapping[str, Any]) -> None:
    """The JSON's nesting, checked before any record is built, so every refusal names its field.

    (``from_dict`` would also fail on a string where a list of drafts belongs, but with
    Python's own words: "'str' object is not a mapping".)"""
    for i, step in enumerate(obj["steps"]):
        w = f"step {i + 1}"
        if not isinstance(step, dict):
            raise TraceImportError(f"{w} must be an object, got {type(step).__name__}")
        for j, d in enumerate(_list_of_objects(step, "drafted", w)):
            for key in ("target_top", "draft_top"):
                _list_of_objects(d, key, f"{w}, draft {j + 1}")
        corr = step.get("correction")
        if corr is not None:
            if not isinstance(corr, dict):
                raise TraceImportError(f"{w}: field 'correction' must be an object or null, got {type(corr).__name__}")
            for key in ("distribution_top", "target_top", "draft_top"):
                _list_of_objects(corr, key, f"{w}, correction")
        if "emitted_ids" in step and not isinstance(step["emitted_ids"], list):
            raise TraceImportError(f"{w}: field 'emitted_ids' must be a list of integers")
        if "drafter_info" in step and not isinstance(step["drafter_info"], dict):
            raise TraceImportError(f"{w}: field 'drafter_info' must be an object")
    if not isinstance(obj["stats"], dict):
        raise TraceImportError(f"field 'stats' must be an object, got {type(obj['stats']).__name__}")


def _check_tokens(ids: Sequence[int], where: str, field: str) -> None:
    bad = next((t for t in ids if not 0 <= t <= MAX_TOKEN_ID), None)
    _need(bad is None, where, field, f"must hold token ids between 0 and {MAX_TOKEN_ID:,}", bad)


def _check_candidates(cands: Sequence[Candidate], where: str, field: str) -> None:
    for k, c in enumerate(cands):
        w = f"{where}, {field}[{k}]"
        _need(0 <= c.token_id <= MAX_TOKEN_ID, w, "token_id", f"must be between 0 and {MAX_TOKEN_ID:,}", c.token_id)
        _need(_prob(c.prob), w, "prob", "is a probability outside [0, 1]", c.prob)


# RunStats fields by what they hold (anything not listed is text or a tuple checked below).
_STATS_COUNTS = ("new_tokens", "steps", "target_calls", "drafter_calls", "drafted_tokens", "judged_tokens",
                 "accepted_tokens")
_STATS_RATES = ("acceptance_rate", "draft_efficiency")
_STATS_MS = ("prefill_ms", "draft_ms", "verify_ms", "wall_ms", "draft_ms_per_token", "verify_ms_per_call",
             "single_token_ms")
# config keys the app reads, and the type each must have when present
_CONFIG_TYPES: dict[str, tuple[type, ...]] = {
    "preset": (str,), "drafter": (str, type(None)), "rule": (str,), "mode": (str,), "dtype": (str,),
    "temperature": (int, float), "top_p": (int, float), "gamma": (int,), "top_k": (int,), "seed": (int,),
    "max_new_tokens": (int,), "trace": (bool,),
}


# drafter_info keys the drafters write (playground/drafters) and the replay reads: their types.
_INFO_COUNTS = ("hidden_from_position", "position_id", "target_kv_positions", "sliding_kv_positions",
                "candidates_scored", "context_candidates", "clusters_scored", "num_clusters", "vocab_size",
                "draft_steps", "target_layers", "tree_nodes", "branches")


def _check_drafter_info(info: Mapping[str, Any], where: str) -> None:
    w = f"{where}, drafter_info"
    for key in _INFO_COUNTS:
        v = info.get(key)
        _need(v is None or (type(v) is int and 0 <= v <= MAX_COUNT), w, key, "must be a whole number >= 0 or null", v)
    v = info.get("target_kv_layer")
    _need(v is None or (type(v) is int and abs(v) <= MAX_COUNT), w, "target_kv_layer", "must be a whole number or null", v)
    v = info.get("draft_ms_per_token")
    _need(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= MAX_MS), w,
          "draft_ms_per_token", "must be a time in ms >= 0 or null", v)
    for key, typ in (("source", str), ("matched", bool)):
        _need(key not in info or isinstance(info[key], typ), w, key, f"must be {typ.__name__}", info.get(key))


def _check_stats(st: RunStats) -> None:
    w = "stats"
    _need(st.mode in MODES, w, "mode", f"must be one of {', '.join(MODES)}", st.mode)
    _need(0 <= st.gamma <= MAX_GAMMA, w, "gamma", f"must be between 0 and {MAX_GAMMA}", st.gamma)
    for name in _STATS_COUNTS:
        v = getattr(st, name)
        _need(0 <= v <= MAX_COUNT, w, name, "must be a count >= 0", v)
    for name in _STATS_RATES:
        v = getattr(st, name)
        _need(_in_range(v, 0.0, 1.0, nan_ok=True), w, name, "must be a fraction in [0, 1]", v)
    for name in _STATS_MS:
        v = getattr(st, name)
        _need(_in_range(v, 0.0, MAX_MS, nan_ok=True), w, name, "must be a time in ms >= 0", v)
    _need(_in_range(st.tokens_per_s, 0.0, 1e9, nan_ok=True), w, "tokens_per_s", "must be >= 0", st.tokens_per_s)
    _need(_in_range(st.tokens_per_target_call, 0.0, MAX_GAMMA + 1.0, nan_ok=True), w, "tokens_per_target_call",
          f"must be between 0 and {MAX_GAMMA + 1}", st.tokens_per_target_call)
    _need(_in_range(st.mean_accepted_length, 0.0, float(MAX_GAMMA), nan_ok=True), w, "mean_accepted_length",
          f"must be between 0 and {MAX_GAMMA}", st.mean_accepted_length)
    _need(len(st.acceptance_by_position) <= MAX_GAMMA, w, "acceptance_by_position",
          f"must have at most {MAX_GAMMA} entries", len(st.acceptance_by_position))
    bad = next((x for x in st.acceptance_by_position if not _in_range(x, 0.0, 1.0, nan_ok=True)), None)
    _need(bad is None, w, "acceptance_by_position", "must hold fractions in [0, 1]", bad)
    _need(len(st.accepted_length_hist) <= MAX_GAMMA + 1, w, "accepted_length_hist",
          f"must have at most {MAX_GAMMA + 1} entries", len(st.accepted_length_hist))
    bad = next((x for x in st.accepted_length_hist if not 0 <= x <= MAX_COUNT), None)
    _need(bad is None, w, "accepted_length_hist", "must hold counts >= 0", bad)


def _check_values(res: GenerationResult) -> None:
    """Value ranges and consistency: everything the replay and the theory bench compute with.

    Types are already right (``_check_record``); here a negative position, a gamma of 10^30 or
    a probability of 7 is refused, naming the step and field."""
    if len(res.steps) > MAX_TRACE_STEPS:
        raise TraceImportError(f"the trace has {len(res.steps):,} steps; the limit is {MAX_TRACE_STEPS:,}")
    if len(res.token_ids) > MAX_TRACE_TOKENS or len(res.prompt_ids) > MAX_TRACE_TOKENS:
        raise TraceImportError("the trace has too many tokens")
    _check_tokens(res.token_ids, "trace", "token_ids")
    _check_tokens(res.prompt_ids, "trace", "prompt_ids")
    _check_stats(res.stats)
    emitted: list[int] = []
    for i, s in enumerate(res.steps):
        w = f"step {i + 1}"
        if s.index != i:
            raise TraceImportError(f"{w}: index is {excerpt(s.index)}, expected {i}")
        if s.mode not in MODES:
            raise TraceImportError(f"{w}: mode must be one of {', '.join(MODES)}")
        _need(0 <= s.gamma <= MAX_GAMMA, w, "gamma", f"must be between 0 and {MAX_GAMMA}", s.gamma)
        tree = any(d.parent is not None for d in s.drafted)
        cap = MAX_TREE_NODES if tree else MAX_GAMMA
        _need(len(s.drafted) <= cap, w, "drafted", f"must hold at most {cap} drafts", len(s.drafted))
        if not 0 <= s.n_accepted <= len(s.drafted):
            raise TraceImportError(f"{w}: n_accepted = {excerpt(s.n_accepted)} but {len(s.drafted)} drafts")
        depth: list[int] = []
        for j, d in enumerate(s.drafted):
            wd = f"{w}, draft {j + 1}"
            if tree:  # a draft tree: every draft names its parent (-1: the newest committed token)
                _need(d.parent is not None and -1 <= d.parent < j, wd, "parent",
                      f"must be between -1 and {j - 1} (an earlier draft)", d.parent)
                depth.append(1 if d.parent == -1 else depth[d.parent] + 1)
                _need(d.position == depth[j], wd, "position", f"must be {depth[j]} (the draft's depth)", d.position)
            else:
                _need(d.position == j + 1, wd, "position", f"must be {j + 1} (drafts are numbered from 1)", d.position)
            if not (_prob(d.draft_prob) and _prob(d.target_prob) and _prob(d.accept_prob) and _prob(d.u)):
                raise TraceImportError(f"{wd}: a probability is outside [0, 1]")
            _need(0 <= d.token_id <= MAX_TOKEN_ID, wd, "token_id", f"must be between 0 and {MAX_TOKEN_ID:,}",
                  d.token_id)
            _need(_in_range(d.ratio, 0.0, math.inf), wd, "ratio", "must be >= 0 (p/q) or null", d.ratio)
            _check_candidates(d.target_top, wd, "target_top")
            _check_candidates(d.draft_top, wd, "draft_top")
        c = s.correction
        if c is not None:
            wc = f"{w}, correction"
            if c.kind not in ("resample", "bonus", "target"):
                raise TraceImportError(f"{wc}: kind {excerpt(c.kind)!r} is unknown (resample, bonus or target)")
            last = (max(depth) if depth else 0) if tree else len(s.drafted)
            _need(1 <= c.position <= last + 1, wc, "position", f"must be between 1 and {last + 1}", c.position)
            _need(0 <= c.token_id <= MAX_TOKEN_ID, wc, "token_id", f"must be between 0 and {MAX_TOKEN_ID:,}",
                  c.token_id)
            if not (_prob(c.prob) and _prob(c.target_prob)):
                raise TraceImportError(f"{wc}: a probability is outside [0, 1]")
            for name in ("distribution_top", "target_top", "draft_top"):
                _check_candidates(getattr(c, name), wc, name)
        for name in ("draft_ms", "verify_ms", "step_ms", "elapsed_ms"):
            v = getattr(s, name)
            if v < 0:
                raise TraceImportError(f"{w}: {name} is negative")
            _need(v <= MAX_MS, w, name, "is not a plausible time in ms", v)
        for name in ("committed_tokens", "target_cache_len", "drafter_cache_len"):
            v = getattr(s, name)
            _need(v is None or 0 <= v <= MAX_COUNT, w, name, "must be a count >= 0", v)
        _check_tokens(s.emitted_ids, w, "emitted_ids")
        _check_jsonish(s.drafter_info, f"{w}: drafter_info")
        _check_drafter_info(s.drafter_info, w)
        emitted.extend(s.emitted_ids)
    if tuple(emitted) != res.token_ids:
        raise TraceImportError("the steps' emitted tokens do not add up to token_ids: the trace is inconsistent")
    if res.stats.steps != len(res.steps) or res.stats.new_tokens != len(res.token_ids):
        raise TraceImportError("stats do not match the steps (steps or new_tokens differ)")
    _check_jsonish(res.config, "config")
    for key, types in _CONFIG_TYPES.items():
        if key in res.config:
            v = res.config[key]
            ok = isinstance(v, types) and not (isinstance(v, bool) and bool not in types)
            if ok and isinstance(v, float):
                ok = math.isfinite(v)
            if ok and isinstance(v, int) and not isinstance(v, bool):
                ok = abs(v) <= 2**63
            _need(ok, "config", key, f"must be {' or '.join('null' if t is type(None) else t.__name__ for t in types)}",
                  v)


def _check_jsonish(obj: Any, where: str) -> None:
    stack = [obj]
    while stack:
        o = stack.pop()
        if isinstance(o, dict):
            if not all(isinstance(k, str) for k in o):
                raise TraceImportError(f"{where} has a non-text key")
            stack.extend(o.values())
        elif isinstance(o, (list, tuple)):
            stack.extend(o)
        elif isinstance(o, str):
            if len(o) > MAX_STRING_CHARS:
                raise TraceImportError(f"{where} has an overlong text")
        elif o is None or isinstance(o, (bool, int)):
            pass
        elif isinstance(o, float):
            if not math.isfinite(o):
                raise TraceImportError(f"{where} has a non-finite number")
        else:
            raise TraceImportError(f"{where} has a value of type {type(o).__name__}")


def parse_trace(data: bytes | str, max_bytes: int | None = None) -> GenerationResult:
    """Validate and rebuild a trace exported with ``GenerationResult.to_dict()`` (JSON).

    Checks, in order: size, UTF-8, strict JSON (no NaN/Infinity, no duplicate keys, bounded
    nesting), the schema (``GenerationResult.from_dict`` plus a type check of every field) and
    the values (probabilities in [0, 1], consistent steps).  Raises TraceImportError with a
    message for the user.  Nothing in the file is ever executed.
    """
    limit = load_config().limits.max_trace_bytes if max_bytes is None else max_bytes
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    if len(raw) > limit:
        raise TraceImportError(f"the file is {_mb(len(raw))}; the limit is {_mb(limit)}")
    if not raw.strip():
        raise TraceImportError("the file is empty")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise TraceImportError("the file is not UTF-8 text: export a trace as JSON from the playground") from None
    try:
        obj = json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_no_duplicates)
    except TraceImportError:
        raise
    except RecursionError:
        raise TraceImportError(f"the JSON is nested too deeply; a trace never is") from None
    except json.JSONDecodeError as exc:
        raise TraceImportError(f"the file is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except ValueError as exc:  # e.g. an integer with thousands of digits
        raise TraceImportError(f"the file has an invalid number ({str(exc)[:80]})") from None
    _check_depth(obj, MAX_JSON_DEPTH)
    if not isinstance(obj, dict):
        raise TraceImportError(f"a trace is a JSON object; this file holds a {type(obj).__name__}")
    missing = [k for k in ("token_ids", "text", "steps", "stats") if k not in obj]
    if missing:
        raise TraceImportError(
            f"this is not a playground trace: it has no {', '.join(repr(m) for m in missing)}"
        )
    if not isinstance(obj["steps"], list):
        raise TraceImportError("'steps' must be a list")
    if len(obj["steps"]) > MAX_TRACE_STEPS:
        raise TraceImportError(f"the trace has {len(obj['steps']):,} steps; the limit is {MAX_TRACE_STEPS:,}")
    for key in ("token_ids", "prompt_ids"):
        if key in obj and not (isinstance(obj[key], list) and all(type(t) is int for t in obj[key])):
            raise TraceImportError(f"{key!r} must be a list of integers")
    for key in ("text", "prompt"):
        if key in obj and not isinstance(obj[key], str):
            raise TraceImportError(f"{key!r} must be text")
    if "config" in obj and not isinstance(obj["config"], dict):
        raise TraceImportError("'config' must be an object")
    _check_shape(obj)
    if isinstance(obj["stats"], dict):  # exports write non-finite floats (e.g. tokens_per_s) as null
        hints = _HINTS[RunStats]
        obj["stats"] = {k: (float("nan") if v is None and hints.get(k) is float else v) for k, v in obj["stats"].items()}
    try:
        res = GenerationResult.from_dict(obj)
    except TraceImportError:
        raise
    except KeyError as exc:
        raise TraceImportError(f"the trace is incomplete: {str(exc).strip(chr(34)+chr(39))}") from None
    except (TypeError, ValueError, AttributeError) as exc:
        raise TraceImportError(f"the trace has the wrong structure ({str(exc)[:120]})") from None
    _check_record(res.stats, "stats")
    for i, s in enumerate(res.steps):
        _check_record(s, f"step {i + 1}")
    _check_values(res)
    return res


def load_trace_file(path: str | os.PathLike, max_bytes: int | None = None) -> GenerationResult:
    """Read (at most limit + 1 bytes of) a file and ``parse_trace`` it."""
    limit = load_config().limits.max_trace_bytes if max_bytes is None else max_bytes
    try:
        size = os.path.getsize(path)
    except OSError:
        raise TraceImportError("the file could not be read") from None
    if size > limit:
        raise TraceImportError(f"the file is {_mb(size)}; the limit is {_mb(limit)}")
    with open(path, "rb") as fh:
        data = fh.read(limit + 1)
    return parse_trace(data, max_bytes=limit)


def trace_to_json(result: GenerationResult) -> str:
    return json.dumps(result.to_dict(), ensure_ascii=False, allow_nan=False)


# --------------------------------------------------------------------------------------------
# URL query parameters and classroom presets
# --------------------------------------------------------------------------------------------

QUERY_KEYS = ("preset", "prompt", "gamma", "temperature", "seed", "classroom")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_INVISIBLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]")
EXCERPT_CHARS = 24


def excerpt(raw: Any, limit: int = EXCERPT_CHARS) -> str:
    """A short, single-line piece of a value someone else chose, for a message about it.

    Messages about a shared link are shown to whoever opens it, so they never repeat more
    than ``limit`` characters of what the link said (no room for a convincing "sign in"
    text), with control, line-break and bidirectional-override characters removed.  It is
    still untrusted text: renderers escape it like any other (``visual.lab``)."""
    s = _INVISIBLE.sub("", str(raw))
    return s if len(s) <= limit else s[: limit - 1] + "…"


@dataclass(frozen=True)
class Prefill:
    """Validated values from a shared link (absent keys are None) and what was ignored, and why."""

    preset: str | None = None
    prompt: str | None = None
    gamma: int | None = None
    temperature: float | None = None
    seed: int | None = None
    classroom: str | None = None  # slug of the classroom preset applied, if any
    errors: tuple[str, ...] = ()

    def values(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("preset", "prompt", "gamma", "temperature", "seed") if getattr(self, k) is not None}


def _parse_int(name: str, raw: Any, lo: int, hi: int) -> int:
    if isinstance(raw, bool):
        raise ValueError(f"{name} must be a whole number")
    if isinstance(raw, int):
        v = raw
    else:
        s = str(raw).strip()
        if not re.fullmatch(r"[+]?\d{1,19}", s):
            raise ValueError(f"{name} must be a whole number, got {excerpt(s)!r}")
        v = int(s)
    if not lo <= v <= hi:
        raise ValueError(f"{name} must be between {lo} and {hi}, got {v}")
    return v


def _parse_float(name: str, raw: Any, lo: float, hi: float) -> float:
    if isinstance(raw, bool):
        raise ValueError(f"{name} must be a number")
    if isinstance(raw, (int, float)):
        v = float(raw)
    else:
        s = str(raw).strip()
        if not re.fullmatch(r"[+-]?(\d{1,6}(\.\d{0,6})?|\.\d{1,6})", s):
            raise ValueError(f"{name} must be a number like 0.7, got {excerpt(s)!r}")
        v = float(s)
    if not math.isfinite(v) or not lo <= v <= hi:
        raise ValueError(f"{name} must be between {lo} and {hi}, got {v}")
    return v


def clean_prompt(raw: Any, max_chars: int) -> str:
    if not isinstance(raw, str):
        raise ValueError("prompt must be text")
    s = _CONTROL.sub("", raw.replace("\r\n", "\n"))
    if not s.strip():
        raise ValueError("prompt is empty")
    if len(s) > max_chars:
        raise ValueError(f"prompt is too long: {len(s)} characters (limit {max_chars})")
    return s


def slugify(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")[:60]


@dataclass(frozen=True)
class ClassroomPreset:
    slug: str
    label: str
    preset: str
    prompt: str
    gamma: int
    temperature: float
    seed: int
    explanation: str

    def query(self) -> str:
        """The shareable query string for this preset (``?classroom=slug``)."""
        from urllib.parse import urlencode

        return "?" + urlencode({"classroom": self.slug})


def classroom_presets(cfg: AppConfig | None = None) -> list[ClassroomPreset]:
    """The ``classroom:`` list of spaces_config.yaml, validated (raises ValueError on a bad entry)."""
    cfg = cfg or load_config()
    lim = cfg.limits
    names = {p.name for p in cfg.presets}
    out: list[ClassroomPreset] = []
    for i, entry in enumerate(cfg.classroom):
        w = f"classroom preset {i + 1}"
        if not isinstance(entry, dict):
            raise ValueError(f"{w} must be a mapping")
        extra = set(entry) - {"label", "preset", "prompt", "gamma", "temperature", "seed", "explanation"}
        if extra:
            raise ValueError(f"{w}: unknown keys {sorted(extra)}")
        try:
            label = str(entry["label"]).strip()
            preset = entry["preset"]
            if preset not in names:
                raise ValueError(f"unknown preset {preset!r}")
            cp = ClassroomPreset(
                slug=slugify(label),
                label=label,
                preset=preset,
                prompt=clean_prompt(entry["prompt"], lim.max_prompt_chars),
                gamma=_parse_int("gamma", entry["gamma"], 1, min(lim.max_gamma, MAX_GAMMA)),
                temperature=check_temperature(_parse_float("temperature", entry["temperature"], 0.0, lim.max_temperature), lim.max_temperature),
                seed=_parse_int("seed", entry.get("seed", 0), 0, 2**63 - 1),
                explanation=str(entry["explanation"]).strip(),
            )
        except KeyError as exc:
            raise ValueError(f"{w}: missing {exc.args[0]!r}") from None
        except ValueError as exc:
            raise ValueError(f"{w}: {exc}") from None
        if not label or not cp.explanation:
            raise ValueError(f"{w}: label and explanation must not be empty")
        out.append(cp)
    slugs = [c.slug for c in out]
    if len(set(slugs)) != len(slugs):
        raise ValueError("classroom preset labels must be distinct")
    return out


def validate_query(params: Mapping[str, Any] | None, cfg: AppConfig | None = None) -> Prefill:
    """Validate URL query parameters; bad values are dropped with a reason, never raised.

    ``classroom=<slug or 1-based number>`` applies a classroom preset first; explicit
    preset/prompt/gamma/temperature/seed parameters override it.
    """
    cfg = cfg or load_config()
    lim = cfg.limits
    params = dict(params or {})
    errors: list[str] = []
    vals: dict[str, Any] = {}
    cls_slug = None
    unknown = sorted(k for k in params if k not in QUERY_KEYS and not str(k).startswith("__"))
    if unknown:
        errors.append("ignored unknown parameter(s): " + ", ".join(repr(excerpt(u)) for u in unknown[:5])
                      + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""))
    if params.get("classroom") not in (None, ""):
        raw = str(params["classroom"]).strip()[:80]
        try:
            presets = classroom_presets(cfg)
        except ValueError as exc:
            presets = []
            errors.append(f"classroom presets are misconfigured: {exc}")
        found = None
        if raw.isdigit() and 1 <= int(raw) <= len(presets):
            found = presets[int(raw) - 1]
        else:
            found = next((c for c in presets if c.slug == slugify(raw)), None)
        if found is None:
            errors.append(f"classroom: no preset called {excerpt(raw)!r}")
        else:
            cls_slug = found.slug
            vals.update(preset=found.preset, prompt=found.prompt, gamma=found.gamma,
                        temperature=found.temperature, seed=found.seed)
    checks: dict[str, Callable[[Any], Any]] = {
        "preset": lambda r: _check_preset(r, cfg),
        "prompt": lambda r: clean_prompt(r, lim.max_prompt_chars),
        "gamma": lambda r: _parse_int("gamma", r, 1, min(lim.max_gamma, MAX_GAMMA)),
        "temperature": lambda r: check_temperature(_parse_float("temperature", r, 0.0, lim.max_temperature),
                                                  lim.max_temperature),
        "seed": lambda r: _parse_int("seed", r, 0, 2**63 - 1),
    }
    for key, check in checks.items():
        raw = params.get(key)
        if raw is None or (isinstance(raw, str) and raw == ""):
            continue
        if isinstance(raw, str) and len(raw) > lim.max_prompt_chars + 100:
            errors.append(f"{key}: value too long")
            continue
        try:
            vals[key] = check(raw)
        except ValueError as exc:
            errors.append(str(exc))
    return Prefill(classroom=cls_slug, errors=tuple(errors), **vals)


def _check_preset(raw: Any, cfg: AppConfig) -> str:
    name = str(raw).strip()
    names = [p.name for p in cfg.presets]
    if name not in names:
        raise ValueError(f"unknown preset {excerpt(name)!r}; choose one of: {', '.join(names)}")
    return name


def share_query(preset: str | None = None, prompt: str | None = None, gamma: int | None = None,
                temperature: float | None = None, seed: int | None = None) -> str:
    """The query string a teacher can append to the app's URL."""
    from urllib.parse import urlencode

    q = {k: v for k, v in (("preset", preset), ("prompt", prompt), ("gamma", gamma), ("temperature", temperature),
                           ("seed", seed)) if v is not None and v != ""}
    return ("?" + urlencode(q)) if q else ""


def _check_int(name: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    if not lo <= value <= hi:
        raise ValueError(f"{name} must be between {lo} and {hi}, got {value}")
    return value
