"""The early-exit drafter (playground.drafters.early_exit) on tiny random models.

* the cut model is the target's own first k layers + norm + head: its logits equal the
  full model's hidden state after layer k put through the final norm and LM head, it
  shares every parameter with the target (nothing copied) and leaves the target alone;
* greedy output equals transformers' greedy ``generate()`` on the target (fp32), for
  several γ and exit layers, on a Gemma 3 with a sliding window of 4 (rollbacks cross
  the window) and on the tiny Llama, with the target's cache AND the drafter's own
  cache equal to a fresh prefill of what they claim to hold after every step;
* at T = 1 the loop's output follows the target's distribution (chi-square on the first
  two tokens of a 6-token-vocabulary Llama), and a mutant that samples from exit k but
  reports the q of exit k + 1 is caught by the same test.
"""

import pytest
import torch
from transformers import DynamicCache
from transformers.utils.output_capturing import maybe_install_capturing_hooks

from playground.decoding.draft import TargetState
from playground.decoding.engine import run
from playground.decoding.sampling import SamplingParams, logits_to_probs
from playground.drafters.early_exit import NOTHING_REUSED, EarlyExitDrafter, exit_model
from playground.drafters.model import ModelDrafter
from playground.models.tiny import EOS, CharTokenizer
from playground.settings import RunSettings
from tests.contract import (
    DrafterCacheSpy,
    assert_checked_every_step,
    assert_greedy_equals_target,
    committed_prefix_without_newest,
    first_pair_counts,
    hf_greedy,
    q_rows_of,
    rejected_drafts,
    seeded,
)
from tests.fakes import LetterTokenizer
from tests.prompts import BENCH_PROMPTS, TINY_PROMPTS
from tests.stats import assert_does_not_follow, assert_follows, model_pair_pmf
from tests.tiny_models import sliding_pair
from tests.tiny_models import small_llama as build_small_llama

GAMMAS = [1, 2, 4, 8]


def _exit_reference(model, ids, k):
    """Logits [T, V] of the full model's hidden state after layer k, normed and put through the head."""
    out = model(torch.tensor([ids]), output_hidden_states=True)
    logits = model.lm_head(model.model.norm(out.hidden_states[k]))[0]
    cap = getattr(model.config, "final_logit_softcapping", None)
    return torch.tanh(logits / cap) * cap if cap else logits


@torch.inference_mode()
@pytest.mark.parametrize("k", [1, 2, 3])
def test_exit_model_is_the_targets_first_layers_norm_and_head(k):
    target, _ = sliding_pair(window=4)
    before = (target.config.num_hidden_layers, list(target.config.layer_types))
    maybe_install_capturing_hooks(target)  # as loading does: transformers' own recorders, before any run
    hooks = [dict(layer._forward_hooks) for layer in target.model.layers]
    cut = exit_model(target, k)
    ids = list(range(3, 40))  # 37 tokens: past the window of 4
    assert torch.equal(cut(torch.tensor([ids])).logits[0], _exit_reference(target, ids, k))
    own = {id(p) for p in target.parameters()}
    assert all(id(p) in own for p in cut.parameters())  # shared, not copied
    assert len(cut.model.layers) == k and all(cut.model.layers[i] is target.model.layers[i] for i in range(k - 1))
    assert cut.model.layers[k - 1].layer is target.model.layers[k - 1]  # the exit's own recorder around it
    assert [dict(layer._forward_hooks) for layer in target.model.layers] == hooks  # nothing hooked on shared layers
    assert (target.config.num_hidden_layers, list(target.config.layer_types)) == before
    assert len(target.model.layers) == 4


@pytest.mark.parametrize("k", [0, 4, 9])
def test_exit_layer_out_of_range_is_refused(k):
    target, _ = sliding_pair(window=4)
    with pytest.raises(ValueError, match="exit layer must be between 1 and 3"):
        exit_model(target, k)


def exit_spy(drafter, target):
    """The target's cache and the exit's own after every step: its cache holds a prefix of the
    committed tokens without the newest, over the exit's k layers."""
    return DrafterCacheSpy(drafter, target, holds=committed_prefix_without_newest, layers=drafter.exit_layer)


