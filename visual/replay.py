"""The replay's frame model: which part of which step is on screen.

A run of N steps is replayed as frames.  Frame 0 shows only the prompt.  Each
step with drafts has two frames: ``draft`` (the drafter's proposals appear one
by one, the target has not looked yet) and ``verify`` (after the single target
pass every draft flips to its verdict and the target's extra token appears).
A step without drafts (autoregressive, or a drafter that found nothing) has
only its ``verify`` frame.

Pure functions on lists of ``StepRecord``; no Gradio, no HTML.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from playground.decoding.records import StepRecord

START, DRAFT, VERIFY = "start", "draft", "verify"


@dataclass(frozen=True)
class Frame:
    step: int  # index into the steps; -1 for the start frame
    phase: str  # START | DRAFT | VERIFY


def frames(steps: Sequence[StepRecord]) -> list[Frame]:
    out = [Frame(-1, START)]
    for i, s in enumerate(steps):
        if s.drafted:
            out.append(Frame(i, DRAFT))
        out.append(Frame(i, VERIFY))
    return out


def frame_count(steps: Sequence[StepRecord]) -> int:
    return 1 + sum(2 if s.drafted else 1 for s in steps)


def frame_at(steps: Sequence[StepRecord], index: int) -> Frame:
    """The frame at ``index`` (clamped to the frames that exist)."""
    fs = frames(steps)
    return fs[max(0, min(index, len(fs) - 1))]


def clamp(index: int, steps: Sequence[StepRecord]) -> int:
    return max(0, min(int(index), frame_count(steps) - 1))


def first_frame_of_step(steps: Sequence[StepRecord], step: int) -> int:
    """Frame index where ``step`` first appears (its draft frame, or its verify frame)."""
    return 1 + sum(2 if s.drafted else 1 for s in steps[:step])
