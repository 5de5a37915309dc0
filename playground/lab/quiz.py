"""Predict, then reveal: questions from a recorded step, scored guesses, a session's score.

``question`` shows a step's drafts as they were before verification; ``reveal`` scores a
guess (accept? per draft) against what verification did; ``score_rate_guess`` scores a
guess of a run's acceptance rate; ``Scoreboard`` adds them up.

Pure functions of a recorded ``GenerationResult``: this module runs no model and renders
nothing (``visual.lab`` does).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from playground.decoding.records import GenerationResult
from playground.decoding.text import token_label
from playground.validate import number as check_number


@dataclass(frozen=True)
class Question:
    step_index: int
    context: str  # text committed before this step (tail)
    drafts: tuple[str, ...]
    draft_probs: tuple[float, ...]  # q(d): how sure the drafter was
    deterministic: bool  # q is a point mass (greedy / argmax / copied drafts)


@dataclass(frozen=True)
class Reveal:
    step_index: int
    guess: tuple[bool, ...]
    outcome: tuple[str, ...]  # per draft: "accepted" | "rejected" | "not judged"
    target_probs: tuple[float, ...]
    accept_probs: tuple[float, ...]
    us: tuple[float | None, ...]
    correction: str  # the token the target added (its label), "" if none
    correction_kind: str | None  # records.Correction.kind: "resample" | "bonus" | "target"
    points: int
    max_points: int

    @property
    def exact(self) -> bool:
        return self.points == self.max_points


def question_steps(result: GenerationResult) -> list[int]:
    """Indexes of steps that drafted at least one token (the ones worth guessing)."""
    return [s.index for s in result.steps if s.drafted]


def question(result: GenerationResult, step_index: int, context_chars: int = 160) -> Question:
    step = result.steps[step_index]
    if not step.drafted:
        raise ValueError(f"step {step_index} has no drafts to guess about")
    before = result.prompt + "".join(s.emitted_text for s in result.steps[:step_index])
    return Question(
        step_index=step_index,
        context=before[-context_chars:],
        drafts=tuple(d.text for d in step.drafted),
        draft_probs=tuple(d.draft_prob for d in step.drafted),
        deterministic=all(d.draft_prob >= 1.0 for d in step.drafted),
    )


def reveal(result: GenerationResult, step_index: int, guess: Sequence[bool]) -> Reveal:
    """Score a guess (accept? per draft) against what verification did.

    Acceptance is a prefix: drafts after the first rejection are discarded ("not judged") and
    count as not accepted.  One point per draft guessed right.
    """
    step = result.steps[step_index]
    k = len(step.drafted)
    g = tuple(bool(x) for x in guess)
    if len(g) != k:
        raise ValueError(f"need one guess per draft: {k} drafts, {len(g)} guesses")
    outcome = tuple(
        "accepted" if i < step.n_accepted else ("rejected" if d.judged else "not judged")
        for i, d in enumerate(step.drafted)
    )
    truth = [i < step.n_accepted for i in range(k)]
    points = sum(1 for a, b in zip(g, truth) if a == b)
    corr = step.correction
    ctext = "" if corr is None else repr(token_label(corr.text))
    return Reveal(
        step_index=step_index,
        guess=g,
        outcome=outcome,
        target_probs=tuple(d.target_prob for d in step.drafted),
        accept_probs=tuple(d.accept_prob for d in step.drafted),
        us=tuple(d.u for d in step.drafted),
        correction=ctext,
        correction_kind=None if corr is None else corr.kind,
        points=points,
        max_points=k,
    )


def score_rate_guess(guess: float, actual: float | None) -> int:
    """0–10 points for guessing a run's acceptance rate (both in [0, 1]); 10 within 2.5 points."""
    guess = check_number("guess", guess, 0.0, 1.0)
    if actual is None:
        return 0
    err = abs(guess - actual)
    return max(0, min(10, round(10 * (1 - max(0.0, err - 0.025) / 0.5))))


@dataclass(frozen=True)
class StepScore:
    """One scored step of a round (the page words it: ``visual.lab.score_card``)."""

    step: int  # 1-based
    points: int
    max_points: int
    exact: bool


@dataclass(frozen=True)
class RateScore:
    """One scored acceptance-rate guess."""

    guess: float
    actual: float | None  # None: the run judged no draft
    points: int


@dataclass(frozen=True)
class Scoreboard:
    """A session's score (kept in gr.State; every update returns a new board)."""

    steps: int = 0
    step_points: int = 0
    step_max: int = 0
    exact_steps: int = 0
    rate_rounds: int = 0
    rate_points: int = 0
    history: tuple[StepScore | RateScore, ...] = ()

    def add_step(self, r: Reveal) -> Scoreboard:
        line = StepScore(r.step_index + 1, r.points, r.max_points, r.exact)
        return replace(
            self,
            steps=self.steps + 1,
            step_points=self.step_points + r.points,
            step_max=self.step_max + r.max_points,
            exact_steps=self.exact_steps + int(r.exact),
            history=(self.history + (line,))[-20:],
        )

    def add_rate(self, guess: float, actual: float | None) -> Scoreboard:
        pts = score_rate_guess(guess, actual)
        line = RateScore(guess, actual, pts)
        return replace(
            self,
            rate_rounds=self.rate_rounds + 1,
            rate_points=self.rate_points + pts,
            history=(self.history + (line,))[-20:],
        )

    @property
    def total(self) -> int:
        return self.step_points + self.rate_points

    @property
    def total_max(self) -> int:
        return self.step_max + 10 * self.rate_rounds
