"""The public Python interface: ``generate`` and ``stream_generate``, and the one door to a run.

    >>> from playground import generate
    >>> r = generate("The capital of France is", preset="tiny-random", gamma=4, max_new_tokens=16)
    >>> r.token_ids, r.text, r.steps[0].drafted, r.stats.acceptance_rate

``run_settings`` turns user values (keywords: Python, the CLI, ``/speculate``, the form, the
lab, the bench) into a checked ``RunSettings`` with the preset's defaults filled in, reporting
every mistake at once (``validate.SettingsError``; the CLI and the app show the messages as
they are).  ``stream_run`` runs one: it loads the pair (once per process), builds the drafter
and passes the settings whole to the engine.  ``generate`` / ``stream_generate`` keep their
keywords for users and do both.  This module does not implement the loop
(``playground.decoding.engine``) or any rendering.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import torch

from playground import validate
from playground.config import AppConfig, Preset, load_config
from playground.decoding.draft import Drafter
from playground.decoding.engine import stream
from playground.decoding.records import GenerationResult, StepRecord
from playground.drafters.registry import build_drafter
from playground.models.loading import ModelPair, ModelUnavailable, load_pair
from playground.serving.policy import ReplayedCaps
from playground.serving.pool import scheduler_for
from playground.settings import SPECS, RunSettings, check_public, public_name

if TYPE_CHECKING:  # pragma: no cover - a type only: serving sits above the API (its load test calls it)
    from playground.serving.trace_cache import TraceCache, Visitor

__all__ = [
    "generate",
    "stream_generate",
    "run_settings",
    "stream_run",
    "run",
    "resolve",
    "make_drafter",
    "encode_prompt",
    "ModelUnavailable",
]


def _preset(cfg: AppConfig, preset: str | None) -> Preset:
    try:
        return cfg.preset(preset or cfg.default_preset)
    except KeyError:
        raise validate.Invalid(
            "unknown_preset", preset=repr(preset or cfg.default_preset), choices=", ".join(p.name for p in cfg.presets)
        ) from None


def _kind(p: Preset, drafter: str | None) -> str:
    kind = drafter or p.drafter
    if kind not in p.drafters:
        raise validate.Invalid("no_drafter", preset=repr(p.name), drafter=repr(kind), choices=", ".join(p.drafters))
    return kind


def resolve(preset: str | None, drafter: str | None) -> tuple[Preset, str]:
    """The preset (None: the default) and the drafter kind (None: the preset's own)."""
    p = _preset(load_config(), preset)
    return p, _kind(p, drafter)


def make_drafter(kind: str, pair: ModelPair, preset: Preset, argmax: bool = False) -> Drafter:
    """A drafter of ``kind`` with the preset's own stop threshold (``argmax``: draft the argmax)."""
    return build_drafter(kind, pair, preset, RunSettings(draft_argmax=argmax))


def encode_prompt(prompt: str, tokenizer, max_chars: int, max_tokens: int) -> list[int]:
    validate.prompt(prompt, max_chars)
    ids = tokenizer(prompt)["input_ids"]
    if hasattr(ids, "tolist"):
        ids = ids.tolist()
    ids = [int(i) for i in ids]
    if len(ids) > max_tokens:
        raise validate.Invalid("prompt_long_tokens", n=len(ids), limit=max_tokens)
    return ids


def run_settings(*, cfg: AppConfig | None = None, **values) -> RunSettings:
    """User values as a checked ``RunSettings``, within the app's limits.  ``values`` are
    ``RunSettings``' fields, or their public names (``verification``: the app's name for
    ``rule``, only the rules the app offers); None, or a field left out, is its default, and for
    ``preset`` (the app's default), ``drafter``, ``gamma``, ``dtype``, ``tree_nodes`` and
    ``draft_stop`` the preset's own.  Raises ``validate.SettingsError`` with every mistake, keyed
    by the name it was given under."""
    cfg = cfg or load_config()
    errors: dict[str, Exception] = {}
    given = {k: v for k, v in values.items() if v is not None}
    p = kind = None
    try:
        p = _preset(cfg, given.get("preset"))
        kind = _kind(p, given.get("drafter"))
    except ValueError as exc:
        errors["preset" if p is None else "drafter"] = exc
    if p is not None:
        given["preset"] = p.name
        for name, spec in SPECS.items():  # the preset's own values, resolved here once
            if spec.preset and given.get(name, given.get(public_name(name))) is None:
                given[name] = getattr(p, name)
    if kind is not None:
        given["drafter"] = kind
    else:
        given = {k: v for k, v in given.items() if k not in ("preset", "drafter")}
    try:
        clean = check_public(given, cfg.limits)
    except validate.SettingsError as exc:
        errors.update({k: m for k, m in exc.errors.items() if k not in errors})
    if errors:
        raise validate.SettingsError(errors)
    if clean.get("mode") == "autoregressive":
        clean["tree_nodes"] = 1  # nothing to branch
    return RunSettings(**clean)


def stream_generate(
    prompt: str, *, progress=None, shared: TraceCache | None = None, **values
) -> Iterator[StepRecord | GenerationResult]:
    """Yield a StepRecord per target pass as it happens, then the GenerationResult.

    ``values`` (any of ``RunSettings``' fields, see ``run_settings``) become one ``RunSettings``
    at once; ``stream_run`` does the rest.  shared: a ``TraceCache`` (the app's): an identical
    request already computed or in flight is replayed or followed instead of run again
    (``result.config["replay"]`` says so), and new runs take one of its compute slots."""
    return stream_run(prompt, run_settings(**values), progress=progress, shared=shared)


def stream_run(
    prompt: str,
    settings: RunSettings,
    *,
    progress=None,
    shared: TraceCache | None = None,
    batch: bool = False,
    draft_caps: list[int] | None = None,
    visitor: Visitor | None = None,
) -> Iterator[StepRecord | GenerationResult]:
    """Run ``settings`` (from ``run_settings``: a preset named, its defaults filled in) on ``prompt``.

    shared: see ``stream_generate``; the request's key is (prompt, settings), and its target
    passes are shared with the other runs on the model (the app's runs always batch).
    batch: share target passes with other runs on the same model even without ``shared``.
    draft_caps: re-run alone with the per-step draft lengths a batched run had (its steps'
    ``gamma``): at T > 0 the same seed then gives the same tokens.
    visitor: who asks (``shared`` counts the runs each visitor leads against its caps)."""
    if settings.preset is None or settings.dtype is None:
        raise ValueError("these settings name no preset: build them with playground.api.run_settings")
    validate.prompt(prompt, load_config().limits.max_prompt_chars)
    if shared is None:
        return _run(prompt, settings, progress, batch, draft_caps)
    return shared.stream((prompt, settings), lambda: _run(prompt, settings, progress, True, None), visitor)


def _run(prompt, settings: RunSettings, progress, batch: bool, draft_caps) -> Iterator[StepRecord | GenerationResult]:
    """One run.  ``batch``: its target passes may share forward passes with the other runs on
    the same model (``playground.serving``), its drafts capped by the load; ``draft_caps``:
    re-run alone with the draft lengths a run had under load (its records' ``gamma``)."""
    lim = load_config().limits
    p = load_config().preset(settings.preset)
    pair = load_pair(p, settings.dtype, progress=progress)
    ids = encode_prompt(prompt, pair.tokenizer, lim.max_prompt_chars, lim.max_prompt_tokens)
    d = None
    if settings.speculative:  # the drafter reads its own settings (argmax, stop threshold) from the run's
        d = build_drafter(settings.drafter, pair, p, settings)
    gen = torch.Generator().manual_seed(settings.seed)
    scheduler = scheduler_for(pair.target, lim.max_batch, lim.kv_budget_mb) if batch else None
    if draft_caps is not None:
        scheduler = ReplayedCaps(draft_caps)
    for item in stream(pair.target, pair.tokenizer, ids, settings, drafter=d, eos_token_ids=pair.eos_token_ids,
                       generator=gen, prompt=prompt, scheduler=scheduler):  # fmt: skip
        if isinstance(item, GenerationResult):
            item.config.update(preset=p.name, dtype=pair.dtype)
        yield item


def run(prompt: str, settings: RunSettings, **kwargs) -> GenerationResult:
    """``stream_run`` to the end: the GenerationResult."""
    return _last(stream_run(prompt, settings, **kwargs))


def generate(prompt: str, **values) -> GenerationResult:
    """Run one generation and return the result (``.token_ids``, ``.text``, ``.steps``, ``.stats``).
    ``values``: ``RunSettings``' fields (``run_settings``), plus ``progress`` and ``shared``."""
    return _last(stream_generate(prompt, **values))


def _last(items) -> GenerationResult:
    result = None
    for item in items:
        result = item
    assert isinstance(result, GenerationResult)
    return result
