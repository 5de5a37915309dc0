"""Early exit / self-speculation (``early-exit``): the target's first k layers draft.

The drafter is the target itself cut after decoder layer k: its own embedding (Gemma 3's
scaled embedding included), layers 0..k-1, its final norm and its LM head (logit
soft-capping included) — LayerSkip's "exit" without a trained exit.  ``exit_model``
builds that model as a second object of the target's own class whose config says
``num_hidden_layers = k``; every module in it *is* the target's (shared, not copied: no
extra weights), so rotary embeddings, sliding/full masks and the cache layout are the
ones the target's own ``forward`` computes for its first k layers.

Drafting then works exactly like the two-model drafter (``ModelDrafter``): the cut model
keeps its own ``DynamicCache`` of k layers, drafts γ tokens one pass each, and ``accept``
crops the cache back to the committed prefix; trees come from the same per-level tree
passes.  q is the cut model's own distribution (sampled drafts) or a point mass
(greedy / argmax), so verification is lossless at every temperature.

Cost, and why it is slow here.  A draft pass costs k of the L layers *plus the whole LM
head*.  Measured on Gemma 3 270M (bf16, ``python -m playground.exit_scan``): a 1-layer
exit already costs c = 0.49 of a target pass (the 262k × 640 head), layer 17 of 18 costs
0.97; and untrained exits agree with the full model only near the top (greedy agreement
≤ 0.02 below layer 12, 0.54 at 12, 0.92 at 17).  Every exit predicts a slowdown (best
0.95× at layer 17, γ = 1).  ``Draft.info`` reports the exit and the layer fraction; the
bench measures c.

This module does NOT reuse computation between draft and verify passes: LayerSkip feeds
the draft pass's KV cache for layers < k (and its exit hidden states) into the verify pass
so verification only runs layers k..L-1; here the verify pass is the engine's ordinary
full-model pass, and the drafter's K/V for layers < k are computed again by the target.
``Draft.info["reused"]`` says so for the step panel.  It does not train an exit adapter.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn

from playground.drafters.base import Draft, TargetState, TreeDraft
from playground.drafters.model import ModelDrafter
from playground.sampling import SamplingParams

NOTHING_REUSED = "nothing: the verify pass recomputes layers below the exit (no LayerSkip KV reuse)"


def num_layers(target) -> int:
    return int(target.config.get_text_config().num_hidden_layers)


def _decoder(target) -> nn.Module:
    inner = getattr(target, "model", None)
    if inner is None or not isinstance(getattr(inner, "layers", None), nn.ModuleList):
        raise ValueError(f"early exit needs a causal LM with .model.layers; {type(target).__name__} has none")
    return inner


def exit_model(target, exit_layer: int) -> nn.Module:
    """The target cut after ``exit_layer`` decoder layers: same class, config with
    ``num_hidden_layers = exit_layer`` (and ``layer_types`` cut to match), built on the meta
    device and then given the target's own modules (embedding, first layers, norm, rotary
    embedding, LM head).  No parameter is copied; the target is not modified."""
    n = num_layers(target)
    if not 1 <= exit_layer < n:
        raise ValueError(f"exit layer must be between 1 and {n - 1} (the target has {n} layers), got {exit_layer}")
    inner = _decoder(target)
    cfg = copy.deepcopy(target.config)
    cfg.num_hidden_layers = exit_layer
    if getattr(cfg, "layer_types", None) is not None:
        cfg.layer_types = list(cfg.layer_types)[:exit_layer]
    with torch.device("meta"):
        cut = type(target)(cfg)
    cut_inner = _decoder(cut)
    for name, module in inner.named_children():
        if name == "layers":
            cut_inner.layers = nn.ModuleList(list(inner.layers)[:exit_layer])
        else:
            setattr(cut_inner, name, module)
    for name, module in target.named_children():
        if module is not inner:
            setattr(cut, name, module)
    for name, t in list(cut.named_parameters()) + list(cut.named_buffers()):
        if t.is_meta:  # a module the target has and the rebuilt object did not get
            raise ValueError(f"early exit: {name} was not taken from the target ({type(target).__name__})")
    cut.generation_config = target.generation_config
    return cut.eval()


class EarlyExitDrafter(ModelDrafter):
    """``ModelDrafter`` over ``exit_model(target, exit_layer)``; the step info says where it exits."""

    name = "early-exit"
    needs_target_hidden = False

    def __init__(self, target, exit_layer: int, argmax: bool = False) -> None:
        super().__init__(exit_model(target, exit_layer), target.config.get_text_config().vocab_size, argmax=argmax)
        self.exit_layer = exit_layer
        self.total_layers = num_layers(target)

    def _info(self) -> dict[str, Any]:
        return {
            "exit_layer": self.exit_layer,
            "layers": self.total_layers,
            "layer_fraction": round(self.exit_layer / self.total_layers, 3),  # of the decoder stack, LM head not counted
            "reused": NOTHING_REUSED,
        }

    def propose(self, state: TargetState, gamma: int, params: SamplingParams,
                generator: torch.Generator | None) -> Draft:
        draft = super().propose(state, gamma, params, generator)
        draft.info = {**draft.info, **self._info()}
        return draft

    def propose_tree(self, state: TargetState, max_nodes: int, max_depth: int, params: SamplingParams,
                     generator: torch.Generator | None, branch: int = 4) -> TreeDraft:
        result = super().propose_tree(state, max_nodes, max_depth, params, generator, branch=branch)
        result.info = {**result.info, **self._info()}
        return result


def default_exit_layer(target) -> int:
    """The last layer but one, for presets that do not name a measured ``exit_layer``.

    Untrained exits agree with the full model only near the top of the stack (greedy
    agreement, ``python -m playground.exit_scan``: Gemma 3 270M 0.00-0.02 below layer 12
    of 18, 0.54 at 12, 0.92 at 17; SmolLM2-135M below 0.12 up to layer 20 of 30, 0.64 at
    29), and on both the best accepted-per-cost ratio α / c is at layer L - 1."""
    return max(1, num_layers(target) - 1)
