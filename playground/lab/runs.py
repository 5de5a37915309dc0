"""Runs that may stop early: ``api.stream_run`` under a ``Budget``, and a result from the steps that ran.

``run_within`` stops a generation between target passes once its budget runs out (Stop
raises ``LabCancelled``); ``partial_result`` rebuilds a ``GenerationResult`` and its
``RunStats`` from the step records of a stopped run, marked ``stats.stopped ==
STOPPED_TIME``.  The equality check and the theory bench's measurement use both.

This module does not compare runs or decide what a stopped run means for a check.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from playground.api import encode_prompt, stream_run
from playground.config import load_config
from playground.decoding.records import GenerationResult, StepRecord
from playground.decoding.tally import Tally
from playground.lab.budget import Budget
from playground.models.loading import load_pair
from playground.settings import RunSettings

STOPPED_TIME = "time limit"  # RunStats.stopped of a run the lab's budget cut short


def partial_result(
    prompt: str,
    prompt_ids: Sequence[int],
    steps: Sequence[StepRecord],
    *,
    mode: str,
    gamma: int,
    config: Mapping[str, Any] | None = None,
    stopped: str = STOPPED_TIME,
) -> GenerationResult:
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
    tally = Tally(int(gamma) if speculative else 0)
    for s in steps:
        tally.add_record(s, speculative)
    new_ids = [t for s in steps for t in s.emitted_ids]
    prefill_calls = 1 if len(prompt_ids) > 1 else 0
    prefill_ms = max(0.0, steps[0].elapsed_ms - steps[0].step_ms) if steps and prefill_calls else 0.0
    stats = tally.stats(
        mode=mode,
        drafter=next((s.drafter for s in steps if s.drafter), None) if speculative else None,
        new_tokens=len(new_ids),
        steps=len(steps),
        target_calls=len(steps) + prefill_calls,
        prefill_calls=prefill_calls,
        prefill_ms=prefill_ms,
        wall_ms=steps[-1].elapsed_ms if steps else 0.0,
        single_token_ms=[s.verify_ms for s in steps if not s.drafted],
        stopped=stopped,
    )
    return GenerationResult(
        prompt=prompt,
        prompt_ids=tuple(int(t) for t in prompt_ids),
        token_ids=tuple(new_ids),
        text="".join(s.emitted_text for s in steps),
        steps=steps,
        stats=stats,
        config=dict(config or {}),
    )


def run_within(
    prompt: str, settings: RunSettings, budget: Budget, *, prompt_ids: Sequence[int] | None = None
) -> GenerationResult:
    """``api.run`` of ``settings`` that stops between target passes when ``budget`` runs out.

    Returns the finished result, or ``partial_result`` of the steps so far
    (``stats.stopped == STOPPED_TIME``); Stop raises LabCancelled between steps.  The
    generator is closed on the way out, so a stopped run frees what it held at once."""
    it = stream_run(prompt, settings)
    steps: list[StepRecord] = []
    try:
        for item in it:
            if isinstance(item, GenerationResult):
                return item
            steps.append(item)
            last = item.eos or item.committed_tokens >= settings.max_new_tokens
            if budget.expired() and not last:  # the last step is in: take the real result instead
                break
    finally:
        it.close()
    if prompt_ids is None:  # only a stopped run needs them; the pair is loaded by now
        lim = load_config().limits
        pair = load_pair(load_config().preset(settings.preset), settings.dtype)
        prompt_ids = encode_prompt(prompt, pair.tokenizer, lim.max_prompt_chars, lim.max_prompt_tokens)
    config = {k: v for k, v in settings.to_dict().items() if k in _RECORDED}
    return partial_result(prompt, prompt_ids, steps, mode=settings.mode, gamma=settings.gamma, config=config)


# what a stopped run's result.config says (a finished run's says everything RunSettings holds)
_RECORDED = ("preset", "drafter", "gamma", "temperature", "seed", "max_new_tokens", "dtype", "rule")
