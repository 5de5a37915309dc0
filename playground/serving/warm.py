"""Warm the kernels a preset's default run uses, so that its first timed run is not its first run.

The first pass over a new shape pays one-off costs (oneDNN builds its kernels per shape; a
bfloat16 model on a CPU without bfloat16 instructions upcasts through its own path), and a
run that pays them reports slower passes than every later one.  ``warm_preset`` runs, once:

* one target pass over each of 1 … γ+1 new tokens (every verify pass a chain of up to γ
  drafts makes, or a tree of up to ``tree_nodes`` nodes, and the single-token step of the
  calibration and of a race's baseline), both as a run that is alone makes it (the model's
  own forward) and as one row of a shared pass (``playground.decoding.batch_pass``);
* one short speculative run with the preset's own drafter and settings and one short
  autoregressive run, greedy, through the same scheduler as the app's runs (the drafter's
  own shapes, acceptance, the prefill).

This module does not load models for the app at start-up (``visual.warmup`` calls it), store
anything in the trace cache, or report timings.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from transformers import DynamicCache

from playground import api
from playground.config import load_config
from playground.models.loading import load_pair
from playground.serving.pass_cost import pass_costs

WARM_TOKENS = 16  # new tokens of each warming run
CTX = 32  # cached tokens before the warming passes
WARM_PROMPT = "The capital of France is Paris. The capital of France is"  # repeats: prompt lookup drafts too


def verify_shapes(gamma: int, tree_nodes: int = 1) -> list[tuple[int, int]]:
    """(rows, new tokens) of every single-row pass a run of this preset can make."""
    return [(1, k) for k in range(1, max(gamma, tree_nodes) + 2)]


@torch.inference_mode()
def _alone(model, sizes: list[int]) -> None:
    """One plain forward pass per size on a ``CTX``-token cache, as a run that is alone makes it
    (``Target._forward_alone``: every kept position's logits, and the hidden states drafters read)."""
    device = model.device
    cache = DynamicCache(config=model.config)
    cache.activate_past_recording()
    model(input_ids=torch.arange(1, CTX + 1, device=device)[None], cache=cache, use_cache=True, logits_to_keep=1)
    for k in sizes:
        ids = torch.arange(1, k + 1, device=device)[None]
        model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=k, output_hidden_states=True)
        cache.crop(-k)


def warm_preset(preset: str, dtype: str | None = None, progress: Callable[[float, str], None] | None = None) -> None:
    """Run each kernel shape a default run of ``preset`` uses once (its models load first if needed)."""
    say = progress or (lambda fraction, message: None)
    p = load_config().preset(preset)
    pair = load_pair(p, dtype or p.dtype)
    say(0.0, "warming up: one target pass per verify size")
    shapes = verify_shapes(p.gamma, p.tree_nodes)
    _alone(pair.target, [k for _, k in shapes])
    pass_costs(pair.target, shapes, ctx=CTX, repeats=1)
    for i, mode in enumerate(("speculative", "autoregressive")):
        say(0.5 + 0.25 * i, f"warming up: a short {mode} run")
        settings = api.run_settings(preset=preset, dtype=dtype, mode=mode, temperature=0.0, max_new_tokens=WARM_TOKENS)
        api.run(WARM_PROMPT, settings, batch=True)
    say(1.0, "warm")
