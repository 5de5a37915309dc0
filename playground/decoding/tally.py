"""Running totals over the steps of one run, and the ``RunStats`` they make.

One home for acceptance counting: the decoding loop adds each step as it decides it, and
the lab (a run it stopped early), the stats card and the charts (``visual.stats``,
``visual.charts``: the steps streamed so far) rebuild the totals from step records
(``Tally.add_record``, ``Tally.of_records``), so all of them count acceptance by draft
*depth* the same way, chain or tree.

This module does not time anything or decide what a step accepts; it only sums.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from playground.decoding.records import RunStats, StepRecord


@dataclass
class Tally:
    gamma: int
    draft_ms: float = 0.0
    verify_ms: float = 0.0
    drafted: int = 0
    judged: int = 0
    accepted: int = 0
    drafter_calls: int = 0
    judged_at: list[int] = field(default_factory=list)  # draft depth - 1 -> judged drafts
    accepted_at: list[int] = field(default_factory=list)
    hist: list[int] = field(default_factory=list)  # accepted length -> steps

    def __post_init__(self) -> None:
        self.judged_at = [0] * self.gamma
        self.accepted_at = [0] * self.gamma
        self.hist = [0] * (self.gamma + 1)

    def add(
        self,
        *,
        draft_ms: float,
        verify_ms: float,
        drafted: int,
        judged: Iterable[tuple[int, bool]],
        n_accepted: int,
        drafter_calls: int,
        speculative: bool,
    ) -> None:
        """One step: ``judged`` holds (depth, accepted) for every draft the target judged."""
        self.draft_ms += draft_ms
        self.verify_ms += verify_ms
        self.drafted += drafted
        self.accepted += n_accepted
        self.drafter_calls += drafter_calls
        for depth, ok in judged:
            self.judged += 1
            if depth <= self.gamma:
                self.judged_at[depth - 1] += 1
                self.accepted_at[depth - 1] += int(ok)
        if speculative and n_accepted <= self.gamma:
            self.hist[n_accepted] += 1

    def add_record(self, s: StepRecord, speculative: bool) -> None:
        """One recorded step.  A record keeps no drafter call count: a step that drafted
        counts as one call (a lower bound for drafters that make one call per draft)."""
        self.add(
            draft_ms=s.draft_ms,
            verify_ms=s.verify_ms,
            drafted=len(s.drafted),
            judged=[(d.position, d.accepted) for d in s.drafted if d.judged],
            n_accepted=s.n_accepted,
            drafter_calls=int(bool(s.drafted)),
            speculative=speculative,
        )

    @classmethod
    def of_records(cls, steps: Iterable[StepRecord], gamma: int, speculative: bool = True) -> Tally:
        """The totals of recorded steps (the lab's stopped runs, the app's streamed steps)."""
        tally = cls(gamma)
        for s in steps:
            tally.add_record(s, speculative)
        return tally

    @property
    def alpha(self) -> float | None:
        """The measured acceptance rate: accepted ÷ judged drafts."""
        return (self.accepted / self.judged) if self.judged else None

    def stats(
        self,
        *,
        mode: str,
        drafter: str | None,
        new_tokens: int,
        steps: int,
        target_calls: int,
        prefill_calls: int,
        prefill_ms: float,
        wall_ms: float,
        single_token_ms: Sequence[float],
        stopped: str,
    ) -> RunStats:
        decode_calls = max(target_calls - prefill_calls, 1)
        hist = self.hist
        return RunStats(
            mode=mode,
            drafter=drafter,
            gamma=self.gamma,
            new_tokens=new_tokens,
            steps=steps,
            target_calls=target_calls,
            drafter_calls=self.drafter_calls,
            drafted_tokens=self.drafted,
            judged_tokens=self.judged,
            accepted_tokens=self.accepted,
            acceptance_rate=self.alpha,
            draft_efficiency=(self.accepted / self.drafted) if self.drafted else None,
            acceptance_by_position=tuple((a / j) if j else None for a, j in zip(self.accepted_at, self.judged_at)),
            accepted_length_hist=tuple(hist),
            mean_accepted_length=(sum(n * c for n, c in enumerate(hist)) / sum(hist)) if sum(hist) else None,
            tokens_per_target_call=new_tokens / decode_calls,
            prefill_ms=prefill_ms,
            draft_ms=self.draft_ms,
            verify_ms=self.verify_ms,
            wall_ms=wall_ms,
            tokens_per_s=new_tokens / (wall_ms / 1000.0) if wall_ms > 0 else float("nan"),
            draft_ms_per_token=(self.draft_ms / self.drafted) if self.drafted else None,
            verify_ms_per_call=self.verify_ms / decode_calls,
            single_token_ms=(sum(single_token_ms) / len(single_token_ms)) if single_token_ms else None,
            stopped=stopped,
        )
