"""Greedy equality on the real packaged Gemma 3 270M (float32), both drafters.

The packaged GGUF is converted once (~60 s, cached under the playground cache
dir) the first time; nothing is downloaded.  The model drafter here is a small
*random* model with Gemma's vocabulary: it is almost always rejected, which
exercises rejection, residual resampling and rollback on the real target
(including its 512-token sliding-window layers only loosely; the tight
window-crossing rollback is tested with a window of 4 in test_engine.py).
"""

import pytest
import torch
from transformers import Gemma3ForCausalLM, Gemma3TextConfig

from playground.decoding.engine import run
from playground.decoding.text import REPLACEMENT, IncrementalText
from playground.drafters.model import ModelDrafter
from playground.drafters.prompt_lookup import PromptLookupDrafter
from playground.models import convert
from playground.settings import RunSettings

pytestmark = pytest.mark.real_model

PROMPTS = [
    "The capital of France is",
    "Repeat after me: the quick brown fox jumps over the lazy dog. The quick brown fox",
    "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n",
]
NEW = 20


@pytest.fixture(scope="module")
def gemma(gemma_fp32):
    model, tok, eos = gemma_fp32
    refs = {}
    with torch.inference_mode():
        for p in PROMPTS:
            ids = tok(p)["input_ids"]
            out = model.generate(torch.tensor([ids]), max_new_tokens=NEW, do_sample=False)
            refs[p] = (ids, out[0, len(ids) :].tolist())
    return model, tok, eos, refs


def random_gemma_vocab_drafter(vocab):
    cfg = Gemma3TextConfig(
        vocab_size=vocab,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=1,
        num_key_value_heads=1,
        head_dim=16,
        sliding_window=8,
        layer_types=["sliding_attention"],
        attn_implementation="eager",
    )
    torch.manual_seed(0)
    return Gemma3ForCausalLM(cfg).eval()


@pytest.mark.parametrize("gamma", [1, 2, 4, 8])
@pytest.mark.parametrize("kind", ["prompt-lookup", "model"])
def test_gemma_greedy_speculative_equals_transformers(gemma, all_threads, kind, gamma):
    model, tok, eos, refs = gemma
    vocab = model.config.vocab_size
    for prompt in PROMPTS:
        ids, ref = refs[prompt]
        drafter = (
            PromptLookupDrafter() if kind == "prompt-lookup" else ModelDrafter(random_gemma_vocab_drafter(vocab), vocab)
        )
        r = run(model, tok, ids, RunSettings(gamma=gamma, max_new_tokens=NEW), drafter=drafter, eos_token_ids=eos)
        assert list(r.token_ids) == ref, (prompt, tok.decode(ref), r.text)


@pytest.mark.parametrize("kind,gamma,stop", [("mtp", 5, 0.0), ("mtp+lookup", 5, 0.0), ("mtp+lookup", 8, 0.15)])
def test_gemma_greedy_with_the_shipped_mtp_drafter_equals_transformers(gemma, all_threads, kind, gamma, stop):
    """The trained drafter in playground/weights (the default preset's), float32 target; the
    last case is the default preset's setting, chains that stop early (draft_stop)."""
    from playground.drafters.hybrid import HybridDrafter
    from playground.drafters.mtp import load_mtp_drafter

    model, tok, eos, refs = gemma
    stopped = 0
    for prompt in PROMPTS:
        ids, ref = refs[prompt]
        drafter = load_mtp_drafter(model, eos_token_ids=eos, stop_below=stop)
        if kind == "mtp+lookup":
            drafter = HybridDrafter(drafter)
        r = run(model, tok, ids, RunSettings(gamma=gamma, max_new_tokens=NEW), drafter=drafter, eos_token_ids=eos)
        assert list(r.token_ids) == ref, (prompt, tok.decode(ref), r.text)
        assert r.stats.accepted_tokens > 0  # the trained head really drafts for this target
        stopped += sum(bool(s.drafter_info.get("stopped_early")) for s in r.steps)
    assert (stopped > 0) == (stop > 0)  # the threshold really cut chains short


