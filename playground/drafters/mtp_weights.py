"""MTP head weights as files: ``config.json`` plus safetensors shards, optionally int8 rows.

Shards stay under Hugging Face's 10 MB limit for non-LFS files (a Space is a git repo);
int8 storage keeps every large matrix as int8 rows with a bf16 scale per row and is
dequantised on load, so the head always runs on ordinary float weights.

This module does not build the head's architecture (``playground.drafters.mtp_head``) and
does not draft (``playground.drafters.mtp``).
"""

from __future__ import annotations

import functools
import json
import threading
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from playground.drafters.mtp_head import MTPConfig, MTPHead

DEFAULT_WEIGHTS = Path(__file__).resolve().parent.parent / "weights" / "gemma3-270m-mtp"

# Hugging Face refuses git pushes of non-LFS files over 10 MB (a Space is a git repo), so
# weights are written in shards below this size; the bytes are the same as one file.
MAX_SHARD_BYTES = 8_000_000


INT8_MIN_NUMEL = 65_536  # matrices at least this large are stored as int8 rows when asked


def quantize_rows(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int8 per output row: (q [out, in] int8, scale [out] bf16); w ~ q * scale."""
    scale = (w.float().abs().amax(dim=1) / 127.0).clamp_min(1e-12).to(torch.bfloat16)
    q = torch.round(w.float() / scale.float()[:, None]).clamp(-127, 127).to(torch.int8)
    return q, scale


def save_head(
    head: MTPHead,
    out_dir: str | Path,
    dtype: torch.dtype = torch.bfloat16,
    max_shard_bytes: int = MAX_SHARD_BYTES,
    int8: bool = False,
) -> Path:
    """Write ``config.json`` and the weights as ``model-0000i-of-0000n.safetensors`` shards,
    each under ``max_shard_bytes`` (one tensor larger than that gets a shard of its own).

    int8=True stores every matrix of at least ``INT8_MIN_NUMEL`` entries as int8 rows with
    a bf16 scale per row (``NAME.q8`` + ``NAME.scale``), half the bytes of bf16; the drafter
    then runs on the dequantised weights, and its acceptance is measured on those."""

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tensors: dict[str, torch.Tensor] = {}
    for k, v in head.state_dict().items():
        v = v.detach().cpu().contiguous()
        if int8 and v.is_floating_point() and v.dim() == 2 and v.numel() >= INT8_MIN_NUMEL:
            tensors[k + ".q8"], tensors[k + ".scale"] = quantize_rows(v)
        else:
            tensors[k] = v if not v.is_floating_point() else v.to(dtype)
    shards: list[dict[str, torch.Tensor]] = [{}]
    size = 0
    for k, v in tensors.items():
        nbytes = v.numel() * v.element_size()
        if shards[-1] and size + nbytes > max_shard_bytes:
            shards.append({})
            size = 0
        shards[-1][k] = v
        size += nbytes
    for old in weight_files(out, missing_ok=True):
        old.unlink()
    for i, sd in enumerate(shards, 1):
        save_file(sd, str(out / f"model-{i:05d}-of-{len(shards):05d}.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps({"model_type": "playground-mtp", **head.cfg.to_dict()}, indent=2))
    return out


def weight_files(path: str | Path, missing_ok: bool = False) -> list[Path]:
    """The weight files in ``path``: ``model.safetensors`` or every shard of
    ``model-*-of-N.safetensors`` (all N of them, or FileNotFoundError)."""
    path = Path(path)
    single = path / "model.safetensors"
    shards = sorted(path.glob("model-*-of-*.safetensors"))
    files = ([single] if single.exists() else []) + shards
    if missing_ok:
        return files
    if single.exists() and shards:
        raise FileNotFoundError(f"{path} holds both model.safetensors and shards: keep one")
    if shards:
        n = int(shards[0].stem.rsplit("-of-", 1)[1])
        expected = [path / f"model-{i:05d}-of-{n:05d}.safetensors" for i in range(1, n + 1)]
        if shards != expected:
            raise FileNotFoundError(f"{path}: expected {n} weight shards, found {len(shards)}")
    if not files:
        raise FileNotFoundError(f"MTP drafter weights not found at {path} (train: python -m tools train-drafter)")
    return files


def load_head(path: str | Path = DEFAULT_WEIGHTS, dtype: torch.dtype = torch.float32) -> MTPHead:

    path = Path(path)
    cfg = MTPConfig.from_dict(json.loads((path / "config.json").read_text()))
    head = MTPHead(cfg)
    sd: dict[str, torch.Tensor] = {}
    for f in weight_files(path):
        sd.update(load_file(str(f)))
    for k in [k for k in sd if k.endswith(".q8")]:  # int8 rows (save_head(int8=True))
        name = k[: -len(".q8")]
        sd[name] = sd.pop(k).float() * sd.pop(name + ".scale").float()[:, None]
    head.load_state_dict(sd)
    return head.to(dtype).eval()


_LOADING = threading.Lock()  # one head load at a time (see shared_head)


def shared_head(path: str | Path, dtype: torch.dtype, device: torch.device | str = "cpu") -> MTPHead:
    """The head at ``path`` in ``dtype`` on ``device``, loaded once and shared read-only by
    every drafter built from it (a drafter per run: building the head each time cost 40-50 ms
    alone and a fifth of the CPU with thirty runs starting at once).  Its parameters do not
    require grad; training loads its own copy with ``load_head``.  The files' modification
    times are part of the key, so weights written anew are read anew.  Thirty runs that start
    at once on a fresh server load it once: the others wait for that load (the cache alone
    would let each of them miss and build its own)."""
    path = Path(path).resolve()
    stamp = tuple((f.name, f.stat().st_mtime_ns) for f in [path / "config.json", *weight_files(path)])
    with _LOADING:
        return _shared_head(str(path), stamp, dtype, str(device))


@functools.lru_cache(maxsize=4)
def _shared_head(path: str, stamp: tuple, dtype: torch.dtype, device: str) -> MTPHead:
    head = load_head(path, dtype=torch.float32).to(device=device, dtype=dtype)
    for p in head.parameters():
        p.requires_grad_(False)
    return head
