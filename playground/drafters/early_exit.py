"""Early exit / self-speculation (``early-exit``): the target's first k layers draft.

The drafter is the target itself cut after decoder layer k: its own embedding (Gemma 3's
scaled embedding included), layers 0..k-1, its final norm and its LM head (logit
soft-capping included): LayerSkip's "exit", untrained or with a trained adapter (below).
``exit_model`` builds that model as a second object of the target's own class whose config says
``num_hidden_layers = k``; every module in it *is* the target's (shared, not copied: no
extra weights), so rotary embeddings, sliding/full masks and the cache layout are the
ones the target's own ``forward`` computes for its first k layers.

Drafting then works exactly like the two-model drafter (``ModelDrafter``): the cut model
keeps its own ``DynamicCache`` of k layers, drafts γ tokens one pass each, and ``accept``
crops the cache back to the committed prefix; trees come from the same per-level tree
passes.  q is the cut model's own distribution (sampled drafts) or a point mass
(greedy / argmax), so verification is lossless at every temperature.

Cost, and why it is slow here.  A draft pass costs k of the L layers *plus the whole LM
head*.  Measured on Gemma 3 270M (bf16, ``python -m tools.training.exit_scan``): a 1-layer
exit already costs c = 0.49 of a target pass (the 262k × 640 head), layer 17 of 18 costs
0.97; and untrained exits agree with the full model only near the top (greedy agreement
≤ 0.02 below layer 12, 0.54 at 12, 0.92 at 17).  Every exit predicts a slowdown (best
0.95× at layer 17, γ = 1).  ``Draft.info`` reports the exit and the layer fraction; the
bench measures c.

KV reuse (LayerSkip), chain drafts: with ``reuse_kv`` (the default) the draft passes run
the first k layers *in the target's own cache* (layers 0..k-1 of ``TargetState.target_cache``
— the one exception to "drafters only read the target's cache": these layers are the
drafter's own) and keep each fed token's state after layer k-1.  The verify pass is then
``verify_logits``: layers 0..k-1 only for the tokens the drafting never fed (the last
draft), and layers k..L-1, the final norm and the LM head for all γ+1 tokens, fed the
kept states (``upper_model``).  Same weights, same inputs, same positions: the logits are
the full model's (up to float rounding of a different batching), so verification stays
exactly as lossless; the engine's rollback crops every layer alike.  ``Draft.info["reused"]``
says what was reused.  Tree drafts (``propose_tree``) use the drafter's own cache and
reuse nothing.

Trained exits: with an ``ExitAdapter`` (``playground.drafters.exit_adapter``, fitted by
``train-drafter --drafter early-exit``) the cut model's final norm reads A h_k instead of
h_k; only the proposal changes (the kept states are the raw h_k, verification is the
unchanged target).  This module does not train adapters.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from playground.decoding.draft import Draft, TargetState, TreeDraft
from playground.decoding.sampling import SamplingParams
from playground.decoding.tree import DraftTree
from playground.decoding.tree_pass import tree_masks, tree_position_ids
from playground.drafters.exit_adapter import AdaptedNorm, ExitAdapter
from playground.drafters.model import ModelDrafter
from playground.models.view import decoder, model_view, num_layers

NOTHING_REUSED = "nothing: the verify pass recomputes layers below the exit (no LayerSkip KV reuse)"
TREE_NOTHING_REUSED = "nothing: tree drafts use the drafter's own cache; the verify pass runs every layer"


def exit_model(target, exit_layer: int, adapter: ExitAdapter | None = None) -> nn.Module:
    """The target cut after ``exit_layer`` decoder layers: same class, config with
    ``num_hidden_layers = exit_layer`` (and ``layer_types`` cut to match), built on the meta
    device and then given the target's own modules (embedding, first layers, norm, rotary
    embedding, LM head).  No parameter is copied; the target is not modified.  With an
    ``adapter`` the cut model's norm reads A h (a trained exit)."""
    n = num_layers(target)
    if not 1 <= exit_layer < n:
        raise ValueError(f"exit layer must be between 1 and {n - 1} (the target has {n} layers), got {exit_layer}")
    cut = model_view(target, 0, exit_layer)
    layers = decoder(cut).layers
    layers[-1] = ExitRecorder(layers[-1])
    if adapter is not None:
        inner = decoder(cut)
        inner.norm = AdaptedNorm(adapter, inner.norm)
    return cut


class ExitRecorder(nn.Module):
    """The exit's last decoder layer (the target's own module, called as is) in the cut model's
    own layer list, which hands each output [1, n, H] (pre-norm) to ``sink`` while one is set.

    Recording in a module the cut model owns, not in a forward hook on the shared layer: a
    hook on a module of the target fires for every thread's pass through it, so one run
    could take another run's states as its own."""

    def __init__(self, layer: nn.Module) -> None:
        super().__init__()
        self.layer = layer
        self.sink: list[torch.Tensor] | None = None

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:  # what the model's layer loop reads of a layer (e.g. attention_type)
            return getattr(self._modules["layer"], name)

    def forward(self, *args, **kwargs):
        out = self.layer(*args, **kwargs)
        if self.sink is not None:
            self.sink.append(out[0] if isinstance(out, tuple) else out)
        return out


