"""The MTP drafter (playground.drafters.mtp) on a tiny random Gemma 3: no real weights.

Checks: the training-time unrolled form equals what ``propose`` computes step by
step; the drafter's RoPE/keys match the target's cache; q rows are exact (sum to
1, zero outside the candidates, the very distribution the draft was drawn from,
empirically too); greedy returns point masses; a one-token prompt works;
rollback is trivial (stateless); save/load round trip; cost model on the real
Gemma 3 270M geometry; greedy equality through the engine.
"""

from __future__ import annotations

import dataclasses
import os

import pytest
import torch
from transformers import DynamicCache, Gemma3ForCausalLM, Gemma3TextConfig

from playground.decoding.draft import TargetState
from playground.decoding.sampling import SamplingParams, logits_to_probs
from playground.drafters.mtp import MTPDrafter, load_mtp_drafter, target_kv
from playground.drafters.mtp_head import MTPConfig, MTPHead, apply_rope, rope_cos_sin, unrolled_states
from playground.drafters.mtp_weights import load_head, save_head
from tests.contract import (
    assert_argmax_mode,
    assert_greedy_draft_protocol,
    assert_greedy_equals_target,
    assert_q_is_the_sampling_law,
    assert_q_rows,
    assert_stateless_rollback,
    hf_greedy,
)
from tests.tiny_models import (
    EOS,
    VOCAB,
    char_target_and_head,
    first_draft_state,
    prefix_state,
    rand_ids,
    tiny_head,
    tiny_target,
)


@pytest.fixture(scope="module")
def target():
    return tiny_target()


@pytest.fixture(scope="module")
def head(target):
    return tiny_head(target)


def test_protocol_and_info(target, head):
    d = MTPDrafter(target, head, eos_token_ids=[])
    draft = assert_greedy_draft_protocol(d, "mtp", prefix_state(target, rand_ids(10)), 4)
    info = draft.info
    assert info["hidden_from_position"] == 8  # the position before the newest token (index 9)
    assert info["candidates_scored"] == 200 + info["context_candidates"] and info["vocab_size"] == VOCAB
    assert 0 < info["context_candidates"] <= 10
    assert info["target_kv_positions"] == 9
    assert info["draft_ms_per_token"] > 0
    assert info["target_kv_layer"] == 1 and info["target_layers"] == 4  # the tiny target's only full-attention layer
    d.cfg = dataclasses.replace(d.cfg, attn_layer=-3)  # a layer counted from the end is reported from the front
    assert d._info(None, 0, 0)["target_kv_layer"] == 1


