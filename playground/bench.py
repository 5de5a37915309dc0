"""Benchmarks: our loop side by side with transformers' ``generate()``, on this machine.

    python -m playground bench [--preset P] [--prompts FILE] [--max-new-tokens N]
        [--gammas 2,4,8] [--temperatures 0] [--drafters prompt-lookup,...] [--dtype D[,D]]
        [--methods hf_generate,autoregressive,speculative,hf_assisted] [--repeats R]
        [--trace off|on|both] [--rules lossless[,typical]] [--json] [--out DIR]

Methods, all on the same prompts and the same loaded models, in one process:

* ``hf_generate``    transformers ``model.generate()`` (greedy or sampled): the peer;
* ``autoregressive`` our loop without a drafter: the baseline every speedup is against;
* ``speculative``    our loop, per drafter x gamma;
* ``hf_assisted``    transformers' assisted generation where it applies:
                     ``prompt_lookup_num_tokens=gamma``, ``assistant_model`` (two-model presets) and
                     ``assistant_early_exit=k`` (the early-exit drafter's layer k) and universal
                     assisted generation (``assistant_tokenizer``; the other-tokenizer drafter,
                     when both tokenizers are transformers tokenizers).

Runs are *interleaved*: for each repetition, each prompt, each temperature, every
method runs once, in an order rotated between prompts, so machine drift (this
machine is shared) hits all methods alike.  One unrecorded warm-up run per
method comes first.

Measured costs (DESIGN.md §2):
  t1      one target pass over 1 token (ms), from the interleaved autoregressive runs;
  c       drafter ms per drafted token / t1;
  v       v_gamma = one target pass over gamma+1 tokens / one over 1 token, timed directly
          back to back at the same cache length (prompt + max_new_tokens/2);
  predicted_speedup = E(alpha, gamma) / (gamma*c + v_gamma), alpha = measured acceptance rate;
  predicted_speedup_steps = the same model on the step mix that really happened (drafts per
          step vary for prompt lookup): tokens per target call / (drafted per step * c + v(k)).
  measured_over_predicted(_steps) = decode-phase speedup over our autoregressive loop /
          predicted_speedup(_steps); the _steps ratio isolates the loop's own overhead.

Rows are aggregated per (dtype, prompt kind, temperature, method, drafter, gamma, trace, rule):
ms_per_token is the mean over prompts of the median over repetitions of
end-to-end ms per new token (prefill included, as ``generate()`` is timed);
decode_ms_per_token counts from the end of the prefill pass (noted by a forward
hook on the target, the same way for transformers and for our loop) and divides by
the tokens made after it (generate()'s prefill pass also yields the first token;
ours stops one token short and feeds it in the first decode pass).

This module never imports gradio or ``visual``; pandas, plotly and tqdm are
imported inside the functions that need them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import torch

from playground.drafters.registry import KINDS as DRAFTER_KINDS
from playground.validate import temperature as check_temperature

DEFAULT_PROMPTS = Path(__file__).resolve().parent / "data" / "bench_prompts.json"
METHODS = ("hf_generate", "autoregressive", "speculative", "hf_assisted")
RULES = ("lossless", "exact-match", "typical")  # verification rules worth timing
LOSSLESS_RULES = ("lossless", "exact-match")
TRACE_MODES = ("off", "on", "both")
BRANCHING = tuple(k.name for k in DRAFTER_KINDS.values() if k.branches)  # drafters with propose_tree

ROW_FIELDS = (
    "method",
    "drafter",
    "gamma",
    "tree_nodes",
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
    "peak_rss_mb",
)


class BenchError(ValueError):
    """Bad benchmark options (the CLI prints it on one line and exits 2)."""


# ----------------------------------------------------------------------------- options


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


@dataclass(frozen=True)
class Spec:
    """One benchmarked method configuration (a future row, per dtype/kind/temperature)."""

    method: str
    drafter: str | None = None
    gamma: int = 0
    trace: bool = False
    rule: str = "lossless"
    tree_nodes: int = 1

    @property
    def label(self) -> str:
        parts = [self.method]
        if self.drafter:
            parts.append(self.drafter)
        if self.gamma:
            parts.append(f"γ={self.gamma}")
        if self.tree_nodes > 1:
            parts.append(f"tree={self.tree_nodes}")
        if self.rule != "lossless":
            parts.append(self.rule)
        if self.trace:
            parts.append("trace")
        return " ".join(parts)


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

    @property
    def new_tokens(self) -> int:
        return len(self.token_ids)


@dataclass
class Costs:
    """Target pass timings at one cache length, for one dtype."""

    cache_len: int
    ms_by_tokens: dict[int, float]  # n new tokens -> median ms

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


# ----------------------------------------------------------------------------- prompts


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


# ----------------------------------------------------------------------------- measuring


def _reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark (VmHWM) of this process; False if not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def _peak_rss_mb() -> float | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    try:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    except Exception:  # pragma: no cover - non-Unix
        return None


_GLOBAL_RNG = threading.Lock()  # held by sampling runs of transformers' generate()
_ASSISTANT = threading.Lock()  # held while an assistant's generation_config carries a run's draft settings
ASSISTANT_KEYS = ("num_assistant_tokens", "num_assistant_tokens_schedule", "assistant_confidence_threshold")


class _CallCounter:
    """Counts forward calls of a module (transformers' generate() does not report them) and
    notes when the first one (the prefill) ended, so decode time is measured the same way
    for every method: from the end of the prefill pass to the end of the run.

    The module is shared by every user of the process; only calls made on the thread that
    entered the counter are counted (a run and its forward passes share one thread)."""

    def __init__(self, module, skip: Callable[[], bool] | None = None) -> None:
        self.module = module
        self.skip = skip  # calls for which skip() is true are not counted (transformers' early-exit drafts)
        self.calls = 0
        self.skipped = 0
        self.first_end: float | None = None
        self._handle = None
        self._thread = threading.get_ident()

    def __enter__(self) -> "_CallCounter":
        self._thread = threading.get_ident()

        def hook(*_):
            if threading.get_ident() != self._thread:
                return  # another user's run on the same model
            if self.skip is not None and self.skip():
                self.skipped += 1
                return
            self.calls += 1
            if self.first_end is None:
                self.first_end = time.perf_counter()

        self._handle = self.module.register_forward_hook(hook)
        return self

    def __exit__(self, *exc) -> None:
        if self._handle is not None:
            self._handle.remove()


def measure_costs(model, ids: list[int], sizes: Iterable[int], reps: int = 5, hidden: bool = False) -> Costs:
    """Median ms of one target pass over n new tokens, for each n in sizes, at the same
    cache length len(ids) - 1 (the cache is cropped back after every pass).  Sizes are
    interleaved so drift hits them alike; one unrecorded warm-up pass per size."""
    from playground.engine import Target

    sizes = sorted({int(n) for n in sizes} | {1})
    if len(ids) < max(sizes) + 1:
        raise ValueError("need more ids than the largest pass")
    target = Target(model, rollback=True)
    prefix, tail = ids[: -max(sizes)], ids[-max(sizes) :]
    target.forward(prefix, keep=1, hidden=False)
    cache_len = len(target)
    times: dict[int, list[float]] = {n: [] for n in sizes}
    for rep in range(reps + 1):
        order = sizes[rep % len(sizes) :] + sizes[: rep % len(sizes)]
        for n in order:
            out = target.forward(tail[:n], keep=n, hidden=hidden)
            target.crop(n)
            if rep:
                times[n].append(out.ms)
    return Costs(cache_len=cache_len, ms_by_tokens={n: statistics.median(t) for n, t in times.items()})


def _hf_generation_config(model, max_new_tokens: int, temperature: float, eos: tuple[int, ...], pad, assisted: dict):
    from transformers import GenerationConfig

    kw: dict[str, Any] = dict(
        max_new_tokens=max_new_tokens,
        eos_token_id=list(eos) if eos else None,
        pad_token_id=pad,
        do_sample=temperature > 0,
        **assisted,
    )
    if temperature > 0:
        kw.update(temperature=float(temperature), top_k=0, top_p=1.0)
    base = getattr(model, "generation_config", None)
    impl = getattr(base, "cache_implementation", None) if base is not None else None
    if impl:
        kw["cache_implementation"] = impl
    return GenerationConfig(**kw)


def _hf_run(pair, ids: list[int], max_new_tokens: int, temperature: float, seed: int, spec: "Spec",
            exit_layer: int | None = None):
    """transformers generate(); returns (new token ids, wall ms, target forward calls).
    ``exit_layer``: the layer transformers' early-exit assistant exits after (the same k as ours)."""
    model = pair.target
    pad = getattr(pair.tokenizer, "pad_token_id", None)
    if pad is None and pair.eos_token_ids:
        pad = pair.eos_token_ids[0]
    assisted: dict[str, Any] = {}
    kwargs: dict[str, Any] = {}
    if spec.method == "hf_assisted" and spec.drafter == "prompt-lookup":
        assisted = {"prompt_lookup_num_tokens": spec.gamma}
    elif spec.method == "hf_assisted" and spec.drafter == "early-exit":
        if exit_layer is None:
            raise BenchError("hf_assisted early-exit needs the early-exit drafter's layer")
        # transformers sets the shared model's num_hidden_layers to k while it drafts
        assisted = {
            "assistant_early_exit": int(exit_layer),
            "num_assistant_tokens": spec.gamma,
            "num_assistant_tokens_schedule": "constant",
            "assistant_confidence_threshold": 0.0,
        }
    elif spec.method == "hf_assisted":
        assisted = {
            "num_assistant_tokens": spec.gamma,
            "num_assistant_tokens_schedule": "constant",
            "assistant_confidence_threshold": 0.0,
        }
        kwargs["assistant_model"] = pair.drafter_model
        if spec.drafter == "other-tokenizer":  # universal assisted generation: text through both tokenizers
            kwargs.update(tokenizer=pair.tokenizer, assistant_tokenizer=pair.drafter_tokenizer)
    gc = _hf_generation_config(model, max_new_tokens, temperature, pair.eos_token_ids, pad, assisted)
    input_ids = torch.tensor([ids], device=model.device)
    mask = torch.ones_like(input_ids)
    # generate() samples from torch's one global generator (it takes no generator argument).
    # Sampling runs hold _GLOBAL_RNG while they seed and use it, so two users' runs never
    # draw from each other's stream, and the global state is restored for everyone else.
    # Our own loop never touches the global generator.
    assistant = kwargs.get("assistant_model", model if "assistant_early_exit" in assisted else None)
    with _GLOBAL_RNG if temperature > 0 else contextlib.nullcontext(), _assistant_settings(assistant, assisted):
        rng = torch.random.get_rng_state()
        try:
            torch.manual_seed(seed)
            with _CallCounter(model, _early_exit_pass(model) if "assistant_early_exit" in assisted else None) as counter, \
                    torch.inference_mode(), _quiet_transformers():
                t0 = time.perf_counter()
                out = model.generate(input_ids=input_ids, attention_mask=mask, generation_config=gc, **kwargs)
                wall = (time.perf_counter() - t0) * 1000.0
        finally:
            torch.random.set_rng_state(rng)
    prefill = (counter.first_end - t0) * 1000.0 if counter.first_end else None
    new = [int(t) for t in out[0, len(ids) :].tolist()]
    eos = set(pair.eos_token_ids)
    for i, t in enumerate(new):  # transformers pads finished rows; cut after the first EOS
        if t in eos:
            new = new[: i + 1]
            break
    return tuple(new), wall, counter.calls, prefill


def _hf_tokenizers(pair) -> bool:
    """Both tokenizers of a pair are transformers tokenizers (what universal assisted generation needs)."""
    from transformers import PreTrainedTokenizerBase

    return all(isinstance(t, PreTrainedTokenizerBase) for t in (pair.tokenizer, pair.drafter_tokenizer))


@contextlib.contextmanager
def _assistant_settings(assistant, assisted: dict):
    """transformers' candidate generators read γ (num_assistant_tokens), its schedule and the
    confidence threshold from the *assistant's own* generation_config, not from the one given
    to generate(): set them there for the run (one run at a time) and restore them after."""
    if assistant is None:
        yield
        return
    with _ASSISTANT:
        cfg = assistant.generation_config
        before = {k: getattr(cfg, k, None) for k in ASSISTANT_KEYS}
        try:
            for k in ASSISTANT_KEYS:
                if k in assisted:
                    setattr(cfg, k, assisted[k])
            yield
        finally:
            for k, v in before.items():
                setattr(cfg, k, v)


def _early_exit_pass(model) -> Callable[[], bool]:
    """True while transformers' early-exit assistant drafts (it lowers the base model's
    num_hidden_layers for the draft passes), so only full verify passes are counted."""
    base = getattr(model, model.base_model_prefix)
    full = base.config.num_hidden_layers
    return lambda: base.config.num_hidden_layers < full


class _quiet_transformers:
    """Silence transformers' warnings (deprecation chatter of assisted generation) for a block."""

    def __enter__(self):
        from transformers.utils import logging as hf_logging

        self._level = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()
        return self

    def __exit__(self, *exc):
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity(self._level)


def _our_run(pair, drafter, ids: list[int], spec: Spec, max_new_tokens: int, temperature: float, seed: int):
    from playground.engine import GenerationConfig, run

    cfg = GenerationConfig(
        mode="speculative" if spec.method == "speculative" else "autoregressive",
        gamma=spec.gamma if spec.method == "speculative" else 4,
        temperature=float(temperature),
        seed=seed,
        max_new_tokens=max_new_tokens,
        trace=spec.trace,
        rule=spec.rule,
        tree_nodes=spec.tree_nodes if spec.method == "speculative" else 1,
    )
    gen = torch.Generator().manual_seed(seed)
    counter = _CallCounter(pair.target)
    with counter:
        t0 = time.perf_counter()
        result = run(
            pair.target,
            pair.tokenizer,
            ids,
            cfg,
            drafter=drafter if spec.method == "speculative" else None,
            eos_token_ids=pair.eos_token_ids,
            generator=gen,
        )
        wall = (time.perf_counter() - t0) * 1000.0
    prefill = (counter.first_end - t0) * 1000.0 if (counter.first_end and result.stats.prefill_ms) else 0.0
    return result, wall, prefill


def _drift(result) -> float | None:
    """Sum over emitted tokens of TV(distribution the token came from, target p).

    Exact for deterministic drafts (q one-hot): a lossless rule emits exactly p
    (TV 0); typical acceptance emits the draft d with certainty when it is
    accepted, TV = 1 - p(d).  None when drafts were sampled (not measurable per step)."""
    total = 0.0
    for step in result.steps:
        for d in step.drafted:
            if d.judged and d.draft_prob < 1.0:
                return None
            if d.accepted:
                total += max(0.0, 1.0 - d.target_prob)
    return total


# ----------------------------------------------------------------------------- the benchmark


def _specs(opts: BenchOptions, drafters: tuple[str, ...], hf_assistant: bool, hf_uag: bool = False) -> list[Spec]:
    """hf_uag: transformers' universal assisted generation can run (both tokenizers are HF tokenizers)."""
    traces = {"off": (False,), "on": (True,), "both": (False, True)}[opts.trace]
    out: list[Spec] = []
    for tr in traces:
        if "hf_generate" in opts.methods and not tr:
            out.append(Spec("hf_generate"))
        if "autoregressive" in opts.methods:
            out.append(Spec("autoregressive", trace=tr))
        if "speculative" in opts.methods:
            for kind in drafters:
                for g in opts.gammas:
                    for rule in opts.rules:
                        for n in opts.tree_nodes:
                            if n > 1 and (kind not in BRANCHING or rule != "lossless"):
                                continue
                            out.append(Spec("speculative", kind, g, trace=tr, rule=rule, tree_nodes=n))
        if "hf_assisted" in opts.methods and not tr:
            for g in opts.gammas:
                if "prompt-lookup" in drafters:
                    out.append(Spec("hf_assisted", "prompt-lookup", g))
                if hf_assistant and "model" in drafters:
                    out.append(Spec("hf_assisted", "model", g))
                if "early-exit" in drafters:
                    out.append(Spec("hf_assisted", "early-exit", g))
                if hf_uag and "other-tokenizer" in drafters:
                    out.append(Spec("hf_assisted", "other-tokenizer", g))
    return out


def _validate(opts: BenchOptions) -> None:
    from playground.config import load_config

    lim = load_config().limits
    if not 1 <= opts.max_new_tokens <= lim.max_new_tokens:
        raise BenchError(f"--max-new-tokens must be between 1 and {lim.max_new_tokens}, got {opts.max_new_tokens}")
    if not opts.gammas:
        raise BenchError("--gammas needs at least one value")
    from playground.engine import MAX_TREE_NODES

    if not opts.tree_nodes or any(not 1 <= n <= MAX_TREE_NODES for n in opts.tree_nodes):
        raise BenchError(f"--tree-nodes must be between 1 and {MAX_TREE_NODES}")
    for g in opts.gammas:
        if not 1 <= g <= lim.max_gamma:
            raise BenchError(f"gamma must be between 1 and {lim.max_gamma}, got {g}")
    if not opts.temperatures:
        raise BenchError("--temperatures needs at least one value")
    for t in opts.temperatures:
        try:
            check_temperature(t, lim.max_temperature)
        except ValueError as exc:
            raise BenchError(str(exc)) from None
    if not opts.methods or any(m not in METHODS for m in opts.methods):
        raise BenchError(f"--methods must be a subset of {','.join(METHODS)}")
    if not 1 <= opts.repeats <= 100:
        raise BenchError(f"--repeats must be between 1 and 100, got {opts.repeats}")
    if opts.trace not in TRACE_MODES:
        raise BenchError(f"--trace must be one of {', '.join(TRACE_MODES)}")
    if not opts.rules or any(r not in RULES for r in opts.rules):
        raise BenchError(f"--rules must be a subset of {','.join(RULES)}")
    if opts.dtypes is not None:
        for d in opts.dtypes:
            if d not in ("float32", "bfloat16"):
                raise BenchError(f"dtype must be float32 or bfloat16, got {d!r}")


def _build_drafters(pair, preset, kinds: Iterable[str], notes: list[str]) -> dict[str, Any]:
    from playground.api import make_drafter

    out = {}
    for kind in kinds:
        try:
            out[kind] = make_drafter(kind, pair, preset)
        except Exception as exc:  # e.g. MTP weights not trained yet
            notes.append(f"drafter {kind!r} skipped: {type(exc).__name__}: {exc}".splitlines()[0])
    return out


def iter_bench(opts: BenchOptions, load_progress=None) -> Iterator[Progress | BenchReport]:
    """Run the benchmark; yield Progress events, then one BenchReport.

    Raises BenchError for bad options and ModelUnavailable when the preset cannot load.
    ``opts.threads`` sets torch's thread count for the run; it is restored afterwards."""
    before = torch.get_num_threads()
    try:
        yield from _iter_bench(opts, load_progress)
    finally:
        torch.set_num_threads(before)


def _iter_bench(opts: BenchOptions, load_progress=None) -> Iterator[Progress | BenchReport]:
    from playground.api import encode_prompt, resolve
    from playground.config import load_config
    from playground.models import load_pair

    t_begin = time.perf_counter()
    _validate(opts)
    try:
        preset, _ = resolve(opts.preset, None)
    except ValueError as exc:
        raise BenchError(str(exc)) from None
    kinds = opts.drafters if opts.drafters is not None else preset.drafters
    for k in kinds:
        if k not in preset.drafters:
            raise BenchError(f"preset {preset.name!r} has no {k!r} drafter; choose from: {', '.join(preset.drafters)}")
    prompts = opts.prompts if opts.prompts is not None else load_prompts()
    dtypes = opts.dtypes or (preset.dtype,)
    lim = load_config().limits
    notes: list[str] = []

    pairs, drafters, encoded = {}, {}, {}
    for dt in dtypes:
        pairs[dt] = pair = load_pair(preset, dt, progress=load_progress)
        drafters[dt] = _build_drafters(pair, preset, kinds, notes)
        for p in prompts:
            try:
                encoded[(dt, p.id)] = encode_prompt(p.text, pair.tokenizer, lim.max_prompt_chars, lim.max_prompt_tokens)
            except ValueError as exc:
                raise BenchError(f"prompt {p.id!r}: {exc}") from None
    if opts.threads:
        torch.set_num_threads(opts.threads)
    threads = torch.get_num_threads()
    usable = tuple(k for k in kinds if all(k in drafters[dt] for dt in dtypes))
    hf_assistant = all(pairs[dt].drafter_model is not None for dt in dtypes)
    hf_uag = hf_assistant and all(_hf_tokenizers(pairs[dt]) for dt in dtypes)
    specs = _specs(opts, usable, hf_assistant, hf_uag)
    if not specs:
        raise BenchError("nothing to run: no method/drafter combination is available")

    # ---- costs: v_gamma directly, same cache length, every dtype ----
    needs_hidden = any(getattr(d, "needs_target_hidden", False) for dt in dtypes for d in drafters[dt].values())
    sizes = {1, 2} | {g + 1 for g in opts.gammas} | {n + 1 for n in opts.tree_nodes if n > 1}
    total = len(specs) * len(prompts) * len(opts.temperatures) * len(dtypes) * opts.repeats
    done = 0
    costs: dict[str, Costs] = {}
    for dt in dtypes:
        yield Progress(done, total, f"measuring target pass cost ({dt})")
        base = list(encoded[(dt, prompts[0].id)])
        lens = sorted(len(encoded[(dt, p.id)]) for p in prompts)
        want = lens[len(lens) // 2] + opts.max_new_tokens // 2 + max(sizes)
        ids = (base * (want // len(base) + 1))[:want]
        costs[dt] = measure_costs(pairs[dt].target, ids, sizes, reps=opts.cost_reps, hidden=needs_hidden)

    # ---- warm-up: one short unrecorded run per method ----
    if opts.warmup:
        for dt in dtypes:
            yield Progress(done, total, f"warming up ({dt})")
            ids = encoded[(dt, prompts[0].id)]
            for spec in specs:
                _run_one(pairs[dt], drafters[dt], spec, ids, min(8, opts.max_new_tokens), opts.temperatures[0], opts.seed)

    # ---- interleaved measured runs (a round: every spec once on one prompt/temperature/dtype) ----
    runs: list[Run] = []
    partial = None
    for rep in range(opts.repeats):
        for pi, p in enumerate(prompts):
            for temperature in opts.temperatures:
                for dt in dtypes:
                    shift = (rep * len(prompts) + pi) % len(specs)
                    order = specs[shift:] + specs[:shift]
                    if opts.wall_s is not None and runs and time.perf_counter() - t_begin > opts.wall_s:
                        partial = (f"stopped after {opts.wall_s:g} s of wall time: {len(runs)} of {total} runs "
                                   f"({len(runs) // len(specs)} complete round(s) of every method)")
                        break
                    for spec in order:
                        yield Progress(done, total, f"{spec.label} · {p.id} · T={temperature:g} · {dt}")
                        seed = opts.seed + rep
                        run = _run_one(
                            pairs[dt], drafters[dt], spec, encoded[(dt, p.id)], opts.max_new_tokens, temperature, seed
                        )
                        runs.append(
                            replace(run, dtype=dt, prompt_id=p.id, kind=p.kind, temperature=temperature, rep=rep)
                        )
                        done += 1
                if partial:
                    break
            if partial:
                break
        if partial:
            break
    yield Progress(done, total, "done" if not partial else partial)
    rows = aggregate(runs, costs)
    meta = {
        "preset": preset.name,
        "target": preset.target,
        "dtypes": list(dtypes),
        "drafters": list(usable),
        "gammas": list(opts.gammas),
        "tree_nodes": list(opts.tree_nodes),
        "partial": partial,
        "temperatures": list(opts.temperatures),
        "max_new_tokens": opts.max_new_tokens,
        "repeats": opts.repeats,
        "prompts": [{"id": p.id, "kind": p.kind, "tokens": len(encoded[(dtypes[0], p.id)])} for p in prompts],
        "costs": {dt: {"cache_len": c.cache_len, "ms_by_tokens": {str(k): v for k, v in c.ms_by_tokens.items()}} for dt, c in costs.items()},
        "machine": machine_info(threads),
        "notes": notes,
    }
    yield BenchReport(rows=rows, meta=meta, runs=runs)


def run_bench(opts: BenchOptions, on_progress: Callable[[Progress], None] | None = None) -> BenchReport:
    report = None
    for item in iter_bench(opts):
        if isinstance(item, Progress):
            if on_progress:
                on_progress(item)
        else:
            report = item
    assert report is not None
    return report


def _run_one(pair, drafters: dict, spec: Spec, ids: list[int], max_new: int, temperature: float, seed: int) -> Run:
    _reset_peak_rss()
    if spec.method in ("hf_generate", "hf_assisted"):
        exit_layer = getattr(drafters.get("early-exit"), "exit_layer", None)
        tokens, wall, calls, prefill = _hf_run(pair, ids, max_new, temperature, seed, spec, exit_layer)
        return Run(
            spec=spec, dtype="", prompt_id="", kind="", temperature=temperature, rep=0, token_ids=tokens,
            wall_ms=wall, prefill_ms=prefill, prefill_emits=1 if prefill is not None else 0,
            decode_calls=max(calls - 1, 0), peak_rss_mb=_peak_rss_mb(),
        )  # fmt: skip
    drafter = drafters.get(spec.drafter) if spec.method == "speculative" else None
    result, wall, prefill = _our_run(pair, drafter, ids, spec, max_new, temperature, seed)
    s = result.stats
    judged_at = [0] * spec.gamma
    accepted_at = [0] * spec.gamma
    for step in result.steps:
        for d in step.drafted:
            if d.judged:
                judged_at[d.position - 1] += 1
                accepted_at[d.position - 1] += int(d.accepted)
    return Run(
        spec=spec,
        dtype="",
        prompt_id="",
        kind="",
        temperature=temperature,
        rep=0,
        token_ids=tuple(result.token_ids),
        wall_ms=wall,
        prefill_ms=prefill,
        draft_ms=s.draft_ms,
        verify_ms=s.verify_ms,
        decode_calls=s.target_calls - (1 if s.prefill_ms else 0),
        steps=s.steps,
        drafted=s.drafted_tokens,
        judged=s.judged_tokens,
        accepted=s.accepted_tokens,
        judged_at=judged_at,
        accepted_at=accepted_at,
        hist=list(s.accepted_length_hist),
        drift_sum=_drift(result) if spec.method == "speculative" else 0.0,
        peak_rss_mb=_peak_rss_mb(),
    )


# ----------------------------------------------------------------------------- aggregation


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def _ratio(a, b):
    return (a / b) if (a is not None and b) else None


def aggregate(runs: list[Run], costs: dict[str, Costs]) -> list[dict[str, Any]]:
    """Turn runs into rows (see ROW_FIELDS)."""
    from playground.sampling import predicted_speedup

    groups: dict[tuple, list[Run]] = {}
    for r in runs:
        groups.setdefault((r.dtype, r.kind, r.temperature, r.spec), []).append(r)

    def by_prompt(rs: list[Run], fn) -> list[float]:
        """Median over repetitions of fn(run), per prompt."""
        per: dict[str, list[float]] = {}
        for r in rs:
            val = fn(r)
            if val is not None:
                per.setdefault(r.prompt_id, []).append(val)
        return [statistics.median(v) for v in per.values()]

    # References: hf_generate greedy tokens per (dtype, prompt) and rep 0; AR per trace setting.
    hf_tokens = {
        (r.dtype, r.prompt_id): r.token_ids for r in runs if r.spec.method == "hf_generate" and r.temperature == 0
    }
    ar_tokens = {
        (r.dtype, r.prompt_id): r.token_ids for r in runs if r.spec.method == "autoregressive" and r.temperature == 0
    }
    rows: list[dict[str, Any]] = []
    base: dict[tuple, dict[str, Any]] = {}
    for (dtype, kind, temperature, spec), rs in groups.items():
        ms = _mean(by_prompt(rs, lambda r: r.wall_ms / max(r.new_tokens, 1)))
        decode = _mean(
            by_prompt(
                rs,
                lambda r: (r.wall_ms - r.prefill_ms) / max(r.new_tokens - r.prefill_emits, 1)
                if r.prefill_ms is not None
                else None,
            )
        )
        judged = sum(r.judged for r in rs)
        accepted = sum(r.accepted for r in rs)
        drafted = sum(r.drafted for r in rs)
        steps = sum(r.steps for r in rs)
        calls = sum(r.decode_calls for r in rs)
        tokens = sum(r.new_tokens for r in rs)
        decode_tokens = sum(r.new_tokens - r.prefill_emits for r in rs)  # made by decode-phase passes
        g = spec.gamma
        by_pos = None
        hist_mean = None
        if spec.method == "speculative":
            ja = [sum(r.judged_at[i] for r in rs) for i in range(g)]
            aa = [sum(r.accepted_at[i] for r in rs) for i in range(g)]
            by_pos = [(a / j) if j else None for a, j in zip(aa, ja)]
            hist = [sum(r.hist[i] for r in rs if i < len(r.hist)) for i in range(g + 1)]
            hist_mean = (sum(n * c for n, c in enumerate(hist)) / sum(hist)) if sum(hist) else None
        elif spec.method == "hf_assisted" and calls:
            hist_mean = decode_tokens / calls - 1.0  # tokens per target call - the one the target adds
        identical = first_div = None
        identical_ar = None
        if temperature == 0 and spec.method != "hf_generate":
            divs = [_first_divergence(r.token_ids, hf_tokens.get((r.dtype, r.prompt_id))) for r in rs]
            if all(d != "missing" for d in divs):
                identical = all(d is None for d in divs)
                hits = [d for d in divs if d is not None]
                first_div = min(hits) if hits else None
            divs_ar = [_first_divergence(r.token_ids, ar_tokens.get((r.dtype, r.prompt_id))) for r in rs]
            if all(d != "missing" for d in divs_ar):
                identical_ar = all(d is None for d in divs_ar)
        elif temperature == 0:
            identical = True
        drift = None
        if spec.method == "speculative":
            sums = [r.drift_sum for r in rs]
            drift = (sum(sums) / max(tokens, 1)) if all(s is not None for s in sums) else None
        row = {
            "method": spec.method,
            "drafter": spec.drafter,
            "gamma": g,
            "tree_nodes": spec.tree_nodes,
            "nodes_per_pass": (drafted / steps) if (steps and spec.method == "speculative") else None,
            "temperature": temperature,
            "prompts": kind,
            "n_prompts": len({r.prompt_id for r in rs}),
            "n_runs": len(rs),
            "dtype": dtype,
            "trace": spec.trace,
            "rule": spec.rule,
            "new_tokens": tokens / len(rs),
            "ms_per_token": ms,
            "tokens_per_s": (1000.0 / ms) if ms else None,
            "decode_ms_per_token": decode,
            "acceptance_rate": (accepted / judged) if judged else None,
            "acceptance_by_position": by_pos,
            "mean_accepted_length": hist_mean,
            "tokens_per_target_call": (decode_tokens / calls) if calls else None,
            "target_calls": calls / len(rs),
            "draft_ms_per_token": (sum(r.draft_ms for r in rs) / drafted) if drafted else None,
            "identical_to_hf": identical,
            "identical_to_autoregressive": identical_ar,
            "first_divergence": first_div,
            "drift_tv": drift,
            "peak_rss_mb": max((r.peak_rss_mb for r in rs if r.peak_rss_mb is not None), default=None),
            "_steps": steps,
            "_drafted": drafted,
            "_loop": _loop_overhead(rs),
            "_t1": (sum(r.verify_ms for r in rs) / calls) if (spec.method == "autoregressive" and calls) else None,
            "_verify": (sum(r.verify_ms for r in rs) / calls) if calls else None,  # ms per decode target pass
        }
        rows.append(row)
        if spec.method == "autoregressive":
            base[(dtype, kind, temperature, spec.trace)] = row
        if spec.method == "hf_generate":
            base[(dtype, kind, temperature, "hf")] = row

    chains = {(r["dtype"], r["prompts"], r["temperature"], r["trace"], r["drafter"], r["gamma"], r["rule"]): r
              for r in rows if r["method"] == "speculative" and r["tree_nodes"] == 1}
    for row in rows:
        key = (row["dtype"], row["prompts"], row["temperature"])
        ar = base.get(key + (row["trace"],)) or base.get(key + (False,))
        chain = chains.get(key + (row["trace"], row["drafter"], row["gamma"], row["rule"]))
        row["speedup_vs_chain"] = (_ratio(chain and chain["ms_per_token"], row["ms_per_token"])
                                   if row["method"] == "speculative" and row["tree_nodes"] > 1 else None)
        hf = base.get(key + ("hf",))
        row["speedup_vs_autoregressive"] = _ratio(ar and ar["ms_per_token"], row["ms_per_token"])
        row["speedup_vs_hf_generate"] = _ratio(hf and hf["ms_per_token"], row["ms_per_token"])
        row["decode_speedup_vs_autoregressive"] = _ratio(ar and ar["decode_ms_per_token"], row["decode_ms_per_token"])
        row["decode_speedup_vs_hf_generate"] = _ratio(hf and hf["decode_ms_per_token"], row["decode_ms_per_token"])
        cst = costs.get(row["dtype"])
        # t1: one single-token target pass, from the interleaved autoregressive runs
        # (every decode pass there is one token); the microbenchmark otherwise.
        t1 = (ar and ar["_t1"]) or (cst.ms_by_tokens.get(1) if cst else None)
        row["t1_ms"] = t1
        g = row["gamma"]
        c = v = pred = pred_steps = None
        if row["method"] == "speculative" and cst:
            c = _ratio(row["draft_ms_per_token"] or 0.0, t1) if row["_drafted"] else 0.0
            tree = row["tree_nodes"] > 1
            v = cst.v(1 + (row["nodes_per_pass"] or 0)) if tree else cst.v(g + 1)
            alpha = row["acceptance_rate"]
            if alpha is not None and c is not None and v is not None and not tree:  # E(α, γ) is a chain's
                pred = predicted_speedup(alpha, g, c, v)
            if row["_steps"] and c is not None and row["tokens_per_target_call"]:
                k_mean = row["_drafted"] / row["_steps"]
                vk = cst.v(1 + k_mean)
                if vk:
                    pred_steps = row["tokens_per_target_call"] / (k_mean * c + vk)
        elif row["method"] == "autoregressive":
            v, pred, pred_steps = 1.0, 1.0, 1.0
        row["c"] = c
        row["v"] = v
        row["v_measured"] = _ratio(row["_verify"], t1) if row["method"] == "speculative" else None
        row["predicted_speedup"] = pred
        row["predicted_speedup_steps"] = pred_steps
        row["measured_over_predicted"] = _ratio(row["decode_speedup_vs_autoregressive"], pred)
        row["measured_over_predicted_steps"] = _ratio(row["decode_speedup_vs_autoregressive"], pred_steps)
        row["loop_overhead"] = row.pop("_loop")
        row["quality"] = _quality(row)
    for row in rows:
        del row["_steps"], row["_drafted"], row["_t1"], row["_verify"]
    order = {m: i for i, m in enumerate(METHODS)}
    rows.sort(
        key=lambda r: (
            r["dtype"], r["prompts"], r["temperature"], r["trace"], order[r["method"]],
            r["drafter"] or "", r["gamma"], r["tree_nodes"], r["rule"],
        )
    )  # fmt: skip
    return [{k: _clean(row.get(k)) for k in ROW_FIELDS} for row in rows]


def _loop_overhead(rs: list[Run]) -> float | None:
    """Share of decode time spent outside draft and verify passes (our loop only)."""
    vals = []
    for r in rs:
        if r.prefill_ms is None or r.spec.method not in ("autoregressive", "speculative"):
            return None
        decode = r.wall_ms - r.prefill_ms
        if decode > 0:
            vals.append((decode - r.draft_ms - r.verify_ms) / decode)
    return _mean(vals)


def _first_divergence(a: tuple[int, ...], b: tuple[int, ...] | None):
    if b is None:
        return "missing"
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def _quality(row: dict[str, Any]) -> str:
    lossless = row["rule"] in LOSSLESS_RULES
    if row["method"] == "hf_generate":
        return "reference" if row["temperature"] == 0 else "reference (sampled)"
    if row["temperature"] == 0:
        if row["identical_to_hf"]:
            return "identical to target"
        if row["identical_to_hf"] is None:
            if row.get("identical_to_autoregressive"):
                return "identical to our autoregressive"
            if row.get("identical_to_autoregressive") is False:
                return "differs from our autoregressive" + (" (bfloat16 rounding)" if row["dtype"] == "bfloat16" else "")
            return "not compared"
        fd = row["first_divergence"]
        if row["dtype"] == "bfloat16":
            # A (γ+1)-token pass rounds differently from 1-token passes in bfloat16, which can
            # flip a near-tie argmax (DESIGN.md §3); transformers' assisted generation does too.
            return f"differs from token {fd} (bfloat16 rounding of the multi-token pass; exact in float32)"
        return f"differs from hf_generate from token {fd}"
    if lossless:
        return "lossless (exact sampling)"
    if row.get("drift_tv") is not None:
        return f"lossy: drift {row['drift_tv']:.3f} TV/token"
    return "lossy"


def _clean(v):
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return None
        return round(v, 6)
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v


def machine_info(threads: int | None = None) -> dict[str, Any]:
    import platform

    import transformers

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        load = os.getloadavg()[0]
    except OSError:  # pragma: no cover
        load = None
    return {
        "cpu": cpu,
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "threads": threads or torch.get_num_threads(),
        "gpu": bool(torch.cuda.is_available()),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "load_avg_1m": load,
        "env": {k: os.environ[k] for k in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS", "SPECPLAY_THREADS") if k in os.environ},
    }


# ----------------------------------------------------------------------------- outputs


TABLE_COLUMNS = (
    ("method", "method"),
    ("drafter", "drafter"),
    ("gamma", "block size γ"),
    ("tree_nodes", "tree nodes"),
    ("nodes_per_pass", "nodes / pass"),
    ("ms_per_token", "latency (ms/token)"),
    ("tokens_per_s", "throughput (tokens/s)"),
    ("speedup_vs_autoregressive", "speedup vs ours AR"),
    ("speedup_vs_hf_generate", "speedup vs HF generate"),
    ("speedup_vs_chain", "speedup vs chain"),
    ("acceptance_rate", "acceptance rate"),
    ("tokens_per_target_call", "tokens / target call"),
    ("c", "c"),
    ("v", "v_γ"),
    ("v_measured", "v in runs"),
    ("predicted_speedup", "predicted"),
    ("predicted_speedup_steps", "predicted (step mix)"),
    ("mean_accepted_length", "mean accepted"),
    ("quality", "quality"),
)


TREE_COLUMNS = ("tree_nodes", "nodes_per_pass", "speedup_vs_chain", "v_measured")


def table_columns(rows: list[dict[str, Any]]) -> tuple[tuple[str, str], ...]:
    """TABLE_COLUMNS, without the tree columns when every row drafts a chain."""
    if any((r.get("tree_nodes") or 1) > 1 for r in rows):
        return TABLE_COLUMNS
    return tuple(c for c in TABLE_COLUMNS if c[0] not in TREE_COLUMNS)


def _fmt(v, key: str) -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if key in ("ms_per_token",):
            return f"{v:.1f}"
        if key in ("tokens_per_s",):
            return f"{v:.2f}"
        if key.startswith("speedup") or key.startswith("predicted") or key in ("v", "v_measured", "tokens_per_target_call",
                                                                              "nodes_per_pass", "mean_accepted_length"):
            return f"{v:.2f}×" if key.startswith(("speedup", "predicted")) else f"{v:.2f}"
        return f"{v:.3f}"
    return str(v)


def markdown_table(rows: list[dict[str, Any]], meta: dict[str, Any] | None = None) -> str:
    """The familiar 'block size → latency, throughput, acceptance rate, quality' tables,
    one per (dtype, prompt kind, temperature, trace)."""
    out: list[str] = []
    if meta:
        m = meta.get("machine", {})
        out.append(
            f"Preset `{meta.get('preset')}` ({meta.get('target')}), {meta.get('max_new_tokens')} new tokens, "
            f"{meta.get('repeats')} interleaved repetitions; {m.get('cpu')}, {m.get('cores')} cores, "
            f"{'GPU' if m.get('gpu') else 'no GPU'}, torch {m.get('torch')}, transformers {m.get('transformers')}."
        )
        out.append("")
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["dtype"], r["prompts"], r["temperature"], r["trace"]), []).append(r)
    for (dtype, kind, temp, trace), rs in groups.items():
        n = rs[0]["n_prompts"]
        out.append(
            f"### {kind} prompts ({n}), temperature {temp:g}, {dtype}{', tracing on' if trace else ''}"
        )
        out.append("")
        columns = table_columns(rs)
        out.append("| " + " | ".join(h for _, h in columns) + " |")
        out.append("|" + "|".join("---" if k in ("method", "drafter", "quality") else "---:" for k, _ in columns) + "|")
        for r in rs:
            cells = {k: _fmt(r.get(k), k) for k, _ in columns}
            if r.get("rule") and r["rule"] != "lossless":
                cells["method"] += f" ({r['rule']})"
            out.append("| " + " | ".join(cells[k] for k, _ in columns) + " |")
        out.append("")
    out.append(
        "latency = wall time per new token, prefill included; acceptance rate = accepted / judged drafts; "
        "c = draft ms per drafted token / one single-token target pass; v_γ = target pass over γ+1 tokens / "
        "over 1 token (same cache length; for a tree, over 1 + nodes per pass tokens); "
        "predicted = E(α,γ)/(γc+v_γ) from the measured α (chains only); predicted (step mix) = tokens per target "
        "call / (k̄c + v(1+k̄)) with k̄ the mean drafted tokens per step."
        + (" Tree rows: nodes / pass = drafted nodes per verify pass; speedup vs chain = the chain row of the same "
           "drafter and γ over this one; v in runs = mean verify pass of these runs (tree mask included) / one "
           "single-token pass." if any((r.get("tree_nodes") or 1) > 1 for r in rows) else "")
    )
    return "\n".join(out) + "\n"


def build_figures(rows: list[dict[str, Any]], template: str | None = None) -> dict[str, Any]:
    """Plotly figures from bench rows (plotly is imported here, never at import time).

    Keys: "throughput" (tokens/s vs γ, with the two baselines as lines), "speedup"
    (measured vs predicted speedup vs γ), "acceptance" (acceptance by draft position),
    "costs" (γ·c and v_γ vs γ)."""
    import plotly.graph_objects as go

    figs: dict[str, Any] = {}
    rows = [r for r in rows if not r["trace"]] or rows
    keys = sorted({(r["dtype"], r["prompts"], r["temperature"]) for r in rows})
    multi = len(keys) > 1

    def suffix(key) -> str:
        return f" · {key[1]} · T={key[2]:g} · {key[0]}" if multi else ""

    fig = go.Figure()
    for key in keys:
        rs = [r for r in rows if (r["dtype"], r["prompts"], r["temperature"]) == key]
        lines: dict[tuple, list[dict]] = {}
        for r in rs:
            if r["method"] in ("speculative", "hf_assisted"):
                lines.setdefault((r["method"], r["drafter"], r["rule"]), []).append(r)
        gammas = sorted({r["gamma"] for r in rs if r["gamma"]}) or [1]
        for (method, drafter, rule), pts in lines.items():
            pts.sort(key=lambda r: r["gamma"])
            name = ("ours " if method == "speculative" else "HF assisted ") + str(drafter)
            if rule != "lossless":
                name += f" ({rule})"
            fig.add_trace(
                go.Scatter(
                    x=[r["gamma"] for r in pts], y=[r["tokens_per_s"] for r in pts], mode="lines+markers",
                    name=name + suffix(key), line={"dash": "solid" if method == "speculative" else "dot"},
                )
            )  # fmt: skip
        for method, name, dash in (("autoregressive", "ours autoregressive", "dash"), ("hf_generate", "HF generate()", "longdash")):
            ref = next((r for r in rs if r["method"] == method), None)
            if ref and ref["tokens_per_s"]:
                fig.add_trace(
                    go.Scatter(
                        x=[min(gammas), max(gammas)], y=[ref["tokens_per_s"]] * 2, mode="lines",
                        name=name + suffix(key), line={"dash": dash, "width": 1.5},
                    )
                )  # fmt: skip
    fig.update_layout(title="Throughput by block size γ", xaxis_title="block size γ (drafts per step)", yaxis_title="tokens / s")
    figs["throughput"] = fig

    fig = go.Figure()
    for key in keys:
        rs = [r for r in rows if (r["dtype"], r["prompts"], r["temperature"]) == key and r["method"] == "speculative"]
        for drafter in sorted({r["drafter"] for r in rs}):
            pts = sorted((r for r in rs if r["drafter"] == drafter and r["rule"] == "lossless"), key=lambda r: r["gamma"])
            if not pts:
                continue
            fig.add_trace(go.Scatter(x=[r["gamma"] for r in pts], y=[r["decode_speedup_vs_autoregressive"] for r in pts], mode="lines+markers", name=f"{drafter} measured{suffix(key)}"))
            fig.add_trace(go.Scatter(x=[r["gamma"] for r in pts], y=[r["predicted_speedup"] for r in pts], mode="lines", line={"dash": "dot"}, name=f"{drafter} predicted E/(γc+v){suffix(key)}"))
            fig.add_trace(go.Scatter(x=[r["gamma"] for r in pts], y=[r["predicted_speedup_steps"] for r in pts], mode="lines", line={"dash": "dash"}, name=f"{drafter} predicted from step mix{suffix(key)}"))
    fig.add_hline(y=1.0, line={"dash": "dash", "width": 1}, annotation_text="autoregressive")
    fig.update_layout(title="Decode speedup over our autoregressive loop: measured vs predicted", xaxis_title="block size γ", yaxis_title="speedup (×)")
    figs["speedup"] = fig

    fig = go.Figure()
    for key in keys:
        for r in rows:
            if (r["dtype"], r["prompts"], r["temperature"]) != key or r["method"] != "speculative" or not r["acceptance_by_position"]:
                continue
            ys = r["acceptance_by_position"]
            fig.add_trace(go.Scatter(x=list(range(1, len(ys) + 1)), y=ys, mode="lines+markers", name=f"{r['drafter']} γ={r['gamma']}{suffix(key)}"))
    fig.update_layout(title="Acceptance by draft position (P(accept | judged))", xaxis_title="draft position", yaxis_title="acceptance", yaxis_range=[0, 1.02])
    figs["acceptance"] = fig

    fig = go.Figure()
    for key in keys:
        rs = [r for r in rows if (r["dtype"], r["prompts"], r["temperature"]) == key and r["method"] == "speculative" and r["rule"] == "lossless"]
        vs = sorted({(r["gamma"], r["v"]) for r in rs if r["v"] is not None})
        if vs:
            fig.add_trace(go.Scatter(x=[g for g, _ in vs], y=[v for _, v in vs], mode="lines+markers", name=f"v_γ (target pass over γ+1 tokens){suffix(key)}"))
        for drafter in sorted({r["drafter"] for r in rs}):
            pts = sorted((r for r in rs if r["drafter"] == drafter and r["c"] is not None), key=lambda r: r["gamma"])
            if pts:
                fig.add_trace(go.Bar(x=[r["gamma"] for r in pts], y=[r["gamma"] * r["c"] for r in pts], name=f"γ·c {drafter}{suffix(key)}", opacity=0.6))
    fig.update_layout(title="Cost of one step in single-token target passes: γ·c + v_γ", xaxis_title="block size γ", yaxis_title="× one single-token target pass", barmode="group")
    figs["costs"] = fig
    if template:
        for f in figs.values():
            f.update_layout(template=template)
    return figs


def write_outputs(report: BenchReport, out_dir: str | os.PathLike) -> dict[str, str]:
    """Write bench.json, bench.csv (pandas), bench.md and bench.html (plotly); return the paths."""
    import pandas as pd

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {k: str(out / f"bench.{k}") for k in ("json", "csv", "md", "html")}
    Path(paths["json"]).write_text(json.dumps(report.to_json(), indent=2, ensure_ascii=False), encoding="utf-8")
    df = pd.DataFrame(report.rows, columns=list(ROW_FIELDS))
    df["acceptance_by_position"] = df["acceptance_by_position"].map(lambda v: json.dumps(v) if v is not None else "")
    df.to_csv(paths["csv"], index=False)
    Path(paths["md"]).write_text(markdown_table(report.rows, report.meta), encoding="utf-8")
    figs = build_figures(report.rows)
    parts = ["<html><head><meta charset='utf-8'><title>Speculative decoding benchmark</title></head><body>"]
    parts.append("<h1>Speculative decoding benchmark</h1><pre>" + _html_escape(json.dumps(report.meta.get("machine", {}))) + "</pre>")
    for i, fig in enumerate(figs.values()):
        parts.append(fig.to_html(full_html=False, include_plotlyjs="inline" if i == 0 else False))
    parts.append("</body></html>")
    Path(paths["html"]).write_text("\n".join(parts), encoding="utf-8")
    return paths


def _html_escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# ----------------------------------------------------------------------------- CLI


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2
        raise BenchError(message)


def _int_list(s: str) -> tuple[int, ...]:
    try:
        vals = tuple(int(x) for x in s.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {s!r}") from None
    if not vals:
        raise argparse.ArgumentTypeError("expected at least one integer")
    return vals


def _float_list(s: str) -> tuple[float, ...]:
    try:
        vals = tuple(float(x) for x in s.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {s!r}") from None
    if not vals:
        raise argparse.ArgumentTypeError("expected at least one number")
    return vals


def _str_list(s: str) -> tuple[str, ...]:
    vals = tuple(x.strip() for x in s.split(",") if x.strip())
    if not vals:
        raise argparse.ArgumentTypeError("expected at least one name")
    return vals


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m playground bench", description="Benchmark our loop against transformers on this machine.")
    p.add_argument("--preset", default=None, help="preset name (default: the default preset)")
    p.add_argument("--prompts", default=None, help='JSON file {"prompts": [...]} (default: playground/data/bench_prompts.json)')
    p.add_argument("--kinds", type=_str_list, default=None, help="only prompts of these kinds (e.g. grounded,general)")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--gammas", type=_int_list, default=(2, 4, 8))
    p.add_argument("--tree-nodes", type=_int_list, default=(1,),
                   help="1 = chain drafts; larger values add draft-tree rows with that node budget (e.g. 1,4,8,16,32)")
    p.add_argument("--temperatures", type=_float_list, default=(0.0,))
    p.add_argument("--drafters", type=_str_list, default=None)
    p.add_argument("--dtype", type=_str_list, default=None, help="float32, bfloat16 or both (comma-separated)")
    p.add_argument("--methods", type=_str_list, default=METHODS)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--trace", choices=TRACE_MODES, default="off", help="run our loop with full tracing off, on, or both")
    p.add_argument("--rules", type=_str_list, default=("lossless",))
    p.add_argument("--cost-reps", type=int, default=5)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: every core)")
    p.add_argument("--no-warmup", action="store_true")
    p.add_argument("--json", action="store_true", help='print {"rows": [...], "meta": {...}} on stdout')
    p.add_argument("--out", default="bench_results", help="directory for bench.{json,csv,md,html} ('' to skip)")
    p.add_argument("--no-progress", action="store_true")
    return p


def options_from_args(args) -> BenchOptions:
    prompts = load_prompts(args.prompts) if args.prompts or args.kinds else None
    if args.kinds:
        prompts = tuple(p for p in prompts if p.kind in args.kinds)
        if not prompts:
            raise BenchError(f"no prompts of kind {', '.join(args.kinds)}")
    if args.seed < 0:
        raise BenchError("--seed must be >= 0")
    if args.threads is not None and not 1 <= args.threads <= 256:
        raise BenchError("--threads must be between 1 and 256")
    if not 1 <= args.cost_reps <= 100:
        raise BenchError("--cost-reps must be between 1 and 100")
    return BenchOptions(
        preset=args.preset,
        prompts=prompts,
        max_new_tokens=args.max_new_tokens,
        gammas=tuple(dict.fromkeys(args.gammas)),
        tree_nodes=tuple(dict.fromkeys(args.tree_nodes)),
        temperatures=tuple(dict.fromkeys(args.temperatures)),
        drafters=tuple(dict.fromkeys(args.drafters)) if args.drafters else None,
        dtypes=tuple(dict.fromkeys(args.dtype)) if args.dtype else None,
        methods=tuple(dict.fromkeys(args.methods)),
        repeats=args.repeats,
        seed=args.seed,
        trace=args.trace,
        rules=tuple(dict.fromkeys(args.rules)),
        cost_reps=args.cost_reps,
        warmup=not args.no_warmup,
        threads=args.threads,
    )


def main(argv: list[str] | None = None) -> int:
    from playground.models import ModelUnavailable

    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
        opts = options_from_args(args)
        _validate(opts)
    except BenchError as exc:
        sys.stderr.write(f"python -m playground bench: error: {exc}\n")
        return 2
    bar = None
    try:
        report = None
        for item in iter_bench(opts):
            if isinstance(item, Progress):
                if bar is None and not args.no_progress:
                    from tqdm import tqdm

                    bar = tqdm(total=item.total, file=sys.stderr, unit="run", dynamic_ncols=True, leave=True)
                if bar is not None:
                    bar.n = item.done
                    bar.set_description_str(item.label[:60])
                    bar.refresh()
            else:
                report = item
    except BenchError as exc:
        if bar is not None:
            bar.close()
        sys.stderr.write(f"python -m playground bench: error: {exc}\n")
        return 2
    except ModelUnavailable as exc:
        if bar is not None:
            bar.close()
        sys.stderr.write(f"python -m playground bench: error: {exc}\n")
        return 2
    if bar is not None:
        bar.close()
    assert report is not None
    paths = write_outputs(report, args.out) if args.out else {}
    report.meta["outputs"] = paths
    for note in report.meta.get("notes", []):
        sys.stderr.write(f"note: {note}\n")
    if args.json:
        print(json.dumps(report.to_json(), ensure_ascii=False))
    else:
        print(markdown_table(report.rows, report.meta))
        if paths:
            print("wrote " + ", ".join(paths.values()))
    return 0
