"""Every kind of work on one shared model at the same time: each run's tokens are its tokens alone.

One tiny Gemma 3 (float32, sliding-window layers) serves, all at once: plain decoding, every
drafter kind (a second model, prompt lookup, the MTP head, MTP + lookup, the early exit
untrained and trained, a drafter with another tokenizer), chains and trees, token and block
verification, sampled runs, a lab draw of many seeded continuations, and the benchmark's
transformers rows (``generate()``, its early-exit and prompt-lookup assisted generation).
Batched through one ``PassScheduler`` (as the app serves a class) and unbatched (each run its
own passes).  Every result must equal the same work done alone, before: tokens at T = 0, and
tokens and accepted counts at T > 0 (the scheduler never caps drafts here, so a sampled run
drafts what it drafts alone).

Two wrong implementations are kept as mutants that this check must catch: an early exit that
records its states with a forward hook on the target's shared layer (the hook fires for every
thread's pass), and transformers' early exit run on the shared model instead of a view of its
own (it lowers the shared config's ``num_hidden_layers`` while it drafts).
"""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
import torch
from transformers.utils.output_capturing import maybe_install_capturing_hooks

from playground.decoding.engine import run
from playground.drafters import early_exit
from playground.drafters.early_exit import EarlyExitDrafter
from playground.drafters.hybrid import HybridDrafter
from playground.drafters.model import ModelDrafter
from playground.drafters.mtp import MTPDrafter
from playground.drafters.other_tokenizer import OtherTokenizerDrafter
from playground.drafters.prompt_lookup import PromptLookupDrafter
from playground.lab.budget import Budget
from playground.lab.draws import draw_in_order
from playground.models.tiny import EOS, VOCAB, CharTokenizer, build_tiny_pair
from playground.models.tiny_bytes import ByteTokenizer, build_byte_drafter
from playground.serving.scheduler import PassScheduler
from playground.settings import RunSettings
from tests.drafters.test_exit_adapter import random_adapter
from tests.tiny_models import char_target_and_head
from tools.bench import measure
from tools.bench.options import Spec

TOK = CharTokenizer()
N = 20  # new tokens per run
PROMPTS = ["The capital of France is", "ab ab ab ab ab", "one two three one two", "def f(x):\n    return x", "a"]


@pytest.fixture(scope="module")
def shared():
    """The one target every job runs on, its MTP head, and the models of the other drafters."""
    target, head = char_target_and_head()
    maybe_install_capturing_hooks(target)  # as loading does, before any run
    _, char_drafter, _ = build_tiny_pair()  # a second model over the same characters
    return SimpleNamespace(
        target=target, head=head, drafter_model=char_drafter, byte_drafter=build_byte_drafter(char_drafter)
    )


def _drafter(kind: str, m):
    t = m.target
    return {
        "model": lambda: ModelDrafter(m.drafter_model, VOCAB),
        "prompt-lookup": PromptLookupDrafter,
        "mtp": lambda: MTPDrafter(t, m.head, eos_token_ids=[EOS]),
        "mtp+lookup": lambda: HybridDrafter(MTPDrafter(t, m.head, eos_token_ids=[EOS])),
        "early-exit": lambda: EarlyExitDrafter(t, 2),
        "early-exit-trained": lambda: EarlyExitDrafter(t, 2, adapter=random_adapter(t.config.hidden_size, 0.05)),
        "other-tokenizer": lambda: OtherTokenizerDrafter(m.byte_drafter, ByteTokenizer(), TOK, target_eos_ids=[EOS]),
    }[kind]()


# (drafter kind or None for plain decoding, settings): one job each, prompts taken in turn
RUNS = [
    (None, dict(mode="autoregressive")),
    ("model", dict(gamma=4)),
    ("model", dict(gamma=3, tree_nodes=6)),
    ("model", dict(gamma=4, rule="block")),
    ("prompt-lookup", dict(gamma=5)),
    ("mtp", dict(gamma=4)),
    ("mtp", dict(gamma=3, tree_nodes=6)),
    ("mtp+lookup", dict(gamma=4)),
    ("early-exit", dict(gamma=3)),
    ("early-exit", dict(gamma=2, tree_nodes=4)),
    ("early-exit-trained", dict(gamma=3)),
    ("other-tokenizer", dict(gamma=3)),
    ("model", dict(gamma=4, temperature=0.8, seed=7)),
    ("mtp", dict(gamma=3, temperature=1.0, seed=3, top_p=0.9)),
    ("early-exit", dict(gamma=3, temperature=0.7, seed=5)),
    ("early-exit", dict(gamma=2, temperature=1.0, seed=9, rule="block")),
]
HF_ROWS = [
    Spec.of("hf_generate"),
    Spec.of("hf_assisted", drafter="early-exit", gamma=3),
    Spec.of("hf_assisted", drafter="prompt-lookup", gamma=3),
]


