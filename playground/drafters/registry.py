"""The drafter kinds: one table read by the config, the API, the CLI, the app, the lab, the bench
and the tests.

Each kind has its name (what presets, links and ``--drafter`` say), the words the app's
narration uses for it, what it needs from a preset (a second model, weight files, its own
tokenizer, the target's state), which presets offer it, what it can do (``Capabilities``:
branch into trees, stop early, share the target's cache — the drafter classes declare the
same object, and the loop reads it), and how to build it for a loaded pair.  Builders import
their drafter module when called, so reading the table loads no model code (the config and
``python -m playground presets`` read it without torch).  This module does not load models.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from playground.decoding.draft import Capabilities

if TYPE_CHECKING:  # pragma: no cover - types only
    from playground.config import Preset
    from playground.decoding.draft import Drafter
    from playground.models.loading import ModelPair

# Each builder imports its drafter module when called (drafter modules bring the models' code):
# reading the table loads none of it.


def _prompt_lookup(pair, preset, argmax):
    from playground.drafters.prompt_lookup import PromptLookupDrafter  # when built (see above)

    return PromptLookupDrafter()


def _model(pair, preset, argmax):
    from playground.drafters.model import ModelDrafter  # when built (see above)

    return ModelDrafter(pair.drafter_model, pair.target.config.get_text_config().vocab_size, argmax=argmax)


def _mtp(pair, preset, argmax):
    from playground.drafters.mtp import load_mtp_drafter  # when built (see above)

    return load_mtp_drafter(pair.target, preset, argmax=argmax, eos_token_ids=pair.eos_token_ids)


def _mtp_lookup(pair, preset, argmax):
    from playground.drafters.hybrid import HybridDrafter  # when built (see above)

    return HybridDrafter(_mtp(pair, preset, argmax))


def _gemma4_assistant(pair, preset, argmax):
    from playground.drafters import gemma4_assistant  # when built (see above)

    return gemma4_assistant.load_gemma4_assistant_drafter(
        pair.target, pair.drafter_model, argmax=argmax, eos_token_ids=pair.eos_token_ids
    )


def _early_exit(pair, preset, argmax):
    from playground.drafters import early_exit, exit_adapter  # when built (see above)

    layer = preset.exit_layer if preset.exit_layer is not None else early_exit.default_exit_layer(pair.target)
    adapter = exit_adapter.preset_adapter(preset, pair.target, layer)  # None (the untrained exit) where it has none
    return early_exit.EarlyExitDrafter(
        pair.target, layer, argmax=argmax, reuse_kv=preset.exit_kv_reuse, adapter=adapter
    )


def _other_tokenizer(pair, preset, argmax):
    from playground.drafters import other_tokenizer  # when built (see above)

    if pair.drafter_model is None or pair.drafter_tokenizer is None:
        raise ValueError(f"preset {preset.name!r} has no drafter model with its own tokenizer")
    return other_tokenizer.OtherTokenizerDrafter(
        pair.drafter_model, pair.drafter_tokenizer, pair.tokenizer, pair.eos_token_ids
    )


@dataclass(frozen=True)
class DrafterKind:
    name: str
    label: str  # the narration's words: "Step 3: <label> proposes 4 tokens"
    build: Callable[[ModelPair, Preset, bool], Drafter]
    capabilities: Capabilities = Capabilities()
    needs_drafter_model: bool = False  # a second model (preset.drafter_model)
    reads_weights: bool = False  # trained weight files (preset.drafter_weights)
    own_tokenizer: bool = False  # drafts in its own tokenization (the pair keeps the drafter's tokenizer)
    reads_target_state: bool = False  # reads the target's hidden states / KV: cannot draft on its own
    offered: Callable[[Preset], bool] = lambda p: False  # does a preset of another kind offer it too?

    @property
    def memoisable(self) -> bool:
        """Its drafts depend only on the committed tokens (and its own model over the target's
        vocabulary): the lab may memoise its passes."""
        return not (self.reads_target_state or self.own_tokenizer)


def _plain_second_model(p: Preset) -> bool:
    """The preset's second model drafts over the target's vocabulary by itself (not an assistant
    that reads the target's state, nor a model with another tokenizer)."""
    own = KINDS[p.drafter]
    return bool(p.drafter_model) and not (own.reads_target_state or own.own_tokenizer)


_BRANCHES = Capabilities(branches=True)
_MTP = Capabilities(branches=True, stops_early=True)
KINDS: dict[str, DrafterKind] = {
    k.name: k
    for k in (
        DrafterKind("model", "the drafter model", _model, _BRANCHES, needs_drafter_model=True,
                    offered=_plain_second_model),
        DrafterKind("mtp", "the MTP head", _mtp, _MTP, reads_weights=True, reads_target_state=True,
                    offered=lambda p: bool(p.drafter_weights)),
        DrafterKind("mtp+lookup", "the MTP head or prompt lookup", _mtp_lookup, _MTP, reads_weights=True,
                    reads_target_state=True, offered=lambda p: bool(p.drafter_weights)),
        DrafterKind("prompt-lookup", "prompt lookup", _prompt_lookup, _BRANCHES, offered=lambda p: True),
        DrafterKind("gemma4-assistant", "the Gemma 4 MTP assistant", _gemma4_assistant, _BRANCHES,
                    needs_drafter_model=True, reads_target_state=True),
        # the target's own first layers: not Gemma 4's multimodal target (no plain .model.layers)
        DrafterKind("early-exit", "the target's first layers (early exit)", _early_exit,
                    Capabilities(branches=True, shares_target_cache=True), reads_target_state=True,
                    offered=lambda p: p.drafter != "gemma4-assistant"),
        DrafterKind("other-tokenizer", "the drafter with another tokenizer", _other_tokenizer, Capabilities(),
                    needs_drafter_model=True, own_tokenizer=True),
    )
}  # fmt: skip
NAMES = tuple(KINDS)


def offered(preset: Preset) -> tuple[str, ...]:
    """The kinds a preset can run: its own first, then every kind its resources allow."""
    return tuple(dict.fromkeys([preset.drafter, *(k.name for k in KINDS.values() if k.offered(preset))]))


def build_drafter(kind: str, pair: ModelPair, preset: Preset, argmax: bool = False) -> Drafter:
    """The drafter of ``kind`` for a loaded pair (``argmax``: draft the argmax at any temperature)."""
    if kind not in KINDS:
        raise ValueError(f"unknown drafter {kind!r}; choose one of: {', '.join(NAMES)}")
    return KINDS[kind].build(pair, preset, argmax)
