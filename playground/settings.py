"""``RunSettings``: one run's settings, typed, frozen and checked once, from the form to the engine.

Every way in builds one — the Playground form, ``/speculate``, the Python API (``generate``
and ``stream_generate`` keep their keywords and build one at once: ``api.run_settings``), the
CLI, the lab and the bench — and passes it whole: to ``api.stream_run``, then to
``decoding.engine.stream``, which reads the fields it needs.  Adding a setting means one
field here, one check in ``playground.validate`` and one control.

A ``RunSettings`` is checked when it is made (``validate.run_settings`` with the engine's
bounds; ``api.run_settings`` checks the app's narrower limits and resolves a preset's
defaults first), so one that exists is valid.  This module does not resolve presets, load
models or know where a value came from.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from playground import validate


@dataclass(frozen=True)
class RunSettings:
    """What decides one run's output.  ``preset``, ``drafter``, ``dtype`` and ``draft_stop`` are
    None only for runs on models given directly to the engine (tests, the lab's own runs)."""

    mode: str = "speculative"  # validate.MODES
    preset: str | None = None  # a preset name of spaces_config.yaml
    drafter: str | None = None  # a drafter kind (drafters.registry)
    gamma: int = 4  # drafts per step (a tree's depth)
    temperature: float = 0.0  # 0 = greedy
    top_k: int = 0  # 0 = off
    top_p: float = 1.0  # 1 = off
    seed: int = 0
    max_new_tokens: int = 64
    dtype: str | None = None  # "float32" | "bfloat16" (None: the preset's)
    tree_nodes: int = 1  # > 1: drafters that branch draft a tree of up to this many nodes
    rule: str = "lossless"  # a verification rule of playground.rules (the lab's wrong ones too)
    draft_stop: float | None = None  # MTP chains stop below this path confidence (None: the preset's)
    draft_argmax: bool = False  # draft the argmax at any temperature (q a point mass)
    trace: bool = True  # False skips top-k lists and per-token texts (overhead measurement)
    top_n: int = 5  # candidates recorded per distribution in the trace

    def __post_init__(self) -> None:
        clean = validate.run_settings({f.name: getattr(self, f.name) for f in fields(self)})
        for name, value in clean.items():  # e.g. a slider's 4.0 becomes the int 4
            object.__setattr__(self, name, value)

    @property
    def speculative(self) -> bool:
        return self.mode == "speculative"

    def autoregressive(self, **changes: Any) -> RunSettings:
        """The same run without a drafter: no rule, tree or stop threshold of its own, so a race's
        baseline is the same request (and trace-cache entry) whatever the speculative run verified."""
        kept = dict(mode="autoregressive", rule="lossless", tree_nodes=1, draft_stop=None, draft_argmax=False)
        return replace(self, **{**kept, **changes})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
