"""The drafter with another tokenizer (playground.drafters.other_tokenizer) on tiny models.

Two drafter tokenizers for the tiny character-level target: ``ByteTokenizer`` (same
segmentation, other ids and vocabulary size; playground/models/tiny_bytes.py) and, here, a
greedy longest-match tokenizer with multi-character tokens ("th", " a", ...) whose
drafter emits a merged token where the char drafter would emit its first character —
the target then gets more draft tokens than the drafter made, and drafts are cut.

* greedy output equals transformers' greedy ``generate()`` on the target (fp32) for
  γ 1-8, past a sliding window of 4, with the target's cache and the drafter's own cache
  checked after every step (a drafter that never crops is caught);
* at T = 1 the drafts are still the drafter's argmax, q is a point mass, and the output
  follows the target's distribution (chi-square on the first two tokens, 6-letter
  alphabet); the obvious cross-tokenizer rule — the drafter's softmax mapped onto target
  tokens as q — is caught by the same test.
"""

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from playground.decoding.engine import run
from playground.decoding.sampling import SamplingParams, logits_to_probs
from playground.drafters.other_tokenizer import OtherTokenizerDrafter, decode, encode, target_tokens_for
from playground.models.tiny import BOS as CHAR_BOS
from playground.models.tiny import CHARS, EOS, CharTokenizer
from playground.models.tiny_bytes import ByteTokenizer, build_byte_drafter, byte_id_of_char_id
from playground.settings import RunSettings
from tests.contract import DrafterCacheSpy, assert_greedy_equals_target, first_pair_counts, seeded
from tests.prompts import TINY_PROMPTS as PROMPTS
from tests.stats import assert_does_not_follow, assert_follows, model_pair_pmf
from tests.tiny_models import sliding_pair

GAMMAS = [1, 2, 4, 8]


# ---------------------------------------------------------------- a tokenizer with multi-character tokens


class MergeTokenizer:
    """Greedy longest match over MERGES (ids 0..) and the target's characters (ids after
    them), then <bos> <eos>: the same text as CharTokenizer, cut differently."""

    MERGES = ["the", "th", "he", " t", " a", "in", "er", "an", "re", "on", "e ", "s "]

    def __init__(self):
        self.pieces = self.MERGES + list(CHARS)
        self.index = {p: i for i, p in enumerate(self.pieces)}
        self.bos_token_id, self.eos_token_id = len(self.pieces), len(self.pieces) + 1
        self.all_special_ids = [self.bos_token_id, self.eos_token_id]
        self.vocab_size = len(self.pieces) + 2

    def encode(self, text, add_special_tokens=True):
        ids, i = [], 0
        while i < len(text):
            for n in (3, 2, 1):
                piece = text[i : i + n]
                if len(piece) == n and piece in self.index:
                    ids.append(self.index[piece])
                    i += n
                    break
            else:
                i += 1  # a character the tiny alphabet does not have
        return ([self.bos_token_id] + ids) if add_special_tokens else ids

    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": self.encode(text, add_special_tokens)}

    def decode(self, ids, skip_special_tokens=False, **_):
        out = []
        for i in ids:
            i = int(i)
            if i < len(self.pieces):
                out.append(self.pieces[i])
            elif not skip_special_tokens:
                out.append("<bos>" if i == self.bos_token_id else "<eos>")
        return "".join(out)


@torch.no_grad()
def merge_drafter(char_drafter, tok: MergeTokenizer):
    """The char drafter over MergeTokenizer's ids: characters keep their rows; a merged token
    reads as its last character and scores as its first, so where the char drafter's argmax
    is 't' this one says "the" (ties go to the lower id, the merge)."""
    cfg = char_drafter.config.__class__.from_dict(char_drafter.config.to_dict())
    cfg.vocab_size, cfg.bos_token_id, cfg.eos_token_id = tok.vocab_size, tok.bos_token_id, tok.eos_token_id
    model = LlamaForCausalLM(cfg)
    src, own = char_drafter.state_dict(), model.state_dict()
    for name, tensor in own.items():
        if name not in ("model.embed_tokens.weight", "lm_head.weight"):
            tensor.copy_(src[name])
            continue
        for i, piece in enumerate(tok.pieces):
            char = piece[-1] if name.startswith("model.embed") else piece[0]
            tensor[i] = src[name][CHARS.index(char)]
        tensor[tok.bos_token_id] = src[name][CHAR_BOS]
        tensor[tok.eos_token_id] = src[name][EOS]
    return model.eval()


