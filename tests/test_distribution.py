"""Statistical losslessness through the full loop, and mutants that must fail.

Small vocabulary (V = 6) bigram models with hand-chosen, disagreeing tables:
the exact target distribution of the first two tokens is
P(y1, y2) = p(y1 | x) · p(y2 | y1), computed from the tables.  We draw N
two-token continuations with the real loop (ModelDrafter, verify, rollback,
bonus) and run a chi-square goodness-of-fit test against it.  The same test
is run on deliberately broken rules and must reject them: a statistical test
that passes a broken sampler proves nothing.
"""

import pytest
import torch
from scipy import stats

from playground.drafters.model import ModelDrafter
from playground.engine import GenerationConfig, run
from playground.sampling import SamplingParams, logits_to_probs
from tests.fakes import BigramLM

V = 6
N = 4000
ALPHA = 1e-3  # significance for "looks lossless"; mutants must give p far below it


class _Tok:
    def decode(self, ids, **_):
        return "".join(chr(65 + int(i)) for i in ids)

    def convert_ids_to_tokens(self, i):
        return chr(65 + int(i))


def _tables():
    g = torch.Generator().manual_seed(7)
    target = torch.randn(V, V, generator=g) * 1.5
    drafter = target + torch.randn(V, V, generator=g) * 1.5  # related but clearly different
    return target, drafter


def exact_pair_pmf(target_logits, params):
    rows = logits_to_probs(target_logits, params)  # [V, V]: row t = p(. | t)
    return (rows[0][:, None] * rows).flatten()  # [V*V], prompt = [0]


def sample_pairs(params, gamma, rule="lossless", draft_argmax=False, mode="speculative", n=N):
    target_logits, drafter_logits = _tables()
    target, drafter = BigramLM(target_logits), BigramLM(drafter_logits)
    config = GenerationConfig(
        mode=mode, gamma=gamma, temperature=params.temperature, top_k=params.top_k, top_p=params.top_p,
        max_new_tokens=2, trace=False, rule=rule,
    )
    counts = torch.zeros(V * V)
    tok = _Tok()
    for seed in range(n):
        d = ModelDrafter(drafter, V, argmax=draft_argmax) if mode == "speculative" else None
        r = run(target, tok, [0], config, drafter=d, generator=torch.Generator().manual_seed(seed))
        y1, y2 = r.token_ids
        counts[y1 * V + y2] += 1
    return counts, exact_pair_pmf(target_logits, params)


def gof_pvalue(counts, pmf):
    """Chi-square goodness of fit, pooling cells with expected count < 5."""
    expected = pmf.double() * counts.sum()
    observed = counts.double()
    if (observed[expected == 0] > 0).any():
        return 0.0  # a token the target can never produce
    big = expected >= 5
    obs = torch.cat([observed[big], observed[~big].sum().view(1)])
    exp = torch.cat([expected[big], expected[~big].sum().view(1)])
    keep = exp > 0
    obs, exp = obs[keep], exp[keep]
    exp = exp * (obs.sum() / exp.sum())  # float rounding of the pmf only
    return float(stats.chisquare(obs.numpy(), exp.numpy()).pvalue)


PARAMS = {
    "T=1": SamplingParams(temperature=1.0),
    "T=0.7,top-k=4": SamplingParams(temperature=0.7, top_k=4),
    "T=1.3,top-p=0.8": SamplingParams(temperature=1.3, top_p=0.8),
}


@pytest.mark.parametrize("gamma", [1, 3])
@pytest.mark.parametrize("name", list(PARAMS))
def test_speculative_sampling_matches_target_distribution(name, gamma):
    counts, pmf = sample_pairs(PARAMS[name], gamma)
    assert gof_pvalue(counts, pmf) > ALPHA


def test_autoregressive_baseline_matches_target_distribution():
    counts, pmf = sample_pairs(PARAMS["T=1"], 1, mode="autoregressive")
    assert gof_pvalue(counts, pmf) > ALPHA


@pytest.mark.parametrize(
    "rule,draft_argmax,gamma",
    [
        ("softmax-q", True, 1),  # argmax drafts verified against softmax q (transformers #32867)
        ("target-sample", False, 1),  # no residual: after a rejection, a plain target sample
        ("bonus-wrong-position", False, 1),  # bonus from p at position γ instead of γ+1
    ],
)
def test_mutants_are_detected(rule, draft_argmax, gamma):
    counts, pmf = sample_pairs(PARAMS["T=1"], gamma, rule=rule, draft_argmax=draft_argmax)
    assert gof_pvalue(counts, pmf) < 1e-6


def test_argmax_drafts_with_one_hot_q_are_lossless():
    # The honest version of the softmax-q mutant: same argmax drafts, one-hot q.
    counts, pmf = sample_pairs(PARAMS["T=1"], 1, draft_argmax=True)
    assert gof_pvalue(counts, pmf) > ALPHA


def test_exact_match_rule_is_lossless_but_accepts_less():
    counts, pmf = sample_pairs(PARAMS["T=1"], 1, rule="exact-match")
    assert gof_pvalue(counts, pmf) > ALPHA