def test_rope_keys_match_target_cache(target, head):
    """Un-noised drafter layer == target layer: its k path reproduces the target's cached keys."""
    clean = MTPHead(head.cfg)
    clean.init_from_target(target)
    ids = torch.tensor([rand_ids(12)])
    cache = DynamicCache(config=target.config)
    with torch.no_grad():
        out = target(input_ids=ids, cache=cache, use_cache=True, output_hidden_states=True)
        layer = clean.layers[0]
        h = layer.input_layernorm(out.hidden_states[head.cfg.attn_layer])
        k = layer.k_norm(layer.k_proj(h).view(1, 12, 2, 16)).transpose(1, 2)
        cos, sin = rope_cos_sin(torch.arange(12)[None], 16, head.cfg.rope_theta, k.dtype)
        k = apply_rope(k, cos, sin)
    torch.testing.assert_close(k, cache.layers[head.cfg.attn_layer].keys, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("layers", [1, 2])
def test_unrolled_training_form_equals_propose(target, layers):
    """The parallel form used in training == the drafter's step-by-step inference."""
    head = tiny_head(target, layers=layers)
    d = MTPDrafter(target, head, eos_token_ids=[], context_candidates=False)
    ids = rand_ids(16, seed=3)
    cand_emb = target.model.embed_tokens.weight[head.candidates]
    for n in (0, 1, 6, 15):
        state = prefix_state(target, ids[: n + 1])
        draft = d.propose(state, 4, SamplingParams(), None)
        # the sequence the drafts continue, teacher-forced with the drafted tokens themselves
        seq = ids[: n + 1] + draft.token_ids[:-1]
        cache = DynamicCache(config=target.config)
        with torch.no_grad():
            out = target(input_ids=torch.tensor([seq]), cache=cache, use_cache=True, output_hidden_states=True)
            lay = cache.layers[head.cfg.attn_layer]
            states = unrolled_states(
                head, target.model.embed_tokens(torch.tensor([seq])), out.hidden_states[-1], lay.keys, lay.values, 4
            )
            toks = [int(head.candidates[head.logits(states[j][0, n], cand_emb).argmax()]) for j in range(4)]
        assert toks == draft.token_ids, n


def test_training_conditions_each_sampled_draft_on_the_token_actually_sampled(target):
    """At T > 0 the drafter feeds draft j+1 the token it *sampled* at j (EAGLE's shifted
    token); training teacher-forces the text's tokens, i.e. the tokens sampled, with the
    head's own states: the unrolled form fed the sampled drafts gives exactly the q rows
    the drafter sampled from (and fed anything else, it does not)."""
    head = tiny_head(target)
    d = MTPDrafter(target, head, eos_token_ids=[], context_candidates=False)
    ids = rand_ids(10, seed=4)
    params = SamplingParams(temperature=1.0)
    state = prefix_state(target, ids)
    draft = d.propose(state, 4, params, torch.Generator().manual_seed(3))
    cand_emb = target.model.embed_tokens.weight[head.candidates]
    n = len(ids) - 1

    def q_rows(seq):
        cache = DynamicCache(config=target.config)
        with torch.no_grad():
            out = target(input_ids=torch.tensor([seq]), cache=cache, use_cache=True, output_hidden_states=True)
            lay = cache.layers[head.cfg.attn_layer]
            emb = target.model.embed_tokens(torch.tensor([seq]))
            states = unrolled_states(head, emb, out.hidden_states[-1], lay.keys, lay.values, 4)
            return [logits_to_probs(head.logits(states[j][0, n], cand_emb), params) for j in range(4)]

    q = draft.draft_probs[:, head.candidates]  # [4, N]
    got = q_rows(ids + draft.token_ids[:-1])
    for j in range(4):
        torch.testing.assert_close(got[j], q[j], rtol=1e-5, atol=1e-6)
    # mutant: feeding the head's argmax instead of the sampled token changes the later rows
    greedy = [int(head.candidates[int(r.argmax())]) for r in q[:3]]
    assert greedy != draft.token_ids[:3]
    wrong = q_rows(ids + greedy)
    assert max(float((wrong[j] - q[j]).abs().max()) for j in range(1, 4)) > 1e-3


@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(temperature=1.0),
        SamplingParams(temperature=0.7, top_k=20),
        SamplingParams(temperature=1.3, top_p=0.8),
    ],
)
def test_q_rows_exact(target, head, params):
    d = MTPDrafter(target, head, eos_token_ids=[])
    state = prefix_state(target, rand_ids(9, seed=5))
    draft = d.propose(state, 5, params, torch.Generator().manual_seed(0))
    q = assert_q_rows(draft, shape=(5, VOCAB))
    cands = torch.unique(torch.cat([head.candidates, torch.tensor(state.committed_ids)]))
    assert torch.equal(torch.unique(d.candidates), cands)  # static set + the context's tokens
    outside = torch.ones(VOCAB, dtype=torch.bool)
    outside[cands] = False
    assert float(q[:, outside].abs().sum()) == 0.0
    # row 1 is logits_to_probs of the candidate logits, recomputed independently
    cand_emb = target.model.embed_tokens.weight[d.candidates]
    with torch.no_grad():
        expected = logits_to_probs(head.logits(first_draft_state(target, head, state.committed_ids), cand_emb), params)
    torch.testing.assert_close(q[0, d.candidates], expected, rtol=1e-5, atol=1e-6)