def exit_logits(target, states: torch.Tensor, adapter: ExitAdapter | None = None) -> torch.Tensor:
    """[n, V] the exit's logits for states [n, H] taken after some decoder layer: what
    ``exit_model`` computes from them, lm_head(final_norm(A h)) with the final soft-capping.
    ``adapter`` may be in another dtype than the target (float32 while it trains)."""
    if adapter is not None:
        states = adapter(states.to(adapter.proj.weight.dtype))
    logits = target.lm_head(decoder(target).norm(states.to(target.lm_head.weight.dtype)))
    cap = getattr(target.config.get_text_config(), "final_logit_softcapping", None)
    return torch.tanh(logits / cap) * cap if cap else logits


def upper_model(target, exit_layer: int) -> nn.Module:
    """The rest of the target after ``exit_layer``: layers exit_layer..L-1, final norm, LM
    head, as a model of the target's class fed the exit's states as ``inputs_embeds``.  Its
    layers keep their own indices, so they read and write the target cache's upper layers."""
    n = num_layers(target)
    if not 1 <= exit_layer < n:
        raise ValueError(f"exit layer must be between 1 and {n - 1} (the target has {n} layers), got {exit_layer}")
    return model_view(target, exit_layer, n)


def _drop_newest(layer, n: int) -> None:
    """Remove a cache layer's ``n`` newest entries and nothing else.  (A sliding layer's own
    ``crop`` also trims it to its window, which would lose entries the engine's rollback
    after this pass still counts on; the cache records its past, so they are all there.)"""
    layer.keys = layer.keys[..., : layer.keys.shape[-2] - n, :]
    layer.values = layer.values[..., : layer.values.shape[-2] - n, :]
    if getattr(layer, "is_sliding", False):
        layer.cumulative_length -= n


