"""The verifier's math on hand-built distributions (no models).

Vocabulary of 4 tokens throughout unless stated: ids 0..3.
"""

import pytest
import torch

from playground.decoding.engine import verify
from playground.decoding.sampling import (
    SamplingParams,
    acceptance_prob,
    accepted_length_pmf,
    draw_draft_token,
    expected_tokens_per_step,
    is_accepted,
    logits_to_probs,
    one_hot,
    plain_softmax,
    predicted_speedup,
    residual_distribution,
)

T = torch.tensor


def fixed(us):
    """A uniform source that returns the given u values in order."""
    it = iter(us)
    return lambda: next(it)


def argmax_draw(dist):
    return int(torch.argmax(dist))


# ---------------------------------------------------------------- pure pieces


def test_acceptance_prob_ratio_and_cap():
    assert acceptance_prob(0.2, 0.4) == pytest.approx(0.5)  # p/q < 1
    assert acceptance_prob(0.6, 0.3) == 1.0  # p/q = 2, capped
    assert acceptance_prob(0.0, 0.3) == 0.0  # target says impossible
    assert acceptance_prob(0.5, 0.0) == 0.0  # q(x)=0 can't have been drafted: reject, no division


def test_is_accepted_is_strict():
    assert is_accepted(0.49, 0.5)
    assert not is_accepted(0.5, 0.5)  # u < a, so P(accept) = a exactly for u ~ U[0,1)
    assert is_accepted(0.0, 1e-9)
    assert not is_accepted(0.0, 0.0)  # p(x) = 0 is never accepted, even with u = 0


def test_residual_is_normalised_positive_part():
    p = T([0.5, 0.3, 0.2, 0.0])
    q = T([0.2, 0.5, 0.1, 0.2])
    r = residual_distribution(p, q)  # max(0, p-q) = [0.3, 0, 0.1, 0] -> [0.75, 0, 0.25, 0]
    assert torch.allclose(r, T([0.75, 0.0, 0.25, 0.0]))


def test_residual_zero_mass_falls_back_to_target():
    p = T([0.25, 0.25, 0.5, 0.0])
    r = residual_distribution(p, p.clone())  # p == q: no residual mass
    assert torch.allclose(r, p)
    assert not torch.isnan(r).any()


def test_residual_one_hot_q_removes_the_draft():
    p = T([0.5, 0.3, 0.2, 0.0])
    r = residual_distribution(p, one_hot(T(0), 4))  # draft 0 rejected: p without 0, renormalised
    assert torch.allclose(r, T([0.0, 0.6, 0.4, 0.0]))


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0])
def test_temperature_scales_logits(temperature):
    logits = T([[2.0, 1.0, 0.0, -1.0]])
    probs = logits_to_probs(logits, SamplingParams(temperature=temperature))
    assert torch.allclose(probs, torch.softmax(logits / temperature, -1))


def test_greedy_is_one_hot_argmax_without_dividing_by_zero():
    probs = logits_to_probs(T([[0.1, 3.0, 2.9, -1.0]]), SamplingParams(temperature=0.0))
    assert probs.tolist() == [[0.0, 1.0, 0.0, 0.0]]


def test_top_k_keeps_k_largest():
    probs = logits_to_probs(T([1.0, 4.0, 3.0, 2.0]), SamplingParams(temperature=1.0, top_k=2))
    assert probs[0] == 0 and probs[3] == 0
    assert torch.allclose(probs[1:3], torch.softmax(T([4.0, 3.0]), -1))


def test_top_p_keeps_smallest_prefix_reaching_p():
    # softmax-free check: log-probs of [0.5, 0.3, 0.15, 0.05]
    logits = T([0.5, 0.3, 0.15, 0.05]).log()
    probs = logits_to_probs(logits, SamplingParams(temperature=1.0, top_p=0.8))
    # 0.5 < 0.8, 0.5+0.3 = 0.8 reaches it: keep {0, 1}
    assert torch.allclose(probs, T([0.625, 0.375, 0.0, 0.0]))
    probs = logits_to_probs(logits, SamplingParams(temperature=1.0, top_p=0.81))
    assert probs[2] > 0 and probs[3] == 0  # needs the third token


