"""Where models run: the GPU when there is one, else the CPU.

``SPECPLAY_DEVICE`` overrides (``cpu``, ``cuda``, ``cuda:1``; ``auto`` or unset picks).
Only model weights and their forward passes move; every distribution the sampling math
touches is brought to the CPU, where the run's one ``torch.Generator`` lives, so a run
draws the same u's and samples on any device.  ``on_zero_gpu`` tells whether this is a
Hugging Face ZeroGPU Space (where the ``spaces`` package attaches a GPU per call).
This module does not load models.
"""

from __future__ import annotations

import importlib.util
import os

import torch


def pick_device() -> torch.device:
    want = (os.environ.get("SPECPLAY_DEVICE") or "auto").strip().lower()
    if want == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(want)  # raises on nonsense, with torch's own message
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"SPECPLAY_DEVICE={want} but no CUDA device is available here")
    return dev


def on_zero_gpu() -> bool:
    """A ZeroGPU Space: ``SPACES_ZERO_GPU`` is set and the ``spaces`` package is installed."""
    return bool(os.environ.get("SPACES_ZERO_GPU")) and importlib.util.find_spec("spaces") is not None


def gpu_entry(fn, duration_s: int = 120):
    """``spaces.GPU(duration=...)(fn)`` on a ZeroGPU Space, else ``fn`` unchanged."""
    if not on_zero_gpu():
        return fn
    import spaces  # noqa: PLC0415  (only on ZeroGPU Spaces)

    return spaces.GPU(duration=duration_s)(fn)
