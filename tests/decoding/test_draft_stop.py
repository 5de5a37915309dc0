"""Early-stopped chains (``playground.decoding.draft_stop``): fewer drafts, the same output law.

1. Exact enumeration.  The tiny context-dependent laws of the block-verification tests
   (``tests.laws.laws``); the drafter samples a chain and stops once
   its path confidence is below τ (``ChainStop`` + ``draft_confidence``, the code the MTP
   drafter runs), so blocks have 1..γ drafts.  Every block and every verdict is enumerated
   with its probability and the emitted tokens extended by the target's continuation to
   γ+1 tokens: that law equals the target's to 1e-9 for every τ.
2. The mutant that draws the next draft and then drops it when its own q is small (the
   draft's value decides, not the drafts before it) must move the law by > 1e-3.
3. The MTP drafter: τ = 0 drafts γ tokens as before; a τ it cannot meet stops after one;
   greedy output equals transformers' with any τ; the first two sampled tokens follow the
   target's law (chi-square) with chains that stop early; the info the step view shows;
   settings outside [0, 1) are refused (preset, drafter, bench).
"""

from __future__ import annotations

from collections import defaultdict

import pytest
import torch

from playground.decoding import tree_grow
from playground.decoding.draft_stop import ChainStop, draft_confidence
from playground.decoding.engine import run
from playground.decoding.sampling import SamplingParams
from playground.drafters.hybrid import HybridDrafter
from playground.drafters.mtp import MTPDrafter
from playground.models.tiny import CharTokenizer
from playground.settings import RunSettings
from playground.validate import draft_stop as check_stop_below
from tests.contract import assert_greedy_equals_target, first_pair_counts, hf_greedy, seeded
from tests.laws import V, add_continuation, laws, target_law, tv, verdict_outcomes
from tests.stats import assert_follows, model_pair_pmf
from tests.tiny_models import EOS, char_target_and_head, prefix_state, rand_ids, tiny_head, tiny_target

SEEDS = [0, 1, 2, 3, 4]
TAUS = [0.0, 0.2, 0.5, 0.9]

# ---------------------------------------------------------------- 1. exact enumeration


def stopped_blocks(draft, gamma: int, tau: float, drop_mutant: bool = False):
    """Every chain the early-stopping drafter can propose, with its probability.

    The honest rule decides whether to draw draft j+1 from drafts 1..j (their path
    confidence).  The mutant draws draft j+1, then throws it away when its own q is below τ."""

    def grow(block, prob, stop):
        q = draft(tuple(block))  # [V] the law this draft is drawn from
        for x in range(V):
            if float(q[x]) == 0.0:
                continue
            p_x = prob * float(q[x])
            if drop_mutant and block and float(q[x]) < tau:
                yield list(block), p_x  # WRONG: the drawn draft's value decided to drop it
                continue
            nxt, s = block + [x], ChainStop(tau)
            s.path = stop.path
            if len(nxt) == gamma or (not drop_mutant and s.after(draft_confidence(q.log(), q))):
                yield nxt, p_x
            else:
                yield from grow(nxt, p_x, s)

    yield from grow([], 1.0, ChainStop(tau))


def stopped_law(target, draft, gamma, tau, drop_mutant=False):
    """Exact law of the first γ+1 tokens after one early-stopped step; and the mean drafts per step."""
    law, drafted = defaultdict(float), 0.0
    for block, q_prob in stopped_blocks(draft, gamma, tau, drop_mutant):
        k = len(block)
        drafted += q_prob * k
        draft_probs = torch.stack([draft(tuple(block[:i])) for i in range(k)])  # [k, V]
        target_probs = torch.stack([target(tuple(block[:i])) for i in range(k + 1)])  # [k+1, V]
        for prob, v in verdict_outcomes("lossless", block, draft_probs, target_probs, frozenset()):
            w = q_prob * prob
            emitted = block[: v.n_accepted]
            for y in range(V):
                add_continuation(law, target, emitted + [y], w * float(v.correction_dist[y]), gamma + 1, None)
    return law, drafted


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("gamma", [1, 2, 3])
@pytest.mark.parametrize("tau", TAUS)
def test_an_early_stopped_step_emits_the_targets_joint_law_exactly(tau, gamma, seed):
    target, draft = laws(seed)
    law, drafted = stopped_law(target, draft, gamma, tau)
    assert abs(sum(law.values()) - 1.0) < 1e-9
    assert tv(law, target_law(target, gamma + 1)) < 1e-9
    assert 1.0 - 1e-12 <= drafted <= gamma + 1e-12