# ---------------------------------------------------------------- the byte drafter is the char drafter


@torch.inference_mode()
def test_byte_drafter_is_the_char_drafter_spelt_in_bytes(tiny_pair):
    _, drafter, tok = tiny_pair
    byte = build_byte_drafter(drafter)
    text = "Hello, world"
    a = drafter(torch.tensor([tok.encode(text)])).logits[0]  # [T, 100]
    b = byte(torch.tensor([ByteTokenizer().encode(text)])).logits[0]  # [T, 259]
    for char_id, byte_id in byte_id_of_char_id().items():
        assert torch.allclose(a[:, char_id], b[:, byte_id], atol=1e-5)
    assert ByteTokenizer().decode(ByteTokenizer().encode("héllo")) == "<bos>héllo"


def test_target_tokens_for_prefers_the_in_context_encoding():
    tok = MergeTokenizer()  # as the *target's* tokenizer: "t" + "he" re-encodes as "the"
    committed = tok.encode("ot")  # <bos> "o" "t"
    ids, how = target_tokens_for(tok, "ot", committed, "he end")
    assert how == "alone" and tok.decode(ids) == "he end"  # "o" "the" would rewrite the committed "t"
    ids, how = target_tokens_for(tok, "in", tok.encode("in"), " a cat")
    assert how == "in context" and tok.decode(ids) == " a cat" and ids[0] == tok.index[" a"]


# ---------------------------------------------------------------- greedy equality and both caches


def retokenized_prefix(d, state):
    """What the drafter holds: a prefix of its own tokenization of the committed text,
    without the last of those tokens."""
    ids = encode(d.dtok, decode(d.ttok, state.committed_ids), specials=True)
    assert d._seen == ids[: len(d._seen)] and len(d._seen) < len(ids)


def spy_on(drafter, target):
    """The target's cache and the drafter's own after every step."""
    return DrafterCacheSpy(drafter, target, holds=retokenized_prefix)


def _byte_drafter(tiny_pair):
    target, drafter, tok = tiny_pair
    return OtherTokenizerDrafter(build_byte_drafter(drafter), ByteTokenizer(), tok, [EOS])


def _merge_drafter(tiny_pair):
    target, drafter, tok = tiny_pair
    mt = MergeTokenizer()
    return OtherTokenizerDrafter(merge_drafter(drafter, mt), mt, tok, [EOS])


@pytest.mark.parametrize("gamma", GAMMAS)
@pytest.mark.parametrize("make", [_byte_drafter, _merge_drafter], ids=["bytes", "merges"])
def test_greedy_equals_transformers_with_both_caches_checked(tiny_pair, make, gamma):
    target, _, tok = tiny_pair
    cut = 0
    for prompt in PROMPTS:
        spy = spy_on(make(tiny_pair), target)
        cfg = RunSettings(gamma=gamma, max_new_tokens=30)
        r = assert_greedy_equals_target(target, tok, tok.encode(prompt), cfg, spy, msg=prompt)
        assert spy.drafter_checks == spy.checks > 0
        for s in r.steps:
            info = s.drafter_info
            if not info:  # the last token of the budget: nothing was drafted
                continue
            assert info["target_tokens"] == [d.text for d in s.drafted] or len(s.drafted) < len(info["target_tokens"])
            cut += len("".join(info["target_tokens"])) < len(info["drafter_text"])
        assert r.stats.accepted_tokens > 0  # the drafts really are the target's text, often
    if make is _merge_drafter and gamma > 1:
        assert cut > 0  # merged drafter tokens made more target tokens than γ: drafts were cut


def test_merge_drafter_emits_multi_character_tokens(tiny_pair):
    target, _, tok = tiny_pair
    r = run(
        target,
        tok,
        tok.encode("the cat and the hat"),
        RunSettings(gamma=4, max_new_tokens=30),
        drafter=_merge_drafter(tiny_pair),
        eos_token_ids=[EOS],
    )
    pieces = [p for s in r.steps for p in s.drafter_info.get("drafter_tokens", [])]
    assert any(len(p) > 1 for p in pieces)  # e.g. "the", " t": one drafter token, several target tokens


