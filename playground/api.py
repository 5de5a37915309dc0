"""The public Python interface: ``generate`` and ``stream_generate``.

    >>> from playground import generate
    >>> r = generate("The capital of France is", preset="tiny-random", gamma=4, max_new_tokens=16)
    >>> r.token_ids, r.text, r.steps[0].drafted, r.stats.acceptance_rate

Inputs are validated here (clear ``ValueError`` messages; the CLI and the app
show them as they are).  Models are loaded once per process and reused.  This
module does not implement the loop (``playground.decoding.engine``) or any rendering.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import replace

import torch

from playground.config import Preset, load_config
from playground.decoding.engine import MAX_TREE_NODES, MODES, GenerationConfig, stream
from playground.decoding.records import GenerationResult, StepRecord
from playground.drafters.base import Drafter
from playground.drafters.registry import build_drafter
from playground.models.loading import ModelPair, ModelUnavailable, load_pair
from playground.serving.trace_cache import TraceCache
from playground.validate import draft_stop as check_stop_below
from playground.validate import temperature as check_temperature
from playground.validate import whole_number

__all__ = ["generate", "stream_generate", "resolve", "make_drafter", "encode_prompt", "ModelUnavailable"]


def resolve(preset: str | None, drafter: str | None) -> tuple[Preset, str]:
    cfg = load_config()
    try:
        p = cfg.preset(preset or cfg.default_preset)
    except KeyError as exc:
        raise ValueError(str(exc.args[0])) from None
    kind = drafter or p.drafter
    if kind not in p.drafters:
        raise ValueError(f"preset {p.name!r} has no {kind!r} drafter; choose one of: {', '.join(p.drafters)}")
    return p, kind


def make_drafter(kind: str, pair: ModelPair, preset: Preset, argmax: bool = False) -> Drafter:
    return build_drafter(kind, pair, preset, argmax)


def encode_prompt(prompt: str, tokenizer, max_chars: int, max_tokens: int) -> list[int]:
    if not isinstance(prompt, str):
        raise ValueError("the prompt must be text")
    if not prompt.strip():
        raise ValueError("the prompt is empty: type at least one word")
    if len(prompt) > max_chars:
        raise ValueError(f"the prompt is too long: {len(prompt)} characters (limit {max_chars})")
    ids = tokenizer(prompt)["input_ids"]
    if hasattr(ids, "tolist"):
        ids = ids.tolist()
    ids = [int(i) for i in ids]
    if len(ids) > max_tokens:
        raise ValueError(f"the prompt is too long: {len(ids)} tokens (limit {max_tokens})")
    return ids


def _validate_numbers(gamma, temperature, top_k, top_p, seed, max_new_tokens) -> None:
    lim = load_config().limits
    check_temperature(temperature, lim.max_temperature)
    if isinstance(top_p, bool) or not isinstance(top_p, (int, float)) or not math.isfinite(top_p):
        raise ValueError(f"top_p must be a finite number, got {top_p!r}")
    for name, v in (("gamma", gamma), ("top_k", top_k), ("seed", seed), ("max_new_tokens", max_new_tokens)):
        whole_number(name, v, -(2**63), 2**63 - 1)  # the type; each range has its own message below
    if not 1 <= gamma <= lim.max_gamma:
        raise ValueError(f"gamma must be between 1 and {lim.max_gamma}, got {gamma}")
    if not 0 <= top_k <= lim.max_top_k:
        raise ValueError(f"top_k must be between 0 (off) and {lim.max_top_k}, got {top_k}")
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    if not 1 <= max_new_tokens <= lim.max_new_tokens:
        raise ValueError(f"max_new_tokens must be between 1 and {lim.max_new_tokens}, got {max_new_tokens}")
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")


def stream_generate(
    prompt: str,
    *,
    preset: str | None = None,
    mode: str = "speculative",
    drafter: str | None = None,
    gamma: int | None = None,
    temperature: float = 0.0,
    top_k: int = 0,
    top_p: float = 1.0,
    seed: int = 0,
    max_new_tokens: int = 64,
    dtype: str | None = None,
    trace: bool = True,
    progress=None,
    rule: str = "lossless",
    draft_argmax: bool = False,
    tree_nodes: int | None = None,
    shared: TraceCache | None = None,
    draft_stop: float | None = None,
) -> Iterator[StepRecord | GenerationResult]:
    """Yield a StepRecord per target pass as it happens, then the GenerationResult.

    shared: a ``TraceCache`` (the app's): an identical request already computed or in
    flight is replayed or followed instead of run again (``result.config["replay"]``
    says so), and new runs take one of its compute slots."""
    p, kind = resolve(preset, drafter)
    gamma = p.gamma if gamma is None else gamma
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if dtype is not None and dtype not in ("float32", "bfloat16"):
        raise ValueError(f"dtype must be float32 or bfloat16, got {dtype!r}")
    _validate_numbers(gamma, temperature, top_k, top_p, seed, max_new_tokens)
    tree_nodes = p.tree_nodes if tree_nodes is None else tree_nodes
    if isinstance(tree_nodes, float) and tree_nodes.is_integer():
        tree_nodes = int(tree_nodes)
    if isinstance(tree_nodes, bool) or not isinstance(tree_nodes, int) or not 1 <= tree_nodes <= MAX_TREE_NODES:
        raise ValueError(f"tree_nodes must be between 1 (a chain) and {MAX_TREE_NODES}, got {tree_nodes!r}")
    if not isinstance(prompt, str):
        raise ValueError("the prompt must be text")
    if draft_stop is not None:
        p = replace(p, draft_stop=check_stop_below(draft_stop))
    args = dict(
        mode=mode,
        gamma=int(gamma),
        temperature=float(temperature),
        top_k=int(top_k),
        top_p=float(top_p),
        seed=int(seed),
        max_new_tokens=int(max_new_tokens),
        dtype=dtype or p.dtype,
        trace=bool(trace),
        rule=rule,
        draft_argmax=bool(draft_argmax),
        tree_nodes=int(tree_nodes),
    )
    if shared is None:
        yield from _stream(prompt, p, kind, progress=progress, **args)
        return
    key = (p.name, kind, prompt, tuple(sorted(args.items())), p.draft_stop)  # another threshold: another run
    yield from shared.stream(key, lambda: _stream(prompt, p, kind, progress=progress, **args))


def _stream(
    prompt: str,
    p: Preset,
    kind: str,
    *,
    mode: str,
    gamma: int,
    temperature: float,
    top_k: int,
    top_p: float,
    seed: int,
    max_new_tokens: int,
    dtype: str,
    trace: bool,
    rule: str,
    draft_argmax: bool,
    tree_nodes: int = 1,
    progress=None,
) -> Iterator[StepRecord | GenerationResult]:
    lim = load_config().limits
    pair = load_pair(p, dtype, progress=progress)
    ids = encode_prompt(prompt, pair.tokenizer, lim.max_prompt_chars, lim.max_prompt_tokens)
    config = GenerationConfig(
        mode=mode,
        gamma=int(gamma),
        temperature=float(temperature),
        top_k=int(top_k),
        top_p=float(top_p),
        seed=int(seed),
        max_new_tokens=int(max_new_tokens),
        trace=trace,
        rule=rule,
        tree_nodes=int(tree_nodes) if mode == "speculative" else 1,
    )
    d = make_drafter(kind, pair, p, argmax=draft_argmax) if mode == "speculative" else None
    gen = torch.Generator().manual_seed(int(seed))
    for item in stream(
        pair.target,
        pair.tokenizer,
        ids,
        config,
        drafter=d,
        eos_token_ids=pair.eos_token_ids,
        generator=gen,
        prompt=prompt,
    ):
        if isinstance(item, GenerationResult):
            item.config.update(preset=p.name, dtype=pair.dtype)
        yield item


def generate(prompt: str, **kwargs) -> GenerationResult:
    """Run one generation and return the result (``.token_ids``, ``.text``, ``.steps``, ``.stats``)."""
    result = None
    for item in stream_generate(prompt, **kwargs):
        result = item
    assert isinstance(result, GenerationResult)
    return result