class EarlyExitDrafter(ModelDrafter):
    """``ModelDrafter`` over ``exit_model(target, exit_layer, adapter)``; the step info says
    where it exits, whether the exit is trained and what the verify pass reuses.
    ``reuse_kv``: chain drafts run in the target's cache and the engine verifies through
    ``verify_logits`` (LayerSkip); trees never do."""

    name = "early-exit"
    shares_target_cache = True  # narrowed per drafter without KV reuse (__init__)
    needs_drafter_model = False  # the target's own first layers

    def __init__(
        self,
        target,
        exit_layer: int,
        argmax: bool = False,
        reuse_kv: bool = True,
        adapter: ExitAdapter | None = None,
    ) -> None:
        model = exit_model(target, exit_layer, adapter)
        super().__init__(model, target.config.get_text_config().vocab_size, argmax=argmax)
        self.exit_layer = exit_layer
        self.trained = adapter is not None
        self.total_layers = num_layers(target)
        self.reuse_kv = reuse_kv
        # chain drafts run in the target's own cache only with KV reuse (then verify_logits)
        self.shares_target_cache = reuse_kv
        self.upper = upper_model(target, exit_layer) if reuse_kv else None
        self._exit: ExitRecorder = decoder(self.model).layers[-1]
        self._shared = None  # the target's cache while drafting chains in it
        self._fed: list[int] = []  # tokens this step ran through the shared lower layers, in order
        self._states: list[torch.Tensor] = []  # [n, H] each, their states after layer k-1

    def _info(self, tree: bool = False) -> dict[str, Any]:
        k, n = self.exit_layer, self.total_layers
        if tree or not self.reuse_kv:
            reused = TREE_NOTHING_REUSED if tree and self.reuse_kv else NOTHING_REUSED
        else:
            upper = f"layer {n}" if k + 1 == n else f"layers {k + 1}-{n}"
            reused = (
                f"K/V of layers 1-{k} from the draft passes, written into the target's cache: the verify "
                f"pass runs layers 1-{k} only for the last draft, {upper} and the head for every token"
            )
        return {
            "shared_cache": not tree and self.reuse_kv,  # drafted in the target's cache (LayerSkip)
            "exit_layer": k,
            "layers": n,
            "layer_fraction": round(k / n, 3),  # of the decoder stack, head not counted
            "exit": "trained: a learned linear map before the final norm" if self.trained else "untrained",
            "reused": reused,
        }

    def start(self, state: TargetState) -> None:
        super().start(state)
        self._shared = state.target_cache if self.reuse_kv else None
        self._fed, self._states = [], []

    @torch.inference_mode()
    def _lower(self, ids: list[int], head: bool) -> torch.Tensor | None:
        """Run ``ids`` through layers 0..k-1 in the target's cache (appending to them), keep
        their exit states, and return the exit's logits [V] after the last one if ``head``."""
        cache = self._shared
        past = cache.get_seq_length(0)
        chain = DraftTree.chain(ids[1:])  # ids[0] is the root
        cfg = self.model.config.get_text_config()
        dtype = next(self.model.parameters()).dtype
        kw = dict(
            input_ids=torch.tensor([ids], device=self.model.device),
            cache=cache,
            use_cache=True,
            attention_mask=tree_masks(cfg, chain, past, dtype, self.model.device),
            position_ids=tree_position_ids(chain, past)[None].to(self.model.device),
        )
        kept: list[torch.Tensor] = []
        # the exit's last layer records its output for this call: the recorder is this drafter's
        # own module (``exit_model``), so the target's passes and other runs never reach it
        self._exit.sink = kept
        try:
            logits = self.model(**kw, logits_to_keep=1).logits[0, -1] if head else None
            if not head:
                decoder(self.model)(**kw)
        finally:
            self._exit.sink = None
        self._fed.extend(ids)
        self._states.extend(kept[-1][0])
        return logits

    def _unfed(self, state: TargetState) -> list[int]:
        if self._shared is None:
            return super()._unfed(state)
        return state.committed_ids[self._shared.get_seq_length(0) :]  # the newest committed token

    def _next_logits(self, pending: list[int]) -> torch.Tensor:
        if self._shared is None:
            return super()._next_logits(pending)
        return self._lower(pending, head=True)

    def propose(
        self, state: TargetState, gamma: int, params: SamplingParams, generator: torch.Generator | None
    ) -> Draft:
        draft = super().propose(state, gamma, params, generator)
        draft.info = {**draft.info, **self._info()}
        return draft

    @torch.inference_mode()
    def verify_logits(self, cache, ids: list[int], keep: int) -> torch.Tensor:
        """The target's logits [keep, V] for ``ids`` = [newest committed, d_1..d_k], reusing
        the drafting's lower layers: what it fed beyond ``ids`` (a draft cut at EOS) is
        dropped from layers 0..k-1, what it never fed runs through them now, and layers
        k..L-1 run on the exit states of all of ``ids``.  Every layer then holds ``ids``."""
        k = self.exit_layer
        upper_len = cache.get_seq_length(k)
        same = 0
        while same < min(len(self._fed), len(ids)) and self._fed[same] == ids[same]:
            same += 1
        extra = cache.get_seq_length(0) - upper_len - same  # lower entries past the shared prefix
        if extra:
            self._drop_lower(cache, extra)
            del self._fed[same:], self._states[same:]
        if same < len(ids):
            self._lower(ids[same:], head=False)
        states = torch.stack(self._states[: len(ids)])[None]  # [1, n, H]
        chain = DraftTree.chain(ids[1:])  # ids[0] is the root
        cfg = self.upper.config.get_text_config()
        out = self.upper(
            inputs_embeds=states,
            cache=cache,
            use_cache=True,
            logits_to_keep=keep,
            attention_mask=tree_masks(cfg, chain, upper_len, states.dtype, states.device),
            position_ids=tree_position_ids(chain, upper_len)[None].to(states.device),
        )
        self._fed, self._states = [], []
        return out.logits[0, -keep:]

    def _drop_lower(self, cache, n: int) -> None:
        for layer in cache.layers[: self.exit_layer]:
            _drop_newest(layer, n)

    def accept(self, n_accepted: int, state: TargetState) -> None:
        # The engine crops the shared cache itself; the drafter's own cache (trees) as before.
        if self._shared is None or self._seen:
            super().accept(n_accepted, state)

    def cache_len(self) -> int | None:
        return self._shared.get_seq_length(0) if self._shared is not None else super().cache_len()

    def propose_tree(
        self,
        state: TargetState,
        max_nodes: int,
        max_depth: int,
        params: SamplingParams,
        generator: torch.Generator | None,
        branch: int = 4,
    ) -> TreeDraft:
        result = super().propose_tree(state, max_nodes, max_depth, params, generator, branch=branch)
        result.info = {**result.info, **self._info(tree=True)}
        return result


def default_exit_layer(target) -> int:
    """The last layer but one, for presets that do not name a measured ``exit_layer``.

    Untrained exits agree with the full model only near the top of the stack (greedy
    agreement, ``python -m tools.training.exit_scan``: Gemma 3 270M 0.00-0.02 below layer 12
    of 18, 0.54 at 12, 0.92 at 17; SmolLM2-135M below 0.12 up to layer 20 of 30, 0.64 at
    29), and on both the best accepted-per-cost ratio α / c is at layer L - 1."""
    return max(1, num_layers(target) - 1)
