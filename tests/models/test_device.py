"""Device choice: the GPU when there is one (faked here), SPECPLAY_DEVICE overrides, models
follow it, and ZeroGPU entry points are wrapped only on a ZeroGPU Space.

On a machine with CUDA, ``python -m pytest -q tests/models/test_device.py`` also runs the real
GPU check (tiny-random on the GPU equals the CPU, greedy and sampled)."""

from __future__ import annotations

import pytest
import torch

from playground.models import device as D


def test_auto_picks_cuda_when_available(monkeypatch):
    monkeypatch.delenv("SPECPLAY_DEVICE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert D.pick_device() == torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert D.pick_device() == torch.device("cpu")


def test_env_overrides_and_refuses_a_missing_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setenv("SPECPLAY_DEVICE", "cpu")
    assert D.pick_device() == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("SPECPLAY_DEVICE", "cuda")
    with pytest.raises(ValueError, match="no CUDA device"):
        D.pick_device()


def test_loaded_models_are_moved_to_the_picked_device(monkeypatch):
    from playground.config import load_config
    from playground.models import loading as models

    moved = []
    monkeypatch.setattr(models, "pick_device", lambda: torch.device("meta"))
    monkeypatch.setattr(torch.nn.Module, "to", lambda self, *a, **k: moved.append((type(self).__name__, a)) or self)
    pair = models._load(load_config().preset("tiny-random"), "float32", None)
    to_meta = [name for name, a in moved if a == (torch.device("meta"),)]
    assert len(to_meta) == 2  # the target and the drafter model
    assert pair.drafter_model is not None


def test_gpu_entry_wraps_only_on_zero_gpu(monkeypatch):
    def fn():
        return 1

    monkeypatch.delenv("SPACES_ZERO_GPU", raising=False)
    assert D.gpu_entry(fn) is fn
    monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    monkeypatch.setattr(D.importlib.util, "find_spec", lambda name: None)  # no `spaces` package installed
    assert D.gpu_entry(fn) is fn


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_tiny_pair_on_the_gpu_matches_the_cpu(monkeypatch):
    from playground.decoding.engine import run
    from playground.drafters.model import ModelDrafter
    from playground.models.tiny import EOS, build_tiny_pair
    from playground.settings import RunSettings

    target, drafter_model, tok = build_tiny_pair()
    ids = tok.encode("The capital of France is")
    out = {}
    for dev in ("cpu", "cuda"):
        t, d = target.to(dev), drafter_model.to(dev)
        for temperature in (0.0, 1.0):
            r = run(
                t,
                tok,
                ids,
                RunSettings(gamma=4, temperature=temperature, max_new_tokens=24),
                drafter=ModelDrafter(d, 100),
                eos_token_ids=[EOS],
            )
            out[dev, temperature] = list(r.token_ids)
    assert out["cuda", 0.0] == out["cpu", 0.0]
    assert len(out["cuda", 1.0]) > 0
