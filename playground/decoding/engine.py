"""The decoding loop: lossless speculative decoding and the autoregressive baseline.

One speculative step, as in Leviathan et al. (2023) / Chen et al. (2023):

  1. Draft    — the drafter proposes d_1..d_k (k <= γ) and the exact q_i each was drawn from.
  2. Verify   — ONE target pass over [x_last, d_1..d_k] gives p_1..p_{k+1}.
  3. Accept   — left to right, d_i survives iff u_i < min(1, p_i(d_i) / q_i(d_i)).
  4. Correct  — after a rejection at i, sample from norm(max(0, p_i - q_i));
                after k acceptances, sample the bonus token from p_{k+1}.

Steps 3-4 are the run's verification rule (``playground.rules``): "block" replaces them with
block verification (Sun et al., ICLR 2025; ``playground.decoding.block_verify``): every draft
judged, the longest passing prefix kept.

Cache invariant (target and model drafters alike): the cache holds every
committed token except the newest one, which is the first input of the next
pass.  After step 3 the target cache is cropped to drop rejected drafts
(``cache.crop(-n)``, with past recording on so sliding-window layers roll back
too).  The autoregressive baseline is the same loop with no drafter.

Randomness comes only from the ``torch.Generator`` passed in; every u is
recorded.  The loop yields typed records (``playground.decoding.records``) and never
prints; it does not load models (``playground.models.loading``) or render anything.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import torch

from playground.decoding.acceptance import acceptance_prob
from playground.decoding.batch_probs import ReadSpec, RowReads
from playground.decoding.confidence import with_chain_confidence
from playground.decoding.draft import Draft, Drafter, TargetState
from playground.decoding.point_mass import one_hot  # noqa: F401  (re-exported: tests build rows with it)
from playground.decoding.records import Correction, DraftDecision, GenerationResult, StepRecord
from playground.decoding.rows import PointRows, target_rows
from playground.decoding.rows import row_top as _row_top
from playground.decoding.rows import top as _top
from playground.decoding.sampling import SamplingParams, sample
from playground.decoding.step import LoopState, Step
from playground.decoding.tally import Tally
from playground.decoding.target import Prefill, Target
from playground.decoding.text import IncrementalText, TokenTexts
from playground.decoding.tree_step import tree_step
from playground.decoding.verdict import Verdict
from playground.rules import DEFAULT_RULE, RULES
from playground.settings import RunSettings
from playground.threads import all_cores, done_computing


def verify(
    drafts: list[int],
    draft_probs: torch.Tensor | PointRows | None,  # [k, V] exactly what each draft was drawn from
    target_probs: torch.Tensor | PointRows,  # [k+1, V] target distributions after the same processing
    *,
    rule: str = DEFAULT_RULE,
    eos: frozenset[int] = frozenset(),
    uniform: Callable[[], float],
    draw: Callable[[torch.Tensor], int],
) -> Verdict:
    """Steps 3-4 of a speculative step, pure apart from the two random sources: the rule of
    ``playground.rules`` named ``rule`` judges the drafts and adds one token.

    3. Accept d_i iff u_i < min(1, p_i(d_i) / q_i(d_i)), left to right, stopping at the
       first rejection.  4. After a rejection at i, draw from norm(max(0, p_i - q_i));
    after k acceptances, draw the bonus from p_{k+1}.  Block verification judges the drafts
    jointly; the lab's other rules each change one part (all but "lossless", "block" and
    "exact-match" are wrong)."""
    return RULES[rule].verify(drafts, draft_probs, target_probs, eos, uniform, draw)


def _draft(drafter, state, k_max, settings, params, generator, eos, vocab) -> tuple[Draft, list[int], Any, bool, float]:
    """Step 1: (draft, its tokens cut at EOS, the q rows [k, V] to verify against, whether
    those rows are point masses, ms)."""
    draft = Draft(token_ids=[], draft_probs=None)
    draft_ms = 0.0
    if k_max > 0:
        t0 = time.perf_counter()
        draft = drafter.propose(state, k_max, params, generator)
        draft_ms = (time.perf_counter() - t0) * 1000.0
    drafts = [int(t) for t in draft.token_ids[:k_max]]
    for i, tok in enumerate(drafts):  # stop drafting at EOS
        if tok in eos:
            drafts = drafts[: i + 1]
            break
    k = len(drafts)
    one_hot_drafts = draft.draft_probs is None  # q rows are point masses on the drafts
    if draft.draft_probs is not None:
        draft_probs = draft.draft_probs[:k].float().cpu()  # [k, V]
    else:
        draft_probs = PointRows(drafts, vocab) if k else None  # one-hot rows, made on demand
    misread = RULES[settings.rule].verified_q(draft.soft_probs)  # [k, V] a wrong rule's q, or None
    if misread is not None and k:
        draft_probs = misread[:k].float().cpu()
        one_hot_drafts = False
    return draft, drafts, draft_probs, one_hot_drafts, draft_ms


@dataclass(frozen=True)
class _ChainRows:
    """What a chain step verified: the drafts and the rows they were judged with."""

    drafts: list[int]
    draft_probs: Any  # [k, V] q rows (tensor or PointRows), None without drafts
    target_probs: Any  # [k+1, V] p rows (tensor or PointRows)
    t_points: list[int | None]  # per p row: its point mass (greedy), else None
    d_points: list[int | None]  # per q row: its point mass (one-hot drafts), else None
    reads: RowReads | None = None  # p rows' top-n lists already computed by a shared pass's worker

    def target_known(self, row: int) -> tuple[list[float], list[int]] | None:
        return self.reads.top_of(row) if self.reads is not None else None


def _chain_decisions(
    rows: _ChainRows, verdict: Verdict, committed: list[int], texts, top_n: int
) -> list[DraftDecision]:
    """One DraftDecision per draft: p, q, p/q, u and the verdict (unjudged after a rejection).

    Block steps record the h_i each u was compared with as accept_prob, and the weight w_i."""
    decisions = []
    for j, tok in enumerate(rows.drafts):
        p, q = float(rows.target_probs[j, tok]), float(rows.draft_probs[j, tok])
        judged = j < len(verdict.accepted)
        block_h = judged and verdict.accept_probs is not None
        decisions.append(
            DraftDecision(
                position=j + 1,
                token_id=tok,
                text=texts.in_context(committed + rows.drafts[:j], tok) if texts else "",
                draft_prob=q,
                target_prob=p,
                ratio=(p / q) if q > 0 else None,
                accept_prob=verdict.accept_probs[j] if block_h else acceptance_prob(p, q),
                u=verdict.us[j] if judged else None,
                judged=judged,
                accepted=judged and verdict.accepted[j],
                target_top=_row_top(rows.target_probs, j, top_n, texts, rows.t_points[j], rows.target_known(j)),
                draft_top=_row_top(rows.draft_probs, j, top_n, texts, rows.d_points[j]),
                weight=verdict.weights[j] if block_h and verdict.weights is not None else None,
            )
        )
    return decisions


def _chain_correction(rows: _ChainRows, verdict: Verdict, before: list[int], texts, top_n: int) -> Correction | None:
    """The token step 4 adds (resample after a rejection, bonus after all accepted), or None."""
    if verdict.correction_token is None:
        return None
    i, dist, tok, kind = (
        verdict.correction_row,
        verdict.correction_dist,
        verdict.correction_token,
        verdict.correction_kind,
    )
    resample = kind == "resample"
    return Correction(
        kind=kind,
        position=i + 1,
        token_id=tok,
        text=texts.in_context(before, tok) if texts else "",
        prob=float(dist[tok]),
        target_prob=float(rows.target_probs[i, tok]),
        # greedy: p is one-hot, so the residual (any q), p itself and the
        # teaching variants are all the point mass on the target's argmax.
        distribution_top=_top(dist, top_n, texts, rows.t_points[i], None if resample else rows.target_known(i)),
        target_top=_row_top(rows.target_probs, i, top_n, texts, rows.t_points[i], rows.target_known(i))
        if resample
        else (),
        draft_top=_row_top(rows.draft_probs, i, top_n, texts, rows.d_points[i]) if resample else (),
    )


def _chain_step(run: LoopState, k_max: int) -> Step:
    """Steps 1-4 with a chain (and the autoregressive step: no drafter, k = 0)."""
    target, committed, settings, params, generator = run.target, run.committed, run.settings, run.params, run.generator
    texts, eos, want_hidden = run.texts, run.eos, run.want_hidden
    # ---- 1. Draft (never past the budget: a step emits up to k+1 tokens) ----
    if run.speculative:
        draft, drafts, draft_probs, one_hot_drafts, draft_ms = _draft(
            run.drafter, run.state, k_max, settings, params, generator, eos, run.vocab
        )
    else:
        draft, drafts, draft_probs, one_hot_drafts, draft_ms = (
            Draft(token_ids=[], draft_probs=None),
            [],
            None,
            True,
            0.0,
        )
    k = len(drafts)

    # ---- 2. Verify: one target pass over [x_last, d_1..d_k] ----
    if run.speculative and run.drafter.capabilities.shares_target_cache:  # LayerSkip: the drafter ran layers < k
        out = target.forward_via(run.drafter.verify_logits, [committed[-1]] + drafts, keep=k + 1)
    else:
        read = ReadSpec(params, top_n=settings.top_n if texts else 0, confidence=texts is not None)
        out = target.forward([committed[-1]] + drafts, keep=k + 1, hidden=want_hidden, read=read)
    target_probs, target_argmax = target_rows(out.logits, params, out.reads)
    # Rows known to be point masses (for the trace's top-k lists): greedy target rows, one-hot drafts.
    t_points = target_argmax if target_argmax is not None else [None] * (k + 1)
    d_points = drafts if one_hot_drafts else [None] * k

    # ---- 3 + 4. Accept left to right, then one more token ----
    verdict = verify(
        drafts,
        draft_probs,
        target_probs,
        rule=settings.rule,
        eos=eos,
        uniform=lambda: float(torch.rand((), generator=generator)),
        draw=lambda d: sample(d, generator),  # a greedy run's rows are point masses: no randomness used
    )
    n_acc = verdict.n_accepted
    rows = _ChainRows(
        drafts=drafts, draft_probs=draft_probs, target_probs=target_probs, t_points=t_points, d_points=d_points,
        reads=out.reads,
    )  # fmt: skip
    decisions = _chain_decisions(rows, verdict, committed, texts, settings.top_n)
    emitted = drafts[:n_acc]
    correction = _chain_correction(rows, verdict, committed + emitted, texts, settings.top_n)
    if texts is not None:  # a traced run: how sure the target and the drafter were (the chips' bars)
        decisions, correction = with_chain_confidence(
            decisions,
            correction,
            out.logits,
            verdict.correction_row,
            draft.soft_probs if one_hot_drafts else None,
            known=out.reads.confidence if out.reads is not None else None,
        )
    if correction is not None:
        emitted = emitted + [correction.token_id]

    # ---- Roll back: keep x_last + accepted drafts in the target cache ----
    target.crop(k - n_acc)
    judged = [(j + 1, ok) for j, ok in enumerate(verdict.accepted)]
    return Step(
        decisions=tuple(decisions),
        correction=correction,
        emitted=tuple(emitted),
        n_accepted=n_acc,
        drafted=k,
        judged=tuple(judged),
        draft_ms=draft_ms,
        verify_ms=out.ms,
        forward_calls=draft.forward_calls,
        info=dict(draft.info),
        hidden=out.hidden[n_acc] if want_hidden else None,  # [H]
    )


def _record(
    step: Step,
    index: int,
    settings: RunSettings,
    drafter: Drafter | None,
    k_max: int,
    text: str,
    step_ms: float,
    elapsed_ms: float,
    committed_tokens: int,
    target_cache_len: int,
    hit_eos: bool,
    shared_rows: int = 1,
) -> StepRecord:
    """The StepRecord of one committed step (what the app, the trace and the lab read)."""
    speculative = settings.mode == "speculative"
    return StepRecord(
        index=index,
        mode=settings.mode,
        drafter=drafter.name if speculative else None,
        gamma=k_max if speculative else 0,
        drafted=tuple(step.decisions),
        n_accepted=step.n_accepted,
        correction=step.correction,
        emitted_ids=tuple(step.emitted),
        emitted_text=text,
        draft_ms=step.draft_ms,
        verify_ms=step.verify_ms,
        step_ms=step_ms,
        elapsed_ms=elapsed_ms,
        committed_tokens=committed_tokens,
        target_cache_len=target_cache_len,
        drafter_cache_len=drafter.cache_len() if speculative else None,
        eos=hit_eos,
        drafter_info=step.info,
        shared_rows=shared_rows,
    )


def _start(
    model,
    tokenizer,
    prompt_ids: list[int],
    settings: RunSettings,
    drafter: Drafter | None,
    eos_token_ids: Iterable[int],
    generator: torch.Generator | None,
    scheduler=None,
    prefill: Prefill | None = None,
) -> tuple[LoopState, float]:
    """Check the request, prefill everything but the newest token (or start from a copy of
    ``prefill``), start the drafter: (what every step reads, this run's prefill ms)."""
    if not prompt_ids:
        raise ValueError("the prompt is empty: type at least one character")
    speculative = settings.mode == "speculative"
    if speculative and drafter is None:
        raise ValueError("speculative mode needs a drafter")
    if generator is None:
        generator = torch.Generator().manual_seed(settings.seed)
    want_hidden = bool(speculative and drafter.needs_target_hidden)
    committed = list(prompt_ids)
    if prefill is not None and (prefill.ids != tuple(committed[:-1]) or (want_hidden and prefill.hidden is None)):
        raise ValueError("this prefill was made for another prompt, or without the hidden state this drafter reads")
    target = Target(model, rollback=speculative, scheduler=scheduler, start=prefill)
    state = TargetState(committed_ids=committed, target_cache=target.cache)
    prefill_ms = 0.0
    if prefill is not None:
        state.hidden = prefill.hidden if want_hidden else None
    elif len(committed) > 1:
        pre = target.forward(committed[:-1], keep=1, hidden=want_hidden)
        prefill_ms = pre.ms
        state.hidden = pre.hidden[-1] if want_hidden else None
    if speculative:
        drafter.start(state)
    texts = TokenTexts(tokenizer) if settings.trace else None
    eos = frozenset(int(e) for e in eos_token_ids)
    loop = LoopState(
        target=target, drafter=drafter, state=state, committed=committed, settings=settings,
        params=SamplingParams.of(settings), generator=generator, texts=texts, eos=eos,
        vocab=model.config.get_text_config().vocab_size, want_hidden=want_hidden, speculative=speculative,
    )  # fmt: skip
    return loop, prefill_ms


def stream(
    model,
    tokenizer,
    prompt_ids: list[int],
    settings: RunSettings,
    drafter: Drafter | None = None,
    eos_token_ids: Iterable[int] = (),
    generator: torch.Generator | None = None,
    prompt: str = "",
    scheduler=None,
    prefill: Prefill | None = None,
) -> Iterator[StepRecord | GenerationResult]:
    """Run one generation, yielding a StepRecord per target pass, then the GenerationResult.

    Prefill, then per step: draft + verify + accept + correct (``_chain_step`` or
    ``tree_step.tree_step``: both read the ``LoopState``, both return a ``Step``), commit the
    emitted tokens, tell the drafter, record.

    ``scheduler`` (``playground.serving.scheduler.PassScheduler``): the run joins it for its
    lifetime, so its target passes may share one forward pass with other runs', and each
    step drafts at most the scheduler's ``draft_cap()`` (the load policy).

    ``prefill`` (``Target``'s ``Prefill`` of this prompt, made once for many runs): start from a
    copy of its cache instead of running the prompt; the run's stats then count no prefill."""
    tokens = len(prompt_ids) + settings.max_new_tokens + settings.gamma  # the most its cache holds
    try:
        with scheduler.join(tokens) if scheduler is not None else nullcontext():
            for item in _generate(model, tokenizer, prompt_ids, settings, drafter, eos_token_ids, generator, prompt,
                                  scheduler, prefill):  # fmt: skip
                # A shared step ran this thread's own torch calls on one core (playground.threads);
                # gradio may run the next step in another of its threads, so leave this one on all cores.
                all_cores()
                yield item
    finally:
        done_computing()  # an idle thread keeps no OpenMP helpers


def _generate(model, tokenizer, prompt_ids, settings, drafter, eos_token_ids, generator, prompt, scheduler, prefill):
    """``stream``'s body, inside the run's membership of its scheduler (if any)."""
    prompt_ids = [int(i) for i in prompt_ids]
    t_start = time.perf_counter()
    run, prefill_ms = _start(model, tokenizer, prompt_ids, settings, drafter, eos_token_ids, generator, scheduler,
                             prefill)  # fmt: skip
    target, committed, state, speculative, eos = run.target, run.committed, run.state, run.speculative, run.eos
    use_tree = bool(speculative and settings.tree_nodes > 1 and drafter.capabilities.branches)
    committed_text = IncrementalText(tokenizer)

    steps: list[StepRecord] = []
    new_ids: list[int] = []
    gamma = settings.gamma if speculative else 0
    tally = Tally(gamma)
    stopped = "max_new_tokens"

    while len(new_ids) < settings.max_new_tokens:
        t_step = time.perf_counter()
        k_max = min(gamma, settings.max_new_tokens - len(new_ids) - 1, target.draft_cap())
        step = tree_step(run, k_max) if use_tree and k_max > 0 else _chain_step(run, k_max)
        # ---- Commit, and tell the drafter what survived ----
        committed.extend(step.emitted)
        new_ids.extend(step.emitted)
        hit_eos = any(t in eos for t in step.emitted)
        state.hidden = step.hidden
        if speculative and not hit_eos:
            drafter.accept(step.n_accepted, state)
        tally.add(
            draft_ms=step.draft_ms, verify_ms=step.verify_ms, drafted=step.drafted, judged=step.judged,
            n_accepted=step.n_accepted, drafter_calls=step.forward_calls, speculative=speculative,
        )  # fmt: skip
        now = time.perf_counter()
        record = _record(step, len(steps), settings, drafter, k_max, committed_text.extend(step.emitted),
                         (now - t_step) * 1000.0, (now - t_start) * 1000.0, len(new_ids), len(target),
                         hit_eos, target.last_rows)  # fmt: skip
        steps.append(record)
        yield record
        if hit_eos:
            stopped = "eos"
            break

    wall_ms = (time.perf_counter() - t_start) * 1000.0
    yield GenerationResult(
        prompt=prompt,
        prompt_ids=tuple(prompt_ids),
        token_ids=tuple(new_ids),
        text=committed_text.text,
        steps=tuple(steps),
        stats=tally.stats(
            mode=settings.mode,
            drafter=drafter.name if speculative else None,
            new_tokens=len(new_ids),
            steps=len(steps),
            target_calls=target.calls,
            prefill_calls=int(len(prompt_ids) > 1 and prefill is None),
            prefill_ms=prefill_ms,
            wall_ms=wall_ms,
            single_token_ms=target.single_token_ms,
            stopped=stopped,
        ),
        config={**settings.to_dict(), "drafter": drafter.name if speculative else None},
    )


def run(*args, **kwargs) -> GenerationResult:
    """Like ``stream`` but returns only the final result."""
    result = None
    for item in stream(*args, **kwargs):
        result = item
    assert isinstance(result, GenerationResult)
    return result
