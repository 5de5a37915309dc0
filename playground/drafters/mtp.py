"""A Gemma-4-style multi-token-prediction (MTP) drafter for a Gemma 3 target.

One draft step (all tensors are the target's dtype; H = target hidden size):

    x  = pre_proj( [ norm_e(embed(token)) ; norm_h(state) ] )        2H -> H
    x  = decoder layer(s) (Gemma 3 layout: sandwich norms, q/k norms, GeLU MLP);
         attention reads the target's own K/V of its last full-attention layer
         (the committed context, read-only) plus the drafter's keys for the
         draft steps of this call
    s' = final_norm(post_proj(x))       H -> H: predicted target final hidden state, fed back
    logits = s' @ E[candidates]^T                                   sparse tied head

``state`` starts as the target's final-norm hidden state at the position
before the newest committed token (``TargetState.hidden``) — a learned start
vector if there is none (one-token prompt) — and is then the drafter's own
output ``s'``: each step conditions on the previous step's prediction, as in
Gemma 4's assistant and EAGLE.  The output head is the target's tied
embedding restricted to ``N`` candidate tokens (the tokens that carried the
most target probability mass in the training text), so a step scores N rows
instead of 262k.  Tokens outside the candidate set have q = 0: they are
never drafted (the target still emits them, through the residual or bonus).

Exactness: the drafted token is drawn from ``logits_to_probs(candidate
logits, params)`` — temperature / top-k / top-p applied over the candidate
set — and that very distribution is scattered into a full-vocabulary row of
``draft_probs`` (zeros elsewhere).  At temperature 0 the draft is the
argmax and ``draft_probs`` is None (point masses).

The drafter keeps no cache across calls: it rebuilds its state from
``TargetState`` (hidden state + target K/V) on every ``propose``, so rollback
after a rejection is free (``accept`` only records statistics).

Design decisions, measured on Gemma 3 270M (bf16) on the project's 2-core CPU:

* Attention source.  The drafter layer reads the target's own K/V of its last
  full-attention layer (layer 17: one KV head, 256 dims, RoPE already applied)
  for the committed context, plus its own keys for this call's draft steps.
  Against the same layer attending only to its own draft keys ("none"), after
  50 identical training steps: training top-1 0.42 vs 0.31, held-out greedy
  acceptance at position 1 0.226 vs 0.199.  The cost is one dot product per
  context key (one KV head): negligible next to the MLP and the sparse head.
  No drafter cache is kept across calls, so there is nothing to roll back.
* Initialisation.  Copying the target's layer 17 (and final norm) into the
  drafter started at a loss of ~130 and learned slowly (top-1 0.27 after 25
  steps overfitting four sequences) against random init (0.98): random init.
* State.  The step output is the drafter's prediction of the target's
  final-norm hidden state (trained with a regression loss next to the KL), so
  the recurrent input lives in the same space as ``TargetState.hidden``.
* Candidates.  N = 8192 static tokens ranked by the target's next-token mass
  over its own training text, plus every other token of the committed context
  (greedy text repeats its prompt's rare words): held-out argmax coverage
  0.90 -> 0.96.  N = 16384 would add ~1.4 points for ~3 % more target-step cost.
* Cost.  One draft step (1 layer, N = 8192) is ~4 % of a single-token target
  step on the same machine (see the model card for the measured numbers).

This module does not train the head (``playground.train_drafter``) and does
not verify or sample target tokens (``playground.engine``).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from playground.drafters.base import Draft, TargetState, TreeDraft, token_id_set
from playground.mtp_clusters import cluster_members
from playground.sampling import SamplingParams, draw_draft_token, logits_to_probs
from playground.tree import ROOT, DraftTree
from playground.tree_grow import grow_level

DEFAULT_WEIGHTS = Path(__file__).resolve().parent.parent / "weights" / "gemma3-270m-mtp"


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
    def from_target(cls, config, **overrides) -> "MTPConfig":
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
    def from_dict(cls, d: dict[str, Any]) -> "MTPConfig":
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
        (-1 pads short clusters); members: ``mtp_clusters.cluster_members`` of this head."""
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


