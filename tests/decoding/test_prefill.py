"""A run that starts from a shared ``Prefill`` is the run that prefills its prompt itself.

The lab draws hundreds of continuations of one prompt; it prefills the prompt once and every
continuation starts from its own copy of that cache (``Target(start=...)``,
``engine.stream(prefill=...)``).  Here, on tiny float32 models whose prompts run far past a
sliding window of 4, every step of such a run (drafts, p, q, u, accepts, corrections,
emitted tokens) equals the run alone, for several seeds in a row from one prefill, and the
prefill itself is never written.  A prefill made for another prompt, another kind of run or
without the hidden state a drafter reads is refused.
"""

from __future__ import annotations

import pytest
import torch

from playground.decoding.engine import run
from playground.decoding.target import Prefill, copy_cache
from playground.drafters.model import ModelDrafter
from playground.drafters.mtp import MTPDrafter
from playground.models.tiny import EOS, CharTokenizer
from playground.settings import RunSettings
from tests.tiny_models import char_target_and_head, sliding_pair

PROMPT = "sliding windows roll back"  # 26 tokens: far past the window of 4


def _steps(result):
    return [(s.emitted_ids, s.n_accepted, s.drafted, s.correction, s.target_cache_len) for s in result.steps]


def _snapshot(cache):
    return [(layer.keys.clone(), layer.values.clone()) for layer in cache.layers]


def _same(cache, snapshot) -> bool:
    return len(cache.layers) == len(snapshot) and all(
        torch.equal(layer.keys, k) and torch.equal(layer.values, v) for layer, (k, v) in zip(cache.layers, snapshot)
    )


@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("gamma", [0, 1, 3])  # 0: the autoregressive loop
def test_runs_from_one_prefill_equal_runs_alone(gamma, temperature):
    target, drafter_model = sliding_pair(window=4)
    tok = CharTokenizer()
    ids = tok.encode(PROMPT)
    speculative = gamma > 0
    cfg = RunSettings(mode="speculative" if speculative else "autoregressive", gamma=max(gamma, 1),
                      temperature=temperature, max_new_tokens=12, trace=False)  # fmt: skip
    pre = Prefill.of(target, ids, rollback=speculative, hidden=False)
    before = _snapshot(pre.cache)
    rejected = 0
    for seed in range(4):  # several runs in a row from the same prefill: none may see another's keys

        def go(**kw):
            drafter = ModelDrafter(drafter_model, 100) if speculative else None
            return run(target, tok, ids, cfg, drafter=drafter, eos_token_ids=[EOS],
                       generator=torch.Generator().manual_seed(seed), **kw)  # fmt: skip

        alone, started = go(), go(prefill=pre)
        assert started.token_ids == alone.token_ids and _steps(started) == _steps(alone), seed
        assert started.stats.target_calls == alone.stats.target_calls - 1  # no prefill pass of its own
        assert started.stats.prefill_ms == 0.0 < alone.stats.prefill_ms
        rejected += sum(s.n_accepted < len(s.drafted) for s in alone.steps)
    assert _same(pre.cache, before)  # copied at every start, never written
    if speculative and temperature == 0.0:  # (at T = 1 this random pair's p and q are near uniform: few rejections)
        assert rejected > 0  # rollbacks across the window really happened


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_drafter_that_reads_the_hidden_state_gets_the_prefills(temperature):
    """The MTP head starts from the target's hidden state at the prompt's last cached position."""
    target, head = char_target_and_head()
    tok = CharTokenizer()
    ids = tok.encode("The capital of France is")
    cfg = RunSettings(mode="speculative", gamma=3, temperature=temperature, max_new_tokens=12, trace=False)
    pre = Prefill.of(target, ids, rollback=True, hidden=True)
    for seed in range(3):

        def go(**kw):
            return run(target, tok, ids, cfg, drafter=MTPDrafter(target, head, [EOS]), eos_token_ids=[EOS],
                       generator=torch.Generator().manual_seed(seed), **kw)  # fmt: skip

        alone, started = go(), go(prefill=pre)
        assert started.token_ids == alone.token_ids and _steps(started) == _steps(alone), seed
    assert sum(len(s.drafted) for s in alone.steps) > 0


def test_a_prefill_for_another_run_is_refused():
    target, drafter_model = sliding_pair(window=4)
    tok = CharTokenizer()
    ids = tok.encode(PROMPT)
    spec = RunSettings(mode="speculative", gamma=2, max_new_tokens=4, trace=False)
    plain = RunSettings(mode="autoregressive", max_new_tokens=4, trace=False)
    pre = Prefill.of(target, ids, rollback=True, hidden=False)
    with pytest.raises(ValueError, match="another prompt"):
        run(target, tok, ids + [5], spec, drafter=ModelDrafter(drafter_model, 100), prefill=pre)
    with pytest.raises(ValueError, match="roll back"):
        run(target, tok, ids, plain, prefill=pre)
    m_target, head = char_target_and_head()
    m_ids = tok.encode("The capital")
    no_hidden = Prefill.of(m_target, m_ids, rollback=True, hidden=False)
    with pytest.raises(ValueError, match="hidden state"):
        run(m_target, tok, m_ids, spec, drafter=MTPDrafter(m_target, head, [EOS]), prefill=no_hidden)
    with pytest.raises(ValueError, match="nothing to prefill"):
        Prefill.of(target, ids[:1], rollback=True, hidden=False)


def test_copy_cache_keeps_every_layer_setting_and_shares_nothing_written():
    target, _ = sliding_pair(window=4)
    tok = CharTokenizer()
    pre = Prefill.of(target, tok.encode(PROMPT), rollback=True, hidden=False)
    copy = copy_cache(pre.cache)
    for a, b in zip(pre.cache.layers, copy.layers):
        assert type(a) is type(b) and a is not b
        assert {k: v for k, v in vars(a).items() if k not in ("keys", "values")}.keys() == vars(b).keys() - {
            "keys",
            "values",
        }
        assert getattr(a, "record_past", None) == getattr(b, "record_past", None)
        assert getattr(a, "cumulative_length", None) == getattr(b, "cumulative_length", None)
        assert torch.equal(a.keys, b.keys) and a.keys.data_ptr() != b.keys.data_ptr()
        assert torch.equal(a.values, b.values) and a.values.data_ptr() != b.values.data_ptr()
    before = _snapshot(pre.cache)
    copy.crop(-3)  # a rollback, then new tokens: the original does not move
    new = torch.ones_like(copy.layers[0].keys[..., :1, :])
    for i in range(len(copy.layers)):
        copy.update(new, new, i)
    assert _same(pre.cache, before) and pre.cache.get_seq_length() == len(tok.encode(PROMPT)) - 1