def test_top_p_always_keeps_the_top_token():
    probs = logits_to_probs(T([0.0, 5.0, 0.0]), SamplingParams(temperature=1.0, top_p=0.01))
    assert probs.tolist() == [0.0, 1.0, 0.0]


@pytest.mark.parametrize(
    "kwargs", [dict(temperature=-1), dict(temperature=float("nan")), dict(top_p=0.0), dict(top_p=1.5), dict(top_k=-1)]
)
def test_sampling_params_validate(kwargs):
    with pytest.raises(ValueError):
        SamplingParams(**kwargs)


def test_expected_tokens_and_speedup_formulas():
    assert expected_tokens_per_step(0.0, 4) == 1.0
    assert expected_tokens_per_step(1.0, 4) == 5.0
    assert expected_tokens_per_step(0.5, 2) == pytest.approx(1 + 0.5 + 0.25)
    # a worked example of the cost model: α=0.8, γ=6, c=0.07, v=1.4 -> S ≈ 2.2
    assert predicted_speedup(0.8, 6, 0.07, 1.4) == pytest.approx(2.18, abs=0.01)
    pmf = accepted_length_pmf(0.6, 3)
    assert sum(pmf) == pytest.approx(1.0)
    assert sum(n * w for n, w in enumerate(pmf)) + 1 == pytest.approx(expected_tokens_per_step(0.6, 3))


# ---------------------------------------------------------------- verify(): hand-built steps


def test_verify_accepts_all_then_bonus_from_position_gamma_plus_one():
    drafts = [1, 2]
    q = T([[0.1, 0.8, 0.1, 0.0], [0.1, 0.1, 0.8, 0.0]])
    p = T([[0.0, 0.9, 0.1, 0.0], [0.0, 0.1, 0.9, 0.0], [0.0, 0.0, 0.0, 1.0]])  # bonus row: token 3
    v = verify(drafts, q, p, uniform=fixed([0.99, 0.05]), draw=argmax_draw)
    # d1: p/q = 0.9/0.8 >= 1 -> accepted whatever u; d2: 0.9/0.8 -> accepted
    assert v.accepted == (True, True) and v.n_accepted == 2
    assert v.correction_kind == "bonus" and v.correction_row == 2 and v.correction_token == 3


def test_verify_rejects_and_resamples_from_residual():
    drafts = [0, 1]
    q = T([[0.8, 0.2, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]])
    p = T([[0.2, 0.1, 0.7, 0.0], [0.25, 0.25, 0.25, 0.25], [1.0, 0, 0, 0]])
    v = verify(drafts, q, p, uniform=fixed([0.3]), draw=argmax_draw)
    # d1 = 0: ratio 0.2/0.8 = 0.25, u = 0.3 >= 0.25 -> rejected, d2 never judged
    assert v.accepted == (False,) and v.n_accepted == 0 and v.rejected_at == 0
    # residual max(0, p-q) = [0, 0, 0.7, 0] -> token 2 with probability 1
    assert v.correction_kind == "resample" and v.correction_token == 2
    assert torch.allclose(v.correction_dist, T([0.0, 0.0, 1.0, 0.0]))


def test_verify_second_draft_rejected_after_first_accepted():
    drafts = [1, 3]
    q = T([[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]])  # one-hot: deterministic drafts
    p = T([[0.1, 0.6, 0.3, 0.0], [0.5, 0.0, 0.3, 0.2], [0.25] * 4])
    v = verify(drafts, q, p, uniform=fixed([0.59, 0.25]), draw=argmax_draw)
    # d1 = 1 accepted (u 0.59 < p 0.6); d2 = 3: accept prob p(3) = 0.2, u = 0.25 -> rejected
    assert v.accepted == (True, False) and v.n_accepted == 1
    # residual = p with token 3 removed -> [0.625, 0, 0.375, 0] -> argmax 0
    assert torch.allclose(v.correction_dist, T([0.625, 0.0, 0.375, 0.0]))
    assert v.correction_row == 1 and v.correction_token == 0