# --------------------------------------------------------------------------------------
# persistence


# Hugging Face refuses git pushes of non-LFS files over 10 MB (a Space is a git repo), so
# weights are written in shards below this size; the bytes are the same as one file.
MAX_SHARD_BYTES = 8_000_000


INT8_MIN_NUMEL = 65_536  # matrices at least this large are stored as int8 rows when asked


def quantize_rows(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int8 per output row: (q [out, in] int8, scale [out] bf16); w ~ q * scale."""
    scale = (w.float().abs().amax(dim=1) / 127.0).clamp_min(1e-12).to(torch.bfloat16)
    q = torch.round(w.float() / scale.float()[:, None]).clamp(-127, 127).to(torch.int8)
    return q, scale


def save_head(head: MTPHead, out_dir: str | Path, dtype: torch.dtype = torch.bfloat16,
              max_shard_bytes: int = MAX_SHARD_BYTES, int8: bool = False) -> Path:
    """Write ``config.json`` and the weights as ``model-0000i-of-0000n.safetensors`` shards,
    each under ``max_shard_bytes`` (one tensor larger than that gets a shard of its own).

    int8=True stores every matrix of at least ``INT8_MIN_NUMEL`` entries as int8 rows with
    a bf16 scale per row (``NAME.q8`` + ``NAME.scale``), half the bytes of bf16; the drafter
    then runs on the dequantised weights, and its acceptance is measured on those."""
    from safetensors.torch import save_file

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tensors: dict[str, torch.Tensor] = {}
    for k, v in head.state_dict().items():
        v = v.detach().cpu().contiguous()
        if int8 and v.is_floating_point() and v.dim() == 2 and v.numel() >= INT8_MIN_NUMEL:
            tensors[k + ".q8"], tensors[k + ".scale"] = quantize_rows(v)
        else:
            tensors[k] = v if not v.is_floating_point() else v.to(dtype)
    shards: list[dict[str, torch.Tensor]] = [{}]
    size = 0
    for k, v in tensors.items():
        nbytes = v.numel() * v.element_size()
        if shards[-1] and size + nbytes > max_shard_bytes:
            shards.append({})
            size = 0
        shards[-1][k] = v
        size += nbytes
    for old in weight_files(out, missing_ok=True):
        old.unlink()
    for i, sd in enumerate(shards, 1):
        save_file(sd, str(out / f"model-{i:05d}-of-{len(shards):05d}.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps({"model_type": "playground-mtp", **head.cfg.to_dict()}, indent=2))
    return out


def weight_files(path: str | Path, missing_ok: bool = False) -> list[Path]:
    """The weight files in ``path``: ``model.safetensors`` or every shard of
    ``model-*-of-N.safetensors`` (all N of them, or FileNotFoundError)."""
    path = Path(path)
    single = path / "model.safetensors"
    shards = sorted(path.glob("model-*-of-*.safetensors"))
    files = ([single] if single.exists() else []) + shards
    if missing_ok:
        return files
    if single.exists() and shards:
        raise FileNotFoundError(f"{path} holds both model.safetensors and shards: keep one")
    if shards:
        n = int(shards[0].stem.rsplit("-of-", 1)[1])
        expected = [path / f"model-{i:05d}-of-{n:05d}.safetensors" for i in range(1, n + 1)]
        if shards != expected:
            raise FileNotFoundError(f"{path}: expected {n} weight shards, found {len(shards)}")
    if not files:
        raise FileNotFoundError(f"MTP drafter weights not found at {path} (train: python -m playground train-drafter)")
    return files


def load_head(path: str | Path = DEFAULT_WEIGHTS, dtype: torch.dtype = torch.float32) -> MTPHead:
    from safetensors.torch import load_file

    path = Path(path)
    cfg = MTPConfig.from_dict(json.loads((path / "config.json").read_text()))
    head = MTPHead(cfg)
    sd: dict[str, torch.Tensor] = {}
    for f in weight_files(path):
        sd.update(load_file(str(f)))
    for k in [k for k in sd if k.endswith(".q8")]:  # int8 rows (save_head(int8=True))
        name = k[: -len(".q8")]
        sd[name] = sd.pop(k).float() * sd.pop(name + ".scale").float()[:, None]
    head.load_state_dict(sd)
    return head.to(dtype).eval()


# --------------------------------------------------------------------------------------
# the drafter


def target_kv(cache, layer: int, n_ctx: int):
    """(keys, values) [1, nkv, M, D] of one target layer for the committed context (at most
    the first n_ctx cached positions), or (None, None) if the cache has nothing there."""
    if cache is None or n_ctx <= 0:
        return None, None
    try:
        lay = cache.layers[layer]
    except (AttributeError, IndexError):
        return None, None
    k, v = getattr(lay, "keys", None), getattr(lay, "values", None)
    if k is None or k.dim() != 4 or k.shape[-2] == 0:
        return None, None
    cum = getattr(lay, "cumulative_length", None)
    total = int(cum) if isinstance(cum, int) and cum >= k.shape[-2] else k.shape[-2]
    # a full layer holds positions 0..total-1; a sliding one the last k.shape[-2] of them
    extra = total - n_ctx  # positions beyond the committed context (should be 0)
    if extra > 0:
        k, v = k[..., : k.shape[-2] - extra, :], v[..., : v.shape[-2] - extra, :]
    return k, v


class MTPDrafter:
    """Drafter kind ``"mtp"``: the MTP head driven by the target's hidden state and K/V."""

    name = "mtp"
    needs_target_hidden = True

    def __init__(
        self, target, head: MTPHead, eos_token_ids=(), argmax: bool = False, context_candidates: bool = True
    ) -> None:
        """target: the target causal LM (its tied embedding is the drafter's input and
        output table); head: trained ``MTPHead``; eos_token_ids: drafting stops after one;
        argmax=True drafts the argmax at every temperature (q one-hot, like Gemma 4's
        assistant), default samples from q."""
        self.target = target
        self.argmax = argmax
        base = text_model(target)
        self.embed = base.embed_tokens  # scaled embedding (Gemma multiplies by sqrt(H))
        weight = self.embed.weight
        self.dtype = weight.dtype
        self.head = head.to(device=weight.device, dtype=self.dtype).eval()
        cfg = head.cfg
        self.cfg = cfg
        self.vocab_size = int(weight.shape[0])
        cand = head.candidates.to(weight.device)
        if int(cand.max()) >= self.vocab_size:
            raise ValueError("candidate ids exceed the target vocabulary: weights for another target?")
        self.static_candidates = cand
        self.static_emb = weight.detach()[cand]  # [N, H] sparse output head (tied embedding rows)
        self.in_static = torch.zeros(self.vocab_size, dtype=torch.bool, device=weight.device)
        self.in_static[cand] = True
        # clusters of the rest of the vocabulary: members [K, S] (-1 pads), scored per step
        self.members = (cluster_members(head.token_cluster, cfg.num_clusters).to(weight.device)
                        if cfg.num_clusters else None)
        self.context_candidates = context_candidates
        self._reset_context()
        self.eos = token_id_set(eos_token_ids)
        self.last_ms_per_token: float | None = None

    @classmethod
    def from_pretrained(
        cls, target, path: str | Path = DEFAULT_WEIGHTS, eos_token_ids=None, argmax: bool = False,
        context_candidates: bool = True,
    ) -> "MTPDrafter":
        """Load shipped weights (``config.json`` + ``model*.safetensors``) for ``target``."""
        head = load_head(path, dtype=torch.float32)
        cfg = target.config.get_text_config() if hasattr(target.config, "get_text_config") else target.config
        if head.cfg.hidden_size != cfg.hidden_size or head.cfg.vocab_size != cfg.vocab_size:
            raise ValueError(f"MTP weights in {path} were trained for another target ({head.cfg.target})")
        if eos_token_ids is None:
            eos_token_ids = set()
            for src in (cfg, getattr(target, "generation_config", None)):
                e = getattr(src, "eos_token_id", None)
                if e is not None:
                    eos_token_ids |= set(e) if isinstance(e, (list, tuple)) else {e}
        return cls(target, head, sorted(eos_token_ids), argmax=argmax, context_candidates=context_candidates)

    # -- candidate set: N static tokens + the committed context's other tokens ----------
    def _reset_context(self) -> None:
        self._scanned: list[int] = []  # committed ids already scanned for candidates
        self._extra: list[int] = []
        self._extra_set: set[int] = set()
        self.candidates = self.static_candidates
        self.cand_emb = self.static_emb
        self.in_extra = torch.zeros_like(self.in_static)  # context tokens already among the candidates

    def _update_context(self, committed: list[int]) -> None:
        """Add the committed tokens outside the static set to the candidates: greedy text
        often repeats a rare token of its own context (a name, a number)."""
        if not self.context_candidates:
            return
        n = len(self._scanned)
        if len(committed) < n or committed[:n] != self._scanned:
            self._reset_context()  # another sequence (start() not called) or rolled back
            n = 0
        new = [int(t) for t in committed[n:]]
        self._scanned = list(committed)
        add = []
        for t in new:
            if 0 <= t < self.vocab_size and not self.in_static[t] and t not in self._extra_set:
                self._extra_set.add(t)
                self._extra.append(t)
                add.append(t)
        if add:
            ids = torch.tensor(add, dtype=torch.long, device=self.static_emb.device)
            self.in_extra[ids] = True
            self.candidates = torch.cat([self.candidates, ids])
            self.cand_emb = torch.cat([self.cand_emb, self.embed.weight.detach()[ids]])

    def _score(self, states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits and their token ids for T draft states [T, H]: both [T, C].

        The columns are the static candidates and the context's other tokens (the same for
        every row), then, with clusters, the tokens of each row's ``clusters_per_step``
        best-scored clusters (a token already in the context part gets -inf there, so no
        token has two columns).  A drafted token is ``ids[row, column]``."""
        T = states.shape[0]
        logits = self.head.logits(states, self.cand_emb)  # [T, N+X]
        ids = self.candidates.expand(T, -1)
        if self.members is None:
            return logits, ids
        mem = self.head.cluster_tokens(states, self.members)  # [T, m*S]
        ok = mem >= 0
        mem = mem.clamp_min(0)
        ok &= ~self.in_extra[mem]
        rows = self.embed.weight.detach()[mem]  # [T, m*S, H]
        more = torch.einsum("th,tch->tc", states, rows).masked_fill(~ok, float("-inf"))
        return torch.cat([logits, more], dim=-1), torch.cat([ids, mem], dim=-1)

    # -- protocol --------------------------------------------------------------------
    def start(self, state: TargetState) -> None:
        self.last_ms_per_token = None
        self._reset_context()

    def accept(self, n_accepted: int, state: TargetState) -> None:
        """Nothing to roll back: the state is rebuilt from the target on every propose."""

    def cache_len(self) -> int | None:
        return None

    @torch.no_grad()  # not inference_mode: the candidate tables it builds stay ordinary tensors
    def propose(
        self, state: TargetState, gamma: int, params: SamplingParams, generator: torch.Generator | None
    ) -> Draft:
        committed = state.committed_ids
        if gamma <= 0 or not committed:
            return Draft(token_ids=[], draft_probs=None, info=self._info(None, 0, 0))
        t0 = time.perf_counter()
        self._update_context(committed)
        dev = self.cand_emb.device
        n_ctx = len(committed) - 1  # committed tokens in the target cache
        pos = n_ctx  # position of the newest committed token (the first input)
        if state.hidden is not None:
            s = state.hidden.reshape(1, 1, -1).to(device=dev, dtype=self.dtype)
            hidden_from = pos - 1
        else:
            s = self.head.start_state.reshape(1, 1, -1)
            hidden_from = None
        ctx_k, ctx_v = target_kv(state.target_cache, self.cfg.attn_layer, n_ctx)
        if ctx_k is not None:
            ctx_k, ctx_v = ctx_k.to(self.dtype), ctx_v.to(self.dtype)
        own = [([], []) for _ in self.head.layers]
        tok = int(committed[-1])
        deterministic = params.greedy or self.argmax
        tokens: list[int] = []
        rows: list[torch.Tensor] = []  # q rows (sampled drafts) or softmax rows (argmax drafts)
        for j in range(gamma):
            emb = self.embed(torch.tensor([[tok]], device=dev))
            p = torch.tensor([[pos + j]], device=dev)
            s = self.head.step(emb, s, p, ctx_k, ctx_v, None, own)
            logits, ids = self._score(s[0])  # [1, C]
            idx, probs = draw_draft_token(logits[0], params, self.argmax, generator)
            tok = int(ids[0, idx])
            tokens.append(tok)
            if probs is not None:
                rows.append(self._scatter(probs, ids[0]))
            if tok in self.eos:
                break
        ms = (time.perf_counter() - t0) * 1000.0
        self.last_ms_per_token = ms / len(tokens)
        n_keys = 0 if ctx_k is None else int(ctx_k.shape[-2])
        stacked = torch.stack(rows) if rows else None
        return Draft(
            token_ids=tokens,
            draft_probs=None if deterministic else stacked,
            info=self._info(hidden_from, n_keys, len(tokens)),
            forward_calls=len(tokens),
            soft_probs=stacked if deterministic else None,  # NOT q: for the "softmax-q" lesson only
        )

    @torch.no_grad()
    def propose_tree(self, state: TargetState, max_nodes: int, max_depth: int, params: SamplingParams,
                     generator: torch.Generator | None, branch: int = 4) -> TreeDraft:
        """A dynamic tree, built one depth at a time (EAGLE-2's rule): every node of the
        current level is expanded in ONE batched head step, and ``ceil(max_nodes / max_depth)``
        children per level go to the nodes with the highest path probability under the head
        (``playground.tree_grow``: at most ``branch`` per node).  At temperature 0 (or with
        ``argmax``) the children are the head's top tokens (one-hot q); when sampling they
        are drawn without replacement from the same q a chain draft uses, each row the exact
        law it was drawn from.  Cost: one head step per level, however wide."""
        committed = state.committed_ids
        if max_nodes <= 0 or max_depth <= 0 or not committed:
            return TreeDraft(tree=DraftTree((), ()), info=self._info(None, 0, 0))
        t0 = time.perf_counter()
        self._update_context(committed)
        dev = self.cand_emb.device
        pos = len(committed) - 1
        if state.hidden is not None:
            s0 = state.hidden.reshape(1, 1, -1).to(device=dev, dtype=self.dtype)
            hidden_from = pos - 1
        else:
            s0 = self.head.start_state.reshape(1, 1, -1)
            hidden_from = None
        ctx_k, ctx_v = target_kv(state.target_cache, self.cfg.attn_layer, pos)
        if ctx_k is not None:
            ctx_k, ctx_v = ctx_k.to(self.dtype), ctx_v.to(self.dtype)
        sample = not (params.greedy or self.argmax)
        per_level = max(1, math.ceil(max_nodes / max_depth))
        tokens: list[int] = []
        parents: list[int] = []
        rows: list[torch.Tensor] = []  # q rows [V] of sampled nodes
        # the level being expanded: (node index, input token, path score); states [1, T, H]
        level = [(ROOT, int(committed[-1]), 1.0)]
        states = s0
        own = [([], []) for _ in self.head.layers]  # per layer: earlier levels' keys, each [1, nkv, T, D]
        steps = 0
        for depth in range(max_depth):
            T = len(level)
            emb = self.embed(torch.tensor([[tok for _, tok, _ in level]], device=dev))  # [1, T, H]
            positions = torch.full((1, T), pos + depth, device=dev)
            states = self.head.step(emb, states, positions, ctx_k, ctx_v, None, own)  # [1, T, H]
            steps += 1
            logits, ids = self._score(states[0])  # [T, C]
            probs = logits_to_probs(logits, params) if sample else torch.softmax(logits.float(), dim=-1)
            kids = grow_level([sc for _, _, sc in level], probs, min(per_level, max_nodes - len(tokens)), branch,
                              sample, generator, expandable=[n == ROOT or tok not in self.eos for n, tok, _ in level])
            if not kids:
                break
            new_level = []
            for kid in kids:
                tok = int(ids[kid.slot, kid.index])
                new_level.append((len(tokens), tok, kid.score))
                tokens.append(tok)
                parents.append(level[kid.slot][0])
                if kid.row is not None:
                    rows.append(self._scatter(kid.row.to(ids.device), ids[kid.slot]))
            index = torch.tensor([kid.slot for kid in kids], device=dev)
            states = states.index_select(1, index)
            own = [([k.index_select(2, index) for k in ks], [v.index_select(2, index) for v in vs]) for ks, vs in own]
            level = new_level
            if len(tokens) >= max_nodes:
                break
        ms = (time.perf_counter() - t0) * 1000.0
        self.last_ms_per_token = ms / max(1, len(tokens))
        n_keys = 0 if ctx_k is None else int(ctx_k.shape[-2])
        info = {**self._info(hidden_from, n_keys, steps), "tree_nodes": len(tokens)}
        draft_probs = torch.stack(rows).cpu() if sample and rows else None  # [n, V]
        return TreeDraft(tree=DraftTree(tuple(tokens), tuple(parents), draft_probs), info=info, forward_calls=steps)

    def _scatter(self, probs: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """A distribution over the columns [C] as a full-vocabulary row [V] (zeros elsewhere).

        index_add, not assignment: a masked column (a -inf logit, probability exactly 0)
        may repeat an id, and adding 0 leaves the real column's probability untouched."""
        row = torch.zeros(self.vocab_size, dtype=torch.float32, device=probs.device)
        return row.index_add_(0, ids.to(probs.device), probs.float())

    def _info(self, hidden_from, n_keys: int, n: int) -> dict[str, Any]:
        tcfg = getattr(self.target, "config", None)
        if tcfg is not None and hasattr(tcfg, "get_text_config"):
            tcfg = tcfg.get_text_config()
        n_layers = getattr(tcfg, "num_hidden_layers", None)
        n_layers = int(n_layers) if isinstance(n_layers, int) else None
        layer = int(self.cfg.attn_layer)
        if layer < 0 and n_layers is not None:
            layer += n_layers  # the index target_kv() reads, counted from the front
        return {
            "target_kv_layer": layer,  # the target layer whose K/V the drafter attended to (0-based)
            "target_layers": n_layers,
            "hidden_from_position": hidden_from,
            "candidates_scored": int(self.candidates.numel()) + (
                0 if self.members is None else self.cfg.clusters_per_step * int(self.members.shape[1])),
            "context_candidates": len(self._extra),
            "vocab_size": self.vocab_size,
            "target_kv_positions": n_keys,
            "draft_steps": n,
            "draft_ms_per_token": None if self.last_ms_per_token is None else round(self.last_ms_per_token, 3),
        }


def load_mtp_drafter(target, preset=None, argmax: bool = False, eos_token_ids=None) -> MTPDrafter:
    """The shipped MTP drafter for ``target``.

    preset: a ``playground.config.Preset`` (its ``drafter_weights`` is a directory relative
    to the repository root), a path to a weights directory, or None for the default
    ``playground/weights/gemma3-270m-mtp``.
    """
    path = DEFAULT_WEIGHTS
    if isinstance(preset, (str, Path)):
        path = Path(preset)
    elif preset is not None and getattr(preset, "drafter_weights", None):
        path = Path(__file__).resolve().parent.parent.parent / preset.drafter_weights
    weight_files(path)  # a clear FileNotFoundError before anything loads
    return MTPDrafter.from_pretrained(target, path, eos_token_ids=eos_token_ids, argmax=argmax)
