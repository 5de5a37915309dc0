"""The drafter contract, written once: what every drafter's tests check.

Greedy equality
  ``hf_greedy`` is the reference (transformers' ``generate(do_sample=False)`` on the same
  float32 model); ``assert_greedy_equals_target`` runs the loop and compares.
Caches after every step
  ``CacheSpy`` wraps a drafter: after every step the target's cache must equal a fresh
  prefill of the committed prefix.  ``DrafterCacheSpy`` also checks a drafter's own KV
  cache (``inner.cache`` over ``inner.model``) against a fresh prefill of the tokens it
  claims to hold (``inner._seen``), and those tokens against ``holds``.
  ``assert_checked_every_step`` says the spy ran after every step.
Distribution when sampling
  ``first_pair_counts`` counts the first two tokens over seeded runs (compared with
  ``tests.stats``' exact laws); ``assert_first_token_distribution`` runs the whole check
  for the first token.
The draft itself
  ``assert_greedy_draft_protocol`` (a Drafter, its name, γ tokens, q a point mass),
  ``assert_q_rows`` (one law per drafted token, summing to 1, mass on what was drafted),
  ``assert_q_is_the_sampling_law`` (the drafts are drawn from the q they report),
  ``assert_argmax_mode`` (argmax drafts ignore the temperature, q one-hot) and
  ``assert_stateless_rollback`` (proposals depend on the TargetState only).
Counting a run: ``rejected_drafts``, ``branched_steps``.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache

from playground.decoding.draft import Drafter, TargetState
from playground.decoding.engine import run
from playground.decoding.sampling import SamplingParams, logits_to_probs
from playground.models.tiny import EOS as CHAR_EOS
from tests.stats import ALPHA, assert_follows, next_token_probs

# ---------------------------------------------------------------- greedy equality


@torch.no_grad()
def hf_greedy(model, ids, n, eos=CHAR_EOS):
    """transformers' greedy decoding of n tokens after ``ids`` (eos None: never stops; pad 0)."""
    pad = eos if eos is not None else 0
    out = model.generate(torch.tensor([ids]), max_new_tokens=n, do_sample=False, eos_token_id=eos, pad_token_id=pad)
    return out[0, len(ids) :].tolist()


def assert_greedy_equals_target(
    target, tok, ids, config, drafter=None, eos_token_ids=(CHAR_EOS,), expected=None, msg=None
):
    """Run the loop (temperature 0) on ``ids``: its tokens must equal transformers' greedy
    decoding on the target, or ``expected`` where the reference is already known.  Returns the run."""
    eos = list(eos_token_ids)
    if expected is None:
        expected = hf_greedy(target, ids, config.max_new_tokens, eos=eos[0] if eos else None)
    r = run(target, tok, ids, config, drafter=drafter, eos_token_ids=eos)
    assert list(r.token_ids) == expected, msg
    return r


# ---------------------------------------------------------------- caches after every step


def prefill(model, ids) -> DynamicCache:
    """A fresh cache holding ``ids``."""
    fresh = DynamicCache(config=model.config)
    model(input_ids=torch.tensor([ids]), cache=fresh, use_cache=True)
    return fresh


def assert_same_kv(live, fresh):
    """Layer by layer, the same keys and values (to 1e-5); layers that hold none in both
    (Gemma 4's KV-shared layers) are skipped."""
    for a, b in zip(live.layers, fresh.layers):
        if a.keys is None and b.keys is None:
            continue
        assert a.keys.shape == b.keys.shape
        assert torch.allclose(a.keys, b.keys, atol=1e-5) and torch.allclose(a.values, b.values, atol=1e-5)


class CacheSpy:
    """Wraps a drafter; after every step checks that the target's cache equals a
    fresh prefill of the committed prefix (everything but the newest token).  Offers
    ``propose_tree`` exactly when the wrapped drafter does."""

    def __init__(self, inner, model):
        self.inner, self.model, self.checks = inner, model, 0
        self.name, self.needs_target_hidden = inner.name, inner.needs_target_hidden
        self.capabilities = inner.capabilities  # what the loop reads: the wrapped drafter's declaration
        if inner.capabilities.branches:
            self.propose_tree = inner.propose_tree

    def start(self, state):
        self.inner.start(state)

    def propose(self, *args):
        return self.inner.propose(*args)

    def cache_len(self):
        return self.inner.cache_len()

    def verify_logits(self, *args):
        return self.inner.verify_logits(*args)

    @torch.inference_mode()
    def accept(self, n, state: TargetState):
        self.inner.accept(n, state)
        fresh = prefill(self.model, state.committed_ids[:-1])
        live = state.target_cache
        assert live.get_seq_length() == len(state.committed_ids) - 1
        assert_same_kv(live, fresh)
        self.checks += 1