def test_verify_p_equals_q_always_accepts():
    drafts = [2]
    q = T([[0.1, 0.2, 0.3, 0.4]])
    p = T([[0.1, 0.2, 0.3, 0.4], [0.0, 1.0, 0.0, 0.0]])
    v = verify(drafts, q, p, uniform=fixed([0.999999]), draw=argmax_draw)
    assert v.accepted == (True,) and v.correction_kind == "bonus" and v.correction_token == 1


def test_verify_zero_draft_step_is_a_plain_target_step():
    p = T([[0.0, 0.0, 1.0, 0.0]])
    v = verify([], None, p, uniform=fixed([]), draw=argmax_draw)
    assert v.n_accepted == 0 and v.correction_kind == "target" and v.correction_token == 2


def test_verify_accepted_eos_ends_the_step_without_bonus():
    eos = frozenset({3})
    drafts = [1, 3]
    q = one_hot(T(drafts), 4)
    p = T([[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0], [1.0, 0, 0, 0]])
    v = verify(drafts, q, p, eos=eos, uniform=fixed([0.5, 0.5]), draw=argmax_draw)
    assert v.n_accepted == 2 and v.eos_accepted and v.correction_token is None


def test_verify_greedy_path_accepts_iff_argmax():
    # Temperature 0: p one-hot on the target argmax, q one-hot on the draft.
    p = one_hot(T([1, 2, 0]), 4)
    q = one_hot(T([1, 3]), 4)
    v = verify([1, 3], q, p, uniform=fixed([0.999, 0.0]), draw=argmax_draw)
    # 1 == argmax -> accepted (even with u close to 1); 3 != 2 -> rejected (even with u = 0)
    assert v.accepted == (True, False)
    assert v.correction_token == 2  # the target's own argmax


# ---------------------------------------------------------------- exactness by enumeration


def enumerate_first_token_pmf(target_probs, draft_probs, rule="lossless", drafted_from=None):
    """Exact distribution of the first emitted token of a one-draft step.

    Enumerates the drafted token d ~ drafted_from (default: draft_probs, the
    honest case), the uniform u (the verdict depends on u only through u < a,
    so it is piecewise constant between the breakpoints {a_d}: one midpoint
    per interval, weighted by its width) and the residual draw (the verdict's
    correction distribution, taken whole).  verify() is handed draft_probs as q.
    """
    drafted_from = draft_probs if drafted_from is None else drafted_from
    V = target_probs.shape[-1]
    p_rows = torch.stack([target_probs, torch.full((V,), 1.0 / V)])  # [2, V]; bonus row unused
    a = [acceptance_prob(float(target_probs[d]), float(draft_probs[d])) for d in range(V)]
    points = sorted({0.0, 1.0, *a})
    pmf = torch.zeros(V, dtype=torch.float64)
    for lo, hi in zip(points, points[1:]):
        width, mid = hi - lo, (lo + hi) / 2
        if width == 0:
            continue
        for d in range(V):
            if drafted_from[d] == 0:
                continue
            captured = {}

            def draw(dist):
                captured["dist"] = dist
                return 0

            v = verify([d], draft_probs[None], p_rows, rule=rule, uniform=fixed([mid]), draw=draw)
            w = float(drafted_from[d]) * width
            if v.accepted[0]:
                pmf[d] += w
            else:
                pmf += w * captured["dist"].double()
    return pmf