def test_context_candidates_match_training_view(target, head):
    """The training-time candidate set of chain n (mtp_train.batches.batch_candidates) is exactly the
    set the drafter scores after committing x_0..x_n: static tokens + the prefix's other tokens."""
    from tools.training.mtp_train.batches import batch_candidates

    ids = rand_ids(20, seed=9)
    d = MTPDrafter(target, head, eos_token_ids=[])
    lut = torch.full((VOCAB,), -1, dtype=torch.long)
    lut[head.candidates] = torch.arange(head.candidates.numel())
    batch = {
        "tok": torch.tensor([ids]),
        "valid": torch.ones(1, 20, dtype=torch.bool),
        "tid": torch.tensor([ids]).unsqueeze(-1),
    }
    cv = batch_candidates(batch, lut, head.candidates.numel(), target.model.embed_tokens.weight.detach())
    all_ids = torch.cat([head.candidates, cv["ext_ids"]])
    for n in (0, 4, 19):
        d.propose(TargetState(committed_ids=ids[: n + 1]), 1, SamplingParams(), None)
        assert set(d.candidates.tolist()) == set(all_ids[cv["allowed"][0, n]].tolist()), n
    d.start(TargetState(committed_ids=ids[:1]))
    assert d.candidates.numel() == head.candidates.numel()  # a new run forgets the old context


def test_q_matches_what_was_sampled(target):
    """Empirical frequencies of the first draft token match q (the exact sampling law)."""
    head = tiny_head(target, n_cand=40, noise=0.3, seed=7)
    d = MTPDrafter(target, head, eos_token_ids=[])
    state = prefix_state(target, rand_ids(6, seed=2))
    assert_q_is_the_sampling_law(d, state, SamplingParams(temperature=2.0), 3000, VOCAB, max_tv=0.06, same_q=True)


def test_greedy_and_argmax_mode(target, head):
    state = prefix_state(target, rand_ids(7, seed=4))
    assert_argmax_mode(lambda **kw: MTPDrafter(target, head, eos_token_ids=[], **kw), state, 3, VOCAB)


def test_one_token_prompt_without_hidden(target, head):
    d = MTPDrafter(target, head, eos_token_ids=[])
    state = TargetState(committed_ids=[2], hidden=None, target_cache=DynamicCache(config=target.config))
    draft = d.propose(state, 3, SamplingParams(), None)
    assert len(draft.token_ids) == 3 and draft.info["hidden_from_position"] is None
    assert draft.info["target_kv_positions"] == 0
    # no cache object at all works too
    assert d.propose(TargetState(committed_ids=[2]), 2, SamplingParams(), None).token_ids == draft.token_ids[:2]


def test_stops_at_eos(target, head):
    d = MTPDrafter(target, head, eos_token_ids=[])
    state = prefix_state(target, rand_ids(8, seed=6))
    toks = d.propose(state, 5, SamplingParams(), None).token_ids
    d_eos = MTPDrafter(target, head, eos_token_ids=[toks[1]])
    assert d_eos.propose(state, 5, SamplingParams(), None).token_ids == toks[:2]


def test_stateless_rollback(target, head):
    """After any accept(), proposals depend only on the TargetState: a fresh drafter agrees,
    and target K/V beyond the committed context (rejected drafts not yet cropped) are ignored."""
    ids = rand_ids(14, seed=8)
    d, stale = assert_stateless_rollback(
        lambda: MTPDrafter(target, head, eos_token_ids=[]),
        lambda ids: prefix_state(target, ids),
        target,
        ids,
        start=True,
    )
    assert d.cache_len() is None
    # what the drafter reads of the stale cache stops at the 6 positions the target had committed
    k, _ = target_kv(stale.target_cache, head.cfg.attn_layer, 6)
    assert k.shape[-2] == 6


