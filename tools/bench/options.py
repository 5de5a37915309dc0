"""Benchmark settings and records: options, run specs, runs, costs, reports, prompts.

This module only describes; ``run`` measures, ``aggregate`` summarises, ``report`` renders.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from playground.drafters.registry import KINDS as DRAFTER_KINDS
from playground.repetition import Repetition
from playground.rules import DEFAULT_RULE
from playground.rules import RULES as ALL_RULES
from playground.settings import RunSettings
from tools.paths import DATA

DEFAULT_PROMPTS = DATA / "bench_prompts.json"
METHODS = ("hf_generate", "autoregressive", "speculative", "hf_assisted")
DRAFTING = ("speculative", "hf_assisted")  # the methods whose runs draft (and have a γ)
RULES = tuple(k for k, r in ALL_RULES.items() if r.category != "wrong")  # rules worth timing: not the mutants
TRACE_MODES = ("off", "on", "both")
BRANCHING = tuple(k.name for k in DRAFTER_KINDS.values() if k.capabilities.branches)  # drafters with propose_tree
STOPPING = tuple(k.name for k in DRAFTER_KINDS.values() if k.capabilities.stops_early)  # drafters with stop_below

ROW_FIELDS = (
    "method",
    "drafter",
    "gamma",
    "tree_nodes",
    "draft_stop",
    "nodes_per_pass",
    "temperature",
    "prompts",
    "n_prompts",
    "n_runs",
    "dtype",
    "trace",
    "rule",
    "new_tokens",
    "ms_per_token",
    "tokens_per_s",
    "ceiling_tokens_per_s",
    "of_ceiling",
    "decode_ms_per_token",
    "speedup_vs_autoregressive",
    "speedup_vs_hf_generate",
    "speedup_vs_chain",
    "decode_speedup_vs_autoregressive",
    "decode_speedup_vs_hf_generate",
    "acceptance_rate",
    "acceptance_by_position",
    "mean_accepted_length",
    "tokens_per_target_call",
    "target_calls",
    "t1_ms",
    "draft_ms_per_token",
    "c",
    "v",
    "v_measured",
    "predicted_speedup",
    "predicted_speedup_steps",
    "measured_over_predicted",
    "measured_over_predicted_steps",
    "loop_overhead",
    "identical_to_hf",
    "identical_to_autoregressive",
    "first_divergence",
    "drift_tv",
    "quality",
    "repeated_4gram_share",
    "distinct_2",
    "repetitive_runs",
    "speedup_non_repetitive",
    "speedup_repetitive",
    "peak_rss_mb",
)


class BenchError(ValueError):
    """Bad benchmark options (the CLI prints it on one line and exits 2)."""


@dataclass(frozen=True)
class BenchPrompt:
    id: str
    kind: str  # "grounded" (edit / copy / summarise a given text), "general", or "custom"
    text: str


@dataclass(frozen=True)
class BenchOptions:
    preset: str | None = None
    prompts: tuple[BenchPrompt, ...] | None = None  # None: playground/data/bench_prompts.json
    max_new_tokens: int = 64
    gammas: tuple[int, ...] = (2, 4, 8)
    tree_nodes: tuple[int, ...] = (1,)  # 1: chain drafts; > 1: draft trees (drafters that can branch)
    draft_stops: tuple[float, ...] | None = None  # chain confidence thresholds to compare (None: the preset's)
    temperatures: tuple[float, ...] = (0.0,)
    drafters: tuple[str, ...] | None = None  # None: every drafter the preset can build
    dtypes: tuple[str, ...] | None = None  # None: the preset's dtype
    methods: tuple[str, ...] = METHODS
    repeats: int = 2
    seed: int = 0
    trace: str = "off"
    rules: tuple[str, ...] = ("lossless",)
    cost_reps: int = 5
    warmup: bool = True
    threads: int | None = None  # torch threads (None: every core, as the app does)
    wall_s: float | None = None  # stop measuring after this many seconds; rows then cover complete rounds only
    exit_layer: int | None = None  # early exit: the layer it exits after (None: the preset's)
    exit_kv_reuse: bool = True  # early exit: reuse the draft passes' KV in the verify pass (LayerSkip)
    exit_trained: bool = True  # early exit: use the preset's trained exit adapter where it has one
    fixed: tuple[tuple[str, Any], ...] = ()  # RunSettings values every row runs with (--set name=value)


@dataclass(frozen=True)
class Spec:
    """One benchmarked method configuration (a future row, per dtype/kind/temperature): the method
    and the ``RunSettings`` it runs with, less what each row sets (temperature, seed, length:
    ``settings``).  The hf_* methods read their drafter and γ from ``run`` too."""

    method: str
    run: RunSettings

    @classmethod
    def of(cls, method: str, **values: Any) -> Spec:
        """``method`` with ``values`` (``RunSettings``' fields; trace off unless given); a method
        that does not draft runs autoregressive."""
        run = RunSettings(**{"trace": False, **values})
        return cls(method, run if method in DRAFTING else run.autoregressive())

    @property
    def gamma(self) -> int:
        """Drafts per step: 0 for a method that does not draft."""
        return self.run.gamma if self.method in DRAFTING else 0

    @property
    def label(self) -> str:
        r = self.run
        parts = [self.method]
        if r.drafter:
            parts.append(r.drafter)
        if self.gamma:
            parts.append(f"γ={self.gamma}")
        if r.tree_nodes > 1:
            parts.append(f"tree={r.tree_nodes}")
        if r.draft_stop:
            parts.append(f"stop<{r.draft_stop:g}")
        if r.rule != DEFAULT_RULE:
            parts.append(r.rule)
        if r.trace:
            parts.append("trace")
        return " ".join(parts)

    def settings(self, temperature: float, seed: int, max_new_tokens: int) -> RunSettings:
        """The run settings of our loop for this spec's row (the hf_* methods have none)."""
        return replace(self.run, temperature=float(temperature), seed=seed, max_new_tokens=max_new_tokens)


@dataclass
class Run:
    """One measured generation."""

    spec: Spec
    dtype: str
    prompt_id: str
    kind: str
    temperature: float
    rep: int
    token_ids: tuple[int, ...]
    wall_ms: float
    prefill_ms: float | None = None  # start of the run to the end of its first target pass
    prefill_emits: int = 0  # tokens that first pass produced (generate(): 1; our loop: 0, its prefill stops short)
    draft_ms: float = 0.0
    verify_ms: float = 0.0
    decode_calls: int = 0
    steps: int = 0
    drafted: int = 0
    judged: int = 0
    accepted: int = 0
    judged_at: list[int] = field(default_factory=list)
    accepted_at: list[int] = field(default_factory=list)
    hist: list[int] = field(default_factory=list)
    drift_sum: float | None = None
    peak_rss_mb: float | None = None
    repetition: Repetition | None = None  # of the output, after the prompt (playground.repetition)

    @property
    def new_tokens(self) -> int:
        return len(self.token_ids)


@dataclass
class Costs:
    """Target pass timings at one cache length, for one dtype."""

    cache_len: int
    ms_by_tokens: dict[int, float]  # n new tokens -> median ms
    # one pass of one row of one token through the shared-pass path (``pass_cost.pass_costs``), same
    # cache length: 1000 / ceiling_ms is plain decoding's ceiling on this machine, one run at a time
    ceiling_ms: float | None = None

    def v(self, n_tokens: int) -> float | None:
        """v for a pass over n_tokens (linear interpolation between measured sizes)."""
        t1 = self.ms_by_tokens.get(1)
        if not t1:
            return None
        return self.ms(n_tokens) / t1

    def ms(self, n_tokens: float) -> float:
        pts = sorted(self.ms_by_tokens.items())
        if n_tokens <= pts[0][0]:
            return pts[0][1]
        for (n0, m0), (n1, m1) in zip(pts, pts[1:]):
            if n_tokens <= n1:
                return m0 + (m1 - m0) * (n_tokens - n0) / (n1 - n0)
        return pts[-1][1]


@dataclass
class BenchReport:
    rows: list[dict[str, Any]]
    meta: dict[str, Any]
    runs: list[Run] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"rows": self.rows, "meta": self.meta}


