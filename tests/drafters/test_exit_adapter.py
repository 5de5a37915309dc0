"""Trained early exits: an adapter changes what the exit proposes, never what is output.

The identity adapter is the untrained exit exactly; a random adapter gives other drafts,
yet greedy output still equals the target's (both caches checked every step) and sampled
output still follows the target's law; a mutant that feeds the *adapted* state to the
verify pass is caught.  Files round-trip, training lowers the loss on tiny models, and the
preset's adapter directory reaches the drafter through the registry.
"""

from __future__ import annotations

import argparse

import pytest
import torch

from playground.config import Preset
from playground.decoding.engine import run
from playground.decoding.sampling import SamplingParams, logits_to_probs
from playground.drafters.early_exit import EarlyExitDrafter, exit_logits, exit_model
from playground.drafters.exit_adapter import ExitAdapter, adapter_layers, load_adapter, save_adapters
from playground.drafters.registry import build_drafter
from playground.models.loading import ModelPair
from playground.models.tiny import CharTokenizer
from playground.settings import RunSettings
from tests.contract import (
    DrafterCacheSpy,
    assert_checked_every_step,
    assert_greedy_equals_target,
    committed_prefix_without_newest,
    first_pair_counts,
    q_rows_of,
    seeded,
)
from tests.fakes import LetterTokenizer
from tests.stats import assert_does_not_follow, assert_follows, model_pair_pmf
from tests.tiny_models import sliding_pair, small_llama
from tools.training.exit_train import agreement, collect, train_adapter

V = 6  # the small Llama's vocabulary (pairs of tokens enumerate to 36 outcomes)


def random_adapter(hidden: int, scale: float, seed: int = 0) -> ExitAdapter:
    g = torch.Generator().manual_seed(seed)
    return ExitAdapter(hidden, torch.eye(hidden) + scale * torch.randn(hidden, hidden, generator=g))


@torch.inference_mode()
@pytest.mark.parametrize("k", [1, 2, 3])
def test_identity_adapter_is_the_untrained_exit_and_a_random_one_is_not(k):
    target, _ = sliding_pair(window=4)
    ids = torch.tensor([list(range(3, 30))])
    plain = exit_model(target, k)(ids).logits
    assert torch.allclose(exit_model(target, k, ExitAdapter(32))(ids).logits, plain, rtol=0, atol=1e-5)
    moved = random_adapter(32, 0.5)
    h_k = target(ids, output_hidden_states=True).hidden_states[k][0]  # [T, H] the state after layer k
    # exit_logits (training, the scan) = what the drafter's cut model computes, adapter or not
    assert torch.allclose(exit_logits(target, h_k), plain[0], rtol=0, atol=1e-5)
    assert torch.allclose(exit_logits(target, h_k, moved), exit_model(target, k, moved)(ids).logits[0], atol=1e-5)
    assert not torch.allclose(exit_model(target, k, random_adapter(32, 0.5))(ids).logits, plain, atol=1e-2)
    assert type(target.model.norm).__name__ != "AdaptedNorm"  # the target keeps its own norm


def _spy(drafter, target):
    return DrafterCacheSpy(drafter, target, holds=committed_prefix_without_newest, layers=drafter.exit_layer)


@pytest.mark.parametrize("reuse", [True, False])
@pytest.mark.parametrize("gamma", [1, 3])
@pytest.mark.parametrize("k", [1, 2])
def test_trained_exit_keeps_greedy_equality_with_both_caches_checked(k, gamma, reuse):
    target, _ = sliding_pair(window=4)
    tok = CharTokenizer()
    ids = tok.encode("sliding windows roll back")
    drafter = EarlyExitDrafter(target, k, reuse_kv=reuse, adapter=random_adapter(32, 0.3))
    spy = _spy(drafter, target)
    r = assert_greedy_equals_target(target, tok, ids, RunSettings(gamma=gamma, max_new_tokens=30), spy)
    assert_checked_every_step(spy, r, drafter_cache=True)
    assert r.stats.accepted_tokens > 0
    assert r.steps[0].drafter_info["exit"].startswith("trained")


class _AdaptsKeptStates(EarlyExitDrafter):
    """Mutant: the verify pass is fed the adapted state A h_k instead of the raw h_k
    (the adapter leaks into verification)."""

    def _lower(self, ids, head):
        n = len(self._states)
        logits = super()._lower(ids, head)
        adapter = self.model.model.norm.adapter
        self._states[n:] = [adapter(s) for s in self._states[n:]]
        return logits


