"""A Gemma-4-style multi-token-prediction (MTP) drafter for a Gemma 3 target.

``MTPDrafter`` drives the MTP head (``playground.drafters.mtp_head``: one step reads the
newest token's embedding, a state and the target's K/V, and predicts the target's next
final hidden state) from the target's ``TargetState`` and turns its output into drafts.

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

Design decisions, measured on Gemma 3 270M (bf16) on the project's 2-core CPU
(the head's own — attention source, initialisation, state — are in ``mtp_head``):

* Candidates.  N = 8192 static tokens ranked by the target's next-token mass
  over its own training text, plus every other token of the committed context
  (greedy text repeats its prompt's rare words): held-out argmax coverage
  0.90 -> 0.96.  N = 16384 would add ~1.4 points for ~3 % more target-step cost.
* Cost.  One draft step (1 layer, N = 8192) is ~4 % of a single-token target
  step on the same machine (see the model card for the measured numbers).

This module does not define the head (``playground.drafters.mtp_head``), does not read or
write weight files (``playground.drafters.mtp_weights``), does not train the head
(``tools.training.train_drafter``) and does not verify or sample target tokens
(``playground.decoding.engine``).
"""

from __future__ import annotations

import math
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from playground.decoding.batch_pass import text_config
from playground.decoding.draft import Draft, TargetState, TreeDraft, token_id_set
from playground.decoding.draft_stop import ChainStop, draft_confidence
from playground.decoding.sampling import SamplingParams, draw_draft_token, logits_to_probs
from playground.decoding.tree import ROOT, DraftTree
from playground.decoding.tree_grow import grow_level
from playground.drafters.base import BaseDrafter
from playground.drafters.mtp_head import MTPHead, cluster_members, text_model
from playground.drafters.mtp_weights import DEFAULT_WEIGHTS, shared_head, weight_files
from playground.validate import draft_stop as check_stop_below


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


@dataclass(frozen=True)
class _HeadInputs:
    """What a draft starts from: the head's first state and the target's K/V for the committed context."""

    state: torch.Tensor  # [1, 1, H]: the target's hidden state before the newest token, or the learned start
    hidden_from: int | None  # the position that hidden state came from (None: the learned start)
    ctx_k: torch.Tensor | None  # [1, nkv, M, D] in the drafter's dtype, None when the cache has nothing
    ctx_v: torch.Tensor | None

    @property
    def n_keys(self) -> int:
        return 0 if self.ctx_k is None else int(self.ctx_k.shape[-2])


