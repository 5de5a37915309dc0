"""The Gemma 4 assistant drafter (playground.drafters.gemma4_assistant) on tiny random
Gemma 4 targets and tiny random ``Gemma4AssistantForCausalLM`` drafters: no weights, no hub.

The tiny pair is built so that drafts are accepted often but not always: the target's
decoder layers are damped (their post-norm weights scaled down), so its next token depends
mostly, but not only, on the current one; the assistant's tied head is the target's LM
head, its pre-projection passes the token embedding through, and its cluster centroids are
the mean head rows of their clusters.  Both accept and reject (rollback) paths are asserted.

Checks: the K/V read from the target cache equal transformers' ``shared_kv_states``; one
step equals ``Gemma4AssistantForCausalLM.forward``; q rows are exactly the sampled law
(zero on unscored tokens); greedy equality with ``generate()`` for γ ∈ {1, 2, 4}, with
sliding-window rollbacks, also through the multimodal wrapper; chi-square losslessness at
T = 1 with sampled and argmax drafts, and the "softmax-q" mutant (transformers' rule) fails.
"""

from __future__ import annotations

import pytest
import torch
from transformers import (
    DynamicCache,
    Gemma4Config,
    Gemma4ForCausalLM,
    Gemma4ForConditionalGeneration,
)

from playground.decoding.draft import TargetState
from playground.decoding.engine import run
from playground.decoding.sampling import SamplingParams, logits_to_probs
from playground.decoding.tree import ROOT
from playground.drafters.gemma4_assistant import Gemma4AssistantDrafter, context_kv, load_gemma4_assistant_drafter
from playground.settings import RunSettings
from tests import tiny_models
from tests.contract import (
    assert_argmax_mode,
    assert_greedy_draft_protocol,
    assert_greedy_equals_target,
    assert_q_is_the_sampling_law,
    assert_q_rows,
    assert_stateless_rollback,
    branched_steps,
    first_pair_counts,
    hf_greedy,
    rejected_drafts,
    seeded,
)
from tests.fakes import LetterTokenizer
from tests.stats import assert_does_not_follow, assert_follows, model_pair_pmf
from tests.tiny_models import gemma4_pair as build_pair
from tests.tiny_models import gemma4_text_config as text_config

S, F = "sliding_attention", "full_attention"
V = 64
EOS = 1
WINDOW = 4
H = 32


@pytest.fixture(scope="module")
def pair():
    return build_pair()


def prefix_state(model, ids: list[int]) -> TargetState:
    """What the loop hands the drafter (its cache records the past, as the loop's does)."""
    return tiny_models.prefix_state(model, ids, record_past=True)


def rand_ids(n: int, seed: int = 0, vocab: int = V) -> list[int]:
    return tiny_models.rand_ids(n, seed, vocab=vocab)


# ---------------------------------------------------------------- the drafter itself