def test_gemma_multibyte_text_is_never_broken(gemma):
    model, tok, _, _ = gemma
    text = "北京是中国的首都。🎉🚀 Ünïcödé"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    inc = IncrementalText(tok)
    pieces = [inc.extend([i]) for i in ids]
    assert all(REPLACEMENT not in p for p in pieces)
    assert "".join(pieces) == text


# ---------------------------------------------------------------- past the 512-token sliding window

LONG_PROMPT = " ".join(
    f"Item {i}: the {['red', 'green', 'blue', 'amber'][i % 4]} lantern number {i} is lit." for i in range(60)
)


@pytest.mark.parametrize("mode", ["autoregressive", "speculative", "race"])
def test_default_preset_runs_past_the_sliding_window(all_threads, mode):
    """A 600+-token prompt on the default preset (Gemma 3 270M, sliding window 512) in every
    mode.  Autoregressive runs once crashed here ("crop was called, but the current layer
    does not track past states"); Race runs both loops through the app's Run handler."""
    from playground.api import generate
    from playground.config import load_config

    cfg = load_config()
    preset = cfg.preset(cfg.default_preset)
    try:
        convert.gguf_path(preset.target)
    except convert.ModelUnavailable as exc:
        pytest.skip(f"packaged model not installed: {exc}")
    from playground.models.loading import load_pair

    n_prompt = len(load_pair(preset).tokenizer(LONG_PROMPT)["input_ids"])
    assert 600 <= n_prompt <= cfg.limits.max_prompt_tokens
    if mode != "race":
        r = generate(LONG_PROMPT, mode=mode, max_new_tokens=12)
        assert len(r.token_ids) == 12 or r.stats.stopped == "eos"
        return
    from visual.playground_tab import make_run_handler, preset_choices

    choices = preset_choices(cfg)
    handler = make_run_handler(cfg, choices)
    last = None
    form = dict(trace=None, prompt=LONG_PROMPT, preset=preset.name, drafter=preset.drafter, gamma=preset.gamma,
                max_new_tokens=12, mode="Race", calibrate=False)  # fmt: skip
    for last in handler(form, progress=lambda *a, **k: None):
        pass
    trace = last[0]
    assert not trace.get("error"), trace.get("error")
    assert trace["spec"] is not None and trace["ar"] is not None
    for result in (trace["spec"], trace["ar"]):
        assert len(result.token_ids) == 12 or result.stats.stopped == "eos"


@pytest.mark.parametrize("kind, nodes", [("prompt-lookup", 8), ("mtp", 8), ("mtp+lookup", 16)])
def test_gemma_greedy_with_draft_trees_equals_transformers(gemma, all_threads, kind, nodes):
    """Draft trees on the real target in float32: one pass over every node with tree masks
    (full and 512-token sliding layers), compaction after each step; output identical."""
    from playground.config import load_config
    from playground.drafters.hybrid import HybridDrafter
    from playground.drafters.mtp import load_mtp_drafter

    model, tok, eos, refs = gemma
    preset = load_config().preset("gemma3-270m-mtp")
    for prompt in PROMPTS:
        ids, ref = refs[prompt]
        if kind == "prompt-lookup":
            drafter = PromptLookupDrafter()
        else:
            mtp = load_mtp_drafter(model, preset, eos_token_ids=eos, stop_below=preset.draft_stop)
            drafter = mtp if kind == "mtp" else HybridDrafter(mtp)
        r = run(
            model,
            tok,
            ids,
            RunSettings(gamma=5, max_new_tokens=NEW, tree_nodes=nodes),
            drafter=drafter,
            eos_token_ids=eos,
        )
        assert list(r.token_ids) == ref[: len(r.token_ids)] and (len(r.token_ids) == NEW or r.stats.stopped == "eos")
