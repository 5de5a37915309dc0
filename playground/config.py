"""Reads ``spaces_config.yaml``: presets, limits, queue settings, examples.

Validates the file into frozen dataclasses.  This module does not load models
(``playground.models.loading``) and does not know about the UI.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from playground.drafters.registry import KINDS, NAMES, offered
from playground.validate import DTYPES
from playground.validate import draft_stop as check_stop_below

CONFIG_PATH = Path(__file__).resolve().parent.parent / "spaces_config.yaml"
SOURCES = ("packaged", "builtin", "hub")


@dataclass(frozen=True)
class Preset:
    name: str
    label: str
    source: str
    target: str
    drafter: str
    dtype: str
    gamma: int
    description: str = ""
    drafter_model: str | None = (
        None  # a second model: the "model" or "other-tokenizer" drafter, or the Gemma 4 assistant
    )
    drafter_weights: str | None = None  # MTP weights dir, relative to the repo
    params_millions: float | None = None  # target + drafter model weights, for the memory budget
    tree_nodes: int = 1  # draft-tree node budget (1 = chain drafts)
    draft_stop: float = (
        0.0  # MTP chains stop once the head's path confidence is below this (playground.decoding.draft_stop)
    )
    exit_layer: int | None = None  # early-exit drafter: decoder layers it runs (None: all but the last)
    exit_kv_reuse: bool = True  # early exit verifies reusing the draft passes' KV (LayerSkip); False: recompute
    exit_adapter: str | None = (
        None  # trained exits (drafters/exit_adapter.py) dir, relative to the repo; None: untrained
    )

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"preset {self.name}: source must be one of {SOURCES}")
        if self.drafter not in KINDS:
            raise ValueError(f"preset {self.name}: drafter must be one of {NAMES}")
        if self.dtype not in DTYPES:
            raise ValueError(f"preset {self.name}: dtype must be one of {DTYPES}")
        if KINDS[self.drafter].needs_drafter_model and not self.drafter_model:
            raise ValueError(f"preset {self.name}: drafter {self.drafter!r} needs drafter_model")
        try:
            check_stop_below(self.draft_stop)
        except ValueError as exc:
            raise ValueError(f"preset {self.name}: {exc}") from None
        if self.exit_layer is not None and (
            isinstance(self.exit_layer, bool) or not isinstance(self.exit_layer, int) or self.exit_layer < 1
        ):
            raise ValueError(f"preset {self.name}: exit_layer must be an integer >= 1, got {self.exit_layer!r}")

    @property
    def drafters(self) -> tuple[str, ...]:
        """Drafter kinds this preset can run: its own first (``drafters.registry.offered``)."""
        return offered(self)


@dataclass(frozen=True)
class Limits:
    max_prompt_chars: int = 4000
    max_prompt_tokens: int = 1024
    max_new_tokens: int = 256
    max_gamma: int = 16
    max_temperature: float = 2.0
    max_top_k: int = 1000
    max_trace_bytes: int = 20_000_000
    memory_budget_mb: int = 12_000  # model weights held at once (a free CPU Space has 16 GB in all)
    lab_wall_s: float = 60.0  # a heavy lab or bench action stops after this and reports what it has
    lab_cache_bytes: int = 200_000_000  # logits the lab may memoise per action (MemoModel)
    lab_rows: int = 32  # continuations the distribution check draws at once on a real model (playground.lab.draws)
    max_upload_bytes: int = 20_000_000  # an uploaded trace file larger than this is refused unread
    trace_cache_entries: int = 128  # finished runs kept for identical requests (playground.serving.trace_cache)
    trace_cache_bytes: int = 64_000_000  # ... and their total size as JSON
    max_batch: int = 32  # runs whose rows one shared target pass carries at most (playground.serving)
    kv_budget_mb: int = 2_000  # the caches of the runs sharing a model's passes, together (playground.serving)
    import_window_bytes: int = (
        1_000_000_000  # trace files everybody may import per 30 min (visual.lab_tabs.replay_share)
    )
    run_wall_s: float = 300.0  # a Playground run stops after computing this long (playground.serving.trace_cache)


@dataclass(frozen=True)
class AppConfig:
    default_preset: str
    presets: tuple[Preset, ...]
    hub_allowlist: tuple[str, ...]
    limits: Limits
    queue: dict[str, int]
    examples: tuple[dict[str, str], ...]
    classroom: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    app: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        names = [p.name for p in self.presets]
        if len(set(names)) != len(names):
            raise ValueError("preset names must be unique")
        if self.default_preset not in names:
            raise ValueError(f"default_preset {self.default_preset!r} is not a preset")
        for p in self.presets:
            if p.source == "hub":
                for repo in (p.target, p.drafter_model):
                    if repo and repo not in self.hub_allowlist:
                        raise ValueError(f"preset {p.name}: {repo} is not in hub_allowlist")

    def preset(self, name: str) -> Preset:
        for p in self.presets:
            if p.name == name:
                return p
        raise KeyError(f"unknown preset {name!r}; choose one of: {', '.join(p.name for p in self.presets)}")


def parse_config(data: dict[str, Any]) -> AppConfig:
    return AppConfig(
        default_preset=data["default_preset"],
        presets=tuple(Preset(**p) for p in data["presets"]),
        hub_allowlist=tuple(data.get("hub_allowlist", ())),
        limits=Limits(**data.get("limits", {})),
        queue=dict(data.get("queue", {})),
        examples=tuple(data.get("examples", ())),
        classroom=tuple(data.get("classroom", ())),
        app=dict(data.get("app", {})),
    )


def load_config(path: str | None = None) -> AppConfig:
    """The app config from ``path``, else ``$SPECPLAY_CONFIG``, else spaces_config.yaml (cached per path)."""
    return _load(path or os.environ.get("SPECPLAY_CONFIG") or str(CONFIG_PATH))


@lru_cache(maxsize=8)
def _load(path: str) -> AppConfig:
    with open(path, encoding="utf-8") as fh:
        return parse_config(yaml.safe_load(fh))