def _dists(seed, V=7):
    g = torch.Generator().manual_seed(seed)
    p = torch.softmax(torch.randn(V, generator=g) * 2, -1)
    q = torch.softmax(torch.randn(V, generator=g) * 2, -1)
    sparse_q = q.clone()
    sparse_q[[1, 4]] = 0
    sparse_q /= sparse_q.sum()
    topk_q = logits_to_probs(torch.randn(V, generator=g), SamplingParams(temperature=1.0, top_k=3))
    topk_p = logits_to_probs(torch.randn(V, generator=g), SamplingParams(temperature=0.7, top_k=4, top_p=0.9))
    return {
        "random": (p, q),
        "sparse_q": (p, sparse_q),
        "topk_truncated": (topk_p, topk_q),
        "one_hot_q": (p, one_hot(T(3), V)),
        "p_equals_q": (p, p.clone()),
        "disjoint_support": (one_hot(T(0), V) * 0.5 + one_hot(T(1), V) * 0.5, one_hot(T(5), V)),
    }


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(
    "case", ["random", "sparse_q", "topk_truncated", "one_hot_q", "p_equals_q", "disjoint_support"]
)
def test_verifier_output_distribution_equals_target_exactly(seed, case):
    p, q = _dists(seed)[case]
    pmf = enumerate_first_token_pmf(p, q)
    assert (pmf - p.double()).abs().max() < 1e-6


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("mutant", ["softmax-q", "target-sample"])
def test_enumeration_detects_wrong_rules(seed, mutant):
    # Mutants must make the exact enumeration fail, or the test above proves nothing.
    p, q = _dists(seed)["random"]
    if mutant == "softmax-q":
        # drafts are the drafter's argmax (q is really one-hot), but verify() is handed softmax q
        hot = one_hot(q.argmax(), len(q))
        pmf = enumerate_first_token_pmf(p, q, drafted_from=hot)
        honest = enumerate_first_token_pmf(p, hot)
        assert (honest - p.double()).abs().max() < 1e-6
    else:
        pmf = enumerate_first_token_pmf(p, q, rule="target-sample")
    assert (pmf - p.double()).abs().max() > 1e-3


@pytest.mark.parametrize("argmax", [False, True])
def test_draw_draft_token_row_is_q_only_for_sampled_drafts(argmax):
    logits = torch.tensor([0.0, 2.0, 1.0, -1.0])  # argmax is index 1
    # T = 0: the argmax, and no row (q is a point mass)
    assert draw_draft_token(logits, SamplingParams(temperature=0.0), argmax, None) == (1, None)
    params = SamplingParams(temperature=1.0)
    q = logits_to_probs(logits, params)
    counts = torch.zeros(4)
    g = torch.Generator().manual_seed(0)
    for _ in range(2000):
        idx, row = draw_draft_token(logits, params, argmax, g)
        assert torch.equal(row, q)  # sampled: row IS q; argmax mode: the softmax, for soft_probs only
        counts[idx] += 1
    if argmax:
        assert counts[1] == 2000  # always the argmax: q is a point mass, not row
    else:
        assert (counts / 2000 - q).abs().max() < 0.04  # drawn from row


# ---------------------------------------------------------------- drawing one token


@pytest.mark.parametrize(
    "weights",
    [
        [0.0, 0.2, 0.0, 0.5, 0.3, 0.0],  # zeros first, between and last
        [1.0, 1.0, 1.0, 1.0],  # unnormalised weights are fine
        [0.0, 0.0, 3e-8, 0.0, 1.0],  # a tiny weight still gets its own interval
    ],
)
def test_index_at_gives_each_index_an_interval_as_wide_as_its_weight(weights):
    from playground.decoding.sampling import index_at

    w = T(weights, dtype=torch.float64)
    cdf = (w.cumsum(0) / w.sum()).tolist()
    lo = 0.0
    for i, hi in enumerate(cdf):
        if w[i] == 0:
            continue  # an empty interval: never drawn (checked at every edge below)
        assert index_at(w, lo) == i  # the left edge is in
        assert index_at(w, (lo + hi) / 2) == i
        assert index_at(w, hi - 1e-12) == i  # the right edge is out (the next index's)
        lo = hi
    assert all(w[index_at(w, u)] > 0 for u in [0.0, *cdf[:-1], 1 - 1e-16])


def test_index_at_mutant_searching_from_the_left_draws_a_zero_weight():
    # side="left" returns the first cdf >= u*total: at u = 0 that is index 0 with weight 0.
    w = T([0.0, 0.4, 0.6])
    wrong = int(torch.searchsorted(w.double().cumsum(0), torch.tensor([0.0], dtype=torch.float64)))
    assert w[wrong] == 0  # the mutant is wrong here...
    from playground.decoding.sampling import index_at

    assert index_at(w, 0.0) == 1  # ...and the real rule is not