def test_stopping_drafts_fewer_tokens_as_tau_grows():
    target, draft = laws(0)
    means = [stopped_law(target, draft, 3, tau)[1] for tau in TAUS]
    assert means[0] == pytest.approx(3.0)
    assert all(a >= b - 1e-12 for a, b in zip(means, means[1:])) and means[-1] < 2.0


def test_mutant_that_drops_a_drawn_draft_by_its_own_q_is_caught():
    worst = 0.0
    for seed in SEEDS:
        target, draft = laws(seed)
        law, _ = stopped_law(target, draft, 2, 0.5, drop_mutant=True)
        worst = max(worst, tv(law, target_law(target, 3)))
    assert worst > 1e-3


def test_chain_stop_rule():
    s = ChainStop(0.3)
    assert not s.after(0.9) and not s.after(0.5)  # path 0.45
    assert s.after(0.6)  # path 0.27 < 0.3
    assert s.info() == {"draft_stop": 0.3, "path_confidence": 0.27, "stopped_early": True}
    off = ChainStop(0.0)
    assert not off.active and not off.after(0.0) and off.info() == {}


def test_a_positions_confidence_is_its_rows_largest_probability():
    """Greedy: the argmax's softmax probability.  Sampled: q's largest entry, whichever token
    was drawn (a draw that lands on a less likely token says nothing against the position)."""
    logits = torch.tensor([2.0, 0.0, -1.0])
    assert draft_confidence(logits, None) == float(torch.softmax(logits, -1)[0])
    assert draft_confidence(logits, torch.tensor([0.1, 0.7, 0.2])) == pytest.approx(0.7)


@pytest.mark.parametrize("bad", [-0.1, 1.0, 2, float("nan"), "0.5", True, None])
def test_out_of_range_thresholds_are_refused(bad):
    with pytest.raises(ValueError, match="draft_stop"):
        check_stop_below(bad)


# ---------------------------------------------------------------- 3. the MTP drafter


@pytest.fixture(scope="module")
def target():
    return tiny_target()


def test_mtp_drafter_stops_early_and_says_so(target):
    head = tiny_head(target)
    state = prefix_state(target, rand_ids(10))
    full = MTPDrafter(target, head, eos_token_ids=[]).propose(state, 5, SamplingParams(), None)
    assert len(full.token_ids) == 5 and "draft_stop" not in full.info
    eager = MTPDrafter(target, head, eos_token_ids=[], stop_below=0.999)
    d = eager.propose(state, 5, SamplingParams(), None)
    assert d.token_ids == full.token_ids[:1]  # the same first draft, then it stops
    assert d.info["stopped_early"] and d.info["draft_stop"] == 0.999 and d.info["path_confidence"] < 0.999
    lax = MTPDrafter(target, head, eos_token_ids=[], stop_below=1e-12).propose(state, 5, SamplingParams(), None)
    assert lax.token_ids == full.token_ids and not lax.info["stopped_early"]
    with pytest.raises(ValueError, match="draft_stop"):
        MTPDrafter(target, head, eos_token_ids=[], stop_below=1.5)


def test_hybrid_forwards_the_threshold_to_its_model_drafter(target):
    mtp = MTPDrafter(target, tiny_head(target), eos_token_ids=[], stop_below=0.2)
    hybrid = HybridDrafter(mtp)
    assert hybrid.stop_below == 0.2
    hybrid.stop_below = 0.4
    assert mtp.stop_below == 0.4
    from playground.drafters.prompt_lookup import PromptLookupDrafter

    plain = HybridDrafter(PromptLookupDrafter())
    assert plain.stop_below is None
    with pytest.raises(AttributeError):
        plain.stop_below = 0.3


@pytest.mark.parametrize("tau", [0.3, 0.8])
def test_greedy_output_equals_transformers_with_early_stopping(tau):
    model, head = char_target_and_head()
    tok = CharTokenizer()
    prompt = tok.encode("The quick brown fox")
    ref = hf_greedy(model, prompt, 24, eos=None)
    for gamma in (1, 3, 5):
        drafter = MTPDrafter(model, head, eos_token_ids=[], stop_below=tau)
        cfg = RunSettings(mode="speculative", gamma=gamma, temperature=0.0, max_new_tokens=24)
        assert_greedy_equals_target(model, tok, prompt, cfg, drafter, eos_token_ids=[], expected=ref, msg=gamma)


