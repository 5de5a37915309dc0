"""The drafter kinds: one table read by the config, the API, the CLI, the app and the tests.

Each kind has its name (what presets, links and ``--drafter`` say), the words the app's
narration uses for it, whether it needs a second model, and how to build it for a loaded
pair.  Builders import their drafter module when called, so reading the table loads no
model code.  This module does not decide which kinds a preset offers (``config.Preset``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - types only
    from playground.config import Preset
    from playground.drafters.base import Drafter
    from playground.models.loading import ModelPair


def _prompt_lookup(pair, preset, argmax):
    from playground.drafters.prompt_lookup import PromptLookupDrafter

    return PromptLookupDrafter()


def _model(pair, preset, argmax):
    from playground.drafters.model import ModelDrafter

    return ModelDrafter(pair.drafter_model, pair.target.config.get_text_config().vocab_size, argmax=argmax)


def _mtp(pair, preset, argmax):
    from playground.drafters.mtp import load_mtp_drafter

    return load_mtp_drafter(pair.target, preset, argmax=argmax, eos_token_ids=pair.eos_token_ids)


def _mtp_lookup(pair, preset, argmax):
    from playground.drafters.hybrid import HybridDrafter

    return HybridDrafter(_mtp(pair, preset, argmax))


def _gemma4_assistant(pair, preset, argmax):
    from playground.drafters.gemma4_assistant import load_gemma4_assistant_drafter

    return load_gemma4_assistant_drafter(
        pair.target, pair.drafter_model, argmax=argmax, eos_token_ids=pair.eos_token_ids
    )


def _early_exit(pair, preset, argmax):
    from playground.drafters.early_exit import EarlyExitDrafter, default_exit_layer
    from playground.drafters.exit_adapter import preset_adapter

    layer = preset.exit_layer if preset.exit_layer is not None else default_exit_layer(pair.target)
    adapter = preset_adapter(preset, pair.target, layer)  # None (the untrained exit) where it has none
    return EarlyExitDrafter(pair.target, layer, argmax=argmax, reuse_kv=preset.exit_kv_reuse, adapter=adapter)


def _other_tokenizer(pair, preset, argmax):
    from playground.drafters.other_tokenizer import OtherTokenizerDrafter

    if pair.drafter_model is None or pair.drafter_tokenizer is None:
        raise ValueError(f"preset {preset.name!r} has no drafter model with its own tokenizer")
    return OtherTokenizerDrafter(pair.drafter_model, pair.drafter_tokenizer, pair.tokenizer, pair.eos_token_ids)


@dataclass(frozen=True)
class DrafterKind:
    name: str
    label: str  # the narration's words: "Step 3: <label> proposes 4 tokens"
    needs_drafter_model: bool
    branches: bool  # has propose_tree: can draft a tree
    build: Callable[[ModelPair, Preset, bool], Drafter]
    stops: bool = False  # has stop_below: its chains stop early when unsure (playground.decoding.draft_stop)


KINDS: dict[str, DrafterKind] = {
    k.name: k
    for k in (
        DrafterKind("model", "the drafter model", True, True, _model),
        DrafterKind("prompt-lookup", "prompt lookup", False, True, _prompt_lookup),
        DrafterKind("mtp", "the MTP head", False, True, _mtp, stops=True),
        DrafterKind("mtp+lookup", "the MTP head or prompt lookup", False, True, _mtp_lookup, stops=True),
        DrafterKind("gemma4-assistant", "the Gemma 4 MTP assistant", True, True, _gemma4_assistant),
        DrafterKind("early-exit", "the target's first layers (early exit)", False, True, _early_exit),
        DrafterKind("other-tokenizer", "the drafter with another tokenizer", True, False, _other_tokenizer),
    )
}
NAMES = tuple(KINDS)


def build_drafter(kind: str, pair: ModelPair, preset: Preset, argmax: bool = False) -> Drafter:
    """The drafter of ``kind`` for a loaded pair (``argmax``: draft the argmax at any temperature)."""
    if kind not in KINDS:
        raise ValueError(f"unknown drafter {kind!r}; choose one of: {', '.join(NAMES)}")
    return KINDS[kind].build(pair, preset, argmax)