def committed_prefix(drafter, state):
    """What a drafter with its own cache holds: a prefix of the committed tokens."""
    assert drafter._seen == state.committed_ids[: len(drafter._seen)]


def committed_prefix_without_newest(drafter, state):
    """A prefix of the committed tokens without the newest."""
    seen = drafter._seen
    assert seen == state.committed_ids[: len(seen)] and len(seen) <= len(state.committed_ids) - 1


class DrafterCacheSpy(CacheSpy):
    """CacheSpy (the target's cache after every step) plus the drafter's own cache: it must
    equal a fresh prefill of the tokens it claims to hold (``_seen``), which ``holds(drafter,
    state)`` checks; ``layers``: how many layers both caches must have (None: unchecked)."""

    def __init__(self, inner, model, holds=committed_prefix, layers=None):
        super().__init__(inner, model)
        self.holds, self.layers, self.drafter_checks = holds, layers, 0

    @torch.inference_mode()
    def accept(self, n, state):
        super().accept(n, state)
        d = self.inner
        if d.capabilities.shares_target_cache and not d._seen:  # drafted in the target's cache, checked above
            assert d.cache.get_seq_length() == 0
            self.drafter_checks += 1
            return
        self.holds(d, state)
        assert d.cache.get_seq_length() == len(d._seen)
        fresh = prefill(d.model, d._seen)
        if self.layers is not None:
            assert len(d.cache.layers) == len(fresh.layers) == self.layers
        assert_same_kv(d.cache, fresh)
        self.drafter_checks += 1


def assert_checked_every_step(spy, r, drafter_cache=False):
    """The spy checked after every step but a final EOS one (and the drafter's cache too)."""
    assert spy.checks == len(r.steps) - (1 if r.stats.stopped == "eos" else 0)
    if drafter_cache:
        assert spy.drafter_checks == spy.checks


# ---------------------------------------------------------------- distribution when sampling