def test_protocol_and_info(pair):
    target, assistant = pair
    d = Gemma4AssistantDrafter(target, assistant, eos_token_ids=[])
    draft = assert_greedy_draft_protocol(d, "gemma4-assistant", prefix_state(target, rand_ids(10)), 4)
    assert draft.forward_calls == 4
    info = draft.info
    assert info["hidden_from_position"] == 8  # the position before the newest token (index 9)
    assert info["position_id"] == 9  # every step queries from the newest token's position
    assert info["target_kv_layers"] == {F: 1, S: 0}  # the target's "store" layers
    assert info["target_kv_positions"] == 9 and info["sliding_kv_positions"] == WINDOW - 1
    assert info["candidates_scored"] == 4 * (V // 8) and info["clusters_scored"] == 4 and info["num_clusters"] == 8
    assert info["vocab_size"] == V and info["draft_steps"] == 4 and info["draft_ms_per_token"] > 0
    import json

    json.dumps(info)  # goes into the trace as it is


def test_shared_kv_equals_transformers_shared_kv_states(pair):
    """What the drafter reads from the target cache == transformers' ``return_shared_kv_states``,
    restricted to the committed context (all of it / the sliding window's last W-1)."""
    target, assistant = pair
    d = Gemma4AssistantDrafter(target, assistant, eos_token_ids=[])
    ids = rand_ids(12, seed=1)
    cache = DynamicCache(config=target.config)
    cache.activate_past_recording()
    with torch.no_grad():
        out = target(input_ids=torch.tensor([ids]), cache=cache, use_cache=True, return_shared_kv_states=True)
    ref = out.shared_kv_states
    for n_ctx in (12, 9, 2):  # 12: all; 9 and 2: later positions are rejected drafts, not yet cropped
        shared = d.shared_kv(cache, n_ctx)
        for i in (0, 1):
            assert torch.equal(shared[F][i], ref[F][i][..., :n_ctx, :])
            assert torch.equal(shared[S][i], ref[S][i][..., max(0, n_ctx - (WINDOW - 1)) : n_ctx, :])
    cache.crop(-3)  # the engine's rollback: the sliding layer keeps W-1 entries
    shared = d.shared_kv(cache, 9)
    assert torch.equal(shared[S][0], ref[S][0][..., 9 - (WINDOW - 1) : 9, :])
    assert torch.equal(shared[F][1], ref[F][1][..., :9, :])
    assert d.shared_kv(DynamicCache(config=target.config), 0) is None
    assert context_kv(None, 0, 5, None) is None


@pytest.mark.parametrize("masked", [True, False])
def test_step_equals_transformers_forward(masked):
    target, assistant = build_pair(masked=masked)
    d = Gemma4AssistantDrafter(target, assistant, eos_token_ids=[])
    ids = rand_ids(11, seed=2)
    state = prefix_state(target, ids)
    shared = d.shared_kv(state.target_cache, 10)
    logits, scored, h_next = d.step(ids[-1], state.hidden, 10, shared)
    x = torch.cat([target.get_input_embeddings()(torch.tensor([[ids[-1]]])), state.hidden.view(1, 1, -1)], dim=-1)
    with torch.no_grad():
        ref = assistant(inputs_embeds=x, position_ids=torch.tensor([[10]]), shared_kv_states=shared)
    assert torch.equal(ref.last_hidden_state[0, 0], h_next)  # post-projected state, fed back
    full = ref.logits[0, 0]
    if masked:
        assert scored.numel() == 32 and torch.equal(scored, torch.sort(scored).values)
        assert torch.equal(full[scored], logits)
        outside = torch.ones(V, dtype=torch.bool)
        outside[scored] = False
        assert bool((full[outside] < logits.min()).all())  # transformers' finite filler
        assert int(full.argmax()) == int(scored[logits.argmax()])
    else:
        assert scored is None and torch.equal(full, logits)


@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(temperature=1.0),
        SamplingParams(temperature=0.7, top_k=3),
        SamplingParams(temperature=1.3, top_p=0.8),
    ],
)
def test_q_rows_exact(pair, params):
    target, assistant = pair
    d = Gemma4AssistantDrafter(target, assistant, eos_token_ids=[])
    ids = rand_ids(9, seed=5)
    state = prefix_state(target, ids)
    draft = d.propose(state, 3, params, torch.Generator().manual_seed(0))
    q = assert_q_rows(draft, shape=(3, V))
    assert draft.soft_probs is None
    # replay the chain: each row is logits_to_probs over that step's scored tokens, zero elsewhere
    shared = d.shared_kv(state.target_cache, 8)
    tok, h = ids[-1], state.hidden
    for i, drafted in enumerate(draft.token_ids):
        logits, scored, h = d.step(tok, h, 8, shared)
        expected = torch.zeros(V)
        expected[scored] = logits_to_probs(logits, params)
        torch.testing.assert_close(q[i], expected, rtol=0, atol=0)
        tok = drafted


def test_q_matches_what_was_sampled(pair):
    """Empirical frequencies of the first draft token match q (the exact sampling law)."""
    target, assistant = pair
    d = Gemma4AssistantDrafter(target, assistant, eos_token_ids=[])
    state = prefix_state(target, rand_ids(6, seed=2))
    assert_q_is_the_sampling_law(d, state, SamplingParams(temperature=2.0), 1500, V, max_tv=0.07)


def test_greedy_and_argmax_mode(pair):
    target, assistant = pair
    state = prefix_state(target, rand_ids(7, seed=4))
    greedy, _ = assert_argmax_mode(
        lambda **kw: Gemma4AssistantDrafter(target, assistant, eos_token_ids=[], **kw), state, 3, V
    )
    assert greedy.soft_probs is None


def test_one_token_prompt_and_eos(pair):
    target, assistant = pair
    d = Gemma4AssistantDrafter(target, assistant, eos_token_ids=[])
    state = TargetState(committed_ids=[5], hidden=None, target_cache=DynamicCache(config=target.config))
    empty = d.propose(state, 3, SamplingParams(), None)
    assert empty.token_ids == [] and empty.info["hidden_from_position"] is None  # nothing to read yet
    r = assert_greedy_equals_target(
        target, LetterTokenizer(), [5], RunSettings(gamma=3, max_new_tokens=12), d, eos_token_ids=[]
    )
    assert len(r.steps[0].drafted) == 0 and len(r.steps[1].drafted) > 0
    s = prefix_state(target, rand_ids(8, seed=6))
    toks = d.propose(s, 5, SamplingParams(), None).token_ids
    stop = Gemma4AssistantDrafter(target, assistant, eos_token_ids=[toks[1]])
    assert stop.propose(s, 5, SamplingParams(), None).token_ids == toks[:2]


