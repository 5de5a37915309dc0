"""The MTP head: its configuration and the module one draft step runs (no drafting loop).

One draft step (all tensors are the target's dtype; H = target hidden size):

    x  = pre_proj( [ norm_e(embed(token)) ; norm_h(state) ] )        2H -> H
    x  = decoder layer(s) (Gemma 3 layout: sandwich norms, q/k norms, GeLU MLP);
         attention reads the target's own K/V of its last full-attention layer
         (the committed context, read-only) plus the drafter's keys for the
         draft steps of this call
    s' = final_norm(post_proj(x))       H -> H: predicted target final hidden state, fed back
    logits = s' @ E[candidates]^T                                   sparse tied head

``state`` is the target's final-norm hidden state (or the learned ``start_state``) on the
first step and the head's own output ``s'`` after that.  ``unrolled_states`` is the same
computation for every start position of a sequence at once (training and evaluation).

Design decisions, measured on Gemma 3 270M (bf16) on the project's 2-core CPU:

* Attention source.  The drafter layer reads the target's own K/V of its last
  full-attention layer (layer 17: one KV head, 256 dims, RoPE already applied)
  for the committed context, plus its own keys for this call's draft steps.
  Against the same layer attending only to its own draft keys ("none"), after
  50 identical training steps: training top-1 0.42 vs 0.31, held-out greedy
  acceptance at position 1 0.226 vs 0.199.  The cost is one dot product per
  context key (one KV head): negligible next to the MLP and the sparse head.
* Initialisation.  Copying the target's layer 17 (and final norm) into the
  drafter started at a loss of ~130 and learned slowly (top-1 0.27 after 25
  steps overfitting four sequences) against random init (0.98): random init.
* State.  The step output is the drafter's prediction of the target's
  final-norm hidden state (trained with a regression loss next to the KL), so
  the recurrent input lives in the same space as ``TargetState.hidden``.

This module does not draft, choose candidates or sample (``playground.drafters.mtp``),
does not read or write weight files (``playground.drafters.mtp_weights``) and does not
train (``tools.training.train_drafter``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

# --------------------------------------------------------------------------------------
# configuration


@dataclass
class MTPConfig:
    hidden_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    num_layers: int = 1
    attend: str = "target"  # "target": read the target's K/V of `attn_layer`; "none": own draft keys only
    attn_layer: int = -1  # target layer whose K/V the drafter reads
    rope_theta: float = 1_000_000.0
    rms_norm_eps: float = 1e-6
    query_pre_attn_scalar: float = 256.0
    num_candidates: int = 8192
    num_clusters: int = 0  # 0: static candidates (+ context) only; else clusters cover the rest (mtp_clusters)
    clusters_per_step: int = 8  # clusters whose tokens a draft step scores besides the static set
    vocab_size: int = 262144
    target: str = "gemma3-270m"

    @classmethod
    def from_target(cls, config, **overrides) -> MTPConfig:
        """Mirror the target's attention geometry (so its last full-attention layer can
        initialise the drafter layer and its K/V can be read as they are)."""
        cfg = config.get_text_config() if hasattr(config, "get_text_config") else config
        types = list(getattr(cfg, "layer_types", None) or ["full_attention"] * cfg.num_hidden_layers)
        full = [i for i, t in enumerate(types) if t == "full_attention"]
        attn_layer = full[-1] if full else cfg.num_hidden_layers - 1
        kw = dict(
            hidden_size=cfg.hidden_size,
            num_attention_heads=cfg.num_attention_heads,
            num_key_value_heads=cfg.num_key_value_heads,
            head_dim=getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads,
            intermediate_size=cfg.intermediate_size,
            attn_layer=attn_layer,
            rope_theta=_rope_theta(cfg, types[attn_layer]),
            rms_norm_eps=float(cfg.rms_norm_eps),
            query_pre_attn_scalar=float(getattr(cfg, "query_pre_attn_scalar", None) or cfg.head_dim),
            vocab_size=cfg.vocab_size,
        )
        kw.update(overrides)
        return cls(**kw)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MTPConfig:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


def _rope_theta(cfg, layer_type: str) -> float:
    rp = getattr(cfg, "rope_parameters", None)
    if isinstance(rp, dict):
        if layer_type in rp and isinstance(rp[layer_type], dict):
            return float(rp[layer_type].get("rope_theta", 10000.0))
        if "rope_theta" in rp:
            return float(rp["rope_theta"])
    return float(getattr(cfg, "rope_theta", 10000.0) or 10000.0)


# --------------------------------------------------------------------------------------
# building blocks (Gemma 3 conventions)


class RMSNorm(nn.Module):
    """Gemma RMSNorm: x / rms(x) * (1 + w), computed in float32."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (xf * (1.0 + self.weight.float())).to(x.dtype)


