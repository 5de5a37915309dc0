"""Engine messages in the visitor's language: ``playground``'s ValueError texts, stop reasons, replay
notes, the lab's progress lines.

``playground`` raises plain English ValueErrors and knows nothing of languages; here each message
the app shows is matched by a pattern and rebuilt from the catalogue, its values (numbers, names,
what the visitor typed) carried over untranslated.  A message no pattern knows is shown as the
engine wrote it.  This module does not raise or validate anything itself.
"""

from __future__ import annotations

import re

from visual.i18n import CATALOGUE, current, t

# (pattern over the whole message, catalogue key); named groups are the key's values
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p, re.S | re.I), key)
    for p, key in (
        (r"temperature must be a finite number, got (?P<value>.+)", "eng.temperature_finite"),
        (
            r"temperature must be 0 \(greedy\) or between (?P<lo>\S+) and (?P<hi>\S+), got (?P<value>.+)",
            "eng.temperature_range",
        ),
        (r"verification must be one of:? (?P<choices>.+?);? got (?P<value>.+)", "eng.verification"),
        (r"block verification judges a chain of drafts, not a tree.*", "eng.block_tree"),
        (
            r"tree drafts are verified with the lossless rule only, not (?P<rule>.+?): set tree_nodes to 1",
            "eng.tree_rule",
        ),
        (r"(?P<name>\w+) must be one of (?P<choices>.+?), got (?P<value>.+)", "eng.one_of"),
        (r"seed must be >= 0, got (?P<value>.+)", "eng.seed"),
        (r"top_p must be a finite number, got (?P<value>.+)", "eng.top_p_finite"),
        (r"top_p must be in \(0, 1\], got (?P<value>.+)", "err.top_p_range"),
        (r"(?P<name>\w+) must be true or false, got (?P<value>.+)", "eng.bool"),
        (r"(?:the )?prompt is empty: type at least one word", "err.prompt_empty"),
        (r"(?:the )?prompt is too long: (?P<n>\d+) tokens \(limit (?P<limit>\d+)\)", "eng.prompt_long_tokens"),
        (r"preset (?P<preset>.+?) is unavailable here: (?P<reason>.+)", "err.preset_unavailable"),
        (
            r"preset (?P<preset>.+?) has no (?P<drafter>.+?) drafter; choose one of: (?P<choices>.+)",
            "err.drafter_unknown",
        ),
        (r"draft_stop must be a number in \[0, 1\) \(0 = off\), got (?P<value>.+)", "eng.draft_stop"),
        (r"(?P<name>\w+) must be a whole number, got (?P<value>.+)", "err.whole"),
        (r"(?P<name>\w+) must be a whole number", "eng.whole"),
        (r"(?P<name>\w+) must be between (?P<lo>\S+) and (?P<hi>\S+), got (?P<value>.+)", "err.between"),
        (r"(?P<name>\w+) must be a number like 0\.7, got (?P<value>.+)", "eng.number_like"),
        (r"(?P<name>\w+) must be a number, got (?P<value>.+)", "eng.number"),
        (r"(?P<name>\w+) must be a number", "eng.number_plain"),
        (r"(?:the )?prompt must be text", "eng.prompt_text"),
        (r"(?:the )?prompt is empty", "eng.prompt_empty"),
        (r"(?:the )?prompt is too long: (?P<n>\d+) characters \(limit (?P<limit>\d+)\)", "eng.prompt_long"),
        (r"unknown preset (?P<preset>.+?); choose one of: (?P<choices>.+)", "eng.unknown_preset"),
        # progress lines of the lab's heavy actions (playground.lab.distribution, exact, equality, theory)
        (r"speculative: (?P<done>[\d,]+) / (?P<n>[\d,]+) continuations", "prog.cont.speculative"),
        (r"target only: (?P<done>[\d,]+) / (?P<n>[\d,]+) continuations", "prog.cont.target"),
        (r"statistics", "prog.statistics"),
        (r"the target's exact probabilities", "prog.exact"),
        (r"done", "prog.done"),
        (r"target alone \(greedy\)", "prog.eq.target"),
        (r"speculative \(greedy\)", "prog.eq.spec"),
        (r"replaying both passes at the divergence", "prog.eq.replay"),
        (r"warming up \(first passes are slower\)", "prog.warmup"),
        (r"target alone", "prog.target"),
        (r"speculative", "prog.spec"),
        (
            r"Shared run: an identical request \(same preset, prompt, settings and seed\) started this run at "
            r"(?P<at>.+?); you watched it as it was computed\. Timings are that run's",
            "eng.shared_run",
        ),
        (
            r"Replay of a recorded run: an identical request \(same preset, prompt, settings and seed\) was "
            r"computed at (?P<at>.+?); the trace is that run's, and so are its timings",
            "eng.replay",
        ),
    )
)


def engine_message(exc: object) -> str:
    """An engine message (an exception or its text) in the current language; unchanged in English."""
    text = str(exc)
    if current() == "en":
        return text
    for pattern, key in _PATTERNS:
        m = pattern.fullmatch(text.strip().rstrip("."))
        if m:
            out = t(key, **m.groupdict())
            return out if out.endswith(("。", ".")) or not text.rstrip().endswith(".") else out + "。"
    return text


def stop_reason(reason: object) -> str:
    """Why generation stopped (``RunStats.stopped``: ``eos`` or ``max_new_tokens``), in words."""
    key = f"stop.{reason}"
    return t(key) if key in CATALOGUE["en"] else str(reason)