@pytest.mark.parametrize("gamma", [1, 4])
def test_greedy_equality_past_a_sliding_window(tiny_pair, gamma):
    """Gemma 3 target with a window of 4 (its rollbacks are the engine's); the drafter is the
    byte-spelt tiny drafter (a different model: mostly rejected, so both caches roll back)."""
    target, _ = sliding_pair(window=4)
    tok = CharTokenizer()
    ids = tok.encode("sliding windows roll back")
    spy = spy_on(_byte_drafter(tiny_pair), target)
    assert_greedy_equals_target(target, tok, ids, RunSettings(gamma=gamma, max_new_tokens=30), spy)
    assert spy.drafter_checks > 0


class _NeverCrops(OtherTokenizerDrafter):
    def _sync(self, committed):
        text = decode(self.ttok, committed)
        return text, encode(self.dtok, text, specials=True)


def test_the_drafter_cache_check_catches_a_drafter_that_never_crops(tiny_pair):
    target, drafter, tok = tiny_pair
    spy = spy_on(_NeverCrops(build_byte_drafter(drafter), ByteTokenizer(), tok, [EOS]), target)
    with pytest.raises(AssertionError):
        run(
            target,
            tok,
            tok.encode("The capital of France is"),
            RunSettings(gamma=4, max_new_tokens=30),
            drafter=spy,
            eos_token_ids=[EOS],
        )


def test_drafts_do_not_depend_on_the_temperature_or_the_generator(tiny_pair):
    from playground.decoding.draft import TargetState

    target, _, tok = tiny_pair
    state = TargetState(committed_ids=tok.encode("The capital of"))
    drafts = []
    for temperature, seed in ((0.0, 0), (1.0, 1), (1.3, 2)):
        d = _byte_drafter(tiny_pair)
        d.start(state)
        out = d.propose(state, 4, SamplingParams(temperature=temperature), torch.Generator().manual_seed(seed))
        assert out.draft_probs is None  # a point mass: the drafts are its argmax
        drafts.append(out.token_ids)
    assert drafts[0] == drafts[1] == drafts[2] and drafts[0]


# ---------------------------------------------------------------- sampling: chi-square through the loop

V = 6
LETTERS = "abcdef"
N = 1500


class _Letters:
    """The target's tokenizer: id i is LETTERS[i]."""

    all_special_ids = []
    eos_token_id = None

    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": [LETTERS.index(c) for c in text]}

    def decode(self, ids, **_):
        return "".join(LETTERS[int(i)] for i in ids)

    def convert_ids_to_tokens(self, i):
        return LETTERS[int(i)]


class _ReversedLetters(_Letters):
    """The drafter's tokenizer: id i is LETTERS[5 - i], and id 6 is "ab"."""

    PIECES = list(reversed(LETTERS)) + ["ab"]

    def __call__(self, text, add_special_tokens=True):
        ids, i = [], 0
        while i < len(text):
            if text[i : i + 2] == "ab":
                ids.append(6)
                i += 2
            else:
                ids.append(self.PIECES.index(text[i]))
                i += 1
        return {"input_ids": ids}

    def decode(self, ids, **_):
        return "".join(self.PIECES[int(i)] for i in ids)


def _llama(vocab, seed, scale):
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=64,
        tie_word_embeddings=False,
        attn_implementation="eager",
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(scale)
    return model


class _MappedSoftmaxQ(OtherTokenizerDrafter):
    """Mutant: the same argmax drafts, judged against the drafter's softmax mapped onto the
    target's tokens by their text (the obvious cross-tokenizer rule; a biased one)."""

    @torch.inference_mode()
    def propose(self, state, gamma, params, generator):
        draft = super().propose(state, gamma, params, generator)
        rows, ctx = [], list(state.committed_ids)
        for tok in draft.token_ids:
            text = decode(self.ttok, ctx)
            logits = self.model(torch.tensor([encode(self.dtok, text, specials=True)])).logits[0, -1]
            drafter_probs = logits_to_probs(logits, params)  # [V_d]
            row = torch.zeros(V)
            for i, piece in enumerate(self.dtok.PIECES):
                if len(piece) == 1:
                    row[LETTERS.index(piece)] += drafter_probs[i]
            rows.append(row / row.sum())
            ctx.append(tok)
        draft.draft_probs = torch.stack(rows) if rows else None  # [k, V]
        return draft