def seeded(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def first_pair_counts(run_seed, n: int, vocab: int) -> torch.Tensor:
    """Counts [V*V] of the first two tokens (y1 * V + y2) of ``run_seed(seed)`` for seed in range(n)."""
    counts = torch.zeros(vocab * vocab)
    for seed in range(n):
        y1, y2 = run_seed(seed).token_ids[:2]
        counts[y1 * vocab + y2] += 1
    return counts


def assert_first_token_distribution(target, tok, prompt, config, make_drafter, n: int, eos_token_ids, alpha=ALPHA):
    """n seeded runs (a fresh drafter each): the first token must follow the target's own
    p(. | prompt) under ``config``'s sampling settings (chi-square).  Returns the runs."""
    p = next_token_probs(target, prompt, SamplingParams.of(config))
    counts = torch.zeros(p.shape[0])
    runs = []
    for seed in range(n):
        r = run(
            target,
            tok,
            prompt,
            config,
            drafter=make_drafter(),
            eos_token_ids=list(eos_token_ids),
            generator=seeded(seed),
        )
        counts[r.token_ids[0]] += 1
        runs.append(r)
    assert_follows(counts, p, alpha)
    return runs


# ---------------------------------------------------------------- the draft itself


def assert_greedy_draft_protocol(drafter, name, state, gamma, needs_target_hidden=True, stateless=True):
    """A Drafter named ``name``; at temperature 0 it drafts γ tokens with q a point mass (None:
    the loop builds it); a stateless one keeps no cache.  Returns the draft."""
    assert isinstance(drafter, Drafter) and drafter.name == name
    assert bool(drafter.needs_target_hidden) == needs_target_hidden
    draft = drafter.propose(state, gamma, SamplingParams(), None)
    assert len(draft.token_ids) == gamma and draft.draft_probs is None
    if stateless:
        assert drafter.cache_len() is None
    return draft


@torch.inference_mode()
def q_rows_of(model, state, draft, params) -> torch.Tensor:
    """[n, V] the law ``model`` gives each of ``draft``'s tokens after the committed ones: the
    wrong q a mutant reports in place of the one its drafts were drawn from."""
    ids = list(state.committed_ids) + list(draft.token_ids)
    logits = model(torch.tensor([ids])).logits[0]  # [T, V]
    n = len(draft.token_ids)
    return logits_to_probs(logits[len(ids) - n - 1 : len(ids) - 1], params)


def assert_q_rows(draft, shape=None):
    """q has one probability law per drafted token (rows sum to 1) and each drafted token has
    mass under its row (so it is in the vocabulary); ``shape``: also q's [k, V] shape, float32."""
    q = draft.draft_probs
    if shape is not None:
        assert q is not None and q.shape == shape and q.dtype == torch.float32
    torch.testing.assert_close(q.sum(-1), torch.ones(q.shape[0]))
    for i, tok in enumerate(draft.token_ids):
        assert q[i, tok] > 0
    return q


def assert_q_is_the_sampling_law(drafter, state, params, n: int, vocab: int, max_tv: float, same_q: bool = False):
    """Over n draws of the first draft token (generator seeded 123): tokens with q = 0 are
    never drawn and the empirical frequencies are within total variation ``max_tv`` of q;
    ``same_q``: every draw also reports the same q (the same state)."""
    g = seeded(123)
    q0 = drafter.propose(state, 1, params, g).draft_probs[0]
    counts = torch.zeros(vocab)
    for _ in range(n):
        dr = drafter.propose(state, 1, params, g)
        if same_q:
            torch.testing.assert_close(dr.draft_probs[0], q0)  # same state -> same q
        counts[dr.token_ids[0]] += 1
    assert float(counts[q0 == 0].sum()) == 0.0  # unscored tokens are never drafted
    tv = 0.5 * float((counts / n - q0).abs().sum())
    assert tv < max_tv, tv


def assert_argmax_mode(make_drafter, state, gamma, vocab):
    """``make_drafter(argmax=True)`` drafts the greedy tokens whatever the temperature, with a
    one-hot q (None: the loop builds it) and the softmax kept apart for the softmax-q lesson.
    Returns (greedy draft, argmax draft)."""
    greedy = make_drafter().propose(state, gamma, SamplingParams(), None)
    assert greedy.draft_probs is None
    dr = make_drafter(argmax=True).propose(state, gamma, SamplingParams(temperature=1.0), seeded(0))
    assert dr.token_ids == greedy.token_ids  # argmax drafts regardless of temperature
    assert dr.draft_probs is None  # q is one-hot: the loop builds it
    assert dr.soft_probs is not None and dr.soft_probs.shape == (gamma, vocab)  # only for the softmax-q lesson
    return greedy, dr


def assert_stateless_rollback(make_drafter, state_of, target, ids, start=False):
    """After accept(), proposals depend only on the TargetState: a fresh drafter agrees, and
    target K/V of rejected drafts still in the cache (not yet cropped) are ignored.
    ``state_of(ids)``: the TargetState after committing ids.  Returns (drafter, stale state)."""
    greedy = SamplingParams()
    d = make_drafter()
    if start:
        d.start(state_of(ids[:5]))
    d.propose(state_of(ids[:5]), 4, greedy, None)
    d.accept(1, state_of(ids[:7]))
    later = state_of(ids[:7])
    a = d.propose(later, 4, greedy, None)
    assert a.token_ids == make_drafter().propose(later, 4, greedy, None).token_ids
    stale = state_of(ids[:7])  # the target cache also holds 3 rejected draft positions
    with torch.no_grad():
        target(input_ids=torch.tensor([ids[6:9]]), cache=stale.target_cache, use_cache=True)
    assert d.propose(stale, 4, greedy, None).token_ids == a.token_ids
    return d, stale


# ---------------------------------------------------------------- counting a run


def rejected_drafts(r) -> int:
    """Drafted tokens the target judged and rejected."""
    return sum(1 for s in r.steps for d in s.drafted if d.judged and not d.accepted)


def branched_steps(r) -> int:
    """Tree steps in which some node has a sibling."""
    return sum(1 for s in r.steps if len({d.parent for d in s.drafted}) < len(s.drafted))