@pytest.mark.parametrize("reuse", [True, False])
@pytest.mark.parametrize("gamma", GAMMAS)
@pytest.mark.parametrize("k", [1, 2, 3])
def test_greedy_equals_transformers_past_the_sliding_window_with_both_caches_checked(k, gamma, reuse):
    target, _ = sliding_pair(window=4)
    tok = CharTokenizer()
    ids = tok.encode("sliding windows roll back")  # 26 tokens: far past the window of 4
    spy = exit_spy(EarlyExitDrafter(target, k, reuse_kv=reuse), target)
    r = assert_greedy_equals_target(target, tok, ids, RunSettings(gamma=gamma, max_new_tokens=30), spy)
    assert_checked_every_step(spy, r, drafter_cache=True)
    assert r.stats.accepted_tokens > 0  # the exit really drafts tokens the target keeps
    assert rejected_drafts(r) > 0  # ... and rollbacks really happened
    info = r.steps[0].drafter_info
    assert info["exit_layer"] == k and info["layers"] == 4
    assert (info["reused"] == NOTHING_REUSED) != reuse
    if reuse:
        upper = "layer 4" if k == 3 else f"layers {k + 1}-4"
        assert f"layers 1-{k}" in info["reused"] and f"{upper} and the head" in info["reused"]


class _KeepsRejectedDrafts(EarlyExitDrafter):
    """Mutant: never crops its cache after a verification (rejected drafts stay in it)."""

    def accept(self, n_accepted, state):
        pass


def test_the_drafter_cache_check_catches_a_drafter_that_keeps_rejected_drafts():
    target, _ = sliding_pair(window=4)
    tok = CharTokenizer()
    spy = exit_spy(_KeepsRejectedDrafts(target, 2, reuse_kv=False), target)
    with pytest.raises(AssertionError):
        run(
            target,
            tok,
            tok.encode("sliding windows roll back"),
            RunSettings(gamma=4, max_new_tokens=30),
            drafter=spy,
            eos_token_ids=[EOS],
        )


class _StatesOffByOne(EarlyExitDrafter):
    """Mutant (LayerSkip): the upper layers get each token's predecessor's exit state."""

    def verify_logits(self, cache, ids, keep):
        if len(self._states) > 1:
            self._states = [self._states[0]] + self._states[:-1]
        return super().verify_logits(cache, ids, keep)


class _KeepsCutDrafts(EarlyExitDrafter):
    """Mutant (LayerSkip): a draft cut short (at EOS) leaves its uncut tokens in the lower layers."""

    def _drop_lower(self, cache, n):
        pass


def _count_tokens(module, counts: list[int]):
    return module.register_forward_hook(lambda m, args, out: counts.append(args[0].shape[1]))


def test_reuse_runs_every_verified_token_through_the_lower_layers_once():
    """With reuse the layers below the exit see each verified token once (drafting or the
    verify pass), the layers above it exactly what they see without reuse; without reuse
    the lower layers also run the drafter's own passes.  Same output either way."""
    target, _ = sliding_pair(window=4)
    tok = CharTokenizer()
    ids = tok.encode("sliding windows roll back")
    seen = {}
    for reuse in (True, False):
        lower, upper = [], []
        hooks = [_count_tokens(target.model.layers[0], lower), _count_tokens(target.model.layers[2], upper)]
        try:
            r = run(
                target,
                tok,
                ids,
                RunSettings(gamma=3, max_new_tokens=24),
                drafter=EarlyExitDrafter(target, 2, reuse_kv=reuse),
            )  # no EOS: no draft is cut
        finally:
            for h in hooks:
                h.remove()
        seen[reuse] = (sum(lower), sum(upper), r.token_ids)
    assert seen[True][2] == seen[False][2] == tuple(hf_greedy(target, ids, 24))
    assert seen[True][1] == seen[False][1]  # the upper layers do the same work
    assert seen[True][0] == seen[True][1]  # below the exit: once per token
    assert seen[False][0] > seen[True][0] + 24  # without reuse: the drafter's passes come on top


@torch.inference_mode()
def test_verify_logits_equal_the_full_models():
    target, _ = sliding_pair(window=4)
    ids = list(range(3, 33))
    d = EarlyExitDrafter(target, 2)
    cache = DynamicCache(config=target.config)
    cache.activate_past_recording()
    target(input_ids=torch.tensor([ids[:-1]]), cache=cache, use_cache=True)
    state = TargetState(committed_ids=list(ids), target_cache=cache)
    d.start(state)
    draft = d.propose(state, 4, SamplingParams(temperature=0.0), None)
    got = d.verify_logits(cache, [ids[-1]] + draft.token_ids, 5)
    want = target(torch.tensor([ids + draft.token_ids])).logits[0, -5:]
    assert torch.allclose(got, want, atol=1e-5)
    assert all(layer.get_seq_length() == len(ids) + 4 for layer in cache.layers)


