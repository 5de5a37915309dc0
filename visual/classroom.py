"""Classroom presets: the ``classroom:`` list of spaces_config.yaml, validated, each with its share link.

``classroom_presets`` turns each entry into a ``ClassroomPreset`` (label, preset, prompt,
γ, temperature, seed and the teacher's explanation) or raises ``ValueError`` naming the
entry; ``slugify`` gives the name a link uses (``?classroom=<slug>``).

This module does not read URLs (``visual.share``) or render the preset's card
(``visual.lab.classroom_md``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlencode

from playground.config import AppConfig, load_config
from playground.validate import bounds, clean_prompt, parse_number, parse_whole_number
from playground.validate import temperature as check_temperature


def slugify(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")[:60]


@dataclass(frozen=True)
class ClassroomPreset:
    slug: str
    label: str
    preset: str
    prompt: str
    gamma: int
    temperature: float
    seed: int
    explanation: str

    def query(self) -> str:
        """The shareable query string for this preset (``?classroom=slug``)."""
        return "?" + urlencode({"classroom": self.slug})


def classroom_presets(cfg: AppConfig | None = None) -> list[ClassroomPreset]:
    """The ``classroom:`` list of spaces_config.yaml, validated (raises ValueError on a bad entry)."""
    cfg = cfg or load_config()
    lim = cfg.limits
    names = {p.name for p in cfg.presets}
    out: list[ClassroomPreset] = []
    for i, entry in enumerate(cfg.classroom):
        w = f"classroom preset {i + 1}"
        if not isinstance(entry, dict):
            raise ValueError(f"{w} must be a mapping")
        extra = set(entry) - {"label", "preset", "prompt", "gamma", "temperature", "seed", "explanation"}
        if extra:
            raise ValueError(f"{w}: unknown keys {sorted(extra)}")
        try:
            label = str(entry["label"]).strip()
            preset = entry["preset"]
            if preset not in names:
                raise ValueError(f"unknown preset {preset!r}")
            cp = ClassroomPreset(
                slug=slugify(label),
                label=label,
                preset=preset,
                prompt=clean_prompt(entry["prompt"], lim.max_prompt_chars),
                gamma=parse_whole_number("gamma", entry["gamma"], 1, bounds(lim).max_gamma),
                temperature=check_temperature(
                    parse_number("temperature", entry["temperature"], 0.0, lim.max_temperature), lim.max_temperature
                ),
                seed=parse_whole_number("seed", entry.get("seed", 0), 0, 2**63 - 1),
                explanation=str(entry["explanation"]).strip(),
            )
        except KeyError as exc:
            raise ValueError(f"{w}: missing {exc.args[0]!r}") from None
        except ValueError as exc:
            raise ValueError(f"{w}: {exc}") from None
        if not label or not cp.explanation:
            raise ValueError(f"{w}: label and explanation must not be empty")
        out.append(cp)
    slugs = [c.slug for c in out]
    if len(set(slugs)) != len(slugs):
        raise ValueError("classroom preset labels must be distinct")
    return out