class MTPDrafter(BaseDrafter):
    """Drafter kind ``"mtp"``: the MTP head driven by the target's hidden state and K/V."""

    name = "mtp"
    needs_target_hidden = True
    branches = True
    stops_early = True

    def __init__(
        self,
        target,
        head: MTPHead,
        eos_token_ids=(),
        argmax: bool = False,
        context_candidates: bool = True,
        stop_below: float = 0.0,
    ) -> None:
        """target: the target causal LM (its tied embedding is the drafter's input and
        output table); head: trained ``MTPHead``; eos_token_ids: drafting stops after one;
        argmax=True drafts the argmax at every temperature (q one-hot, like Gemma 4's
        assistant), default samples from q; stop_below: a chain stops early once the head's
        confidence in it falls below this (``playground.decoding.draft_stop``; 0: always γ drafts)."""
        self.target = target
        self.argmax = argmax
        self.stop_below = check_stop_below(stop_below)
        base = text_model(target)
        self.embed = base.embed_tokens  # scaled embedding (Gemma multiplies by sqrt(H))
        weight = self.embed.weight
        self.dtype = weight.dtype
        first = next(head.parameters())
        if (first.dtype, first.device) != (self.dtype, weight.device):  # a shared head is already both
            head = head.to(device=weight.device, dtype=self.dtype)
        self.head = head.eval() if head.training else head
        cfg = head.cfg
        self.cfg = cfg
        self.vocab_size = int(weight.shape[0])
        fixed = _fixed_tables(head, weight)
        self.static_candidates = fixed.candidates
        self.static_emb = fixed.emb
        self.in_static = fixed.in_static
        self.members = fixed.members
        self.context_candidates = context_candidates
        self._reset_context()
        self.eos = token_id_set(eos_token_ids)
        self.last_ms_per_token: float | None = None

    @classmethod
    def from_pretrained(
        cls,
        target,
        path: str | Path = DEFAULT_WEIGHTS,
        eos_token_ids=None,
        argmax: bool = False,
        context_candidates: bool = True,
        stop_below: float = 0.0,
    ) -> MTPDrafter:
        """Load shipped weights (``config.json`` + ``model*.safetensors``) for ``target``."""
        weight = text_model(target).embed_tokens.weight
        head = shared_head(path, weight.dtype, weight.device)  # read-only, one per weights file and dtype
        cfg = text_config(target)
        if head.cfg.hidden_size != cfg.hidden_size or head.cfg.vocab_size != cfg.vocab_size:
            raise ValueError(f"MTP weights in {path} were trained for another target ({head.cfg.target})")
        if eos_token_ids is None:
            eos_token_ids = set()
            for src in (cfg, getattr(target, "generation_config", None)):
                e = getattr(src, "eos_token_id", None)
                if e is not None:
                    eos_token_ids |= set(e) if isinstance(e, (list, tuple)) else {e}
        return cls(
            target,
            head,
            sorted(eos_token_ids),
            argmax=argmax,
            context_candidates=context_candidates,
            stop_below=stop_below,
        )

    # -- candidate set: N static tokens + the committed context's other tokens ----------
    def _reset_context(self) -> None:
        self._scanned: list[int] = []  # committed ids already scanned for candidates
        self._extra: list[int] = []
        self._extra_set: set[int] = set()
        self.candidates = self.static_candidates
        self.cand_emb = self.static_emb
        self._room: tuple[torch.Tensor, torch.Tensor] | None = None  # (embedding rows, ids) with room to grow
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
            self._append_candidates(ids)

    EXTRA_ROOM = 256  # context candidates a run's table has room for before it grows (doubling)

    def _append_candidates(self, ids: torch.Tensor) -> None:
        """Append ``ids`` and their embedding rows to the candidate table in place.

        ``cand_emb`` is a prefix view of a buffer with room for more rows: the 8192 static
        rows (10 MB in bfloat16) are copied once per run, not again with every new context
        token as a ``torch.cat`` would (at T = 1, where sampled text brings a new rare token
        every other draft, that copy was a sixth of a draft step's time).  The view has the
        layout of a fresh tensor of its size, so the head's scores are the same bits."""
        n, need = self.candidates.numel(), self.candidates.numel() + ids.numel()
        if self._room is None or need > self._room[0].shape[0]:
            cap = need + max(self.EXTRA_ROOM, need - self.static_candidates.numel())
            emb = self.cand_emb.new_empty(cap, self.cand_emb.shape[1])  # [cap, H]
            cand = self.candidates.new_empty(cap)  # [cap]
            emb[:n], cand[:n] = self.cand_emb, self.candidates
            self._room = (emb, cand)
        emb, cand = self._room
        emb[n:need] = self.embed.weight.detach()[ids]
        cand[n:need] = ids
        self.cand_emb, self.candidates = emb[:need], cand[:need]

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
        # index_select + bmm: ~5x faster here than fancy indexing + einsum (which made
        # scoring 8 clusters cost more than the 8,192 static candidates)
        rows = self.embed.weight.detach().index_select(0, mem.reshape(-1)).view(T, mem.shape[1], -1)  # [T, m*S, H]
        more = torch.bmm(rows, states.to(rows.dtype).unsqueeze(-1)).squeeze(-1)  # [T, m*S]
        more = more.to(logits.dtype).masked_fill(~ok, float("-inf"))
        return torch.cat([logits, more], dim=-1), torch.cat([ids, mem], dim=-1)

    # -- protocol --------------------------------------------------------------------
    def start(self, state: TargetState) -> None:
        self.last_ms_per_token = None
        self._reset_context()

    # accept, cache_len: BaseDrafter's (nothing to roll back: the state is rebuilt from the target on every propose)

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
        pos = len(committed) - 1  # position of the newest committed token (the first input)
        start = self._head_inputs(state, pos)
        s, ctx_k, ctx_v = start.state, start.ctx_k, start.ctx_v
        own = [([], []) for _ in self.head.layers]
        tok = int(committed[-1])
        deterministic = params.greedy or self.argmax
        tokens: list[int] = []
        rows: list[torch.Tensor] = []  # q rows (sampled drafts) or softmax rows (argmax drafts)
        stop = ChainStop(self.stop_below)
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
            # decided from the drafts already drawn, before the next is drawn: lossless
            if stop.active and j + 1 < gamma and stop.after(draft_confidence(logits[0], probs)):
                break
        ms = (time.perf_counter() - t0) * 1000.0
        self.last_ms_per_token = ms / len(tokens)
        info = {**self._info(start.hidden_from, start.n_keys, len(tokens)), **stop.info()}
        return Draft.drawn(tokens, rows, deterministic, info=info, forward_calls=len(tokens))

    @torch.no_grad()
    def propose_tree(
        self,
        state: TargetState,
        max_nodes: int,
        max_depth: int,
        params: SamplingParams,
        generator: torch.Generator | None,
        branch: int = 4,
    ) -> TreeDraft:
        """A dynamic tree, built one depth at a time (EAGLE-2's rule): every node of the
        current level is expanded in ONE batched head step, and ``ceil(max_nodes / max_depth)``
        children per level go to the nodes with the highest path probability under the head
        (``playground.decoding.tree_grow``: at most ``branch`` per node).  At temperature 0 (or with
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
        start = self._head_inputs(state, pos)
        ctx_k, ctx_v = start.ctx_k, start.ctx_v
        sample = not (params.greedy or self.argmax)
        per_level = max(1, math.ceil(max_nodes / max_depth))
        tokens: list[int] = []
        parents: list[int] = []
        rows: list[torch.Tensor] = []  # q rows [V] of sampled nodes
        # the level being expanded: (node index, input token, path score); states [1, T, H]
        level = [(ROOT, int(committed[-1]), 1.0)]
        states = start.state
        own = [([], []) for _ in self.head.layers]  # per layer: earlier levels' keys, each [1, nkv, T, D]
        steps = 0
        stopped = False  # the threshold ended the tree before max_depth
        for depth in range(max_depth):
            if depth > 0 and max(sc for _, _, sc in level) < self.stop_below:
                stopped = True  # no child could reach the threshold: skip the head step too
                break
            T = len(level)
            emb = self.embed(torch.tensor([[tok for _, tok, _ in level]], device=dev))  # [1, T, H]
            positions = torch.full((1, T), pos + depth, device=dev)
            states = self.head.step(emb, states, positions, ctx_k, ctx_v, None, own)  # [1, T, H]
            steps += 1
            logits, ids = self._score(states[0])  # [T, C]
            probs = logits_to_probs(logits, params) if sample else torch.softmax(logits.float(), dim=-1)
            kids = grow_level(
                [sc for _, _, sc in level],
                probs,
                min(per_level, max_nodes - len(tokens)),
                branch,
                sample,
                generator,
                expandable=[n == ROOT or tok not in self.eos for n, tok, _ in level],
                min_score=self.stop_below if depth > 0 else 0.0,  # the root's children are always drafted
            )
            if not kids:  # the threshold cut every slot, unless no node could have children (EOS)
                stopped = (
                    depth > 0 and self.stop_below > 0.0 and any(n == ROOT or t not in self.eos for n, t, _ in level)
                )
                break
            level = self._add_children(kids, ids, level, tokens, parents, rows)
            # A child with path score 0 gets no children (tree_grow: a later sibling, when sampling):
            # the next head step leaves it out.
            live = [j for j, (_, _, score) in enumerate(level) if score > 0.0]
            level = [level[j] for j in live]
            index = torch.tensor([kids[j].slot for j in live], device=dev)
            states = states.index_select(1, index)
            own = [([k.index_select(2, index) for k in ks], [v.index_select(2, index) for v in vs]) for ks, vs in own]
            if len(tokens) >= max_nodes or not level:
                break
        ms = (time.perf_counter() - t0) * 1000.0
        self.last_ms_per_token = ms / max(1, len(tokens))
        info = {**self._info(start.hidden_from, start.n_keys, steps), "tree_nodes": len(tokens)}
        if self.stop_below > 0.0:
            info |= {"draft_stop": self.stop_below, "stopped_early": stopped}
        draft_probs = torch.stack(rows).cpu() if sample and rows else None  # [n, V]
        return TreeDraft(tree=DraftTree(tuple(tokens), tuple(parents), draft_probs), info=info, forward_calls=steps)

    def _add_children(self, kids, ids, level, tokens: list[int], parents: list[int], rows: list) -> list:
        """Append one level's children (``tree_grow.grow_level``'s picks) to the tree's tokens, parents
        and q rows; returns the next level to expand: (node index, token, path score) per child."""
        new_level = []
        for kid in kids:
            tok = int(ids[kid.slot, kid.index])  # ids [T, C]: each expanded node's candidate ids
            new_level.append((len(tokens), tok, kid.score))
            tokens.append(tok)
            parents.append(level[kid.slot][0])
            if kid.row is not None:
                rows.append(self._scatter(kid.row.to(ids.device), ids[kid.slot]))  # [V]
        return new_level

    def _head_inputs(self, state: TargetState, pos: int) -> _HeadInputs:
        """The head's first state and the target's K/V for a draft whose first input sits at ``pos``.

        ``pos`` is also the number of committed tokens in the target cache (all but the newest)."""
        if state.hidden is not None:
            s0 = state.hidden.reshape(1, 1, -1).to(device=self.cand_emb.device, dtype=self.dtype)
            hidden_from = pos - 1
        else:
            s0 = self.head.start_state.reshape(1, 1, -1)
            hidden_from = None
        ctx_k, ctx_v = target_kv(state.target_cache, self.cfg.attn_layer, pos)
        if ctx_k is not None:
            ctx_k, ctx_v = ctx_k.to(self.dtype), ctx_v.to(self.dtype)
        return _HeadInputs(s0, hidden_from, ctx_k, ctx_v)

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
            "candidates_scored": int(self.candidates.numel())
            + (0 if self.members is None else self.cfg.clusters_per_step * int(self.members.shape[1])),
            "context_candidates": len(self._extra),
            "vocab_size": self.vocab_size,
            "target_kv_positions": n_keys,
            "draft_steps": n,
            "draft_ms_per_token": None if self.last_ms_per_token is None else round(self.last_ms_per_token, 3),
        }


def load_mtp_drafter(
    target, preset=None, argmax: bool = False, eos_token_ids=None, stop_below: float = 0.0
) -> MTPDrafter:
    """The shipped MTP drafter for ``target``.

    preset: a ``playground.config.Preset`` (its ``drafter_weights`` is a directory relative
    to the repository root), a path to a weights directory, or None for the default
    ``playground/weights/gemma3-270m-mtp``.  stop_below: the run's early-stop threshold
    (``playground.drafters.registry`` resolves it from the run's settings and the preset).
    """
    path = DEFAULT_WEIGHTS
    if isinstance(preset, (str, Path)):
        path = Path(preset)
    elif preset is not None and getattr(preset, "drafter_weights", None):
        path = Path(__file__).resolve().parent.parent.parent / preset.drafter_weights
    weight_files(path)  # a clear FileNotFoundError before anything loads
    return MTPDrafter.from_pretrained(target, path, eos_token_ids=eos_token_ids, argmax=argmax, stop_below=stop_below)


@dataclass(frozen=True)
class _Fixed:
    """What a drafter reads of its head and the target's embedding and never writes."""

    candidates: torch.Tensor  # [N] static candidate ids
    emb: torch.Tensor  # [N, H] their rows of the tied embedding: the sparse output head
    in_static: torch.Tensor  # [V] bool, True at the candidates
    members: torch.Tensor | None  # [K, S] each cluster's tokens (-1 pads), scored per step


_FIXED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # head -> (its target embedding, _Fixed)
_FIXED_LOCK = threading.Lock()


def _fixed_tables(head: MTPHead, weight: torch.Tensor) -> _Fixed:
    """The candidate tables of ``head`` over the embedding ``weight``, built once per pair and
    shared read-only by every drafter (one per run: gathering 8192 embedding rows per run cost
    about 2 ms, most of a drafter's construction, and the lab builds one per continuation)."""
    with _FIXED_LOCK:
        known = _FIXED.get(head)
        if known is not None and known[0]() is weight:
            return known[1]
        vocab = int(weight.shape[0])
        cand = head.candidates.to(weight.device)
        if int(cand.max()) >= vocab:
            raise ValueError("candidate ids exceed the target vocabulary: weights for another target?")
        in_static = torch.zeros(vocab, dtype=torch.bool, device=weight.device)
        in_static[cand] = True
        n_clusters = head.cfg.num_clusters
        members = cluster_members(head.token_cluster, n_clusters).to(weight.device) if n_clusters else None
        fixed = _Fixed(cand, weight.detach()[cand], in_static, members)
        _FIXED[head] = (weakref.ref(weight), fixed)
        return fixed
