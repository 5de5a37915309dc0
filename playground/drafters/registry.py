"""The drafter kinds: one table read by the config, the API, the CLI, the app, the lab, the bench
and the tests.

Each kind has its name (what presets, links and ``--drafter`` say), its drafter class (which
declares what it can do: branch into trees, stop early, share the target's cache, need a
second model — ``playground.drafters.base``), the words the app's narration uses for it,
what else it needs from a preset (weight files, its own tokenizer, the target's state),
which presets offer it, and how to build it for a loaded pair.  This module does not load
models; it imports the drafter classes, never the config or the loading code (which read
this table).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from playground.decoding.draft import Capabilities
from playground.drafters import early_exit, exit_adapter, gemma4_assistant, mtp
from playground.drafters.base import BaseDrafter
from playground.drafters.early_exit import EarlyExitDrafter
from playground.drafters.gemma4_assistant import Gemma4AssistantDrafter
from playground.drafters.hybrid import HybridDrafter
from playground.drafters.model import ModelDrafter
from playground.drafters.mtp import MTPDrafter
from playground.drafters.other_tokenizer import OtherTokenizerDrafter
from playground.drafters.prompt_lookup import PromptLookupDrafter
from playground.settings import RunSettings

# A builder takes a loaded pair (``playground.models.loading.ModelPair``), its preset
# (``playground.config.Preset``: weights, exit layer) and the run's ``RunSettings``, from which
# a drafter reads its own settings (``draft_argmax``; ``draft_stop``, already resolved against
# the preset by ``playground.api.run_settings``, or None: the preset's).


def _stop(preset, s) -> float:
    """The run's early-stop threshold: its own, or the preset's."""
    return float((preset.draft_stop if s.draft_stop is None else s.draft_stop) or 0.0)


def _prompt_lookup(pair, preset, s):
    return PromptLookupDrafter()


def _model(pair, preset, s):
    return ModelDrafter(pair.drafter_model, pair.target.config.get_text_config().vocab_size, argmax=s.draft_argmax)


def _mtp(pair, preset, s):
    return mtp.load_mtp_drafter(
        pair.target, preset, argmax=s.draft_argmax, eos_token_ids=pair.eos_token_ids, stop_below=_stop(preset, s)
    )


def _mtp_lookup(pair, preset, s):
    return HybridDrafter(_mtp(pair, preset, s))


def _gemma4_assistant(pair, preset, s):
    return gemma4_assistant.load_gemma4_assistant_drafter(
        pair.target, pair.drafter_model, argmax=s.draft_argmax, eos_token_ids=pair.eos_token_ids
    )


def _early_exit(pair, preset, s):
    layer = preset.exit_layer if preset.exit_layer is not None else early_exit.default_exit_layer(pair.target)
    adapter = exit_adapter.preset_adapter(preset, pair.target, layer)  # None (the untrained exit) where it has none
    return EarlyExitDrafter(pair.target, layer, argmax=s.draft_argmax, reuse_kv=preset.exit_kv_reuse, adapter=adapter)


def _other_tokenizer(pair, preset, s):
    if pair.drafter_model is None or pair.drafter_tokenizer is None:
        raise ValueError(f"preset {preset.name!r} has no drafter model with its own tokenizer")
    return OtherTokenizerDrafter(pair.drafter_model, pair.drafter_tokenizer, pair.tokenizer, pair.eos_token_ids)


@dataclass(frozen=True)
class DrafterKind:
    name: str
    drafter: type[BaseDrafter]  # its class: what it can do is declared there
    label: str  # the narration's words: "Step 3: <label> proposes 4 tokens"
    build: Callable[[Any, Any, RunSettings], BaseDrafter]  # (pair, preset, the run's settings) -> the drafter
    reads_weights: bool = False  # trained weight files (preset.drafter_weights)
    own_tokenizer: bool = False  # drafts in its own tokenization (the pair keeps the drafter's tokenizer)
    reads_target_state: bool = False  # reads the target's hidden states / KV: cannot draft on its own
    offered: Callable[[Any], bool] = lambda p: False  # does a preset of another kind offer it too?

    @property
    def capabilities(self) -> Capabilities:
        """What every drafter of this kind can do (its class's declaration)."""
        return self.drafter.declared()

    @property
    def needs_drafter_model(self) -> bool:
        """A second model (preset.drafter_model)."""
        return self.drafter.needs_drafter_model

    @property
    def memoisable(self) -> bool:
        """Its drafts depend only on the committed tokens (and its own model over the target's
        vocabulary): the lab may memoise its passes."""
        return not (self.reads_target_state or self.own_tokenizer)


def _plain_second_model(p) -> bool:
    """The preset's second model drafts over the target's vocabulary by itself (not an assistant
    that reads the target's state, nor a model with another tokenizer)."""
    own = KINDS[p.drafter]
    return bool(p.drafter_model) and not (own.reads_target_state or own.own_tokenizer)


KINDS: dict[str, DrafterKind] = {
    k.name: k
    for k in (
        DrafterKind("model", ModelDrafter, "the drafter model", _model, offered=_plain_second_model),
        DrafterKind("mtp", MTPDrafter, "the MTP head", _mtp, reads_weights=True, reads_target_state=True,
                    offered=lambda p: bool(p.drafter_weights)),
        DrafterKind("mtp+lookup", HybridDrafter, "the MTP head or prompt lookup", _mtp_lookup, reads_weights=True,
                    reads_target_state=True, offered=lambda p: bool(p.drafter_weights)),
        DrafterKind("prompt-lookup", PromptLookupDrafter, "prompt lookup", _prompt_lookup, offered=lambda p: True),
        DrafterKind("gemma4-assistant", Gemma4AssistantDrafter, "the Gemma 4 MTP assistant", _gemma4_assistant,
                    reads_target_state=True),
        # the target's own first layers: not Gemma 4's multimodal target (no plain .model.layers)
        DrafterKind("early-exit", EarlyExitDrafter, "the target's first layers (early exit)", _early_exit,
                    reads_target_state=True, offered=lambda p: p.drafter != "gemma4-assistant"),
        DrafterKind("other-tokenizer", OtherTokenizerDrafter, "the drafter with another tokenizer", _other_tokenizer,
                    own_tokenizer=True),
    )
}  # fmt: skip
NAMES = tuple(KINDS)


def offered(preset) -> tuple[str, ...]:
    """The kinds a preset can run: its own first, then every kind its resources allow."""
    return tuple(dict.fromkeys([preset.drafter, *(k.name for k in KINDS.values() if k.offered(preset))]))


def build_drafter(kind: str, pair, preset, settings: RunSettings | None = None) -> BaseDrafter:
    """The drafter of ``kind`` for a loaded pair, with the run's own drafter settings
    (``draft_argmax``, ``draft_stop``; None: the defaults, and the preset's stop threshold)."""
    if kind not in KINDS:
        raise ValueError(f"unknown drafter {kind!r}; choose one of: {', '.join(NAMES)}")
    return KINDS[kind].build(pair, preset, settings or RunSettings())
