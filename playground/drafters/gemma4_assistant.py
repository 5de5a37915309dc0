"""Gemma 4's own MTP drafter (the "-assistant" checkpoints) in our lossless loop.

The real Gemma 4 assistant (``Gemma4AssistantForCausalLM`` in transformers 5.24, e.g.
``google/gemma-4-E2B-it-assistant`` for ``google/gemma-4-E2B-it``) drafts several tokens
from ONE target position, reading the target's key/value states instead of keeping a
cache of its own.  One draft step (H_t = target hidden size, H_a = assistant's):

    x   = pre_projection([ E_t(token) ; h ])          2·H_t -> H_a   (E_t: the target's
                                                                      scaled input embedding)
    y   = assistant decoder layers, every one a KV-"reuse" layer: queries at position
          L-1 (the newest committed token's position, the same for every step) attend to
          the target's K/V of the committed context (full-attention and sliding layers)
    h'  = post_projection(y)                           H_a -> H_t    fed back as the next h
    logits = y @ lm_head[scored tokens]^T              tied head, sparse: only the tokens of
                                                       the top-k token clusters are scored

h starts as the target's final-norm hidden state at the position before the newest
committed token (``TargetState.hidden``) and is then the assistant's own h'.

Exactness (what transformers' assisted generation does NOT do when sampling): at
temperature 0 the draft is the argmax over the scored tokens and ``draft_probs`` is None
(point masses).  When sampling, the draft is drawn from ``logits_to_probs(scored
logits, params)`` (temperature / top-k / top-p over the scored tokens only) and that very
distribution, scattered into a full-vocabulary row with zeros at every unscored token, is
q.  With ``argmax=True`` drafts are argmax at every temperature (like transformers) and q
is a point mass; the softmax rows go to ``Draft.soft_probs`` only, for the "softmax-q"
lesson.

Facts this module relies on, read in transformers 5.24.0 (site-packages/transformers/):

* models/gemma4_assistant/modeling_gemma4_assistant.py
  - :134-201 ``Gemma4AssistantForCausalLM.forward(inputs_embeds, position_ids,
    attention_mask, shared_kv_states)``: ``inputs_embeds`` [B, T, 2·backbone_hidden_size]
    -> ``pre_projection`` (:175) -> ``self.model`` (a ``Gemma4TextModel``) with
    ``shared_kv_states`` and ``use_cache=False`` -> ``post_projection`` (:189, returned as
    ``last_hidden_state``) and logits from ``lm_head`` or ``masked_embedding`` (:192).
    ``input_ids`` and ``use_cache`` are ignored.  ``lm_head`` is tied to the assistant's
    own ``model.embed_tokens`` (:109).
  - :203-244 ``create_attention_masks``: bidirectional masks over the shared K/V (the
    assistant has no causal structure of its own); the sliding mask keeps
    |q - kv| <= sliding_window (masking_utils.py:147), flipped (:242) so it covers the
    NEWEST entries.  With ``attention_mask=None`` every full-attention entry is visible.
  - :42-87 ``Gemma4AssistantMaskedEmbedder`` (``use_ordered_embeddings``): ``centroids``
    = Linear(H_a, num_centroids); top ``centroid_intermediate_top_k`` centroids;
    ``token_ordering.view(num_centroids, V // num_centroids)`` (:64) lists each cluster's
    tokens; only those are scored (h @ lm_head.weight[ids]^T); every other token gets
    min(scored) - 1 (:77), a FINITE filler, so a softmax of the returned logits puts mass
    on tokens that were never scored.  ``token_ordering`` is initialised to zeros (:104):
    it only becomes a permutation when loaded from a checkpoint.
* models/gemma4_assistant/configuration_gemma4_assistant.py:73-78: the assistant's text
  config is forced to ``num_kv_shared_layers = num_hidden_layers``: all its layers reuse
  K/V (``shared_kv_states[layer_type]``) and own no k/v projections.
* models/gemma4/configuration_gemma4.py:226-251 ``kv_sharing_modes``: the last non-shared
  layer of each layer type is a "store" layer (also with ``num_kv_shared_layers = 0``: "assistant
  models read them from the shared_kv_states returned by the target model").
  models/gemma4/modeling_gemma4.py:1230-1231: a store layer puts the keys/values it got
  back from ``cache.update`` (k_norm, v_norm and RoPE applied) into ``shared_kv_states``;
  so with a cache, the store layer's cache entry holds the same tensors (the KV-shared
  layers have ``DummyLayer`` cache entries).
* generation/candidate_generator.py:1213-1360 ``SinglePositionMultiTokenCandidateGenerator``
  (picked by generation/utils.py:1342 for a Gemma4Assistant): the target call adds
  ``output_hidden_states=True, return_shared_kv_states=True`` (:1249-1251); h =
  ``hidden_states[-1]`` (:1313) at the last prompt position after prefill (:1325) or at
  index ``n_last_matches`` of the verify pass (:1327); ``position_ids`` = len(input_ids) - 1
  for EVERY draft step (:1329); the token embedding is the target's
  ``get_input_embeddings()`` (utils.py:1354, :1336); drafts are ``logits.argmax`` (:1348)
  and ``outputs.last_hidden_state`` is fed back (:1349).
* generation/utils.py:4464 ``_speculative_sampling``: ``q = candidate_logits.softmax(-1)``
  — argmax drafts verified against the assistant's softmax (over the filler-padded
  logits, without the logits processors): biased when sampling.  We never do that.
* cache_utils.py:246 a ``DynamicSlidingWindowLayer`` keeps the last sliding_window - 1
  positions (after ``crop`` when past recording is on, as in our engine).
* models/auto/modeling_auto.py:844-845: ``AutoModelForCausalLM`` loads a ``gemma4`` repo as
  ``Gemma4ForConditionalGeneration`` (the multimodal wrapper; text goes through
  ``model.language_model``) and a ``gemma4_assistant`` repo as ``Gemma4AssistantForCausalLM``.

Design decisions:

* K/V source.  The drafter reads the store layers' entries of the target's cache (the
  tensors ``return_shared_kv_states=True`` would return, tested equal), so the target
  call needs nothing extra and the engine's rollback (``cache.crop``) already removed the
  rejected drafts.  Full attention: positions 0..L-2 (all of the committed context the
  target has seen).  Sliding: the last min(W-1, L-1) of them — what the target's own
  sliding layer at position L-1 attends to besides L-1 itself.  (transformers instead
  slices the states of the last target pass to ``len(input_ids)`` from the front,
  candidate_generator.py:1320.  Measured with the tiny test pair and
  ``generate(assistant_model=...)``: after a rejection the assistant got full-attention
  keys for positions 0..L-1, position L-1 holding the REJECTED draft's key, and sliding
  keys through the last rejected draft, W+1 of them visible.)
* Position: the newest committed token's position L-1 for every step, as transformers.
* The assistant's forward is run piece by piece with its own modules (pre_projection,
  create_attention_masks, model, post_projection, masked_embedding.centroids, lm_head)
  so the scored token ids are known without scattering a 262k row; the result equals
  ``Gemma4AssistantForCausalLM.forward`` (tested: same h', same logits on the scored ids,
  filler elsewhere).  Scored ids are sorted so argmax ties break towards the lowest id,
  like an argmax over the full row.
* No cache of its own: every ``propose`` rebuilds from ``TargetState``, so rollback is free;
  ``propose_tree`` branches by giving each node its own (token, h).
* A one-token prompt has no target hidden state and no K/V yet: the drafter proposes
  nothing for that one step (the loop then takes a plain target step).

This module does not verify or sample target tokens (``playground.decoding.engine``) and does not
load models (``playground.models.loading``).
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch

from playground.decoding.batch_pass import text_config
from playground.decoding.draft import Draft, TargetState, TreeDraft, token_id_set
from playground.decoding.sampling import SamplingParams, draw_draft_token, logits_to_probs
from playground.decoding.tree import ROOT, DraftTree
from playground.decoding.tree_grow import grow_level
from playground.drafters.base import BaseDrafter

NAME = "gemma4-assistant"
LAYER_TYPES = ("full_attention", "sliding_attention")


def store_layers(target_text_config) -> dict[str, int]:
    """Target layer index whose cache entry holds the shared K/V, per layer type."""
    modes = list(getattr(target_text_config, "kv_sharing_modes", None) or [])
    types = list(target_text_config.layer_types)
    if len(modes) != len(types):
        raise ValueError("the target has no Gemma 4 KV sharing layout (kv_sharing_modes): not a Gemma 4 model?")
    out = {}
    for i, (t, m) in enumerate(zip(types, modes)):
        if m == "store":
            out[t] = i
    return out


def context_kv(cache, layer: int, n_ctx: int, window: int | None):
    """(keys, values) [1, nkv, M, D] of one target cache layer for the committed context.

    n_ctx: committed tokens the target has seen (positions 0..n_ctx-1); entries of later
    positions (rejected drafts not yet cropped) are left out.  window: for a sliding layer,
    the target's sliding window W; only the last W-1 positions are returned (those the
    target itself would attend to from position n_ctx, besides n_ctx).  None if empty.
    """
    if cache is None or n_ctx <= 0:
        return None
    try:
        lay = cache.layers[layer]
    except (AttributeError, IndexError):
        return None
    k, v = getattr(lay, "keys", None), getattr(lay, "values", None)
    if not isinstance(k, torch.Tensor) or k.dim() != 4 or k.shape[-2] == 0:
        return None
    n = k.shape[-2]
    cum = getattr(lay, "cumulative_length", None)
    total = int(cum) if isinstance(cum, int) and cum >= n else n  # entries are positions total-n..total-1
    end = n - max(0, total - n_ctx)
    start = 0 if window is None else max(0, end - (window - 1))
    if end <= start:
        return None
    return k[..., start:end, :], v[..., start:end, :]


class Gemma4AssistantDrafter(BaseDrafter):
    """Drafter kind ``"gemma4-assistant"``: a transformers ``Gemma4AssistantForCausalLM``
    driven by the Gemma 4 target's last hidden state and shared K/V."""

    name = NAME
    needs_target_hidden = True
    branches = True
    needs_drafter_model = True

    def __init__(self, target, assistant, eos_token_ids=(), argmax: bool = False) -> None:
        """target: a Gemma 4 causal LM (``Gemma4ForCausalLM`` or the multimodal
        ``Gemma4ForConditionalGeneration``); assistant: its ``Gemma4AssistantForCausalLM``;
        eos_token_ids: drafting stops after one; argmax=True drafts the argmax at every
        temperature (q one-hot, as transformers does), default samples from q."""
        if "Gemma4" not in type(target).__name__:
            raise ValueError(f"the Gemma 4 assistant needs a Gemma 4 target, got {type(target).__name__}")
        if "Gemma4" not in type(assistant).__name__ or not hasattr(assistant, "pre_projection"):
            raise ValueError(f"expected a Gemma4AssistantForCausalLM, got {type(assistant).__name__}")
        self.target = target
        self.assistant = assistant
        self.argmax = argmax
        tcfg = text_config(target)
        acfg = assistant.config
        atcfg = acfg.get_text_config()
        self.embed = target.get_input_embeddings()  # scaled (Gemma multiplies by sqrt(H))
        self.device = self.embed.weight.device
        self.vocab_size = int(tcfg.vocab_size)
        if int(atcfg.vocab_size) != self.vocab_size:
            raise ValueError(f"assistant vocabulary {atcfg.vocab_size} != target vocabulary {self.vocab_size}")
        if int(acfg.backbone_hidden_size) != int(tcfg.hidden_size):
            raise ValueError(
                f"assistant was trained for a target with hidden size {acfg.backbone_hidden_size}, "
                f"this target has {tcfg.hidden_size}"
            )
        stores = store_layers(tcfg)
        needed = LAYER_TYPES  # create_attention_masks reads both entries of shared_kv_states
        missing = [t for t in needed if t not in stores]
        if missing:
            raise ValueError(f"the target has no KV store layer of type {missing} that the assistant reads")
        self.kv_layers = {t: stores[t] for t in needed}
        self.window = int(tcfg.sliding_window) if "sliding_attention" in self.kv_layers else None
        self.a_device = assistant.pre_projection.weight.device
        self.a_dtype = assistant.pre_projection.weight.dtype
        me = getattr(assistant, "masked_embedding", None)
        self.masked = bool(getattr(acfg, "use_ordered_embeddings", False)) and me is not None
        if self.masked:
            order = me.token_ordering.long()
            if not torch.equal(torch.sort(order).values, torch.arange(self.vocab_size, device=order.device)):
                raise ValueError("the assistant's token_ordering is not a permutation of the vocabulary (not loaded?)")
            self.num_clusters = int(me.num_centroids)
            self.top_clusters = int(me.centroid_intermediate_top_k)
            self.cluster_tokens = order.view(self.num_clusters, self.vocab_size // self.num_clusters)  # [C, V/C]
            self.scored_per_step = self.top_clusters * (self.vocab_size // self.num_clusters)
        else:
            self.num_clusters = self.top_clusters = None
            self.scored_per_step = self.vocab_size
        self.eos = token_id_set(eos_token_ids)
        self.last_ms_per_token: float | None = None

    # -- protocol --------------------------------------------------------------------
    def start(self, state: TargetState) -> None:
        self.last_ms_per_token = None

    # accept, cache_len: BaseDrafter's (nothing to roll back: every propose rebuilds from the cropped target state)

    def shared_kv(self, cache, n_ctx: int) -> dict[str, tuple[torch.Tensor, torch.Tensor]] | None:
        """The assistant's ``shared_kv_states`` for a committed context of n_ctx target positions."""
        out = {}
        for t, layer in self.kv_layers.items():
            kv = context_kv(cache, layer, n_ctx, self.window if t == "sliding_attention" else None)
            if kv is None:
                return None
            out[t] = (kv[0].to(self.a_device, self.a_dtype), kv[1].to(self.a_device, self.a_dtype))
        return out

    @torch.inference_mode()
    def step(
        self, token: int, h: torch.Tensor, position: int, shared, masks=None
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
        """One assistant step: (logits [N] over the scored tokens, their ids [N] sorted
        ascending (None: the whole vocabulary), next h [H_t]).  masks: the assistant's
        attention masks for ``shared`` (the same for every step of a proposal), or None to
        build them here."""
        a = self.assistant
        e = self.embed(torch.tensor([[int(token)]], device=self.device))  # [1, 1, H_t]
        x = torch.cat([e, h.reshape(1, 1, -1).to(e.dtype)], dim=-1).to(self.a_device, self.a_dtype)
        x = a.pre_projection(x)
        if masks is None:
            masks = a.create_attention_masks(x, None, shared)
        y = a.model(
            input_ids=None,
            inputs_embeds=x,
            attention_mask=masks,
            position_ids=torch.tensor([[int(position)]], device=self.a_device),
            shared_kv_states=shared,
            use_cache=False,
        ).last_hidden_state  # [1, 1, H_a]
        h_next = a.post_projection(y)[0, 0]
        if not self.masked:
            return a.lm_head(y)[0, 0], None, h_next
        me = a.masked_embedding
        top = torch.topk(me.centroids(y), k=self.top_clusters, dim=-1).indices  # [1, 1, k]
        ids = self.cluster_tokens.to(y.device)[top].reshape(-1)  # [N]
        emb = a.lm_head.weight[ids].view(1, 1, ids.numel(), -1)  # [1, 1, N, H_a]
        logits = (y.unsqueeze(-2) @ emb.transpose(-1, -2)).squeeze(-2)[0, 0]  # [N], as the masked embedder
        ids, order = torch.sort(ids)
        return logits[order], ids, h_next

    @torch.inference_mode()
    def propose(
        self, state: TargetState, gamma: int, params: SamplingParams, generator: torch.Generator | None
    ) -> Draft:
        committed = state.committed_ids
        n_ctx = len(committed) - 1  # committed tokens in the target cache
        shared = self.shared_kv(state.target_cache, n_ctx) if gamma > 0 and committed else None
        if shared is None or state.hidden is None:
            return Draft(token_ids=[], draft_probs=None, info=self._info(None, shared, 0, n_ctx))
        t0 = time.perf_counter()
        h = state.hidden
        tok = int(committed[-1])
        deterministic = params.greedy or self.argmax
        tokens: list[int] = []
        rows: list[torch.Tensor] = []  # q rows (sampled drafts) or softmax rows (argmax drafts)
        probe = torch.empty(
            1, 1, self.assistant.config.get_text_config().hidden_size, device=self.a_device, dtype=self.a_dtype
        )
        masks = self.assistant.create_attention_masks(probe, None, shared)  # shape/dtype only: same for every step
        for _ in range(gamma):
            logits, ids, h = self.step(tok, h, n_ctx, shared, masks)
            idx, probs = draw_draft_token(logits, params, self.argmax, generator)
            tok = int(ids[idx]) if ids is not None else idx
            tokens.append(tok)
            if probs is not None:
                rows.append(self._scatter(probs, ids))
            if tok in self.eos:
                break
        ms = (time.perf_counter() - t0) * 1000.0
        self.last_ms_per_token = ms / len(tokens)
        info = self._info(n_ctx - 1, shared, len(tokens), n_ctx)
        return Draft.drawn(tokens, rows, deterministic, info=info, forward_calls=len(tokens))

    @torch.inference_mode()
    def propose_tree(
        self,
        state: TargetState,
        max_nodes: int,
        max_depth: int,
        params: SamplingParams,
        generator: torch.Generator | None,
        branch: int = 4,
    ) -> TreeDraft:
        """A dynamic tree (EAGLE-2's rule): every frontier node takes one assistant step from
        its own (token, h) — the assistant keeps no cache, so branches share nothing but the
        target's K/V — and ``ceil(max_nodes / max_depth)`` children per level go to the nodes
        with the highest path probability (``playground.decoding.tree_grow``).  Children are the top
        scored tokens (one-hot q) at temperature 0 or with ``argmax``, else drawn without
        replacement from the same q a chain draft uses.  Cost: one assistant step per
        expanded node."""
        committed = state.committed_ids
        n_ctx = len(committed) - 1
        shared = self.shared_kv(state.target_cache, n_ctx) if max_nodes > 0 and max_depth > 0 and committed else None
        if shared is None or state.hidden is None:
            return TreeDraft(tree=DraftTree((), ()), info=self._info(None, shared, 0, n_ctx))
        t0 = time.perf_counter()
        probe = torch.empty(
            1, 1, self.assistant.config.get_text_config().hidden_size, device=self.a_device, dtype=self.a_dtype
        )
        masks = self.assistant.create_attention_masks(probe, None, shared)
        sample = not (params.greedy or self.argmax)
        per_level = max(1, math.ceil(max_nodes / max_depth))
        tokens: list[int] = []
        parents: list[int] = []
        rows: list[torch.Tensor] = []  # q rows [V] of sampled nodes
        level = [(ROOT, int(committed[-1]), state.hidden, 1.0)]  # (node, token, h, path probability)
        steps = 0
        for _ in range(max_depth):
            # Nothing follows an end of sequence, and a node with path score 0 (a later sibling,
            # when sampling: tree_grow) gets no children: neither takes an assistant step.
            expandable = [(node == ROOT or tok not in self.eos) and score > 0.0 for node, tok, _, score in level]
            dists, h_next = [], []
            for (node, tok, h, _), ok in zip(level, expandable):
                if not ok:
                    dists.append(torch.zeros(self.vocab_size, device=self.device))
                    h_next.append(None)
                    continue
                logits, ids, h2 = self.step(tok, h, n_ctx, shared, masks)
                steps += 1
                probs = logits_to_probs(logits, params) if sample else torch.softmax(logits.float(), dim=-1)  # [N]
                dists.append(self._scatter(probs, ids))  # [V]
                h_next.append(h2)
            kids = grow_level(
                [sc for _, _, _, sc in level],
                torch.stack(dists),
                min(per_level, max_nodes - len(tokens)),
                branch,
                sample,
                generator,
                expandable=expandable,
            )
            new_level = []
            for kid in kids:
                new_level.append((len(tokens), kid.index, h_next[kid.slot], kid.score))
                tokens.append(kid.index)
                parents.append(level[kid.slot][0])
                if kid.row is not None:
                    rows.append(kid.row)
            level = new_level
            if len(tokens) >= max_nodes or not kids:
                break
        self.last_ms_per_token = (time.perf_counter() - t0) * 1000.0 / max(1, len(tokens))
        info = {**self._info(n_ctx - 1, shared, steps, n_ctx), "tree_nodes": len(tokens)}
        draft_probs = torch.stack(rows).cpu() if sample and rows else None  # [n, V]
        return TreeDraft(tree=DraftTree(tuple(tokens), tuple(parents), draft_probs), info=info, forward_calls=steps)

    def _scatter(self, probs: torch.Tensor, ids: torch.Tensor | None) -> torch.Tensor:
        """A distribution over the scored tokens [N] as a full-vocabulary row [V] (zeros elsewhere)."""
        probs = probs.float().to(self.device)
        if ids is None:
            return probs
        row = torch.zeros(self.vocab_size, dtype=torch.float32, device=self.device)
        row[ids.to(self.device)] = probs
        return row

    def _info(self, hidden_from, shared, n: int, position: int) -> dict[str, Any]:
        def positions(t):
            return int(shared[t][0].shape[-2]) if shared and t in shared else 0

        return {
            "hidden_from_position": hidden_from,
            "position_id": position if hidden_from is not None else None,
            "target_kv_layers": dict(self.kv_layers),
            "target_kv_positions": positions("full_attention"),
            "sliding_kv_positions": positions("sliding_attention"),
            "candidates_scored": int(self.scored_per_step),
            "clusters_scored": self.top_clusters,
            "num_clusters": self.num_clusters,
            "vocab_size": self.vocab_size,
            "draft_steps": n,
            "draft_ms_per_token": None if self.last_ms_per_token is None else round(self.last_ms_per_token, 3),
        }


def load_gemma4_assistant_drafter(
    target, assistant, argmax: bool = False, eos_token_ids=None
) -> Gemma4AssistantDrafter:
    """The drafter for a loaded target/assistant pair (EOS ids from the target's configs if not given)."""
    if eos_token_ids is None:
        eos_token_ids = set()
        for src in (text_config(target), getattr(target, "generation_config", None)):
            e = getattr(src, "eos_token_id", None)
            if e is not None:
                eos_token_ids |= set(e) if isinstance(e, (list, tuple)) else {e}
        eos_token_ids = sorted(eos_token_ids)
    return Gemma4AssistantDrafter(target, assistant, eos_token_ids=eos_token_ids, argmax=argmax)
