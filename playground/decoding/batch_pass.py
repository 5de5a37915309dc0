"""One target forward pass that carries the new tokens of many runs, each with its own cache.

Every run keeps its own ``DynamicCache`` (the engine's cache invariant is per run and does
not change).  With a ``SlotCache`` (the scheduler's), the runs' caches live in one batched
cache and the pass reads and writes them there (``batch_slots``: new tokens left-aligned,
nothing stacked or copied back).  Without one, or when a row cannot have a slot,
``batched_forward`` stacks the rows for one pass:

    input ids      [B, K]       row b's k_b new tokens right-aligned, pad slots before them
    position ids   [B, K]       row b's own positions (its cache length + offset, or a tree's depths)
    keys           [B, Hkv, P+K, D] per layer: row b's cached keys left-aligned, zeros after
                                them, then K slots the pass writes the new keys into
    masks          {layer type: [B, 1, K, P+K]}  row b's queries see only row b's keys

A row's query sees a cached key of its own row (sliding-window layers: only if
query position − key position < W), and the new tokens its ``attend`` matrix allows
(causal for a chain, ancestors for a tree).  Pad keys and other rows' keys are never
visible; a pad query sees only itself, so it stays finite (a fully masked softmax row is
NaN, and 0 · NaN in the value product would reach nobody, but finite is simpler to trust).

Each layer's batch is allocated once with its K new slots (the model's cache update writes
into them: no second copy of the batch per layer) and filled with one ``pad_sequence`` call
(its copies in C++, not thirty Python calls a layer).  After the pass, the k_b new keys and
values of each row are appended to that row's own cache with the layer's ``update``
(sliding layers count and trim as in a plain pass), and row b gets the logits (and final
hidden states) of its last ``keep`` new tokens.

The decoder runs on its own and the LM head (262k × 640 for Gemma 3, as much work per
token as the rest of the model) only on the positions a row needs — a chunk of a
newcomer's prompt one, a chain γ+1 — not on B × the longest row.

This module does not decide which rows share a pass (``playground.serving.scheduler``),
does not verify or sample, and does not know what a draft is.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from torch.nn.utils.rnn import pad_sequence
from transformers import DynamicCache
from transformers.cache_utils import Cache, DynamicLayer

from playground.decoding.batch_slots import SlotCache


@dataclass(frozen=True)
class RowPass:
    """One run's part of a batched pass."""

    cache: DynamicCache  # the run's own cache, extended in place by the pass
    ids: tuple[int, ...]  # the new tokens, k >= 1
    keep: int  # logits (and hidden states) of the last `keep` new tokens
    hidden: bool = False  # also return the final hidden states of those tokens
    positions: torch.Tensor | None = None  # [k] absolute positions; None: cache length + arange(k)
    attend: torch.Tensor | None = None  # [k, k] bool, which new tokens each new token sees; None: causal


@dataclass(frozen=True)
class RowOut:
    logits: torch.Tensor  # [keep, V]
    hidden: torch.Tensor | None  # [keep, H]


@dataclass(frozen=True)
class PassTimes:
    """Where one batched pass's wall time went, in ms: gathering the rows' ids, positions,
    masks and caches into one batch (with slots: each row's cache into its slot, where it is
    not already), the model itself (decoder and LM head; with slots it also writes the new
    keys into the slots and reads the rows), and extending each row's cache by its new keys
    and values (with slots: pointing it at its slot)."""

    gather_ms: float
    model_ms: float
    write_ms: float


def text_config(model):
    """The config of the model's text decoder (a multimodal model's, or the model's own)."""
    return model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config


def kv_heads(config) -> tuple[int, int]:
    """(key/value heads, head dim) of each attention layer's cache."""
    heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    return heads, getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads


def layer_types(config) -> list[str]:
    types = getattr(config, "layer_types", None)
    return list(types) if types else ["full_attention"] * config.num_hidden_layers