def _engine_job(m, i, kind, settings, scheduler):
    ids = TOK.encode(PROMPTS[i % len(PROMPTS)])
    s = RunSettings(max_new_tokens=N, **settings)

    def job():
        d = _drafter(kind, m) if kind else None
        r = run(m.target, TOK, ids, s, drafter=d, eos_token_ids=[EOS], scheduler=scheduler)
        return r.token_ids, tuple(step.n_accepted for step in r.steps)

    return job


def _hf_job(m, i, spec):
    pair = SimpleNamespace(target=m.target, tokenizer=TOK, eos_token_ids=(EOS,), drafter_model=None)
    ids = TOK.encode(PROMPTS[i % len(PROMPTS)])
    return lambda: measure._hf_run(pair, ids, N, 0.0, 0, spec, exit_layer=2)[0]


def _lab_job(m, n=6):
    """A lab draw: n seeded continuations of one prompt, a few rows at a time on a private scheduler."""
    ids = TOK.encode(PROMPTS[0])

    def job():
        out: dict[int, tuple] = {}

        def draw(i, scheduler):
            s = RunSettings(gamma=3, temperature=1.0, seed=100 + i, max_new_tokens=4, trace=False)
            return run(m.target, TOK, ids, s, drafter=_drafter("mtp", m), eos_token_ids=[EOS], scheduler=scheduler)

        draw_in_order(m.target, draw, n, 3, Budget(None), lambda i, r: out.__setitem__(i, r.token_ids))
        return tuple(out[i] for i in range(n))

    return job


def _jobs(m, scheduler):
    jobs = [_engine_job(m, i, k, s, scheduler) for i, (k, s) in enumerate(RUNS)]
    jobs += [_hf_job(m, i, spec) for i, spec in enumerate(HF_ROWS)]
    return [*jobs, _lab_job(m)]


def _together(jobs):
    """Every job in its own thread, started at once: (results, errors) by job index."""
    results, errors = {}, {}
    barrier = threading.Barrier(len(jobs))

    def go(i, job):
        barrier.wait()
        try:
            results[i] = job()
        except Exception as exc:  # reported with the job's index
            errors[i] = exc

    threads = [threading.Thread(target=go, args=(i, j), daemon=True) for i, j in enumerate(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not any(t.is_alive() for t in threads), "a job hung"
    return results, errors


def _differences(m, batched: bool, rounds: int = 1) -> list[str]:
    """The jobs whose side-by-side result differs from their result alone (or that failed)."""
    alone = [job() for job in _jobs(m, None)]
    bad = []
    for _ in range(rounds):
        scheduler = PassScheduler(m.target, max_batch=32, knee_tokens=None) if batched else None
        results, errors = _together(_jobs(m, scheduler))
        for i, want in enumerate(alone):
            if i in errors:
                bad.append(f"job {i}: {type(errors[i]).__name__}: {errors[i]}")
            elif results[i] != want:
                bad.append(f"job {i}: {results[i]} != {want} alone")
    return bad


@pytest.mark.parametrize("batched", [True, False], ids=["batched", "unbatched"])
def test_every_kind_of_work_side_by_side_gives_its_output_alone(shared, batched):
    config = shared.target.config.to_dict()
    hooks = [dict(layer._forward_hooks) for layer in shared.target.model.layers]
    assert _differences(shared, batched) == []
    assert shared.target.config.to_dict() == config  # nothing shared was written
    assert [dict(layer._forward_hooks) for layer in shared.target.model.layers] == hooks


def _hooked_lower(self, ids, head):
    """The early exit's old drafting pass: its states from a forward hook on the target's own layer."""
    cache, past = self._shared, self._shared.get_seq_length(0)
    from playground.decoding.tree import DraftTree
    from playground.decoding.tree_pass import tree_masks, tree_position_ids

    chain = DraftTree.chain(ids[1:])
    cfg = self.model.config.get_text_config()
    kw = dict(
        input_ids=torch.tensor([ids]),
        cache=cache,
        use_cache=True,
        attention_mask=tree_masks(cfg, chain, past, torch.float32, "cpu"),
        position_ids=tree_position_ids(chain, past)[None],
    )
    kept = []
    hook = self._exit.layer.register_forward_hook(
        lambda mod, args, out: kept.append(out[0] if isinstance(out, tuple) else out)
    )
    try:
        with torch.inference_mode():
            logits = self.model(**kw, logits_to_keep=1).logits[0, -1] if head else None
            if not head:
                early_exit.decoder(self.model)(**kw)
    finally:
        hook.remove()
    self._fed.extend(ids)
    self._states.extend(kept[-1][0])
    return logits


def test_mutant_a_hook_on_a_shared_layer_is_caught(shared, monkeypatch):
    monkeypatch.setattr(EarlyExitDrafter, "_lower", _hooked_lower)
    assert _differences(shared, batched=False, rounds=5)  # it takes a foreign state in 1-2 jobs a round


def test_mutant_transformers_early_exit_on_the_shared_model_is_caught(shared, monkeypatch):
    monkeypatch.setattr(measure, "hf_models", lambda pair, spec: (pair.target, None))
    assert _differences(shared, batched=False, rounds=3)