@pytest.mark.parametrize("mutant", [_StatesOffByOne, _KeepsCutDrafts])
def test_layerskip_mutants_are_caught(mutant):
    target, _ = sliding_pair(window=4)
    tok = CharTokenizer()
    ids = tok.encode("sliding windows roll back")
    spy = exit_spy(mutant(target, 1), target)
    with pytest.raises(AssertionError):
        r = run(target, tok, ids, RunSettings(gamma=8, max_new_tokens=30), drafter=spy, eos_token_ids=[EOS])
        assert list(r.token_ids) == hf_greedy(target, ids, 30)


@pytest.mark.parametrize("gamma", [1, 4])
def test_greedy_equals_transformers_on_tiny_llama(tiny_pair, gamma):
    target, _, tok = tiny_pair
    for prompt in TINY_PROMPTS:
        spy = exit_spy(EarlyExitDrafter(target, 1), target)
        cfg = RunSettings(gamma=gamma, max_new_tokens=30)
        assert_greedy_equals_target(target, tok, tok.encode(prompt), cfg, spy, msg=prompt)


@pytest.mark.parametrize("nodes", [4, 8])
def test_tree_drafts_keep_greedy_equality(nodes):
    target, _ = sliding_pair(window=4)
    tok = CharTokenizer()
    ids = tok.encode("sliding windows roll back")
    spy = exit_spy(EarlyExitDrafter(target, 2), target)
    cfg = RunSettings(gamma=4, tree_nodes=nodes, max_new_tokens=24)
    r = assert_greedy_equals_target(target, tok, ids, cfg, spy)
    assert spy.drafter_checks > 0 and r.steps[0].drafter_info["exit_layer"] == 2


# ---------------------------------------------------------------- sampling: chi-square through the loop

V = 6
N = 1500


class _OffByOneQ(EarlyExitDrafter):
    """Mutant: samples from the exit after layer k but reports q of the exit after layer k + 1
    (an off-by-one in the exit index).  (Reporting a point mass for a sampled draft would
    NOT be a mutant: judging the drafted token as a point mass is lossless whatever it was
    drawn from.)"""

    def __init__(self, target, exit_layer):
        super().__init__(target, exit_layer)
        self.wrong_exit = exit_model(target, exit_layer + 1)

    @torch.inference_mode()
    def propose(self, state, gamma, params, generator):
        draft = super().propose(state, gamma, params, generator)
        draft.draft_probs = q_rows_of(self.wrong_exit, state, draft, params)  # [k, V]
        return draft


def _sample_pairs(model, drafter_cls, gamma, params, prompt=(0, 1), n=N):
    config = RunSettings(gamma=gamma, temperature=params.temperature, max_new_tokens=2, trace=False)
    return first_pair_counts(
        lambda seed: run(
            model, LetterTokenizer(), list(prompt), config, drafter=drafter_cls(model, 1), generator=seeded(seed)
        ),
        n,
        V,
    )


@pytest.fixture(scope="module")
def small_llama():
    model = build_small_llama(V)
    params = SamplingParams(temperature=1.0)
    pmf = model_pair_pmf(model, [0, 1], params, V)
    with torch.inference_mode():  # the exit's q really differs from p (else the test proves little)
        exit_probs = logits_to_probs(exit_model(model, 1)(torch.tensor([[0, 1]])).logits[0, -1], params)
        target_probs = pmf.view(V, V).sum(1)
    assert 0.1 < 0.5 * float((exit_probs - target_probs).abs().sum()) < 0.9  # total variation
    return model, params, pmf


@pytest.mark.parametrize("gamma", [1, 3])
def test_sampling_at_t1_follows_the_target_distribution(small_llama, gamma):
    model, params, pmf = small_llama
    counts = _sample_pairs(model, EarlyExitDrafter, gamma, params)
    assert_follows(counts, pmf)


def test_mutant_q_from_the_wrong_exit_is_detected(small_llama):
    model, params, pmf = small_llama
    counts = _sample_pairs(model, _OffByOneQ, 1, params, n=500)  # p ~ 1e-60 at 500
    assert_does_not_follow(counts, pmf)


# ---------------------------------------------------------------- presets and the API