@pytest.fixture(scope="module")
def letters_pair():
    return _llama(V, 3, 8.0), _llama(len(_ReversedLetters.PIECES), 4, 8.0)


def _sample_pairs(letters_pair, cls, gamma, n=N):
    target, drafter = letters_pair
    params = SamplingParams(temperature=1.0)
    config = RunSettings(gamma=gamma, temperature=1.0, max_new_tokens=2, trace=False)

    def run_seed(seed):
        d = cls(drafter, _ReversedLetters(), _Letters(), [])
        return run(target, _Letters(), [0, 1], config, drafter=d, generator=seeded(seed))

    return first_pair_counts(run_seed, n, V), model_pair_pmf(target, [0, 1], params, V)


@pytest.mark.parametrize("gamma", [1, 3])
def test_sampling_at_t1_follows_the_target_distribution(letters_pair, gamma):
    counts, pmf = _sample_pairs(letters_pair, OtherTokenizerDrafter, gamma)
    assert_follows(counts, pmf)


def test_mutant_mapped_softmax_q_is_detected(letters_pair):
    counts, pmf = _sample_pairs(letters_pair, _MappedSoftmaxQ, 1, n=800)
    assert_does_not_follow(counts, pmf)


# ---------------------------------------------------------------- the preset and the API


def test_preset_and_api():
    from playground import generate
    from playground.config import load_config

    p = load_config().preset("tiny-random-other-tokenizer")
    assert p.drafters == ("other-tokenizer", "prompt-lookup", "early-exit")  # never "model": other ids
    r = generate("Hello", preset=p.name, gamma=4, max_new_tokens=20)
    ar = generate("Hello", preset=p.name, mode="autoregressive", max_new_tokens=20)
    assert r.token_ids == ar.token_ids and r.steps[0].drafter == "other-tokenizer"
    assert r.stats.accepted_tokens > 0
    s = generate("Hello", preset=p.name, gamma=4, max_new_tokens=20, temperature=1.0, seed=5)
    assert len(s.token_ids) == 20


def test_step_view_shows_both_tokenizations(tiny_pair):
    from visual import tokens
    from visual.replay import VERIFY, Frame

    target, _, tok = tiny_pair
    r = run(
        target,
        tok,
        tok.encode("the cat and the hat"),
        RunSettings(gamma=3, max_new_tokens=12),
        drafter=_merge_drafter(tiny_pair),
        eos_token_ids=[EOS],
    )
    i = next(j for j, s in enumerate(r.steps) if any(len(p) > 1 for p in s.drafter_info.get("drafter_tokens", [])))
    info = r.steps[i].drafter_info
    html_text = tokens.step_view("the cat and the hat", r.steps, Frame(i, VERIFY))
    assert "Another tokenizer: the drafter\u2019s text, re-tokenized for the target" in html_text
    assert f"{len(info['drafter_tokens'])} of its own tokens" in html_text
    assert f"{len(info['target_tokens'])} target tokens" in html_text
    assert len(info["target_tokens"]) > len(info["drafter_tokens"]) or len(info["target_tokens"]) == 3


def test_bench_offers_transformers_universal_assisted_generation_only_with_hf_tokenizers(tiny_pair):
    from playground.models.loading import ModelPair
    from tools import bench

    opts = bench.BenchOptions(gammas=(3,), methods=("speculative", "hf_assisted"))
    with_uag = bench._specs(opts, ("other-tokenizer",), hf_assistant=True, hf_uag=True)
    assert bench.Spec.of("hf_assisted", drafter="other-tokenizer", gamma=3) in with_uag
    assert all(s.method == "speculative" for s in bench._specs(opts, ("other-tokenizer",), True, hf_uag=False))
    target, drafter, tok = tiny_pair
    pair = ModelPair(
        target=target, tokenizer=tok, eos_token_ids=(EOS,), drafter_model=drafter, drafter_tokenizer=ByteTokenizer()
    )
    assert not bench._hf_tokenizers(pair)  # the tiny tokenizers are not transformers tokenizers
