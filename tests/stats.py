"""Goodness of fit and exact enumeration for the statistical tests.

* ``gof_pvalue(counts, pmf)``: chi-square goodness of fit of observed counts to an exact
  pmf (cells with expected count < 5 pooled; a count where the pmf is 0 gives p = 0).
* ``ALPHA`` (a lossless sampler must give p above it) and ``MUTANT_P`` (a broken one must
  give p below it).
* Exact laws: ``table_pair_pmf`` (the first two tokens of a bigram table model),
  ``model_pair_pmf`` (the first two tokens, from a model's own passes) and
  ``next_token_probs`` (the first token).
* ``PARAMS``: the sampling settings the table-driven distribution tests run under.
"""

import torch
from scipy import stats

from playground.decoding.sampling import SamplingParams, logits_to_probs

ALPHA = 1e-3  # significance for "looks lossless"; mutants must give p far below it
MUTANT_P = 1e-6  # a mutant's p-value must fall below this

PARAMS = {
    "T=1": SamplingParams(temperature=1.0),
    "T=0.7,top-k=4": SamplingParams(temperature=0.7, top_k=4),
    "T=1.3,top-p=0.8": SamplingParams(temperature=1.3, top_p=0.8),
}


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


def table_pair_pmf(target_logits, params, last: int = 0):
    """P(y1, y2) = p(y1 | last) · p(y2 | y1) of a bigram table model ([V, V] logits) whose
    prompt ends in token ``last``. [V*V]"""
    rows = logits_to_probs(target_logits, params)  # [V, V]: row t = p(. | t)
    return (rows[last][:, None] * rows).flatten()


@torch.inference_mode()
def model_pair_pmf(model, prompt, params, vocab: int):
    """P(y1, y2) = p(y1 | prompt) · p(y2 | prompt, y1), from the model's own passes. [V*V]"""
    first = logits_to_probs(model(input_ids=torch.tensor([list(prompt)])).logits[0, -1], params)  # [V]
    rows = torch.stack(
        [
            logits_to_probs(model(input_ids=torch.tensor([list(prompt) + [y]])).logits[0, -1], params)
            for y in range(vocab)
        ]
    )  # [V, V]
    return (first[:, None] * rows).flatten()


@torch.no_grad()
def next_token_probs(model, prompt, params):
    """p(y1 | prompt) under the sampling settings. [V]"""
    return logits_to_probs(model(input_ids=torch.tensor([list(prompt)])).logits[0, -1], params)


def assert_follows(counts, pmf, alpha=ALPHA):
    """The sample looks drawn from pmf: chi-square p above alpha."""
    p = gof_pvalue(counts, pmf)
    assert p > alpha, f"chi-square p = {p:.3g} <= {alpha}: not the expected distribution"


def assert_does_not_follow(counts, pmf, below=MUTANT_P):
    """A mutant's sample: chi-square p below ``below``."""
    p = gof_pvalue(counts, pmf)
    assert p < below, f"chi-square p = {p:.3g} >= {below}: the mutant was not detected"
