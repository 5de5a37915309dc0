"""The drafter contract, once for every kind in the registry (``playground.drafters.registry``).

Each kind is built on tiny random models (no weights, no hub) and must:

* greedy: make the loop's output token-identical to transformers' greedy decoding of the
  target, for γ = 1 and 3, with the target's KV cache equal to a fresh prefill of the
  committed tokens after every step (rollback leaves nothing of a rejected draft);
* sampling (T = 1): report as q exactly the law its first draft is drawn from — a sampled
  draft's token frequencies match its q row, a deterministic draft (q a point mass, built
  by the loop) does not depend on the random stream at all;
* roll back: after a step whose drafts were rejected, its next draft equals what a fresh
  drafter started on the same committed tokens proposes.

The per-kind test files check what is particular to each kind; a kind added to the registry
without an entry here fails ``test_every_registry_kind_is_covered``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch

from playground.config import load_config
from playground.decoding.draft import TargetState
from playground.decoding.engine import run
from playground.decoding.sampling import SamplingParams
from playground.drafters import registry
from playground.drafters.gemma4_assistant import Gemma4AssistantDrafter
from playground.drafters.hybrid import HybridDrafter
from playground.drafters.mtp import MTPDrafter
from playground.models.loading import load_pair
from playground.models.tiny import VOCAB as CHAR_VOCAB
from playground.models.tiny import CharTokenizer
from playground.settings import RunSettings
from tests.contract import CacheSpy, assert_checked_every_step, assert_greedy_equals_target, hf_greedy, seeded
from tests.fakes import LetterTokenizer
from tests.stats import assert_does_not_follow, assert_follows
from tests.tiny_models import gemma4_pair, prefix_state, tiny_head, tiny_target


@dataclass
class Case:
    target: torch.nn.Module
    tokenizer: object
    prompt: list[int]
    make: Callable[[], object]  # a fresh drafter
    vocab: int


def _preset_case(preset_name: str, kind: str) -> Case:
    preset = load_config().preset(preset_name)
    pair = load_pair(preset, "float32")
    prompt = pair.tokenizer.encode("the cat sat. the cat ran. the c")
    return Case(
        pair.target,
        pair.tokenizer,
        prompt,
        lambda: registry.build_drafter(kind, pair, preset),
        pair.target.config.get_text_config().vocab_size,
    )


def _mtp_case(hybrid: bool) -> Case:
    model = tiny_target(vocab=CHAR_VOCAB, seed=11)
    head = tiny_head(model, n_cand=60, noise=0.02, seed=3)
    tok = CharTokenizer()

    def make():
        mtp = MTPDrafter(model, head, eos_token_ids=[])
        return HybridDrafter(mtp) if hybrid else mtp

    return Case(model, tok, tok.encode("the quick fox. the quick f"), make, CHAR_VOCAB)


def _gemma4_case() -> Case:
    target, assistant = gemma4_pair()
    tok = LetterTokenizer()
    return Case(
        target,
        tok,
        [5, 9, 12, 5, 9, 12, 5, 9, 20, 31, 5, 9],
        lambda: Gemma4AssistantDrafter(target, assistant, eos_token_ids=[]),
        target.config.get_text_config().vocab_size,
    )


CASES: dict[str, Callable[[], Case]] = {
    "model": lambda: _preset_case("tiny-random", "model"),
    "prompt-lookup": lambda: _preset_case("tiny-random", "prompt-lookup"),
    "early-exit": lambda: _preset_case("tiny-random", "early-exit"),
    "other-tokenizer": lambda: _preset_case("tiny-random-other-tokenizer", "other-tokenizer"),
    "mtp": lambda: _mtp_case(hybrid=False),
    "mtp+lookup": lambda: _mtp_case(hybrid=True),
    "gemma4-assistant": _gemma4_case,
}


def test_every_registry_kind_is_covered():
    assert set(CASES) == set(registry.NAMES)


@pytest.mark.parametrize("gamma", [1, 3])
@pytest.mark.parametrize("kind", registry.NAMES)
def test_greedy_output_is_the_targets_and_the_cache_holds_only_committed_tokens(kind, gamma):
    case = CASES[kind]()
    spy = CacheSpy(case.make(), case.target)
    expected = hf_greedy(case.target, case.prompt, 20, eos=None)
    r = assert_greedy_equals_target(
        case.target,
        case.tokenizer,
        case.prompt,
        RunSettings(gamma=gamma, max_new_tokens=20),
        spy,
        eos_token_ids=[],
        expected=expected,
    )
    assert_checked_every_step(spy, r)


def _first_draft(case: Case, params: SamplingParams, seed: int, make=None):
    """The first draft token and its q row from a fresh drafter on a fresh loop state."""
    state = prefix_state(case.target, case.prompt, record_past=True)
    drafter = (make or case.make)()
    drafter.start(state)
    return drafter.propose(state, 1, params, seeded(seed))


def _first_drafts(case: Case, n: int, make=None):
    params = SamplingParams(temperature=1.0)
    draws = [_first_draft(case, params, seed, make) for seed in range(n)]
    tokens = [d.token_ids[0] for d in draws if d.token_ids]
    assert len(tokens) == len(draws)  # every kind drafts on this repetitive prompt
    return draws, torch.bincount(torch.tensor(tokens), minlength=case.vocab).float()


@pytest.mark.parametrize("kind", registry.NAMES)
def test_q_is_the_law_the_first_draft_was_drawn_from(kind):
    case = CASES[kind]()
    draws, counts = _first_drafts(case, 400)
    if draws[0].draft_probs is None:  # a point mass: the draft must not depend on the random stream
        assert int((counts > 0).sum()) == 1
        return
    q = draws[0].draft_probs[0].float()
    assert q.shape == (case.vocab,) and abs(float(q.sum()) - 1.0) < 1e-5
    for d in draws[1:5]:
        torch.testing.assert_close(d.draft_probs[0].float(), q)  # same state, same law
    assert_follows(counts, q)


class _ReportsAFlatterQ:
    """Mutant: draws from its q but reports q^0.5 renormalised (a law it did not draw from)."""

    def __init__(self, inner):
        self.inner, self.name, self.needs_target_hidden = inner, inner.name, inner.needs_target_hidden
        self.capabilities = inner.capabilities

    def start(self, state):
        self.inner.start(state)

    def propose(self, *args):
        draft = self.inner.propose(*args)
        flat = draft.draft_probs.float().sqrt()
        draft.draft_probs = flat / flat.sum(-1, keepdim=True)
        return draft


def test_a_drafter_reporting_another_q_than_it_drew_from_is_caught():
    case = CASES["model"]()
    draws, counts = _first_drafts(case, 400, make=lambda: _ReportsAFlatterQ(case.make()))
    assert_does_not_follow(counts, draws[0].draft_probs[0].float())


class _RecordingState:
    """Keeps the TargetState the loop hands the drafter at every step."""

    def __init__(self, inner):
        self.inner, self.name, self.needs_target_hidden = inner, inner.name, inner.needs_target_hidden
        self.proposals: list[tuple[list[int], list[int]]] = []  # (committed, drafted) per proposal
        if inner.capabilities.branches:
            self.propose_tree = inner.propose_tree

    def __getattr__(self, name):  # capabilities, verify_logits, cache_len
        return getattr(self.inner, name)

    def start(self, state):
        self.inner.start(state)

    def propose(self, state: TargetState, *args):
        draft = self.inner.propose(state, *args)
        self.proposals.append((list(state.committed_ids), list(draft.token_ids)))
        return draft

    def accept(self, n, state):
        self.inner.accept(n, state)


@pytest.mark.parametrize("kind", registry.NAMES)
def test_after_a_rollback_the_next_draft_is_a_fresh_drafters(kind):
    """Greedy run with rejections; at every step the draft equals that of a fresh drafter started
    on the same committed tokens (nothing of a rejected draft survives in the drafter)."""
    case = CASES[kind]()
    rec = _RecordingState(case.make())
    r = run(
        case.target,
        case.tokenizer,
        case.prompt,
        RunSettings(gamma=3, max_new_tokens=16),
        drafter=rec,
        eos_token_ids=[],
    )
    assert any(d.judged and not d.accepted for s in r.steps for d in s.drafted)  # rollbacks happened
    assert len(rec.proposals) > 2
    for committed, got in rec.proposals:
        state = prefix_state(case.target, committed, record_past=True)
        fresh = case.make()
        fresh.start(state)
        want = fresh.propose(state, max(len(got), 1), SamplingParams(), None).token_ids[: len(got)]
        assert want == got, (committed, want, got)