def test_stateless_rollback(pair):
    """Proposals depend only on the TargetState: a fresh drafter agrees, and target K/V of
    rejected drafts still in the cache (not yet cropped) are ignored."""
    target, assistant = pair
    assert_stateless_rollback(
        lambda: Gemma4AssistantDrafter(target, assistant, eos_token_ids=[]),
        lambda ids: prefix_state(target, ids),
        target,
        rand_ids(14, seed=8),
    )


def test_rejects_mismatched_models(pair):
    target, assistant = pair
    zeros = build_pair(seed=1)[1]
    with torch.no_grad():
        zeros.masked_embedding.token_ordering.zero_()  # transformers' init: not loaded from a checkpoint
    with pytest.raises(ValueError, match="permutation"):
        Gemma4AssistantDrafter(target, zeros)
    other = Gemma4ForCausalLM(text_config(V, 2, [S, F], hidden_size=48, hidden_size_per_layer_input=0))
    with pytest.raises(ValueError, match="hidden size"):
        Gemma4AssistantDrafter(other, assistant)
    from tests.fakes import BigramLM

    with pytest.raises(ValueError, match="Gemma 4 target"):
        Gemma4AssistantDrafter(BigramLM(torch.zeros(V, V)), assistant)
    assert load_gemma4_assistant_drafter(target, assistant).eos == frozenset({EOS})


def test_preset_and_api_wiring(pair):
    from playground.api import make_drafter, resolve
    from playground.config import load_config
    from playground.models.loading import ModelPair, availability

    p, kind = resolve("hub-gemma4-e2b-mtp", None)
    assert kind == "gemma4-assistant" and p.source == "hub" and p.drafters == ("gemma4-assistant", "prompt-lookup")
    assert (p.target, p.drafter_model) == ("google/gemma-4-E2B-it", "google/gemma-4-E2B-it-assistant")
    assert {p.target, p.drafter_model} <= set(load_config().hub_allowlist)
    ok, reason = availability(p)  # offline here (conftest): listed as unavailable, with the reason
    assert ok or "Hugging Face hub" in reason
    target, assistant = pair
    duo = ModelPair(target=target, tokenizer=None, eos_token_ids=(EOS,), drafter_model=assistant)
    d = make_drafter(kind, duo, p)
    assert isinstance(d, Gemma4AssistantDrafter) and d.eos == frozenset({EOS}) and not d.argmax
    assert make_drafter(kind, duo, p, argmax=True).argmax


# ---------------------------------------------------------------- through the loop: greedy


def test_greedy_equality_through_engine(pair):
    """Speculative decoding with the assistant == the target's greedy generate() (float32,
    eager), prompts longer than the sliding window (4), with accepted and rejected drafts."""
    target, assistant = pair
    drafter = Gemma4AssistantDrafter(target, assistant, eos_token_ids=[])
    accepted = rejected = 0
    for gamma in (1, 2, 4):
        for seed in range(3):
            prompt = rand_ids(10, seed=seed)
            cfg = RunSettings(gamma=gamma, max_new_tokens=24)
            res = assert_greedy_equals_target(
                target, LetterTokenizer(), prompt, cfg, drafter, eos_token_ids=[], msg=(gamma, seed)
            )
            accepted += res.stats.accepted_tokens
            rejected += rejected_drafts(res)
            assert all(s.drafter_info["sliding_kv_positions"] == WINDOW - 1 for s in res.steps if s.drafted)
    assert accepted > 20 and rejected > 20, (accepted, rejected)  # both paths, rollbacks included


@pytest.mark.parametrize("nodes", [4, 12])
def test_tree_greedy_equality_through_engine(pair, nodes):
    """Draft trees from the assistant (each node its own (token, h)) == greedy generate()."""
    target, assistant = pair
    drafter = Gemma4AssistantDrafter(target, assistant, eos_token_ids=[])
    branched = 0
    for gamma in (2, 4):
        for seed in range(2):
            prompt = rand_ids(10, seed=seed)
            cfg = RunSettings(gamma=gamma, max_new_tokens=20, tree_nodes=nodes)
            res = assert_greedy_equals_target(
                target, LetterTokenizer(), prompt, cfg, drafter, eos_token_ids=[], msg=(gamma, seed)
            )
            branched += branched_steps(res)
    assert branched > 0