def rope_cos_sin(positions: torch.Tensor, head_dim: int, theta: float, dtype: torch.dtype):
    """cos, sin [..., head_dim] for integer positions [...] (HF 'default' rope, half-rotation)."""
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32, device=positions.device) / head_dim))
    freqs = positions.float().unsqueeze(-1) * inv
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    a, b = x.chunk(2, dim=-1)
    return torch.cat([-b, a], dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [B, heads, T, D]; cos/sin [B, T, D]."""
    return x * cos.unsqueeze(1) + _rotate_half(x) * sin.unsqueeze(1)


class DrafterLayer(nn.Module):
    """A Gemma 3 decoder layer whose attention reads external (target) K/V plus its own draft keys."""

    def __init__(self, cfg: MTPConfig) -> None:
        super().__init__()
        H, nh, nkv, D = cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        self.nh, self.nkv, self.D = nh, nkv, D
        self.scale = cfg.query_pre_attn_scalar**-0.5
        self.input_layernorm = RMSNorm(H, cfg.rms_norm_eps)
        self.q_proj = nn.Linear(H, nh * D, bias=False)
        self.k_proj = nn.Linear(H, nkv * D, bias=False)
        self.v_proj = nn.Linear(H, nkv * D, bias=False)
        self.o_proj = nn.Linear(nh * D, H, bias=False)
        self.q_norm = RMSNorm(D, cfg.rms_norm_eps)
        self.k_norm = RMSNorm(D, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(H, cfg.rms_norm_eps)
        self.pre_feedforward_layernorm = RMSNorm(H, cfg.rms_norm_eps)
        self.gate_proj = nn.Linear(H, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(H, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, H, bias=False)
        self.post_feedforward_layernorm = RMSNorm(H, cfg.rms_norm_eps)

    def forward(self, x, cos, sin, ctx_k, ctx_v, ctx_mask, own_k: list, own_v: list):
        """x [B, T, H] (T independent draft chains, one step each).

        ctx_k/ctx_v: [B, nkv, M, D] target keys/values (RoPE already applied) or None;
        ctx_mask: [T, M] or [B, T, M] bool (True = may attend) or None (attend to all);
        own_k/own_v: this layer's keys/values of earlier steps of the same chains, each
        [B, nkv, T, D]; this step's are appended (so a query always sees itself).
        """
        B, T, _ = x.shape
        h = self.input_layernorm(x)
        q = self.q_norm(self.q_proj(h).view(B, T, self.nh, self.D)).transpose(1, 2)  # [B, nh, T, D]
        k = self.k_norm(self.k_proj(h).view(B, T, self.nkv, self.D)).transpose(1, 2)
        v = self.v_proj(h).view(B, T, self.nkv, self.D).transpose(1, 2)
        q = apply_rope(q, cos, sin)
        k = apply_rope(k, cos, sin)
        own_k.append(k)
        own_v.append(v)
        g = self.nh // self.nkv
        qg = q.view(B, self.nkv, g, T, self.D)  # heads grouped by their kv head
        # scores against this call's own keys: elementwise per chain -> [B, nkv, g, T, j]
        ks = torch.stack(own_k, dim=-2)  # [B, nkv, T, j, D]
        vs = torch.stack(own_v, dim=-2)
        s_own = torch.einsum("bkgtd,bktjd->bkgtj", qg, ks) * self.scale
        if ctx_k is not None and ctx_k.shape[-2] > 0:
            s_ctx = torch.einsum("bkgtd,bkmd->bkgtm", qg, ctx_k) * self.scale  # [B, nkv, g, T, M]
            if ctx_mask is not None:
                m = ctx_mask if ctx_mask.dim() == 3 else ctx_mask.unsqueeze(0)
                s_ctx = s_ctx.masked_fill(~m[:, None, None], float("-inf"))
            M = s_ctx.shape[-1]
            w = torch.softmax(torch.cat([s_ctx, s_own], dim=-1).float(), dim=-1).to(q.dtype)
            o = torch.einsum("bkgtm,bkmd->bkgtd", w[..., :M], ctx_v) + torch.einsum(
                "bkgtj,bktjd->bkgtd", w[..., M:], vs
            )
        else:
            w = torch.softmax(s_own.float(), dim=-1).to(q.dtype)
            o = torch.einsum("bkgtj,bktjd->bkgtd", w, vs)
        o = o.reshape(B, self.nh, T, self.D).transpose(1, 2).reshape(B, T, self.nh * self.D)
        x = x + self.post_attention_layernorm(self.o_proj(o))
        h = self.pre_feedforward_layernorm(x)
        h = self.down_proj(F.gelu(self.gate_proj(h), approximate="tanh") * self.up_proj(h))
        return x + self.post_feedforward_layernorm(h)


class MTPHead(nn.Module):
    """The drafter's own weights (the tied embedding stays in the target)."""

    def __init__(self, cfg: MTPConfig) -> None:
        super().__init__()
        H = cfg.hidden_size
        self.cfg = cfg
        self.start_state = nn.Parameter(torch.zeros(H))  # stands in for a missing target hidden state
        self.emb_norm = RMSNorm(H, cfg.rms_norm_eps)
        self.hid_norm = RMSNorm(H, cfg.rms_norm_eps)
        self.pre_proj = nn.Linear(2 * H, H, bias=False)
        self.layers = nn.ModuleList(DrafterLayer(cfg) for _ in range(cfg.num_layers))
        self.post_proj = nn.Linear(H, H, bias=False)
        self.final_norm = RMSNorm(H, cfg.rms_norm_eps)
        self.register_buffer("candidates", torch.arange(cfg.num_candidates, dtype=torch.long))
        if cfg.num_clusters:
            # scores the clusters of the non-static vocabulary; token_cluster: cluster id per token (-1: static)
            self.cluster_proj = nn.Linear(H, cfg.num_clusters, bias=False)
            self.register_buffer("token_cluster", torch.full((cfg.vocab_size,), -1, dtype=torch.int16))
            nn.init.normal_(self.cluster_proj.weight, std=0.02)
        nn.init.normal_(self.pre_proj.weight, std=0.02)
        nn.init.eye_(self.post_proj.weight)

    def init_from_target(self, target) -> None:
        """Copy the target's last full-attention layer into every drafter layer and the
        target's final norm into ``final_norm`` (a warm start, not a requirement)."""
        base = text_model(target)
        src = base.layers[self.cfg.attn_layer]
        with torch.no_grad():
            for layer in self.layers:
                for name in ("q_proj", "k_proj", "v_proj", "o_proj", "q_norm", "k_norm"):
                    getattr(layer, name).load_state_dict(getattr(src.self_attn, name).state_dict())
                for name in ("gate_proj", "up_proj", "down_proj"):
                    getattr(layer, name).load_state_dict(getattr(src.mlp, name).state_dict())
                for name in (
                    "input_layernorm",
                    "post_attention_layernorm",
                    "pre_feedforward_layernorm",
                    "post_feedforward_layernorm",
                ):
                    getattr(layer, name).load_state_dict(getattr(src, name).state_dict())
            self.final_norm.load_state_dict(base.norm.state_dict())

    def step(self, emb, state, positions, ctx_k, ctx_v, ctx_mask, own: list[tuple[list, list]]):
        """One draft step for B×T independent chains.

        emb, state: [B, T, H]; positions: [B, T] (the query position = position of the
        input token); own: per layer (keys, values) lists of this call's earlier steps.
        Returns the new state [B, T, H]: the drafter's prediction of the target's
        final-norm hidden state at the input token's position (the same space as
        ``TargetState.hidden``, so it is fed back as the next step's state).
        """
        x = self.pre_proj(torch.cat([self.emb_norm(emb), self.hid_norm(state)], dim=-1))
        cos, sin = rope_cos_sin(positions, self.cfg.head_dim, self.cfg.rope_theta, x.dtype)
        use_ctx = self.cfg.attend == "target"
        for layer, (ok, ov) in zip(self.layers, own):
            x = layer(x, cos, sin, ctx_k if use_ctx else None, ctx_v if use_ctx else None, ctx_mask, ok, ov)
        return self.final_norm(self.post_proj(x))

    def cluster_tokens(self, states: torch.Tensor, members: torch.Tensor) -> torch.Tensor:
        """Token ids [T, m*S] of the ``clusters_per_step`` best clusters of each state [T, H]
        (-1 pads short clusters); members: ``cluster_members`` of this head."""
        best = self.cluster_proj(states).topk(self.cfg.clusters_per_step, dim=-1).indices  # [T, m]
        return members[best].reshape(states.shape[0], -1)

    def logits(self, state: torch.Tensor, cand_emb: torch.Tensor) -> torch.Tensor:
        """Candidate logits [..., N] from a state [..., H] and E[candidates] [N, H] (tied head)."""
        return state @ cand_emb.t()


def unrolled_states(head: MTPHead, emb, hidden, ctx_k, ctx_v, steps: int) -> list[torch.Tensor]:
    """Training/evaluation form of ``steps`` draft steps for every start position at once.

    emb: [B, T, H] target input embeddings of the sequence tokens x_0..x_{T-1};
    hidden: [B, T, H] target final-norm hidden states h_0..h_{T-1};
    ctx_k/ctx_v: [B, nkv, T, D] the target's K/V (RoPE applied) of ``cfg.attn_layer``.
    Chain n starts from state h_{n-1} (``start_state`` for n = 0) and token x_n at
    position n and reads target keys 0..n-1, exactly what ``MTPDrafter.propose`` sees
    with committed = x_0..x_n; step j feeds token x_{n+j-1} (teacher forcing of the
    tokens, which equal the drafts whenever those are accepted) and the drafter's
    own previous state.  Returns [s_1, ..., s_steps], each [B, T, H]; s_j predicts
    x_{n+j}, so its target distribution is the target's at position n+j-1.
    """
    B, T, H = emb.shape
    dev = emb.device
    s = torch.cat([head.start_state.to(hidden.dtype).expand(B, 1, H), hidden[:, :-1]], dim=1)
    n = torch.arange(T, device=dev)
    ctx_mask = n[None, :] < n[:, None]  # [T(query chain), M(key)]: key m < n
    own = [([], []) for _ in head.layers]
    out = []
    for j in range(1, steps + 1):
        e = emb[:, j - 1 :]
        if j > 1:
            e = torch.cat([e, emb.new_zeros(B, j - 1, H)], dim=1)
        pos = (n + j - 1).unsqueeze(0).expand(B, T)
        s = head.step(e, s, pos, ctx_k, ctx_v, ctx_mask, own)
        out.append(s)
    return out


def text_model(target):
    """The decoder stack (``.layers``, ``.norm``, ``.embed_tokens``) of a causal LM."""
    m = target.model if hasattr(target, "model") else target
    if hasattr(m, "language_model"):
        m = m.language_model
    return m


def cluster_members(token_cluster: torch.Tensor, k: int) -> torch.Tensor:
    """The token ids of every cluster as [k, S] (S = largest cluster; -1 pads shorter ones)."""
    tc = token_cluster.long()
    ids = torch.nonzero(tc >= 0).squeeze(-1)
    order = torch.argsort(tc[ids], stable=True)
    ids, cl = ids[order], tc[ids][order]
    sizes = torch.bincount(cl, minlength=k)
    S = int(sizes.max()) if sizes.numel() else 0
    start = torch.cumsum(sizes, 0) - sizes
    slot = torch.arange(ids.numel()) - start[cl]
    members = torch.full((k, max(S, 1)), -1, dtype=torch.long)
    members[cl, slot] = ids
    return members
