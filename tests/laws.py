"""Tiny context-dependent laws and the exact law of one verify step, enumerated.

A vocabulary of ``V`` tokens; ``laws(seed)`` gives a target and a drafter as functions
prefix -> [V] distribution (seeded, with zeros and near-equal rows).  ``step_law`` enumerates
every draft block with its probability and every verdict of ``engine.verify`` with its
probability (each η_i matters only through η_i < a_i), then extends the emitted tokens by the
target's own continuation: the law of the first γ+1 tokens, to compare with ``target_law``
(``tv``).  Shared by the block-verification and early-stopping tests.
"""

from __future__ import annotations

import itertools
import zlib
from collections import defaultdict

import torch

from playground.decoding.engine import verify
from playground.decoding.sampling import acceptance_prob

V = 4

# ---------------------------------------------------------------- tiny context-dependent laws


def _law(seed: int, who: str, prefix: tuple[int, ...]) -> torch.Tensor:
    """A seeded [V] float64 distribution for this prefix: random logits, sometimes a zero."""
    g = _gen(seed, who, prefix)
    probs = torch.softmax(torch.randn(V, generator=g, dtype=torch.float64), -1)
    if float(torch.rand((), generator=g)) < 0.4:  # a token this model never produces here
        probs[int(torch.randint(V, (), generator=g))] = 0.0
    return probs / probs.sum()


def _gen(seed: int, who: str, prefix: tuple[int, ...]) -> torch.Generator:
    return torch.Generator().manual_seed(zlib.crc32(f"{seed}/{who}/{prefix}".encode()))


def laws(seed: int):
    """(target, draft): prefix -> [V].  Per prefix the drafter is exactly the target, almost
    the target (near-equal rows), a noisy copy of it (zeros kept), or a law of its own."""

    def target(prefix):
        return _law(seed, "p", prefix)

    def draft(prefix):
        g = _gen(seed, "kind", prefix)
        kind, p = float(torch.rand((), generator=g)), target(prefix)
        if kind < 0.15:
            return p.clone()
        if kind < 0.3:
            near = p + 1e-3 * torch.rand(V, generator=g, dtype=torch.float64)
            return near / near.sum()
        if kind < 0.75:
            return torch.softmax(p.log() + 2.0 * torch.randn(V, generator=g, dtype=torch.float64), -1)
        return _law(seed, "q", prefix)

    return target, draft


# ---------------------------------------------------------------- exact laws


def add_continuation(law, target, prefix, prob, n, eos):
    """Extend ``prefix`` by the target's own tokens to length n (padded with EOS after an EOS)."""
    if prob == 0.0:
        return
    if len(prefix) >= n or (eos is not None and prefix and prefix[-1] == eos):
        law[tuple(prefix) + (eos,) * (n - len(prefix))] += prob
        return
    p = target(tuple(prefix))
    for y in range(V):
        add_continuation(law, target, prefix + [y], prob * float(p[y]), n, eos)


def target_law(target, n, eos=None):
    law = defaultdict(float)
    add_continuation(law, target, [], 1.0, n, eos)
    return law


def draft_blocks(draft, gamma):
    """Every block d_1..d_γ the drafter can propose, with its probability."""
    for block in itertools.product(range(V), repeat=gamma):
        prob = 1.0
        for i, tok in enumerate(block):
            prob *= float(draft(block[:i])[tok])
        if prob > 0.0:
            yield list(block), prob


def verdict_outcomes(rule, drafts, draft_probs, target_probs, eos):
    """Every verdict of ``verify`` on this block, with its probability.

    Each η_i matters only through η_i < a_i (a_i: h_i for block, min(1, p/q) for lossless),
    so the 2^k outcomes are realised with η_i = 0 (passes) or η_i = a_i (fails)."""

    def call(etas):
        it = iter(etas)
        return verify(drafts, draft_probs, target_probs, rule=rule, eos=eos, uniform=lambda: next(it), draw=lambda d: 0)

    if rule == "lossless":
        a = [acceptance_prob(float(target_probs[i, t]), float(draft_probs[i, t])) for i, t in enumerate(drafts)]
    else:
        a = list(call([0.5] * len(drafts)).accept_probs)
    for passes in itertools.product([True, False], repeat=len(a)):
        prob = 1.0
        for ok, ai in zip(passes, a):
            prob *= ai if ok else 1.0 - ai
        if prob > 0.0:
            yield prob, call([0.0 if ok else ai for ok, ai in zip(passes, a)])


def step_law(rule, target, draft, gamma, eos=None):
    """Exact law of the first γ+1 tokens: one verify step, then the target's continuation;
    and the expected number of drafts kept."""
    law = defaultdict(float)
    kept = 0.0
    eos_set = frozenset() if eos is None else frozenset([eos])
    for drafts, q_prob in draft_blocks(draft, gamma):
        draft_probs = torch.stack([draft(tuple(drafts[:i])) for i in range(gamma)])  # [γ, V]
        target_probs = torch.stack([target(tuple(drafts[:i])) for i in range(gamma + 1)])  # [γ+1, V]
        for prob, v in verdict_outcomes(rule, drafts, draft_probs, target_probs, eos_set):
            w = q_prob * prob
            emitted = drafts[: v.n_accepted]
            kept += w * v.n_accepted
            if v.correction_dist is None:  # an accepted EOS ended the step
                assert v.eos_accepted and emitted[-1] == eos
                add_continuation(law, target, emitted, w, gamma + 1, eos)
                continue
            for y in range(V):
                add_continuation(law, target, emitted + [y], w * float(v.correction_dist[y]), gamma + 1, eos)
    return law, kept


def tv(law_a, law_b) -> float:
    """Total variation distance between two laws of token sequences."""
    return 0.5 * sum(abs(law_a.get(k, 0.0) - law_b.get(k, 0.0)) for k in set(law_a) | set(law_b))