def test_an_adapter_leaking_into_verification_is_caught():
    target, _ = sliding_pair(window=4)
    tok = CharTokenizer()
    ids = tok.encode("sliding windows roll back")
    drafter = _AdaptsKeptStates(target, 2, reuse_kv=True, adapter=random_adapter(32, 0.3))
    with pytest.raises(AssertionError):
        assert_greedy_equals_target(target, tok, ids, RunSettings(gamma=3, max_new_tokens=30), drafter)


def _pair_counts(model, make_drafter, n: int):
    config = RunSettings(gamma=2, temperature=1.0, max_new_tokens=2, trace=False)
    return first_pair_counts(
        lambda seed: run(model, LetterTokenizer(), [0, 1], config, drafter=make_drafter(), generator=seeded(seed)),
        n,
        V,
    )


class _UntrainedQ(EarlyExitDrafter):
    """Mutant: samples from the trained exit but reports the untrained exit's q."""

    def __init__(self, target, adapter):
        super().__init__(target, 1, adapter=adapter)
        self.plain = exit_model(target, 1)

    @torch.inference_mode()
    def propose(self, state, gamma, params, generator):
        draft = super().propose(state, gamma, params, generator)
        draft.draft_probs = q_rows_of(self.plain, state, draft, params)  # [n, V]
        return draft


def test_sampling_with_a_trained_exit_follows_the_target_and_a_wrong_q_is_caught():
    model = small_llama(V)
    params = SamplingParams(temperature=1.0)
    pmf = model_pair_pmf(model, [0, 1], params, V)
    adapter = random_adapter(16, 1.0, seed=2)
    with torch.inference_mode():  # the adapter really moves q (else the mutant proves nothing)
        plain = logits_to_probs(exit_model(model, 1)(torch.tensor([[0, 1]])).logits[0, -1], params)
        trained = logits_to_probs(exit_model(model, 1, adapter)(torch.tensor([[0, 1]])).logits[0, -1], params)
    assert 0.5 * float((plain - trained).abs().sum()) > 0.2
    assert_follows(_pair_counts(model, lambda: EarlyExitDrafter(model, 1, adapter=adapter), 1500), pmf)
    assert_does_not_follow(_pair_counts(model, lambda: _UntrainedQ(model, adapter), 800), pmf)


def test_files_round_trip_and_refuse_a_wrong_size(tmp_path):
    adapters = {2: random_adapter(32, 0.1, seed=1), 3: random_adapter(32, 0.1, seed=2)}
    save_adapters(adapters, tmp_path, "tiny", {"2": {"trained": {"all": 0.5}}})
    assert adapter_layers(tmp_path) == [2, 3] and adapter_layers(tmp_path / "missing") == []
    back = load_adapter(tmp_path, 3, 32, torch.float32)
    want = adapters[3].proj.weight.to(torch.bfloat16).float()  # stored as bf16
    assert torch.equal(back.proj.weight, want)
    assert load_adapter(tmp_path, 1, 32, torch.float32) is None  # no adapter: the untrained exit
    with pytest.raises(ValueError, match="hidden size is 16"):
        load_adapter(tmp_path, 2, 16, torch.float32)


def test_the_preset_adapter_directory_reaches_the_drafter(tmp_path):
    target, _ = sliding_pair(window=4)
    save_adapters({2: random_adapter(32, 0.1)}, tmp_path, "tiny")
    kw = dict(name="x", label="x", source="builtin", target="t", drafter="early-exit", dtype="float32", gamma=2)
    pair = ModelPair(target=target, tokenizer=CharTokenizer(), eos_token_ids=(1,))
    trained = build_drafter("early-exit", pair, Preset(**kw, exit_layer=2, exit_adapter=str(tmp_path)))
    untrained = build_drafter("early-exit", pair, Preset(**kw, exit_layer=3, exit_adapter=str(tmp_path)))
    assert trained.trained and not untrained.trained  # layer 3 has no adapter in the directory
    assert trained._info()["exit"].startswith("trained") and untrained._info()["exit"] == "untrained"


def test_training_lowers_the_loss_and_does_not_lower_agreement():
    target, _ = sliding_pair(window=4)
    g = torch.Generator().manual_seed(0)
    rows = [{"ids": torch.randint(3, 90, (40,), generator=g).tolist(), "n_prompt": 1} for _ in range(8)]
    feats = collect(target, rows, [1, 2])
    assert feats.states[1].shape == (8 * 39, 32) and feats.top_ids.shape[0] == 8 * 39
    args = argparse.Namespace(exit_lr=1e-2, exit_steps=200, exit_batch=64)
    with torch.inference_mode():  # the identity's (untrained exit's) soft cross-entropy on the same positions
        logp = torch.log_softmax(exit_logits(target, feats.states[2]).float(), -1).gather(1, feats.top_ids.long())
        untrained_loss = float(-(feats.top_probs.float() * logp).sum(-1).mean())
    adapter, curve = train_adapter(target, feats, 2, args, seed=0)
    assert curve["step"] == [100, 200] and curve["loss"][-1] < untrained_loss
    assert curve["kept_validation_agreement"] >= max(curve["validation_agreement"])
    assert agreement(target, adapter, feats, 2)["all"] >= agreement(target, None, feats, 2)["all"]
    assert all(p.grad is None for p in target.parameters())


