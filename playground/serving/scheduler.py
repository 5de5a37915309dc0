"""Continuous batching: one worker per loaded target runs every concurrent run's next pass
as one forward pass.

Each run keeps its own decoding loop (``playground.decoding.engine.stream``), its own
cache and its own random stream; only the target's forward pass is shared.  A run
``join``s the scheduler for its lifetime; when it needs a pass it calls ``forward`` and
blocks until the worker has run it.  The worker waits until every joined run has
submitted, or until no run has submitted for ``wait_ms`` (counted from when the previous
pass's last runs were let go: the runs it served come back one by one, after their own
sampling), or ``max_hold_ms`` after the first submission, so a run busy drafting does not
hold the others up for long.  A pass of prompts also waits until no run has joined for
``JOIN_WAIT_S``: a class's requests arrive over a few hundred ms, and it then prefills in
one pass rather than two or three.  Then the worker runs up to ``max_batch`` rows at once
(``playground.decoding.batch_pass``), the runs' caches kept in the scheduler's batched cache
(``playground.decoding.batch_slots``).  Runs join and leave between passes; a run that
leaves (finished, stopped, disconnected) is no longer waited for.

Prompts and steps are not padded to each other: a newcomer's prompt is fed in chunks of
at most ``PREFILL_CHUNK`` tokens by the caller (``Target``), and the worker runs prompt
chunks (rows that keep fewer logits than they have tokens) and steps (a chain or a tree
keeps every row's logits; a plain step is one token) in separate passes, so a 20-token
chunk does not make thirty 1-token rows pay for 20 slots each.

A run that is alone does not come here: ``Target`` runs its pass in its own thread with
no hand-off, so a single request is as fast as without the scheduler.

After the pass the worker also reads each run's logits as the run asked (its p rows, the
target's confidence, the trace's top-n: ``playground.decoding.batch_probs``), for all rows
at once rather than in thirty threads between two passes.

The worker is the one thread that computes with every core while runs share its passes
(except while it reads logits after letting runs go: on one core, the runs use the other);
theirs run on one (``playground.threads``: parked OpenMP helpers in other threads would
slow its every kernel), and it gives its own helpers back after ``RELEASE_AFTER_S`` idle.

This module does not verify, sample or draft; ``draft_cap`` asks ``playground.serving.policy``
how far a run may draft at the current load.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, fields

from playground.decoding.batch_pass import (
    PassTimes,
    RowOut,
    RowPass,
    batched_forward,
    kv_heads,
    layer_types,
    text_config,
)
from playground.decoding.batch_probs import ReadSpec, RowReads, read_rows
from playground.decoding.batch_slots import SlotCache
from playground.errors import Busy
from playground.serving.policy import KNEE_TOKENS, NO_CAP
from playground.serving.policy import draft_cap as _draft_cap
from playground.threads import on_one_core, release_team


@dataclass
class _Ticket:
    row: RowPass
    read: ReadSpec | None = None
    done: threading.Event = field(default_factory=threading.Event)
    out: RowOut | None = None
    error: BaseException | None = None
    rows: int = 1  # how many rows its pass carried
    pass_ms: float = 0.0
    reads: RowReads | None = None
    submitted: float = field(default_factory=time.monotonic)


@dataclass
class PassLedger:
    """Totals over the shared passes a scheduler ran since this ledger was made (the batch
    sweep gives the scheduler a new one per class), in ms: what the worker spends per pass
    besides the model, for the lesson and the batch sweep.

    wait: the worker idle with a submission in hand, holding for stragglers (from the later of
    the pass's first submission and the end of the worker's previous pass, whose last reads
    the first runs it let go often outpace, to this pass's start); gather / model / write:
    ``batch_pass.PassTimes``; read: reading every run's logits after the pass
    (``batch_probs.read_rows``: each run's p rows, confidence, top-n)."""

    passes: int = 0
    rows: int = 0
    wait_ms: float = 0.0
    gather_ms: float = 0.0
    model_ms: float = 0.0
    write_ms: float = 0.0
    read_ms: float = 0.0

    def add(self, rows: int, wait_ms: float, times: PassTimes | None, read_ms: float) -> None:
        self.passes += 1
        self.rows += rows
        self.wait_ms += wait_ms
        self.read_ms += read_ms
        if times is not None:
            self.gather_ms += times.gather_ms
            self.model_ms += times.model_ms
            self.write_ms += times.write_ms

    def per_pass(self) -> dict[str, float]:
        """Mean rows and ms per pass (empty before the first pass)."""
        if not self.passes:
            return {}
        return {f.name: getattr(self, f.name) / self.passes for f in fields(self) if f.name != "passes"}


@dataclass(frozen=True)
class Shared:
    """What a run's pass was: its logits, how many runs' rows it carried, its wall time (the
    forward pass and reading every run's logits), and its logits read as it asked."""

    out: RowOut
    rows: int
    pass_ms: float
    reads: RowReads | None = None


class PassScheduler:
    def __init__(
        self,
        model,
        *,
        max_batch: int = 32,
        wait_ms: float = 25.0,
        max_hold_ms: float = 250.0,
        pad_id: int = 0,
        knee_tokens: int | None = KNEE_TOKENS,
        kv_budget_bytes: int | None = None,
    ) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, got {max_batch}")
        self._model = weakref.ref(model)  # the pool keys schedulers weakly by model: no cycle back
        self.max_batch = max_batch
        self.wait_s = wait_ms / 1000.0  # the longest gap between two submissions the worker waits out
        self.max_hold_s = max_hold_ms / 1000.0  # the longest the first submission waits for a pass
        self.pad_id = pad_id
        self.knee_tokens = knee_tokens  # None: never cap drafts (measurements of the cap itself)
        self.kv_budget_bytes = kv_budget_bytes  # None: no limit on the runs' caches together
        self.kv_bytes_per_token = kv_bytes_per_token(model)
        self._tokens: list[int] = []  # the most tokens each joined run's cache may hold
        config = text_config(model)
        self.batchable = not getattr(config, "num_kv_shared_layers", 0)
        self.slots = _slot_cache(model, config, max_batch)  # written and read by the worker only
        self._cond = threading.Condition()
        self._pending: list[_Ticket] = []
        self._gap_start = 0.0  # the latest submission or release of a pass's runs: the worker waits out gaps from here
        self._joined = 0
        self._joined_at = 0.0  # the latest join: a newcomer's prompt follows within a few ms
        self._worker: threading.Thread | None = None
        self.read_chunk = self.READ_CHUNK
        self.passes = 0  # batched passes run (for the status line and the tests)
        self.max_rows_seen = 0
        self.ledger = PassLedger()  # where the worker's time goes (written by the worker only)

    PASS_WAIT_S = 120.0  # a run waits this long for its pass to start, then as long again for it to end
    IDLE_EXIT_S = 30.0  # a worker with nothing to do for this long ends (a new pass starts another)
    JOIN_WAIT_S = 0.1  # a pass of prompts waits until no run has joined for this long (see _take)
    READ_CHUNK = 8  # runs whose logits are read, and who are let go, together (see _loop)
    RELEASE_AFTER_S = 1.0  # a worker idle this long gives back its OpenMP helpers (playground.threads)

    @property
    def model(self):
        model = self._model()
        if model is None:
            raise RuntimeError("the model of this scheduler was unloaded")
        return model

    # ------------------------------------------------------------------ runs
    @contextmanager
    def join(self, tokens: int = 0) -> Iterator[PassScheduler]:
        """Register a run for as long as the block lasts (its passes may then be shared).

        ``tokens``: the most its cache will hold (prompt + budget + drafts).  While it runs its
        bytes count against ``kv_budget_bytes``: its own cache and, once runs share passes, its
        row of the batched cache, as long as the longest row (``held_bytes``);
        a run that would pass the budget gets ``Busy``."""
        with self._cond:
            held = self.held_bytes(self._tokens + [tokens])
            if self.kv_budget_bytes is not None and held > self.kv_budget_bytes:
                raise Busy(
                    f"The server is holding {self._joined} runs' caches ({self.held_bytes() / 1e6:,.0f} MB of "
                    f"{self.kv_budget_bytes / 1e6:,.0f} MB, the batched cache's padding included); this one would "
                    f"take it to {held / 1e6:,.0f} MB. Try again in a few seconds, or ask for fewer tokens.",
                    retry_after_s=10.0,
                )
            self._joined += 1
            self._joined_at = time.monotonic()
            self._tokens.append(tokens)
            self._cond.notify_all()
        try:
            yield self
        finally:
            with self._cond:
                self._joined -= 1
                self._tokens.remove(tokens)
                self._cond.notify_all()  # the worker stops waiting for this run

    def held_bytes(self, tokens: list[int] | None = None) -> int:
        """Cache bytes runs of these token counts (the joined ones by default) may hold: their
        own caches, plus the batched cache as it is or as these runs would grow it (every row
        padded to the longest, rounded as ``SlotCache`` rounds)."""
        tokens = self._tokens if tokens is None else tokens
        batched = self.slots.rows * self.slots.length
        if len(tokens) > 1:  # a run alone has its passes to itself
            batched = max(batched, SlotCache.tokens_for(len(tokens), max(tokens)))
        return (sum(tokens) + batched) * self.kv_bytes_per_token

    @property
    def load(self) -> int:
        """Runs currently joined (each contributes a row to most passes)."""
        return self._joined

    def shares_passes(self) -> bool:
        """Whether a pass now goes to the worker: other runs are joined, and the model's
        layers each keep their own keys (layers that reuse another layer's K/V, as Gemma 4's
        KV-shared layers do, are not batched: such runs take the plain path)."""
        return self.batchable and self._joined > 1

    def draft_cap(self) -> int:
        """The most drafts a run may propose per step at the current load (``policy``)."""
        return NO_CAP if self.knee_tokens is None else _draft_cap(self._joined, self.knee_tokens)

    def forward(self, row: RowPass, read: ReadSpec | None = None) -> Shared:
        """Run ``row`` in the next shared pass; blocks until it ran.  ``read``: also read its
        logits so, together with the other runs' (``playground.decoding.batch_probs``)."""
        ticket = _Ticket(row, read)
        with self._cond:
            self._ensure_worker()
            self._pending.append(ticket)
            self._gap_start = time.monotonic()
            self._cond.notify_all()
        if not ticket.done.wait(self.PASS_WAIT_S):
            with self._cond:
                waiting = any(t is ticket for t in self._pending)
                if waiting:  # not taken: it never runs, and the run's cache stays as it was
                    self._pending = [t for t in self._pending if t is not ticket]
            if waiting:
                raise Busy(f"No shared pass started within {self.PASS_WAIT_S:.0f} s. Try again later.", 30.0)
            if not ticket.done.wait(self.PASS_WAIT_S):
                raise RuntimeError(f"a shared pass took more than {2 * self.PASS_WAIT_S:.0f} s")
        if ticket.error is not None:
            raise ticket.error
        return Shared(ticket.out, ticket.rows, ticket.pass_ms, ticket.reads)

    # ------------------------------------------------------------------ worker
    def _ensure_worker(self) -> None:
        if self._worker is None or not self._worker.is_alive():
            self._worker = threading.Thread(target=self._loop, name="pass-scheduler", daemon=True)
            self._worker.start()

    def _take(self) -> list[_Ticket] | None:
        """Wait for a batch: every joined run has submitted, or no run has submitted for
        ``wait_s`` (the rest are busy drafting or prefilling), or ``max_hold_s`` after the
        first submission; a batch of prompts also until no run has joined for ``JOIN_WAIT_S``.
        None: idle for ``IDLE_EXIT_S``, the worker ends (and no longer holds the scheduler)."""
        with self._cond:
            start = time.monotonic()
            idle_until, release_at = start + self.IDLE_EXIT_S, start + self.RELEASE_AFTER_S
            while not self._pending:
                now = time.monotonic()
                if now >= idle_until:
                    self._worker = None
                    self.slots.release()  # the runs' views keep what they still use
                    return None
                if release_at is not None and now >= release_at:
                    release_team()  # idle: its parked OpenMP helpers would slow a run alone (playground.threads)
                    release_at = None
                self._cond.wait((idle_until if release_at is None else release_at) - now)
            # A pass costs about the same for 16 rows as for 30, so it pays to wait for the
            # stragglers while they keep arriving: after a pass, every run does its own
            # sampling and bookkeeping in turn, and they come back a few ms apart.  A pass of
            # prompts also waits while runs keep joining: a class's requests arrive over a
            # few hundred ms, and the first few prompts would otherwise go in a pass of their
            # own, a full prompt pass that every later newcomer waits for.
            hold_until = time.monotonic() + self.max_hold_s
            while len(self._pending) < self.max_batch:
                now = time.monotonic()
                until = now if len(self._pending) >= self._joined else self._gap_start + self.wait_s
                if _is_prompt(self._pending[0].row):  # newcomers' prompts come a few ms after they join
                    until = max(until, self._joined_at + self.JOIN_WAIT_S)
                left = min(until, hold_until) - now
                if left <= 0:
                    break
                self._cond.wait(left)
            # One kind per pass, the oldest ticket's: steps or prompt chunks, so neither pads
            # to the other and neither waits for long.
            kind = _is_prompt(self._pending[0].row)
            group = [t for t in self._pending if _is_prompt(t.row) == kind][: self.max_batch]
            taken = set(map(id, group))
            self._pending = [t for t in self._pending if id(t) not in taken]
            return group

    def _loop(self) -> None:
        free_since = time.monotonic()  # when the worker last finished a pass's work
        while True:
            batch = self._take()
            if batch is None:
                return
            t0 = time.perf_counter()
            waited = (time.monotonic() - max(free_since, min(t.submitted for t in batch))) * 1000.0
            timed: list[PassTimes] = []
            read_ms = 0.0
            try:
                outs = batched_forward(self.model, [t.row for t in batch], self.pad_id, timed, self.slots)
                error = None
            except Exception as exc:
                if len(batch) == 1:  # the worker lives on; the run gets the error
                    outs, error = [None], exc
                else:  # one bad row must not fail the others: each runs once more, alone
                    outs, error = self._alone(batch), None
            self.passes += 1
            self.max_rows_seen = max(self.max_rows_seen, len(batch))
            # Read the logits a few runs at a time and let those runs go at once: their own
            # work (a draw, the records; mostly Python) then overlaps the worker's next reads
            # (torch ops, which release the GIL) instead of waiting for all of them.
            for start in range(0, len(batch), self.read_chunk):
                part = slice(start, start + self.read_chunk)
                reads, read_error = [None] * len(batch[part]), error
                ok = [i for i, o in enumerate(outs[part]) if isinstance(o, RowOut)]
                if error is None and ok:
                    r0 = time.perf_counter()
                    try:
                        # Once runs are let go, the other core is theirs (playground.threads).
                        with on_one_core() if start else nullcontext():
                            got = read_rows([outs[part][i].logits for i in ok], [batch[part][i].read for i in ok])
                        for i, r in zip(ok, got):
                            reads[i] = r
                    except Exception as exc:  # these runs get the error, the worker lives on
                        read_error = exc
                    read_ms += (time.perf_counter() - r0) * 1000.0
                ms = (time.perf_counter() - t0) * 1000.0
                for t, out, read in zip(batch[part], outs[part], reads):
                    failed = out if isinstance(out, BaseException) else read_error
                    t.out, t.reads, t.error, t.rows, t.pass_ms = (None if failed else out), read, failed, len(batch), ms
                    t.done.set()
            self.ledger.add(len(batch), waited, timed[0] if timed else None, read_ms)
            free_since = time.monotonic()
            with self._cond:  # every run served is on its way back: the gap starts here, not at the pass's end
                self._gap_start = free_since

    def _alone(self, batch: list[_Ticket]) -> list[RowOut | BaseException]:
        """Each row of a failed shared pass in a pass of its own (``batched_forward`` changes
        no row's cache before it succeeds): its output, or the error it alone raises."""
        outs: list[RowOut | BaseException] = []
        for t in batch:
            try:
                outs.append(batched_forward(self.model, [t.row], self.pad_id)[0])
            except Exception as exc:
                outs.append(exc)
        return outs


def _is_prompt(row: RowPass) -> bool:
    """A chunk of a prompt (its logits are read only after its last token), not a step."""
    return row.keep < len(row.ids)


def _slot_cache(model, config, max_batch: int) -> SlotCache:
    """The runs' caches, kept where a shared pass reads and writes them (``batch_slots``):
    room for twice a full pass, so a class's next runs find slots while the last ones end."""
    dtype = next(iter(model.parameters())).dtype
    return SlotCache(len(layer_types(config)), *kv_heads(config), dtype, model.device, max_rows=2 * max_batch)


def kv_bytes_per_token(model) -> int:
    """Cache bytes one token costs a run (keys and values of every layer, in the model's dtype).
    A sliding-window layer holds at most its window; counting it in full errs on the safe side."""
    config = text_config(model)
    heads, head_dim = kv_heads(config)
    dtype_bytes = next(iter(model.parameters())).element_size()
    return len(layer_types(config)) * 2 * heads * head_dim * dtype_bytes