@dataclass(frozen=True)
class Progress:
    done: int
    total: int
    label: str


def load_prompts(path: str | os.PathLike | None = None) -> tuple[BenchPrompt, ...]:
    """Read ``{"prompts": [...]}``; each entry is a string or ``{"text"|"prompt", "kind"?, "id"?}``."""
    p = Path(path) if path else DEFAULT_PROMPTS
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BenchError(f"prompts file not found: {p}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BenchError(f"cannot read prompts file {p}: {type(exc).__name__}: {exc}".splitlines()[0]) from None
    items = data.get("prompts") if isinstance(data, dict) else None
    if not isinstance(items, list) or not items:
        raise BenchError(f'prompts file {p} must be a JSON object {{"prompts": [...]}} with at least one prompt')
    out = []
    for i, item in enumerate(items):
        if isinstance(item, str):
            text, kind, pid = item, "custom", f"p{i}"
        elif isinstance(item, dict):
            text = item.get("text", item.get("prompt"))
            kind = str(item.get("kind", "custom"))
            pid = str(item.get("id", f"p{i}"))
        else:
            text = None
        if not isinstance(text, str) or not text.strip():
            raise BenchError(f"prompt {i} in {p} must be a non-empty string (or an object with a 'text')")
        out.append(BenchPrompt(id=pid, kind=kind, text=text))
    return tuple(out)
