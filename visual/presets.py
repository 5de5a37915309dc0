"""Which presets this machine can run, as the tabs list them: available or not, and why.

Shared by the Playground and the Classroom lab tabs.  This module asks ``playground.models.loading``
whether a preset's models can be had here; it loads nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from playground.config import AppConfig, Preset
from playground.models.loading import availability
from playground.validate import DTYPES
from visual.i18n import L, preset_key, preset_text, t

DTYPE_DEFAULT = "preset default"  # a dtype control's value for "the preset's own"


def dtype_choices() -> list[tuple]:
    """A dtype control's choices: the preset's own, then every dtype a run may ask for."""
    return [(L("pg.dtype.default"), DTYPE_DEFAULT), *((d, d) for d in DTYPES)]


@dataclass(frozen=True)
class PresetChoice:
    preset: Preset
    available: bool
    reason: str

    @property
    def label(self) -> str:
        return self.preset.label if self.available else f"{self.preset.label} \u2014 unavailable"

    @property
    def label_key(self) -> str:
        """``label`` as a translatable prop (``visual.i18n.L``)."""
        return preset_key(self.preset.name, not self.available)


def preset_choices(cfg: AppConfig) -> list[PresetChoice]:
    out = []
    for p in cfg.presets:
        try:
            ok, reason = availability(p)
        except Exception as exc:  # never let a broken preset break the page
            ok, reason = False, f"{type(exc).__name__}: {exc}"
        out.append(PresetChoice(p, ok, reason))
    return out


def default_preset(cfg: AppConfig, choices: list[PresetChoice]) -> str:
    by_name = {c.preset.name: c for c in choices}
    if by_name.get(cfg.default_preset) and by_name[cfg.default_preset].available:
        return cfg.default_preset
    return next((c.preset.name for c in choices if c.available), cfg.default_preset)


def preset_info(choice: PresetChoice) -> str:
    p = choice.preset
    label, description = preset_text(p.name, p.label, p.description)
    lines = [f"**{label}** \u2014 {description}"]
    lines.append(t("preset.line", target=p.target, drafter=p.drafter_model or p.drafter, dtype=p.dtype, gamma=p.gamma))
    if not choice.available:
        lines.append(t("preset.unavailable_here", reason=choice.reason))
    return "  \n".join(lines)