def test_save_load_roundtrip(tmp_path, target, head):
    save_head(head, tmp_path, dtype=torch.bfloat16)
    loaded = load_head(tmp_path)
    assert torch.equal(loaded.candidates, head.candidates)
    assert loaded.cfg == head.cfg
    sd = {k: v.to(torch.bfloat16).float() if v.is_floating_point() else v for k, v in head.state_dict().items()}
    for k, v in loaded.state_dict().items():
        torch.testing.assert_close(v, sd[k])
    d = MTPDrafter.from_pretrained(target, tmp_path)
    assert d.eos == frozenset({EOS})
    assert load_mtp_drafter(target, tmp_path).eos == frozenset({EOS})
    with pytest.raises(FileNotFoundError):
        load_mtp_drafter(target, tmp_path / "missing")
    assert len(d.propose(prefix_state(target, rand_ids(5)), 3, SamplingParams(), None).token_ids) >= 1


def test_from_pretrained_rejects_other_target(tmp_path, head):
    save_head(head, tmp_path)
    other = tiny_target(vocab=VOCAB + 10)
    with pytest.raises(ValueError):
        MTPDrafter.from_pretrained(other, tmp_path)


def test_cost_model_on_gemma3_270m_geometry():
    """Multiply-adds of one draft step <= 10% of one target token (Gemma 3 270M shapes)."""
    cfg = Gemma3TextConfig(
        vocab_size=262144,
        hidden_size=640,
        intermediate_size=2048,
        num_hidden_layers=18,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=256,
    )
    mc = MTPConfig.from_target(cfg, num_candidates=8192)
    assert mc.attn_layer == 17 and mc.rope_theta == 1_000_000.0
    with torch.device("meta"):
        head = MTPHead(mc)
        target = Gemma3ForCausalLM(cfg)
    head_macs = sum(p.numel() for p in head.parameters()) + mc.num_candidates * mc.hidden_size
    target_macs = sum(p.numel() for p in target.parameters())  # tied: embedding == LM head once
    assert head_macs / target_macs < 0.10
    stored = sum(p.numel() for p in head.parameters()) * 2 + mc.num_candidates * 8  # bf16 + int64 ids
    assert stored < 25e6


def test_greedy_equality_through_engine():
    """Speculative decoding with the MTP drafter == target greedy generate (float32, eager)."""
    from playground.models.tiny import CharTokenizer
    from playground.settings import RunSettings

    model, head = char_target_and_head()
    tok = CharTokenizer()
    drafter = MTPDrafter(model, head, eos_token_ids=[])
    prompt = tok.encode("The quick brown fox")
    ref = hf_greedy(model, prompt, 24, eos=None)
    for gamma in (1, 3, 5):
        cfg = RunSettings(mode="speculative", gamma=gamma, temperature=0.0, max_new_tokens=24)
        assert_greedy_equals_target(model, tok, prompt, cfg, drafter, eos_token_ids=[], expected=ref, msg=gamma)


def test_drafters_share_one_read_only_head_per_weights_file_and_dtype(tmp_path, head):
    """Every run builds its own drafter; the head itself loads once per (weights, dtype) and
    is shared read-only, and weights written anew are read anew."""
    from playground.drafters.mtp_weights import save_head, shared_head

    save_head(head, tmp_path)
    a, b = shared_head(tmp_path, torch.float32), shared_head(tmp_path, torch.float32)
    assert a is b and not any(p.requires_grad for p in a.parameters())
    half = shared_head(tmp_path, torch.bfloat16)
    assert half is not a and next(half.parameters()).dtype == torch.bfloat16
    assert next(a.parameters()).dtype == torch.float32  # the bf16 copy did not convert the shared one
    for f in tmp_path.iterdir():  # new modification times: the next call reads the files again
        os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 1_000_000))
    assert shared_head(tmp_path, torch.float32) is not a