def test_draw_index_uses_one_uniform_and_matches_a_big_vocabulary():
    """On a 262k-wide row with most mass in a few ids, 4,000 draws match the probabilities
    (chi-square over the heavy ids and "the rest"), and each draw takes exactly one uniform."""
    from playground.decoding.sampling import draw_index

    V = 262_144
    logits = torch.full((V,), -4.0)
    heavy = torch.tensor([3, 1000, 77_777, V - 1])
    logits[heavy] = torch.tensor([4.0, 3.5, 3.0, 2.5])
    p = torch.softmax(logits, -1)
    expected = torch.cat([p[heavy], (1 - p[heavy].sum()).reshape(1)]).double() * 4000
    counts = torch.zeros(5, dtype=torch.float64)
    gen = torch.Generator().manual_seed(1)
    twin = torch.Generator().manual_seed(1)
    for _ in range(4000):
        i = draw_index(p, gen)
        torch.rand((), generator=twin, dtype=torch.float64)  # one uniform per draw: the twins stay in step
        hit = (heavy == i).nonzero()
        counts[int(hit) if len(hit) else 4] += 1
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 18.5  # 4 degrees of freedom, p = 0.001
    assert torch.equal(gen.get_state(), twin.get_state())


@pytest.mark.parametrize("vocab", [3, 1024, 1500, 4096])
def test_index_at_agrees_with_a_plain_cumulative_sum_across_blocks(vocab):
    """The two-level search (block sums, then inside one block) returns what one full
    cumulative sum would, for u on a grid and at every bin edge, with zero-weight runs
    that cover whole blocks."""
    from playground.decoding.sampling import index_at

    g = torch.Generator().manual_seed(vocab)
    w = torch.rand(vocab, generator=g, dtype=torch.float64) ** 4
    w[: vocab // 3] = 0.0  # leading zeros (whole blocks when vocab is large)
    w[vocab // 2 : vocab // 2 + vocab // 5] = 0.0
    cdf = w.cumsum(0) / w.sum()

    def reference(u):
        return int(torch.searchsorted(cdf, torch.tensor([u], dtype=torch.float64), right=True))

    grid = [k / 997 for k in range(997)]
    edges = [float(c) + d for c in cdf[w > 0][:-1][::7] for d in (-1e-13, 1e-13)]
    for u in grid + edges:
        assert index_at(w, u) == reference(u), u
    assert w[index_at(w, 1 - 1e-16)] > 0


@pytest.mark.parametrize(
    ("params", "plain"),
    [
        (SamplingParams(1.0), True),
        (SamplingParams(1.0, top_k=1000), True),  # top-k past the vocabulary filters nothing
        (SamplingParams(0.7), False),
        (SamplingParams(1.0, top_k=40), False),
        (SamplingParams(1.0, top_p=0.9), False),
        (SamplingParams(1.0, min_p=0.05), False),
    ],
)
def test_plain_softmax_is_exactly_when_logits_to_probs_is_the_softmax(params, plain):
    """batch_probs reads the confidence off p where plain_softmax says so: p must then be the
    float32 softmax bit for bit, and where it says not, some row must differ."""
    logits = (torch.randn(4, 500, generator=torch.Generator().manual_seed(0)) * 3).bfloat16()
    assert plain_softmax(params, 500) is plain
    assert torch.equal(logits_to_probs(logits, params), torch.softmax(logits.float(), dim=-1)) is plain


@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(0.7),
        SamplingParams(1.0),
        SamplingParams(1.3, top_k=7, top_p=0.9, min_p=0.02),
        SamplingParams(0.0),
    ],
)
def test_scratch_logits_give_the_same_bits(params):
    """scratch=True may overwrite the caller's float32 logits (the batched read's own copy);
    p must be the same bits as from untouched logits."""
    logits = torch.randn(3, 500, generator=torch.Generator().manual_seed(1)) * 3  # float32: not copied by .float()
    kept = logits.clone()
    expected = logits_to_probs(logits, params)
    assert torch.equal(logits, kept)  # without scratch the caller's logits stay as they were
    assert torch.equal(logits_to_probs(logits.clone(), params, scratch=True), expected)