def _stored(layer) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The keys and values a layer holds ([1, Hkv, S, D] each), or None when it holds none."""
    if not getattr(layer, "is_initialized", False) or layer.keys is None or layer.keys.numel() == 0:
        return None
    return layer.keys, layer.values


def _visible_past(layer, window: int | None) -> tuple[torch.Tensor, torch.Tensor] | None:
    """What a new query of this row can see in this layer: a sliding layer's last W−1 keys
    (older ones are out of every new query's window), a full layer's all."""
    kv = _stored(layer)
    if kv is None or not getattr(layer, "is_sliding", False):
        return kv
    k, v = kv
    return k[..., -(window - 1) :, :], v[..., -(window - 1) :, :]


def _row_geometry(row: RowPass) -> tuple[int, torch.Tensor, torch.Tensor]:
    """(cache length L, positions [k], attend [k, k]) of one row."""
    k = len(row.ids)
    past = row.cache.get_seq_length()
    pos = row.positions if row.positions is not None else past + torch.arange(k)
    attend = row.attend if row.attend is not None else torch.ones(k, k, dtype=torch.bool).tril()
    if pos.shape != (k,) or attend.shape != (k, k):
        raise ValueError(f"a row of {k} tokens needs positions [{k}] and attend [{k}, {k}]")
    return past, pos.long(), attend.bool()


def _mask(
    rows_geo, n_past: list[int], width: int, slots: int, window: int | None
) -> torch.Tensor:  # [B, 1, K, P+K] bool
    """One layer type's mask: ``n_past[b]`` cached keys of row b left-aligned in ``width``
    slots (their positions end at L_b − 1), then the K new slots, row b's right-aligned."""
    mask = torch.zeros(len(rows_geo), 1, slots, width + slots, dtype=torch.bool)
    for b, (past, pos, attend) in enumerate(rows_geo):
        k, s = len(pos), n_past[b]
        q0 = slots - k  # first slot of this row's new tokens
        mask[b, 0, torch.arange(q0), width + torch.arange(q0)] = True  # pad queries see themselves
        key_pos = torch.arange(past - s, past)  # [s] positions of the visible cached keys
        seen = torch.ones(k, s, dtype=torch.bool)
        new = attend.clone()
        if window is not None:
            seen &= (pos[:, None] - key_pos[None, :]) < window
            new &= (pos[:, None] - pos[None, :]) < window
        mask[b, 0, q0:, :s] = seen
        mask[b, 0, q0:, width + q0 :] = new
    return mask


def prepare_mask(mask: torch.Tensor, attn: str, dtype: torch.dtype, device) -> torch.Tensor:
    """Boolean for SDPA, additive (0 / −inf) for eager attention, as transformers' own masks."""
    mask = mask.to(device)
    if attn == "eager":
        return torch.zeros(mask.shape, dtype=dtype, device=device).masked_fill(~mask, torch.finfo(dtype).min)
    return mask


class _Slots(DynamicLayer):
    """One layer of the batch: every row's visible past and the pass's new slots, allocated
    together.  The model's update writes the new keys into their slots and attends over the
    whole tensor, where a ``DynamicLayer`` would concatenate a copy of the batch."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, width: int) -> None:  # [B, Hkv, P+K, D] each
        super().__init__()
        self.keys, self.values, self.width = keys, values, width
        self.dtype, self.device, self.is_initialized = keys.dtype, keys.device, True

    def update(self, key_states, value_states, *args, **kwargs):  # [B, Hkv, K, D] each
        self.keys[:, :, self.width :] = key_states
        self.values[:, :, self.width :] = value_states
        return self.keys, self.values


def _stack_past(layers, window, slots: int, heads: int, head_dim: int, dtype, device) -> tuple[_Slots, list[int]]:
    """(one batch layer: its rows' visible keys/values left-aligned in P slots, then ``slots``
    empty ones, [B, Hkv, P+K, D] each; the count per row)."""
    visible = [_visible_past(layer, window) for layer in layers]
    counts = [0 if kv is None else kv[0].shape[-2] for kv in visible]
    width = max(counts)
    empty = torch.zeros(0, heads, head_dim, dtype=dtype, device=device)
    # A sequence of P + K zeros (expanded: nothing allocated) sets the batch's width; rows are
    # [S, Hkv, D] views, padded after their keys.
    extent = torch.zeros(1, 1, 1, dtype=dtype, device=device).expand(width + slots, heads, head_dim)
    out = []
    for i in (0, 1):
        rows = [empty if kv is None else kv[i][0].transpose(0, 1) for kv in visible]
        batch = pad_sequence([*rows, extent], batch_first=True)[: len(layers)]  # [B, P+K, Hkv, D]
        out.append(batch.transpose(1, 2).contiguous())  # [B, Hkv, P+K, D]; no copy for one head
    return _Slots(out[0], out[1], width), counts


def _own_slots(width: int, slots: int, k: int) -> slice:
    """Where a row's k new keys sit in a batch layer of ``width`` cached + ``slots`` new slots."""
    return slice(width + slots - k, width + slots)


@torch.inference_mode()
def batched_forward(
    model, rows: list[RowPass], pad_id: int = 0, timed: list | None = None, slots: SlotCache | None = None
) -> list[RowOut]:
    """One forward pass over every row's new tokens; each row's cache grows by its own tokens.
    ``timed``: a list the pass appends its ``PassTimes`` to.  ``slots``: the rows' caches live
    in (or move into) this batched cache (``batch_slots``); without it, or where a row cannot,
    the pass stacks the rows' caches itself and appends to each afterwards."""
    t0 = time.perf_counter()
    if not rows or any(len(r.ids) < 1 or not 1 <= r.keep <= len(r.ids) for r in rows):
        raise ValueError("every row needs at least one new token and 1 <= keep <= its tokens")
    config = text_config(model)
    types = layer_types(config)
    window = getattr(config, "sliding_window", None)
    attn = getattr(config, "_attn_implementation", None) or "sdpa"
    dtype = next(iter(model.parameters())).dtype
    device = model.device

    geo = [_row_geometry(r) for r in rows]
    slots_new = max(len(r.ids) for r in rows)
    plan = slots.plan([r.cache for r in rows], [g[0] for g in geo], slots_new) if slots is not None else None
    # A slot pass writes row b's tokens first and pads after them; the plain pass right-aligns them.
    starts = [0 if plan is not None else slots_new - len(r.ids) for r in rows]
    ids = torch.full((len(rows), slots_new), pad_id, dtype=torch.long)
    positions = torch.zeros(len(rows), slots_new, dtype=torch.long)
    for b, (r, (_, pos, _), s) in enumerate(zip(rows, geo, starts)):
        ids[b, s : s + len(r.ids)] = torch.tensor(r.ids)
        positions[b] = pos[0]  # pads: any valid position, never seen
        positions[b, s : s + len(r.ids)] = pos

    if plan is not None:
        layers = plan.layers
        masks = {
            kind: prepare_mask(plan.mask(geo, window if kind == "sliding_attention" else None), attn, dtype, device)
            for kind in dict.fromkeys(types)
        }
    else:
        layers, masks = _stacked_layers(rows, geo, types, config, slots_new, attn, dtype, device)
    batch_cache = Cache(layers=layers)
    attention_mask = masks if len(masks) > 1 else next(iter(masks.values()))
    t1 = time.perf_counter()
    hidden = _final_states(model, ids.to(device), attention_mask, positions.to(device), batch_cache)  # [B, K, H]
    # The LM head only where a row needs it: sum(keep) rows, not B x max(keep).
    ends = [s + len(r.ids) for s, r in zip(starts, rows)]
    wanted = torch.cat([hidden[b, e - r.keep : e] for b, (r, e) in enumerate(zip(rows, ends))])  # [sum keep, H]
    logits = _lm_head(model, config, wanted).split([r.keep for r in rows])  # [keep_b, V] each
    t2 = time.perf_counter()
    # Rows' caches change last: a pass that fails before here leaves every row as it was, so
    # the scheduler may run each row again alone.
    if plan is not None:
        plan.commit([r.cache for r in rows], [len(r.ids) for r in rows])
    else:
        for i, layer in enumerate(layers):  # each row keeps its own new keys
            for b, r in enumerate(rows):
                new = _own_slots(layer.width, slots_new, len(r.ids))
                r.cache.layers[i].update(layer.keys[b : b + 1, :, new], layer.values[b : b + 1, :, new])
    if timed is not None:
        timed.append(PassTimes(*((b - a) * 1000.0 for a, b in ((t0, t1), (t1, t2), (t2, time.perf_counter())))))
    return [
        RowOut(logits=logits[b], hidden=hidden[b, e - r.keep : e] if r.hidden else None)
        for b, (r, e) in enumerate(zip(rows, ends))
    ]


def _stacked_layers(rows, geo, types, config, slots_new, attn, dtype, device) -> tuple[list[_Slots], dict]:
    """The plain pass's batch: each layer's rows stacked (``_stack_past``), one mask per layer type."""
    window = getattr(config, "sliding_window", None)
    heads, head_dim = kv_heads(config)
    layers, masks = [], {}
    for i, kind in enumerate(types):
        sliding = kind == "sliding_attention"
        layer, counts = _stack_past(
            [r.cache.layers[i] for r in rows], window, slots_new, heads, head_dim, dtype, device
        )
        layers.append(layer)
        if kind not in masks:
            masks[kind] = prepare_mask(
                _mask(geo, counts, layer.width, slots_new, window if sliding else None), attn, dtype, device
            )
    return layers, masks


def _final_states(model, ids, attention_mask, positions, cache) -> torch.Tensor:  # [B, K, H]
    """The decoder's final-norm hidden states (what ``output_hidden_states`` gives as its last)."""
    out = model.get_decoder()(
        input_ids=ids, attention_mask=attention_mask, position_ids=positions, cache=cache, use_cache=True
    )
    return out.last_hidden_state


def _lm_head(model, config, hidden: torch.Tensor) -> torch.Tensor:  # [N, V]
    """The causal LM's head on ``hidden`` [N, H], with Gemma's final soft-capping where set."""
    logits = model.get_output_embeddings()(hidden)
    cap = getattr(config, "final_logit_softcapping", None)
    if cap is not None:
        logits = torch.tanh(logits / cap) * cap
    return logits