def test_every_preset_but_gemma4_offers_early_exit_and_the_api_runs_it():
    from playground import generate
    from playground.config import load_config

    for p in load_config().presets:
        assert ("early-exit" in p.drafters) == (p.drafter != "gemma4-assistant"), p.name
    r = generate("Hello", preset="tiny-random", drafter="early-exit", gamma=3, max_new_tokens=10)
    ar = generate("Hello", preset="tiny-random", mode="autoregressive", max_new_tokens=10)
    assert r.token_ids == ar.token_ids and r.steps[0].drafter == "early-exit"
    assert r.steps[0].drafter_info["exit_layer"] == 1  # tiny-random's 2-layer target: all layers but the last


def test_bench_runs_transformers_early_exit_beside_ours_and_counts_only_full_passes():
    from tools import bench

    opts = bench.BenchOptions(
        preset="tiny-random",
        prompts=BENCH_PROMPTS,
        max_new_tokens=16,
        gammas=(4,),
        drafters=("early-exit",),
        repeats=1,
        cost_reps=1,
        threads=1,
        warmup=False,
    )
    rows = bench.run_bench(opts).rows
    ours = [r for r in rows if r["method"] == "speculative"]
    theirs = [r for r in rows if r["method"] == "hf_assisted"]
    assert ours and theirs and all(r["drafter"] == "early-exit" for r in ours + theirs)
    for r in ours + theirs:
        assert r["identical_to_hf"] is True
        # transformers drafts through the same module: counting its 4 draft passes per step as
        # target calls would give <= 1 token per call
        assert r["tokens_per_target_call"] > 1.0, r


@pytest.mark.parametrize("reuse", [True, False])
def test_bench_takes_the_exit_layer_and_kv_reuse_and_records_them(reuse):
    from tools import bench

    opts = bench.BenchOptions(
        preset="tiny-random",
        prompts=BENCH_PROMPTS[:1],
        max_new_tokens=8,
        gammas=(2,),
        drafters=("early-exit",),
        methods=("autoregressive", "speculative"),
        repeats=1,
        cost_reps=1,
        threads=1,
        warmup=False,
        exit_layer=1,
        exit_kv_reuse=reuse,
    )
    report = bench.run_bench(opts)
    assert report.meta["exit_layer"] == 1 and report.meta["exit_kv_reuse"] is reuse
    assert report.meta["exit_trained"] is False  # tiny-random ships no exit adapter
    assert all(r["identical_to_autoregressive"] is not False for r in report.rows)
    args = bench.build_parser().parse_args(["--exit-layer", "1"] + (["--no-kv-reuse"] if not reuse else []))
    assert (args.exit_layer, args.no_kv_reuse, args.untrained_exit) == (1, not reuse, False)
    assert bench.build_parser().parse_args(["--untrained-exit"]).untrained_exit


def test_preset_exit_layer_is_validated():
    from playground.config import Preset

    kw = dict(name="x", label="x", source="builtin", target="t", drafter="early-exit", dtype="float32", gamma=4)
    assert Preset(**kw, exit_layer=6).exit_layer == 6
    with pytest.raises(ValueError, match="exit_layer"):
        Preset(**kw, exit_layer=0)


@pytest.mark.parametrize("reuse", [True, False])
def test_step_view_says_which_layers_drafted_and_what_was_reused(reuse):
    from visual import tokens
    from visual.replay import DRAFT, VERIFY, Frame

    target, _ = sliding_pair(window=4)
    tok = CharTokenizer()
    r = run(
        target,
        tok,
        tok.encode("sliding windows"),
        RunSettings(gamma=3, max_new_tokens=8),
        drafter=EarlyExitDrafter(target, 2, reuse_kv=reuse),
        eos_token_ids=[EOS],
    )
    verify = tokens.step_view("sliding windows", r.steps, Frame(0, VERIFY))
    assert "Early exit: the target drafts with its first 2 layers" in verify
    assert "layers 1\u20132 of its 4" in verify
    if reuse:
        assert "K/V of layers 1-2 from the draft passes" in verify and "layers 3-4 and the head" in verify
        assert "in the target\u2019s own cache (its layers 1\u20132" in verify
    else:
        assert "nothing: the verify pass recomputes" in verify and "on the drafter\u2019s own cache" in verify
    assert "for the target\u2019s verify pass" in verify
    drafting = tokens.step_view("sliding windows", r.steps, Frame(0, DRAFT))
    assert "the target\u2019s verify pass comes next" in drafting
    model_run = run(
        target,
        tok,
        tok.encode("sliding windows"),
        RunSettings(gamma=3, max_new_tokens=8),
        drafter=ModelDrafter(exit_model(target, 2), 100),
        eos_token_ids=[EOS],
    )
    assert "Early exit" not in tokens.step_view("sliding windows", model_run.steps, Frame(0, VERIFY))