def test_a_sampled_tree_steps_only_from_the_root_and_first_children(small_pair):
    """Later siblings get no children when sampling (``tree_grow``), so the assistant takes no
    step from them: one step for the root, then one per first child that is expanded."""
    target, assistant = small_pair
    drafter = Gemma4AssistantDrafter(target, assistant, eos_token_ids=[])
    drafter.start(prefix_state(target, PROMPT))
    for seed in range(5):
        draft = drafter.propose_tree(
            prefix_state(target, PROMPT), 9, 3, SamplingParams(temperature=1.0), torch.Generator().manual_seed(seed)
        )
        tree = draft.tree
        first = [j for j, parent in enumerate(tree.parents) if tree.parents.index(parent) == j]  # first of siblings
        expanded = set(tree.parents) - {ROOT}
        assert expanded <= set(first) and len(tree) > len(first)  # siblings drawn, only first ones expanded
        assert draft.forward_calls == 1 + sum(1 for j in first if tree.depth(j) < 3)


def test_tree_sampling_matches_target_distribution(small_pair):
    target, assistant = small_pair
    params = SamplingParams(temperature=1.0)
    config = RunSettings(gamma=2, temperature=1.0, max_new_tokens=3, trace=False, tree_nodes=6)
    drafter = Gemma4AssistantDrafter(target, assistant, eos_token_ids=[])
    counts = first_pair_counts(
        lambda seed: run(
            target, LetterTokenizer(), PROMPT, config, drafter=drafter, eos_token_ids=[], generator=seeded(seed)
        ),
        1500,
        DV,
    )
    assert_follows(counts, model_pair_pmf(target, PROMPT, params, DV))


def test_greedy_equality_through_multimodal_wrapper(pair):
    """The hub checkpoint loads as Gemma4ForConditionalGeneration: the text path works the same."""
    target, assistant = pair
    cfg = Gemma4Config(
        text_config=target.config.to_dict(), vision_config=None, audio_config=None, tie_word_embeddings=False
    )
    mm = Gemma4ForConditionalGeneration(cfg).eval()
    with torch.no_grad():
        mm.model.language_model.load_state_dict(target.model.state_dict())
        mm.lm_head.weight.copy_(target.lm_head.weight)
    drafter = load_gemma4_assistant_drafter(mm, assistant, eos_token_ids=[])
    prompt = rand_ids(9, seed=3)
    cfg = RunSettings(gamma=3, max_new_tokens=16)
    res = assert_greedy_equals_target(
        mm, LetterTokenizer(), prompt, cfg, drafter, eos_token_ids=[], expected=hf_greedy(target, prompt, 16, eos=None)
    )
    assert res.stats.accepted_tokens > 0


# ---------------------------------------------------------------- through the loop: distribution

DV = 16  # vocabulary of the distribution tests: 4 clusters of 4 tokens, 2 clusters scored
PROMPT = [3, 7, 11, 5, 9, 12]


@pytest.fixture(scope="module")
def small_pair():
    return build_pair(vocab=DV, clusters=4, top=2, head_scale=12.0, seed=3)


def sample_pairs(models, n, argmax=False, rule="lossless"):
    """The first two tokens of n seeded runs (budget 3: the first step drafts up to 2)."""
    target, assistant = models
    params = SamplingParams(temperature=1.0)
    config = RunSettings(gamma=2, temperature=1.0, max_new_tokens=3, trace=False, rule=rule)
    drafter = Gemma4AssistantDrafter(target, assistant, eos_token_ids=[], argmax=argmax)
    accepted = rejected = 0

    def run_seed(seed):
        nonlocal accepted, rejected
        r = run(target, LetterTokenizer(), PROMPT, config, drafter=drafter, eos_token_ids=[], generator=seeded(seed))
        accepted += r.stats.accepted_tokens
        rejected += r.stats.judged_tokens - r.stats.accepted_tokens
        return r

    counts = first_pair_counts(run_seed, n, DV)
    return counts, model_pair_pmf(target, PROMPT, params, DV), accepted, rejected


@pytest.mark.parametrize("argmax,n", [(False, 2000), (True, 1200)])
def test_sampling_matches_target_distribution(small_pair, argmax, n):
    counts, pmf, accepted, rejected = sample_pairs(small_pair, n, argmax=argmax)
    assert accepted > 0.2 * n and rejected > 0.2 * n  # drafts are judged both ways
    assert_follows(counts, pmf)


def test_softmax_q_mutant_is_detected(small_pair):
    """transformers' rule for this drafter when sampling: argmax drafts judged against the
    drafter's softmax instead of the one-hot q.  Biased, and the test sees it."""
    counts, pmf, _, _ = sample_pairs(small_pair, 500, argmax=True, rule="softmax-q")
    assert_does_not_follow(counts, pmf)