def test_exit_scan_adds_trained_rows_and_an_identity_adapter_changes_nothing():
    from tools.training.exit_scan import agreement, scan

    target, _ = sliding_pair(window=4)
    tok = CharTokenizer()
    seqs = [(5, tok.encode("sliding windows roll back"))]
    with torch.inference_mode():
        assert agreement(target, seqs, {2: ExitAdapter(32)}) == agreement(target, seqs)
        moved = agreement(target, seqs, {2: random_adapter(32, 1.0)})
    assert moved[1] == agreement(target, seqs)[1]  # only layer 2 had an adapter
    points = scan(
        target, tok, ["sliding windows"], max_new_tokens=6, reps=1, gammas=(1,), adapters={2: ExitAdapter(32)}
    )
    assert [(p.layer, p.trained) for p in points] == [(1, False), (2, False), (3, False), (2, True)]
    assert points[3].agreement == points[1].agreement


def test_step_view_says_whether_the_exit_is_trained():
    from visual import tokens
    from visual.replay import VERIFY, Frame

    target, _ = sliding_pair(window=4)
    tok = CharTokenizer()
    views = {}
    for name, adapter in (("trained", random_adapter(32, 0.3)), ("untrained", None)):
        drafter = EarlyExitDrafter(target, 2, adapter=adapter)
        r = run(target, tok, tok.encode("sliding windows"), RunSettings(gamma=3, max_new_tokens=6), drafter=drafter)
        views[name] = tokens.step_view("sliding windows", r.steps, Frame(0, VERIFY))
    assert "trained: a learned linear map A" in views["trained"]
    assert "untrained: the layer\u2019s state goes straight" in views["untrained"]


def test_training_keeps_the_untrained_exit_when_no_step_beats_it_on_validation(monkeypatch):
    from tools.training import exit_train

    target, _ = sliding_pair(window=4)
    g = torch.Generator().manual_seed(1)
    rows = [{"ids": torch.randint(3, 90, (30,), generator=g).tolist(), "n_prompt": 1} for _ in range(4)]
    feats = collect(target, rows, [3])
    scores = iter([0.9, 0.5, 0.95, 0.7])  # validation agreement at steps 0 (the identity), 100, 200, 300
    monkeypatch.setattr(exit_train, "agreement", lambda *a: {"all": next(scores)})
    args = argparse.Namespace(exit_lr=1e-2, exit_steps=300, exit_batch=32)
    adapter, curve = train_adapter(target, feats, 3, args, seed=0)
    assert curve["kept_step"] == 200 and curve["kept_validation_agreement"] == 0.95
    scores = iter([0.9, 0.5, 0.6, 0.7])  # nothing beats the untrained exit: the identity is kept
    adapter, curve = train_adapter(target, feats, 3, args, seed=0)
    assert curve["kept_step"] == 0 and torch.equal(adapter.proj.weight, torch.eye(32))


@pytest.mark.real_model
def test_gemma_greedy_with_the_trained_exit_preset_equals_transformers(all_threads, gemma_fp32):
    """The shipped trained exit on the packaged Gemma 3 270M, float32, through the registry:
    token-identical to generate(), its drafts accepted, and the step info says it is trained."""
    from playground.config import load_config

    model, tok, eos = gemma_fp32
    preset = load_config().preset("gemma3-270m-early-exit-trained")
    pair = ModelPair(target=model, tokenizer=tok, eos_token_ids=tuple(eos))
    drafter = build_drafter("early-exit", pair, preset)
    assert drafter.trained and drafter.exit_layer == preset.exit_layer == 12
    ids = tok("The capital of France is")["input_ids"]
    with torch.inference_mode():
        ref = model.generate(torch.tensor([ids]), max_new_tokens=16, do_sample=False)[0, len(ids) :].tolist()
    r = run(model, tok, ids, RunSettings(gamma=3, max_new_tokens=16), drafter=drafter, eos_token_ids=eos)
    assert list(r.token_ids) == ref[: len(r.token_ids)] and len(r.token_ids) == len(ref)
    assert r.stats.accepted_tokens > 0 and r.steps[0].drafter_info["exit"].startswith("trained")
