"""Runs that may stop early: ``api.stream_generate`` under a ``Budget``, and a result from the steps that ran.

``run_within`` stops a generation between target passes once its budget runs out (Stop
raises ``LabCancelled``); ``partial_result`` rebuilds a ``GenerationResult`` and its
``RunStats`` from the step records of a stopped run, marked ``stats.stopped ==
STOPPED_TIME``.  The equality check and the theory bench's measurement use both.

This module does not compare runs or decide what a stopped run means for a check.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from playground.api import encode_prompt, resolve, stream_generate
from playground.config import load_config
from playground.lab.budget import Budget
from playground.models import load_pair
from playground.records import GenerationResult, RunStats, StepRecord

STOPPED_TIME = "time limit"  # RunStats.stopped of a run the lab's budget cut short


def partial_result(prompt: str, prompt_ids: Sequence[int], steps: Sequence[StepRecord], *, mode: str, gamma: int,
                   config: Mapping[str, Any] | None = None, stopped: str = STOPPED_TIME) -> GenerationResult:
    """A GenerationResult for the steps a run managed before it was stopped.

    The engine builds RunStats only at the end of a run; this rebuilds them from the step
    records (the same sums), so a stopped run can still be compared and measured.  What the
    records do not hold is estimated and documented here: the prefill is one target call when
    the prompt has more than one token, its time is the first step's elapsed time minus the
    step's own, and ``drafter_calls`` counts steps that drafted (a model drafter makes one
    call per draft, so this is a lower bound).
    """
    steps = tuple(steps)
    speculative = mode == "speculative"
    g = int(gamma) if speculative else 0
    new_ids = [t for s in steps for t in s.emitted_ids]
    prefill_calls = 1 if len(prompt_ids) > 1 else 0
    drafted = sum(len(s.drafted) for s in steps)
    judged = sum(1 for s in steps for d in s.drafted if d.judged)
    accepted = sum(s.n_accepted for s in steps)
    judged_at = [0] * g
    accepted_at = [0] * g
    hist = [0] * (g + 1)
    for s in steps:
        for j, d in enumerate(s.drafted[:g]):
            if d.judged:
                judged_at[j] += 1
                accepted_at[j] += int(d.accepted)
        if speculative and s.n_accepted <= g:
            hist[s.n_accepted] += 1
    draft_ms = sum(s.draft_ms for s in steps)
    verify_ms = sum(s.verify_ms for s in steps)
    wall_ms = steps[-1].elapsed_ms if steps else 0.0
    prefill_ms = max(0.0, steps[0].elapsed_ms - steps[0].step_ms) if steps and prefill_calls else 0.0
    single = [s.verify_ms for s in steps if not s.drafted]
    stats = RunStats(
        mode=mode,
        drafter=next((s.drafter for s in steps if s.drafter), None) if speculative else None,
        gamma=g,
        new_tokens=len(new_ids),
        steps=len(steps),
        target_calls=len(steps) + prefill_calls,
        drafter_calls=sum(1 for s in steps if s.drafted),
        drafted_tokens=drafted,
        judged_tokens=judged,
        accepted_tokens=accepted,
        acceptance_rate=(accepted / judged) if judged else None,
        draft_efficiency=(accepted / drafted) if drafted else None,
        acceptance_by_position=tuple((a / j) if j else None for a, j in zip(accepted_at, judged_at)),
        accepted_length_hist=tuple(hist),
        mean_accepted_length=(sum(n * c for n, c in enumerate(hist)) / sum(hist)) if sum(hist) else None,
        tokens_per_target_call=len(new_ids) / max(len(steps), 1),
        prefill_ms=prefill_ms,
        draft_ms=draft_ms,
        verify_ms=verify_ms,
        wall_ms=wall_ms,
        tokens_per_s=len(new_ids) / (wall_ms / 1000.0) if wall_ms > 0 else float("nan"),
        draft_ms_per_token=(draft_ms / drafted) if drafted else None,
        verify_ms_per_call=(verify_ms / len(steps)) if steps else None,
        single_token_ms=(sum(single) / len(single)) if single else None,
        stopped=stopped,
    )
    return GenerationResult(
        prompt=prompt, prompt_ids=tuple(int(t) for t in prompt_ids), token_ids=tuple(new_ids),
        text="".join(s.emitted_text for s in steps), steps=steps, stats=stats, config=dict(config or {}),
    )


def run_within(prompt: str, budget: Budget, *, prompt_ids: Sequence[int] | None = None, **kwargs) -> GenerationResult:
    """``api.generate`` that stops between target passes when ``budget`` runs out.

    Returns the finished result, or ``partial_result`` of the steps so far
    (``stats.stopped == STOPPED_TIME``); Stop raises LabCancelled between steps.  The
    generator is closed on the way out, so a stopped run frees what it held at once."""
    it = stream_generate(prompt, **kwargs)
    steps: list[StepRecord] = []
    try:
        for item in it:
            if isinstance(item, GenerationResult):
                return item
            steps.append(item)
            last = item.eos or item.committed_tokens >= kwargs.get("max_new_tokens", 64)
            if budget.expired() and not last:  # the last step is in: take the real result instead
                break
    finally:
        it.close()
    if prompt_ids is None:  # only a stopped run needs them; the pair is loaded by now
        lim = load_config().limits
        pair = load_pair(resolve(kwargs.get("preset"), kwargs.get("drafter"))[0], kwargs.get("dtype"))
        prompt_ids = encode_prompt(prompt, pair.tokenizer, lim.max_prompt_chars, lim.max_prompt_tokens)
    mode = kwargs.get("mode", "speculative")
    cfg = {k: kwargs[k] for k in ("preset", "drafter", "gamma", "temperature", "seed", "max_new_tokens", "dtype", "rule")
           if k in kwargs}
    gamma = kwargs.get("gamma")
    if gamma is None:
        gamma = resolve(kwargs.get("preset"), kwargs.get("drafter"))[0].gamma
    return partial_result(prompt, prompt_ids, steps, mode=mode, gamma=int(gamma), config=cfg)
