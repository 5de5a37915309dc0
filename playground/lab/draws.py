"""Many continuations of one prompt at once, their target passes shared: ``draw_in_order``.

The distribution check draws hundreds of short continuations of one prompt.  Drawn one at a
time on a real model, each pays for a prompt pass and one or two step passes of its own,
and on a CPU a target pass over a few rows costs about what a pass over one does
(``playground.serving.policy``).  So ``draw_in_order`` keeps ``rows`` continuations in
flight, each in its own thread with its own engine loop, cache and generator, joined to
one private ``PassScheduler`` whose worker runs all their passes as one forward pass each.

That scheduler never caps drafts: the check measures a rule at the γ it was asked for, and
the app's load policy would turn speculation off under exactly this load, leaving nothing
for a wrong rule to get wrong.  It is private to the call, so the app's runs on the same
model are not slowed by drafts they did not ask for, and vice versa.

Continuation i draws with whatever ``draw(i, scheduler)`` does (the caller gives it the
generator for (seed, i)), so a continuation's randomness is its own whichever others share
its passes.  A shared pass rounds its last bit as any other kernel may: in float32 the
outcomes are those drawn one at a time unless a draw lands within that rounding of a
boundary; in bfloat16 a shared pass may round a probability differently, as a shared run
in the app does.  Either way every continuation is a draw of the same process.

The budget (and Stop) is asked before each continuation starts, never in the middle of
one; those already running finish, so the continuations drawn are always the first ones,
0 … m − 1, as when drawn one at a time.

This module does not count outcomes, sum statistics or decide how many rows to use
(``playground.lab.distribution`` does).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from playground.lab.budget import Budget
from playground.serving.scheduler import PassScheduler


def draw_in_order(
    model,
    draw: Callable[[int, Any], Any],
    n: int,
    rows: int,
    budget: Budget,
    on_result: Callable[[int, Any], None],
) -> int:
    """Run ``draw(i, scheduler)`` for i = 0, 1, … < n, ``rows`` at a time; returns how many ran.

    ``on_result(i, result)`` is called in this thread as each one finishes (in the order
    they finish).  A new one starts only while ``budget`` has time left (the first always
    starts); Stop (``budget.expired`` raising ``LabCancelled``) and any error in a draw
    stop new starts, wait for those running, and are raised here."""
    if rows < 1:
        raise ValueError(f"rows must be at least 1, got {rows}")
    scheduler = PassScheduler(model, max_batch=rows, knee_tokens=None)
    running: dict[Future, int] = {}
    started = 0
    # Leaving the pool waits for every draw it started, on Stop and errors too.
    with ThreadPoolExecutor(max_workers=rows, thread_name_prefix="lab-draw") as pool:
        while True:
            while len(running) < rows and started < n and (not budget.expired() or started == 0):
                running[pool.submit(draw, started, scheduler)] = started
                started += 1
            if not running:
                return started
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                on_result(running.pop(future), future.result())
