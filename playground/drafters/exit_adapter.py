"""Trained exits for the early-exit drafter: one linear map per exit layer, as files.

An untrained exit sends the state after decoder layer k straight into the target's final
norm and LM head, which were trained on the state after the *last* layer; below the top
of the stack the two disagree (greedy agreement 0.00-0.02 below layer 12 of Gemma 3
270M).  A trained exit puts one learned matrix A in between:

    exit logits = lm_head(final_norm(A h_k))        A: [H, H], initialised to the identity

so an adapter that learned nothing *is* the untrained exit.  A is fitted by
``python -m tools train-drafter --drafter early-exit`` (``tools.training.exit_train``) to
the target's own next-token distribution.  It changes only what the drafter *proposes*:
the state kept for the verify pass (LayerSkip KV reuse) is the raw h_k, and verification
runs the unchanged target, so output stays exactly the target's.

Files: ``config.json`` (target, hidden size, the layers present, what was measured) and
``adapters.safetensors`` with one bf16 matrix ``layer_<k>`` per trained exit (H² entries:
0.8 MB at H = 640).  This module does not train and does not draft
(``playground.drafters.early_exit`` does).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from torch import nn

REPO = Path(__file__).resolve().parent.parent.parent  # presets name their adapter directory relative to it
WEIGHTS_FILE = "adapters.safetensors"
CONFIG_FILE = "config.json"


class ExitAdapter(nn.Module):
    """h -> A h over the last dimension (no bias), A initialised to the identity."""

    def __init__(self, hidden_size: int, weight: torch.Tensor | None = None) -> None:
        super().__init__()
        self.proj = nn.Linear(hidden_size, hidden_size, bias=False)
        with torch.no_grad():
            self.proj.weight.copy_(torch.eye(hidden_size) if weight is None else weight)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:  # [..., H] -> [..., H]
        return self.proj(hidden)


class AdaptedNorm(nn.Module):
    """The target's final norm applied after an exit adapter: norm(A h).  Stands in for the
    norm of the cut model only; the target keeps its own."""

    def __init__(self, adapter: ExitAdapter, norm: nn.Module) -> None:
        super().__init__()
        self.adapter = adapter
        self.norm = norm

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.norm(self.adapter(hidden))


def save_adapters(
    adapters: dict[int, ExitAdapter], out_dir: str | Path, target: str, measured: dict | None = None
) -> Path:
    """Write every adapter (bf16) and a config naming the target and the layers."""

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tensors = {f"layer_{k}": a.proj.weight.detach().cpu().to(torch.bfloat16).contiguous() for k, a in adapters.items()}
    save_file(tensors, str(out / WEIGHTS_FILE))
    hidden = next(iter(adapters.values())).proj.weight.shape[0]
    config = {"target": target, "hidden_size": hidden, "layers": sorted(adapters), "measured": measured or {}}
    (out / CONFIG_FILE).write_text(json.dumps(config, indent=1) + "\n")
    return out


def adapter_layers(weights_dir: str | Path) -> list[int]:
    """The exit layers trained in ``weights_dir`` ([] when it has no adapters)."""
    path = Path(weights_dir) / CONFIG_FILE
    if not path.is_file():
        return []
    return [int(k) for k in json.loads(path.read_text()).get("layers", [])]


def load_adapter(weights_dir: str | Path, layer: int, hidden_size: int, dtype: torch.dtype) -> ExitAdapter | None:
    """The adapter trained for ``layer``, or None if ``weights_dir`` has none for it (the
    drafter then runs the untrained exit, and says so)."""
    if layer not in adapter_layers(weights_dir):
        return None

    with safe_open(str(Path(weights_dir) / WEIGHTS_FILE), framework="pt") as f:
        weight = f.get_tensor(f"layer_{layer}")
    if tuple(weight.shape) != (hidden_size, hidden_size):
        raise ValueError(
            f"exit adapter for layer {layer} in {weights_dir} is {tuple(weight.shape)}, "
            f"the target's hidden size is {hidden_size}"
        )
    return ExitAdapter(hidden_size, weight.float()).to(dtype).eval()


def preset_adapter(preset, target, layer: int) -> ExitAdapter | None:
    """The adapter the preset's ``exit_adapter`` directory has for ``layer`` (None: untrained)."""
    if not preset.exit_adapter:
        return None
    cfg = target.config.get_text_config()
    return load_adapter(REPO / preset.exit_adapter, layer, cfg.hidden_size, target.dtype)


def preset_adapters(preset, target) -> dict[int, ExitAdapter]:
    """{k: adapter} for every exit layer the preset's ``exit_adapter`` directory trained."""
    if not preset.exit_adapter:
        return {}
    return {k: preset_adapter(preset, target, k) for k in adapter_layers(REPO / preset.exit_adapter)}
