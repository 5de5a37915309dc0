"""One target pass over a whole draft tree, and keeping only the accepted path in the cache.

``tree_forward`` feeds [root, node 0, ..., node n-1] in one forward pass with a tree
attention mask (each node sees the committed context, the root and its own ancestors)
and depth-based position ids.  Models with sliding-window layers (Gemma 3) get one mask
per layer type: a sliding layer holds only the last W-1 committed keys, and a query at
position t may see a key at position k (committed or an ancestor) only if t - k < W.  The mask is boolean
for SDPA and additive (0 / -inf) for eager attention, as transformers' own masks are.

``compact_cache`` then keeps, of the n+1 entries the pass appended to every cache layer,
only the root and the accepted path, in order, so the cache again holds exactly the
committed tokens at contiguous positions (the engine's cache invariant).  The cache must
record its past (``activate_past_recording``) so sliding layers can drop entries after
their window is full.

This module does not decide what is accepted (``playground.decoding.tree``) and does not sample.
"""

from __future__ import annotations

import torch

from playground.decoding.batch_pass import layer_types, prepare_mask, text_config
from playground.decoding.tree import DraftTree, tree_attention_mask, tree_position_ids


def tree_masks(config, tree: DraftTree, past_len: int, dtype: torch.dtype, device=None) -> torch.Tensor | dict:
    """The 4D mask(s) for a tree pass at cache length ``past_len``: one [1, 1, n+1, kv]
    tensor, or {layer type: mask} when the model has sliding-window layers."""
    full = tree_attention_mask(tree, past_len)  # [n+1, past_len+n+1] bool
    masks = {"full_attention": full}
    types = set(layer_types(config))
    if "sliding_attention" in types:
        window = config.sliding_window
        pos = tree_position_ids(tree, past_len)  # [n+1]
        offset = max(past_len - window + 1, 0)  # the sliding layer holds positions offset..past_len-1
        cached = torch.arange(offset, past_len)  # [m]
        visible = (pos[:, None] - cached[None, :]) < window  # [n+1, m]
        near = (pos[:, None] - pos[None, :]) < window  # [n+1, n+1]: a deep node loses far ancestors too
        masks["sliding_attention"] = torch.cat([visible, full[:, past_len:] & near], dim=1)
    attn = getattr(config, "_attn_implementation", None) or "sdpa"
    prepared = {k: prepare_mask(v[None, None], attn, dtype, device) for k, v in masks.items()}
    if len(types) == 1 and "full_attention" in types:
        return prepared["full_attention"]
    return prepared


@torch.inference_mode()
def tree_forward(model, cache, root_token: int, tree: DraftTree, hidden: bool = False):
    """(logits [n+1, V], hidden states [n+1, H] or None): row 0 at the root, row i+1 after node i."""
    past_len = cache.get_seq_length()
    config = text_config(model)
    dtype = next(iter(model.parameters()), torch.zeros(())).dtype
    device = model.device
    ids = torch.tensor([[int(root_token), *tree.tokens]], device=device)
    out = model(
        input_ids=ids,
        attention_mask=tree_masks(config, tree, past_len, dtype, device),
        position_ids=tree_position_ids(tree, past_len)[None].to(device),
        cache=cache,
        use_cache=True,
        output_hidden_states=hidden,
    )
    h = out.hidden_states[-1][0] if hidden else None
    return out.logits[0], h


def compact_cache(cache, n_new: int, keep: list[int]) -> None:
    """Of the ``n_new`` newest entries of every layer, keep those at ``keep`` (ascending
    indices into the new block, e.g. [0] + [1 + j for j in accepted path])."""
    keep = [int(k) for k in keep]
    if keep != sorted(set(keep)) or any(not 0 <= k < n_new for k in keep):
        raise ValueError(f"keep must be ascending indices below {n_new}, got {keep}")
    dropped = n_new - len(keep)
    for layer in cache.layers:
        if not getattr(layer, "is_initialized", True) or layer.keys is None or layer.keys.numel() == 0:
            continue
        idx = torch.tensor(keep, dtype=torch.long, device=layer.keys.device)
        for name in ("keys", "values"):
            t = getattr(layer, name)
            setattr(
                layer,
                name,
                torch.cat(
                    [t[..., : t.shape[-2] - n_new, :], t[..., t.shape[-2] - n_new :, :].index_select(-2, idx)], dim=-2
                ),
            )
        if getattr(layer, "is_sliding", False):
            layer.cumulative_length -= dropped
            window = layer.sliding_window
            if layer.keys.shape[-2] > window - 1 and layer.cumulative_length >= window:
                layer.keys = layer.keys[..., -window + 1 :, :]
                layer.values = layer.values[..., -window + 1 :, :]