def test_runs_that_start_at_once_load_the_head_once(tmp_path, head, monkeypatch):
    """Thirty runs starting together on a fresh server each ask for the head before the first
    load is done: they must wait for that one load, not each build their own (the cache alone
    lets every one of them miss)."""
    import threading
    import time

    from playground.drafters import mtp_weights

    mtp_weights.save_head(head, tmp_path)
    loads = []
    real = mtp_weights.load_head

    def slow_load(*args, **kwargs):
        loads.append(1)
        time.sleep(0.05)  # a real load takes 40-50 ms: long enough for the others to arrive
        return real(*args, **kwargs)

    monkeypatch.setattr(mtp_weights, "load_head", slow_load)
    got = []
    threads = [threading.Thread(target=lambda: got.append(mtp_weights.shared_head(tmp_path, torch.float32)))
               for _ in range(8)]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(loads) == 1 and len(got) == 8 and all(g is got[0] for g in got)


def test_drafters_share_the_heads_candidate_tables_and_never_write_them():
    """A drafter per run (the lab builds one per continuation) reads one copy of the head's
    candidate tables; a run whose context adds candidates adds them to its own list only."""
    from playground.decoding.engine import run
    from playground.models.tiny import EOS as CHAR_EOS
    from playground.models.tiny import CharTokenizer
    from playground.settings import RunSettings
    from tests.tiny_models import char_target_and_head

    target, head = char_target_and_head()
    a, b = MTPDrafter(target, head, [CHAR_EOS]), MTPDrafter(target, head, [CHAR_EOS])
    assert a.static_emb is b.static_emb and a.in_static is b.in_static and a.static_candidates is b.static_candidates
    before = (b.in_static.clone(), b.static_emb.clone(), b.static_candidates.clone())
    tok = CharTokenizer()
    run(target, tok, tok.encode("Zyx Qwv: zyx qwv zyx"), RunSettings(gamma=3, max_new_tokens=12), drafter=a)
    assert len(a.candidates) > len(a.static_candidates)  # the run's context added candidates of its own
    assert torch.equal(b.in_static, before[0]) and torch.equal(b.static_emb, before[1])
    assert torch.equal(b.static_candidates, before[2]) and b.candidates is b.static_candidates


def test_context_candidates_grow_in_place_as_a_concatenation_would(target, head):
    """Committed tokens outside the static set join the candidate table one call at a time: the
    table equals static + extras in order (what ``torch.cat`` gave), the static rows are copied
    only when the table grows (not per new token), and the head's scores over the grown table
    are the bits a fresh contiguous table of the same rows gives."""
    d = MTPDrafter(target, head, eos_token_ids=[])
    d.EXTRA_ROOM = 3  # grow after a few context tokens (the class's room is far larger)
    static = set(head.candidates.tolist())
    outside = [t for t in range(VOCAB) if t not in static][:10]
    committed, copies, last_ptr = head.candidates[:2].tolist(), 0, None
    first = d.cand_emb.data_ptr()
    for t in outside:
        committed = [*committed, t, t]  # a repeated token joins once
        d._update_context(committed)
        ptr = d.cand_emb.data_ptr()
        copies += ptr != last_ptr
        last_ptr = ptr
        assert ptr != first  # the shared static table is never written
        extras = [x for x in outside if x in committed]
        assert d.candidates.tolist() == [*head.candidates.tolist(), *extras]
        reference = torch.cat([d.static_emb, target.model.embed_tokens.weight.detach()[extras]])  # [N+X, H]
        assert torch.equal(d.cand_emb, reference)
        state = torch.randn(2, reference.shape[1], generator=torch.Generator().manual_seed(len(extras)))
        with torch.no_grad():
            assert torch.equal(head.logits(state, d.cand_emb), head.logits(state, reference.clone()))
    assert copies == 2  # 10 extras, room for 3 more each time: grown at the 1st (room 4) and the 5th (room 10)
    d._update_context(head.candidates[:1].tolist())  # another sequence: back to the shared static table
    assert d.candidates is d.static_candidates and d.cand_emb is d.static_emb