def test_exit_scan_agreement_is_the_exit_models_own_greedy_agreement():
    from tools.training.exit_scan import agreement, expected_tokens, scan

    target, _ = sliding_pair(window=4)
    ids = list(range(3, 30))
    alphas = agreement(target, [(10, ids)])
    with torch.inference_mode():
        full = target(torch.tensor([ids])).logits[0, 9:-1].argmax(-1)
        for k in (1, 2, 3):
            own = exit_model(target, k)(torch.tensor([ids])).logits[0, 9:-1].argmax(-1)
            assert alphas[k] == pytest.approx(float((own == full).float().mean()))
    assert expected_tokens(0.0, 4) == 1.0 and expected_tokens(1.0, 4) == 5.0
    assert expected_tokens(0.5, 2) == pytest.approx(1.75)
    points = scan(target, CharTokenizer(), ["sliding windows"], max_new_tokens=6, reps=1, gammas=(1, 2))
    assert [p.layer for p in points] == [1, 2, 3] and all(p.c > 0 and p.best_gamma in (1, 2) for p in points)


# ---------------------------------------------------------------- the real Gemma 3 270M (fp32)


@pytest.mark.real_model
def test_gemma_greedy_with_the_preset_exit_equals_transformers(all_threads, gemma_fp32):
    """The early-exit preset's layer on the packaged Gemma 3 270M, float32: token-identical to
    generate(), with drafts accepted (the layer was chosen because its exit agrees often)."""
    from playground.config import load_config

    model, tok, eos = gemma_fp32
    layer = load_config().preset("gemma3-270m-early-exit").exit_layer
    ids = tok("The capital of France is")["input_ids"]
    with torch.inference_mode():
        ref = model.generate(torch.tensor([ids]), max_new_tokens=16, do_sample=False)[0, len(ids) :].tolist()
    r = run(
        model,
        tok,
        ids,
        RunSettings(gamma=3, max_new_tokens=16),
        drafter=EarlyExitDrafter(model, layer),
        eos_token_ids=eos,
    )
    assert list(r.token_ids) == ref[: len(r.token_ids)] and len(r.token_ids) == len(ref)
    assert r.stats.accepted_tokens > 0


@pytest.mark.parametrize("gamma", [1, 3])
def test_transformers_early_exit_drafts_gamma_tokens_per_step(gamma):
    """transformers reads γ from the assistant's own generation_config (here the target's): the
    bench sets it on its own view of the model, and the shared target's config and generation
    config stay as loaded."""
    from playground.models.tiny import build_tiny_pair
    from tools import bench

    target, _, tok = build_tiny_pair()
    pair = type("Pair", (), {"target": target, "tokenizer": tok, "eos_token_ids": (EOS,)})()
    before = (target.generation_config.to_dict(), target.config.to_dict())
    counted = []
    real = bench._CallCounter.__exit__

    def keep(self, *exc):
        counted.append((self.calls, self.skipped))
        return real(self, *exc)

    bench._CallCounter.__exit__ = keep
    spec = bench.Spec.of("hf_assisted", drafter="early-exit", gamma=gamma)
    try:
        new, _, calls, _ = bench._hf_run(pair, tok.encode("Hello there"), 12, 0.0, 0, spec, exit_layer=1)
    finally:
        bench._CallCounter.__exit__ = real
    ((full, drafts),) = counted
    assert len(new) == 12 and full == calls
    assert 0 < drafts <= gamma * full  # at most γ draft passes per verify pass (default: 20)
    assert (target.generation_config.to_dict(), target.config.to_dict()) == before


def test_drafters_leave_no_hook_on_the_shared_target():
    """The exit's layers are the target's own modules: building and running many drafters (one
    per request in the app) must leave no forward hook behind on them."""
    target, _ = sliding_pair(window=4)
    tok = CharTokenizer()
    for _ in range(3):
        run(target, tok, tok.encode("sliding windows"), RunSettings(gamma=2, max_new_tokens=6),
            drafter=EarlyExitDrafter(target, 2), eos_token_ids=[EOS])  # fmt: skip
    assert all(not layer._forward_hooks for layer in target.model.layers)