def sampled_first_steps(temperature: float, tau: float, tree_nodes: int = 1, n: int = 2000):
    """n seeded runs of 4 tokens on a 12-token vocabulary (γ = 3, a noisy head): the chi-square
    of the first two tokens against the target's law is asserted; returns how many drafts each
    run's first step had."""
    vocab = 12
    model = tiny_target(vocab=vocab, seed=4)
    head = tiny_head(model, n_cand=10, noise=0.3, seed=6)
    prompt = [2, 5, 7, 3]
    cfg = RunSettings(gamma=3, temperature=temperature, max_new_tokens=4, trace=False, tree_nodes=tree_nodes)
    sizes = []

    def run_seed(seed):
        drafter = MTPDrafter(model, head, eos_token_ids=[], stop_below=tau)
        r = run(model, CharTokenizer(), prompt, cfg, drafter=drafter, eos_token_ids=[], generator=seeded(seed))
        sizes.append(len(r.steps[0].drafted))
        return r

    counts = first_pair_counts(run_seed, n, vocab)
    assert_follows(counts, model_pair_pmf(model, prompt, SamplingParams(temperature=temperature), vocab))
    return sizes


def test_first_two_sampled_tokens_follow_the_target_with_early_stopping():
    """T = 1, τ = 0.015: the head is unsure on this vocabulary, and whether its first chain stops
    after 2 drafts or runs to γ = 3 depends on the first draft drawn (which sets the second
    position's q): chains of both lengths must give p."""
    sizes = sampled_first_steps(1.0, 0.015)
    assert 0.2 < sizes.count(2) / len(sizes) < 0.8 and min(sizes) == 2  # cut short, at varying lengths


# ---------------------------------------------------------------- 4. trees stop growing too


def test_allocation_drops_slots_below_the_threshold():
    probs = torch.tensor([[0.6, 0.3, 0.1], [0.5, 0.4, 0.1]])  # [T=2, N=3]: the frontier's laws
    # slot values: node 0 (score 1.0): 0.6, 0.3, 0.1; node 1 (score 0.5): 0.25, 0.2, 0.05
    assert tree_grow.allocate([1.0, 0.5], probs, budget=6, branch=3) == [3, 3]
    assert tree_grow.allocate([1.0, 0.5], probs, budget=6, branch=3, min_score=0.2) == [2, 2]
    assert tree_grow.allocate([1.0, 0.5], probs, budget=6, branch=3, min_score=0.7) == [0, 0]


@pytest.mark.parametrize("tau", [0.05, 0.3])
@pytest.mark.parametrize("nodes", [4, 16])
def test_mtp_tree_greedy_equals_transformers_with_early_stopping(nodes, tau):
    target = tiny_target()
    head = tiny_head(target)
    tok = CharTokenizer()
    stopped = 0
    for prompt in ("the cat sat on the mat", "abababab", "hello"):
        drafter = MTPDrafter(target, head, eos_token_ids=[EOS], stop_below=tau)
        cfg = RunSettings(gamma=4, max_new_tokens=24, tree_nodes=nodes)
        r = assert_greedy_equals_target(target, tok, tok.encode(prompt), cfg, drafter, msg=prompt)
        stopped += sum(bool(s.drafter_info.get("stopped_early")) for s in r.steps)
    assert stopped > 0


def test_sampled_tree_with_early_stopping_follows_the_target():
    """T = 0.3, a 6-node tree of depth 3 that stops where no child slot reaches τ = 0.02 (the
    first tree has 2, 3 or 4 nodes, depending on what was drawn)."""
    sizes = sampled_first_steps(0.3, 0.02, tree_nodes=6)
    assert min(sizes) < max(sizes)  # the threshold changed the tree's size from draw to draw


def test_python_api_checks_and_threads_the_threshold():
    from playground import generate

    with pytest.raises(ValueError, match="draft_stop"):
        generate("Hello", preset="tiny-random", draft_stop=1.5, max_new_tokens=2)
    r = generate("Hello", preset="tiny-random", draft_stop=0.3, max_new_tokens=4)  # its drafter never stops: ignored
    assert len(r.token_ids) == 4
