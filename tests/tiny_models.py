"""Tiny random transformers models for the drafter tests (float32, eager, no weights).

* ``sliding_pair(window)``: a tiny Gemma 3 over the character vocabulary of
  ``playground.models.tiny`` with sliding-window layers, and a noisy copy of it as drafter.
* ``tiny_target(vocab, seed)`` / ``tiny_head(model, ...)``: a tiny Gemma 3 (``VOCAB``
  tokens, eos ``EOS``) and a random-ish MTP head for it; ``char_target_and_head()``: the
  pair over the character vocabulary that the greedy-equality tests of MTP drafters share.
* ``prefix_state(model, ids)``: the TargetState the loop hands a drafter after committing
  ``ids``; ``first_draft_state(model, head, ids)``: the MTP head's state for draft 1,
  recomputed independently of the drafter; ``rand_ids(n, seed)``: random token ids.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache, Gemma3ForCausalLM, Gemma3TextConfig, LlamaConfig, LlamaForCausalLM

from playground.decoding.draft import TargetState
from playground.drafters.mtp_head import MTPConfig, MTPHead, unrolled_states
from playground.models.tiny import EOS as CHAR_EOS

VOCAB = 300
EOS = 1


def sliding_pair(window=4):
    """Tiny Gemma 3 with sliding-window layers (window 4) and a noisy copy as drafter."""
    cfg = Gemma3TextConfig(
        vocab_size=100,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=4,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        sliding_window=window,
        max_position_embeddings=512,
        layer_types=["sliding_attention", "full_attention", "sliding_attention", "sliding_attention"],
        bos_token_id=CHAR_EOS - 1,
        eos_token_id=CHAR_EOS,
        pad_token_id=CHAR_EOS + 1,
        attn_implementation="eager",
    )
    torch.manual_seed(0)
    target = Gemma3ForCausalLM(cfg).eval()
    with torch.no_grad():
        target.lm_head.weight.mul_(1.0)  # tied to embeddings
    drafter = Gemma3ForCausalLM(cfg).eval()
    drafter.load_state_dict(target.state_dict())
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, w in drafter.named_parameters():
            if w.ndim == 2 and "embed" not in name:
                w.add_(torch.randn(w.shape, generator=g) * 0.5 * w.std())
    return target, drafter


def tiny_target(vocab: int = VOCAB, seed: int = 0) -> Gemma3ForCausalLM:
    torch.manual_seed(seed)
    cfg = Gemma3TextConfig(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        sliding_window=6,
        layer_types=["sliding_attention", "full_attention", "sliding_attention", "sliding_attention"],
        max_position_embeddings=512,
        pad_token_id=0,
        eos_token_id=EOS,
        bos_token_id=2,
        attn_implementation="eager",
    )
    return Gemma3ForCausalLM(cfg).eval()


def tiny_head(model, n_cand: int = 200, noise: float = 0.05, seed: int = 1, layers: int = 1, **cfg) -> MTPHead:
    """A random-ish head (the target's layer plus noise); cfg: MTPConfig overrides, e.g.
    num_clusters / clusters_per_step (the clusters then cover every non-candidate token)."""
    from tools.training.mtp_clusters import balanced_clusters

    cfg = MTPConfig.from_target(model.config, num_candidates=n_cand, num_layers=layers, **cfg)
    head = MTPHead(cfg)
    head.init_from_target(model)
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(model.config.vocab_size, generator=g)
    cand = perm[perm != EOS][: n_cand - 1]
    head.candidates.copy_(torch.cat([torch.tensor([EOS]), cand]))
    if cfg.num_clusters:
        static = torch.zeros(model.config.vocab_size, dtype=torch.bool)
        static[head.candidates] = True
        head.token_cluster.copy_(balanced_clusters(model.model.embed_tokens.weight.detach(), static, cfg.num_clusters))
    with torch.no_grad():
        for p in head.parameters():
            p.add_(torch.randn(p.shape, generator=g) * noise)
    return head.eval()


def char_target_and_head() -> tuple[Gemma3ForCausalLM, MTPHead]:
    """A tiny Gemma 3 over ``playground.models.tiny``'s character vocabulary and a head close to it
    (60 candidates, little noise): drafts are often right, so greedy tests see long accepted runs."""
    from playground.models.tiny import VOCAB as CHAR_VOCAB

    model = tiny_target(vocab=CHAR_VOCAB, seed=11)
    return model, tiny_head(model, n_cand=60, noise=0.02, seed=3)


def prefix_state(model, ids: list[int], record_past: bool = False) -> TargetState:
    """What the loop hands the drafter: the cache holds ids[:-1], hidden is h at len-2.
    ``record_past``: the cache records its past (as the loop's does for Gemma 4)."""
    cache = DynamicCache(config=model.config)
    if record_past:
        cache.activate_past_recording()
    hidden = None
    if len(ids) > 1:
        with torch.no_grad():
            out = model(input_ids=torch.tensor([ids[:-1]]), cache=cache, use_cache=True, output_hidden_states=True)
        hidden = out.hidden_states[-1][0, -1]
    return TargetState(committed_ids=list(ids), hidden=hidden, target_cache=cache)


@torch.no_grad()
def first_draft_state(model, head, ids: list[int]) -> torch.Tensor:
    """The head's state for draft 1 after committing ``ids`` [H], recomputed independently of
    MTPDrafter: one full forward for the hidden states, one cached pass for the keys."""
    seq = torch.tensor([ids])
    out = model(input_ids=seq, output_hidden_states=True)
    cache = DynamicCache(config=model.config)
    model(input_ids=seq, cache=cache, use_cache=True)
    lay = cache.layers[head.cfg.attn_layer]
    return unrolled_states(head, model.model.embed_tokens(seq), out.hidden_states[-1], lay.keys, lay.values, 1)[0][
        0, -1
    ]


def rand_ids(n: int, seed: int = 0, vocab: int = VOCAB) -> list[int]:
    """n token ids drawn from 3..vocab-1 (never pad, eos or bos)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, vocab, (n,), generator=g).tolist()


# The tiny Gemma 4 pair (target + MTP assistant) of the assistant drafter's tests.
G4_S, G4_F = "sliding_attention", "full_attention"
G4_VOCAB, G4_EOS, G4_WINDOW, G4_H = 64, 1, 4, 32


def gemma4_text_config(vocab: int, layers: int, types: list[str], **kw):
    base = dict(
        vocab_size=vocab,
        hidden_size=G4_H,
        intermediate_size=64,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        global_head_dim=16,
        sliding_window=G4_WINDOW,
        layer_types=types,
        max_position_embeddings=256,
        pad_token_id=0,
        eos_token_id=G4_EOS,
        bos_token_id=2,
        attn_implementation="eager",
    )
    base.update(kw)
    from transformers import Gemma4TextConfig

    return Gemma4TextConfig(**base)


def gemma4_pair(vocab=G4_VOCAB, clusters=8, top=4, layer_scale=0.02, head_scale=20.0, seed=0, masked=True):
    """A tiny Gemma 4 target (sliding window 4, per-layer inputs, 2 KV-shared layers, logit
    soft-capping, untied head) and a tiny assistant that agrees with it often."""
    from transformers import Gemma4AssistantConfig, Gemma4AssistantForCausalLM, Gemma4ForCausalLM

    torch.manual_seed(seed)
    tcfg = gemma4_text_config(
        vocab,
        4,
        [G4_S, G4_F, G4_S, G4_F],
        hidden_size_per_layer_input=8,
        vocab_size_per_layer_input=vocab,
        num_kv_shared_layers=2,
        final_logit_softcapping=30.0,
        tie_word_embeddings=False,
    )
    target = Gemma4ForCausalLM(tcfg).eval()
    acfg = Gemma4AssistantConfig(
        text_config=gemma4_text_config(
            vocab, 2, [G4_S, G4_F], hidden_size_per_layer_input=0, vocab_size_per_layer_input=0
        ),
        backbone_hidden_size=G4_H,
        use_ordered_embeddings=masked,
        num_centroids=clusters,
        centroid_intermediate_top_k=top,
        attn_implementation="eager",
    )
    assistant = Gemma4AssistantForCausalLM(acfg).eval()
    with torch.no_grad():
        target.lm_head.weight.mul_(head_scale)
        for layer in target.model.layers:
            for norm in (
                layer.post_attention_layernorm,
                layer.post_feedforward_layernorm,
                layer.post_per_layer_input_norm,
            ):
                norm.weight.mul_(layer_scale)
        W = target.lm_head.weight
        assistant.model.embed_tokens.weight.copy_(W)  # the assistant's tied head = the target's head
        assistant.pre_projection.weight.zero_()
        assistant.pre_projection.weight[:, :G4_H].copy_(torch.eye(G4_H))  # pass the token embedding through
        for layer in assistant.model.layers:
            for norm in (layer.post_attention_layernorm, layer.post_feedforward_layernorm):
                norm.weight.mul_(layer_scale)
        if masked:
            perm = torch.randperm(vocab)
            assistant.masked_embedding.token_ordering.copy_(perm)
            groups = perm.view(clusters, vocab // clusters)
            assistant.masked_embedding.centroids.weight.copy_(torch.stack([W[g].mean(0) for g in groups]))
    return target, assistant


def small_llama(vocab: int = 6):
    """Tiny Llama (3 layers) whose exit after layer 1 really differs from the full model
    (total variation ~0.4 at T=1): for early-exit sampling tests."""
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=3,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=64,
        tie_word_embeddings=False,
        attn_implementation="eager",
    )
    torch.manual_seed(3)
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(15.0)  # peaked distributions ...
        for layer in model.model.layers[1:]:  # ... and layers past the exit that change them (TV ~0.4)
            layer.mlp.down_proj.weight.mul_(3.0)
            layer.self_attn.o_proj.weight.mul_(3.0)
    return model
