"""One measured run: transformers' generate()/assisted generation or our loop, with counters.

This module times single runs; it does not choose what to run (``run``) or summarise (``aggregate``).
"""

from __future__ import annotations

import contextlib
import resource
import statistics
import time
from collections.abc import Callable, Iterable
from typing import Any

import torch
from transformers import GenerationConfig, PreTrainedTokenizerBase

from playground import global_rng
from playground.decoding.engine import run
from playground.decoding.hf_calls import quiet_warnings
from playground.decoding.target import Target
from playground.models.view import model_view
from playground.settings import RunSettings
from tools.bench.options import BenchError, Costs, Spec


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
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    except Exception:  # pragma: no cover - non-Unix
        return None


ASSISTANT_KEYS = ("num_assistant_tokens", "num_assistant_tokens_schedule", "assistant_confidence_threshold")


class _CallCounter:
    """Counts forward calls of a model (transformers' generate() does not report them) and
    notes when the first one (the prefill) ended, so decode time is measured from the end of
    the prefill pass to the end of the run, as our loop's ``prefill_ms`` lets us measure ours.

    The model must be the caller's own ``model_view``: a hook on a shared model would fire
    for every other run's passes too."""

    def __init__(self, module, skip: Callable[[], bool] | None = None) -> None:
        self.module = module
        self.skip = skip  # calls for which skip() is true are not counted (transformers' early-exit drafts)
        self.calls = 0
        self.skipped = 0
        self.first_end: float | None = None
        self._handle = None

    def __enter__(self) -> _CallCounter:
        def hook(*_):
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


def _hf_generation_config(
    model, max_new_tokens: int, temperature: float, eos: tuple[int, ...], pad, assisted: dict, run=None
):
    """generate()'s config: our row's length, temperature and sampling filters (``run``: its
    ``RunSettings``, whose top-k, top-p and min-p generate() applies as ours does)."""

    kw: dict[str, Any] = dict(
        max_new_tokens=max_new_tokens,
        eos_token_id=list(eos) if eos else None,
        pad_token_id=pad,
        do_sample=temperature > 0,
        **assisted,
    )
    if temperature > 0:
        kw.update(temperature=float(temperature), top_k=0, top_p=1.0)
        if run is not None:
            kw.update(top_k=run.top_k, top_p=run.top_p, min_p=run.min_p or None)
    base = getattr(model, "generation_config", None)
    impl = getattr(base, "cache_implementation", None) if base is not None else None
    if impl:
        kw["cache_implementation"] = impl
    return GenerationConfig(**kw)


def hf_models(pair, spec: Spec):
    """(target, assistant or None) for transformers' ``spec``: views of the pair's models of
    this run's own (``model_view``), so what generate() writes while it runs — the base
    model's ``num_hidden_layers`` for its early-exit drafts, the assistant's draft settings in
    its ``generation_config``, our call counter's hook — no other run on the model sees."""
    assistant = None
    if spec.method == "hf_assisted" and spec.run.drafter not in ("prompt-lookup", "early-exit"):
        assistant = model_view(pair.drafter_model)
    return model_view(pair.target), assistant


def _hf_run(
    pair, ids: list[int], max_new_tokens: int, temperature: float, seed: int, spec: Spec, exit_layer: int | None = None
):
    """transformers generate(); returns (new token ids, wall ms, target forward calls).
    ``exit_layer``: the layer transformers' early-exit assistant exits after (the same k as ours)."""
    model, assistant = hf_models(pair, spec)
    pad = getattr(pair.tokenizer, "pad_token_id", None)
    if pad is None and pair.eos_token_ids:
        pad = pair.eos_token_ids[0]
    assisted: dict[str, Any] = {}
    kwargs: dict[str, Any] = {}
    if spec.method == "hf_assisted" and spec.run.drafter == "prompt-lookup":
        assisted = {"prompt_lookup_num_tokens": spec.gamma}
    elif spec.method == "hf_assisted" and spec.run.drafter == "early-exit":
        if exit_layer is None:
            raise BenchError("hf_assisted early-exit needs the early-exit drafter's layer")
        # transformers lowers the (view's) num_hidden_layers to k while it drafts
        assisted = {
            "assistant_early_exit": int(exit_layer),
            "num_assistant_tokens": spec.gamma,
            "num_assistant_tokens_schedule": "constant",
            "assistant_confidence_threshold": 0.0,
        }
        assistant = model
    elif spec.method == "hf_assisted":
        assisted = {
            "num_assistant_tokens": spec.gamma,
            "num_assistant_tokens_schedule": "constant",
            "assistant_confidence_threshold": 0.0,
        }
        kwargs["assistant_model"] = assistant
        if spec.run.drafter == "other-tokenizer":  # universal assisted generation: text through both tokenizers
            kwargs.update(tokenizer=pair.tokenizer, assistant_tokenizer=pair.drafter_tokenizer)
    if assistant is not None:
        # transformers' candidate generators read γ, its schedule and the confidence threshold
        # from the assistant's own generation_config, not from the one given to generate()
        for k in ASSISTANT_KEYS:
            if k in assisted:
                setattr(assistant.generation_config, k, assisted[k])
    gc = _hf_generation_config(model, max_new_tokens, temperature, pair.eos_token_ids, pad, assisted, spec.run)
    input_ids = torch.tensor([ids], device=model.device)
    mask = torch.ones_like(input_ids)
    # generate() samples from torch's global generator (it takes no generator argument)
    with global_rng.seeded(seed) if temperature > 0 else contextlib.nullcontext():
        with (
            _CallCounter(model, _early_exit_pass(model) if "assistant_early_exit" in assisted else None) as counter,
            torch.inference_mode(),
            quiet_warnings(),
        ):
            t0 = time.perf_counter()
            out = model.generate(input_ids=input_ids, attention_mask=mask, generation_config=gc, **kwargs)
            wall = (time.perf_counter() - t0) * 1000.0
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

    return all(isinstance(t, PreTrainedTokenizerBase) for t in (pair.tokenizer, pair.drafter_tokenizer))


def _early_exit_pass(model) -> Callable[[], bool]:
    """True while transformers' early-exit assistant drafts (it lowers the base model's
    num_hidden_layers for the draft passes), so only full verify passes are counted."""
    base = getattr(model, model.base_model_prefix)
    full = base.config.num_hidden_layers
    return lambda: base.config.num_hidden_layers < full


@contextlib.contextmanager
def _stop_below(drafter, value: float | None):
    """The drafter's early-stop threshold set to ``value`` for one run (drafters are shared by runs)."""
    if drafter is None or value is None or not drafter.capabilities.stops_early:
        yield
        return
    before = drafter.stop_below
    drafter.stop_below = value
    try:
        yield
    finally:
        drafter.stop_below = before


def _our_run(pair, drafter, ids: list[int], settings: RunSettings):
    """Our loop on ``settings`` (``Spec.settings``): (result, wall ms, prefill ms)."""
    speculative = settings.speculative
    gen = torch.Generator().manual_seed(settings.seed)
    with _stop_below(drafter if speculative else None, settings.draft_stop):
        t0 = time.perf_counter()
        result = run(
            pair.target,
            pair.tokenizer,
            ids,
            settings,
            drafter=drafter if speculative else None,
            eos_token_ids=pair.eos_token_ids,
            generator=gen,
        )
        wall = (time.perf_counter() - t0) * 1000.0
    return result, wall, result.stats.prefill_ms


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
