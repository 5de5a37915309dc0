"""The greedy equality check: target alone vs speculative decoding, token by token, and why they may differ.

``equality_check`` runs both greedily (under a ``Budget``) and compares the tokens
(``diff_tokens``).  At the first divergence ``divergence_logits`` replays both paths'
passes with the same chunking and reports both tokens' logits as each path computed them,
so a bfloat16 near tie can be shown rather than asserted.

This module does not render anything (``visual.lab`` does).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch
from transformers import DynamicCache

from playground.decoding.hf_calls import logits_to_keep_arg
from playground.decoding.records import GenerationResult
from playground.decoding.text import TokenTexts, token_label
from playground.errors import Message
from playground.lab.budget import Budget, Progress, default_wall_s
from playground.lab.context import LabContext
from playground.lab.runs import STOPPED_TIME, run_within
from playground.settings import RunSettings


@dataclass(frozen=True)
class DiffRow:
    position: int  # 0-based index among the new tokens
    ar_id: int | None
    ar_text: str
    spec_id: int | None
    spec_text: str
    status: str  # "same" | "diverged" | "after" (after the first divergence)


@dataclass(frozen=True)
class TokenLogit:
    token_id: int
    text: str
    logit: float
    prob: float  # softmax at temperature 1 over that path's logits


@dataclass(frozen=True)
class Divergence:
    position: int
    ar: tuple[TokenLogit, TokenLogit]  # (target-only's token, speculative's token) as target-only computed them
    spec: tuple[TokenLogit, TokenLogit]  # the same two tokens as the speculative verify pass computed them
    spec_rows: int  # tokens in the verify pass that produced it
    explanation: str

    @property
    def ar_gap(self) -> float:
        return self.ar[0].logit - self.ar[1].logit

    @property
    def spec_gap(self) -> float:
        return self.spec[0].logit - self.spec[1].logit


@dataclass(frozen=True)
class EqualityCheck:
    prompt: str
    preset: str
    drafter: str
    dtype: str
    gamma: int
    ar: GenerationResult
    spec: GenerationResult
    rows: tuple[DiffRow, ...]
    identical: bool
    divergence: Divergence | None
    summary: str
    stopped: str = ""  # why fewer tokens than asked were compared ("" when complete)


def _token_texts(ids: Sequence[int], tokenizer, prompt_ids: Sequence[int]) -> list[str]:
    tt = TokenTexts(tokenizer)
    ctx = list(prompt_ids)
    out = []
    for t in ids:
        out.append(tt.in_context(ctx, int(t)))
        ctx.append(int(t))
    return out


def diff_tokens(
    ar_ids: Sequence[int], ar_texts: Sequence[str], spec_ids: Sequence[int], spec_texts: Sequence[str]
) -> tuple[tuple[DiffRow, ...], int | None]:
    """Token-by-token comparison; returns the rows and the first diverging position (or None)."""
    rows = []
    first = None
    for i in range(max(len(ar_ids), len(spec_ids))):
        a = ar_ids[i] if i < len(ar_ids) else None
        s = spec_ids[i] if i < len(spec_ids) else None
        if first is None and a != s:
            first = i
        status = "same" if first is None else ("diverged" if i == first else "after")
        rows.append(
            DiffRow(
                position=i,
                ar_id=a,
                ar_text=ar_texts[i] if i < len(ar_texts) else "",
                spec_id=s,
                spec_text=spec_texts[i] if i < len(spec_texts) else "",
                status=status,
            )
        )
    return tuple(rows), first


@torch.inference_mode()
def _replay(model, prompt_ids: Sequence[int], passes: Sequence[tuple[list[int], int]]) -> list[torch.Tensor]:
    """Feed a cache with exactly the passes a run made: (input ids, tokens to crop afterwards).

    Returns each pass's logits [n, V] (float32).  The prompt prefill (all but the newest
    prompt token) comes first, as in the engine.
    """

    cache = DynamicCache(config=model.config)
    cache.activate_past_recording()
    if len(prompt_ids) > 1:
        model(
            input_ids=torch.tensor([list(prompt_ids[:-1])], device=model.device),
            cache=cache,
            use_cache=True,
            logits_to_keep=logits_to_keep_arg(len(prompt_ids) - 1, 1, model.device),
        )
    outs = []
    for ids, crop in passes:
        out = model(
            input_ids=torch.tensor([ids], device=model.device), cache=cache, use_cache=True, logits_to_keep=len(ids)
        )
        outs.append(out.logits[0].float())
        if crop:
            cache.crop(-crop)
    return outs


def _logit_pair(row: torch.Tensor, a: int, b: int, texts: tuple[str, str]) -> tuple[TokenLogit, TokenLogit]:
    probs = torch.softmax(row.float(), dim=-1)
    return (
        TokenLogit(a, texts[0], float(row[a]), float(probs[a])),
        TokenLogit(b, texts[1], float(row[b]), float(probs[b])),
    )


def divergence_logits(
    ctx: LabContext,
    prompt_ids: list[int],
    ar: GenerationResult,
    spec: GenerationResult,
    pos: int,
    texts: tuple[str, str],
) -> Divergence:
    """Both tokens' logits at the first divergence, as each path computed them."""
    a_tok, s_tok = ar.token_ids[pos], spec.token_ids[pos]
    model = ctx.pair.target
    # Target-only: one single-token pass per new token (the last committed token each time).
    seq = list(prompt_ids) + list(ar.token_ids[:pos])
    ar_passes = [([t], 0) for t in seq[len(prompt_ids) - 1 :]]
    ar_row = _replay(model, prompt_ids, ar_passes)[-1][-1]
    # Speculative: replay every verify pass (rejected drafts included, then cropped).
    passes: list[tuple[list[int], int]] = []
    committed = list(prompt_ids)
    where = None
    for step in spec.steps:
        drafts = [d.token_id for d in step.drafted]
        passes.append(([committed[-1]] + drafts, len(drafts) - step.n_accepted))
        start = len(committed) - len(prompt_ids)
        if start <= pos < start + len(step.emitted_ids):
            where = (len(passes) - 1, pos - start, len(drafts) + 1)
            break
        committed.extend(step.emitted_ids)
    assert where is not None, "divergence position not found in the speculative trace"
    outs = _replay(model, prompt_ids, passes)
    spec_row = outs[where[0]][where[1]]
    ar_pair = _logit_pair(ar_row, a_tok, s_tok, texts)
    spec_pair = _logit_pair(spec_row, a_tok, s_tok, texts)
    gap_a = ar_pair[0].logit - ar_pair[1].logit
    gap_s = spec_pair[0].logit - spec_pair[1].logit
    dtype = str(next(model.parameters()).dtype).replace("torch.", "")
    tie = ""
    if gap_a == 0.0 or gap_s == 0.0:
        tie = (
            " An exact tie in bfloat16 goes to the lower token id (that is what argmax does), so the slightest "
            "rounding difference decides it."
        )
    if dtype == "bfloat16":
        expl = (
            f"A near tie, broken differently by rounding. Target-only computed this position in a pass over 1 "
            f"token; speculative decoding computed it inside a verify pass over {where[2]} tokens. In bfloat16 "
            f"(8 significant bits) matrix products of different shapes sum in different orders and round "
            f"differently. Target-only saw {token_label(texts[0])!r} ahead by {gap_a:+.4f} logits; the verify "
            f"pass saw {token_label(texts[0])!r} ahead by {gap_s:+.4f}. When the top two logits are this close, "
            "the argmax flips and everything after it differs." + tie + " Nothing is wrong with the algorithm: "
            "verification compared the draft with the argmax it computed. Re-run in float32, where ties this close "
            "are far rarer, to see the two paths agree."
        )
    else:
        expl = (
            f"In {dtype} the two paths should agree token for token (a 1-token pass vs a {where[2]}-token verify "
            f"pass still round slightly differently: gaps {gap_a:+.6f} vs {gap_s:+.6f}). A divergence here means "
            "an exact tie or a bug: report it with this trace."
        )
    return Divergence(position=pos, ar=ar_pair, spec=spec_pair, spec_rows=where[2], explanation=expl)


def _compared_ids(
    ar: GenerationResult, spec: GenerationResult, budget: Budget, max_new_tokens: int
) -> tuple[Sequence[int], Sequence[int], str]:
    """The two runs' tokens to compare, and why fewer than asked ("" when neither run was cut short).

    When the time limit cut the shorter run, both are compared on the tokens both produced
    (greedy decoding is a prefix)."""
    stopped = ""
    cut = (ar.stats.stopped == STOPPED_TIME, spec.stats.stopped == STOPPED_TIME)
    ar_ids, spec_ids = ar.token_ids, spec.token_ids
    if any(cut):
        shorter_was_cut = cut[0] if len(ar_ids) <= len(spec_ids) else cut[1]
        if shorter_was_cut:  # else the shorter one really ended (EOS) and the length difference is real
            k = min(len(ar_ids), len(spec_ids))
            ar_ids, spec_ids = ar_ids[:k], spec_ids[:k]
        stopped = (
            f"Stopped after {budget.describe()} (the lab's time limit on this model): target alone produced "
            f"{len(ar.token_ids)} and speculative {len(spec.token_ids)} of {max_new_tokens} tokens; the first "
            f"{len(ar_ids)} are compared. Ask for fewer tokens to compare all of them."
        )
    return ar_ids, spec_ids, stopped


def _summary(
    ar: GenerationResult,
    spec: GenerationResult,
    n: int,
    first: int | None,
    div: Divergence | None,
    texts: tuple[Sequence[str], Sequence[str]],
    settings: str,
    stopped: str,
    skipped_replay: bool,
) -> str:
    """The check's verdict in one paragraph: identical, different lengths, or where and how they diverge.

    ``n``: tokens compared; ``settings``: "dtype, γ = g, kind drafter"."""
    ar_texts, spec_texts = texts
    if first is None:
        summary = (
            f"Identical: all {n} tokens {'compared ' if stopped else ''}match ({settings}). "
            f"Speculative decoding used {spec.stats.target_calls} target passes "
            f"instead of {ar.stats.target_calls}."
        )
    elif div is None:
        summary = f"The outputs have different lengths from token {first} (one run stopped at EOS)."
    else:
        summary = (
            f"The outputs agree for {first} token(s), then diverge at token {first}: target alone chose "
            f"{token_label(ar_texts[first])!r}, speculative chose {token_label(spec_texts[first])!r}."
        )
    if skipped_replay:
        summary += " (The logits at the divergence were not replayed: the time limit was reached.)"
    if stopped:
        summary = f"PARTIAL RESULT — {stopped} {summary}"
    return summary


def equality_check(
    prompt: str, settings: RunSettings, *, progress: Progress = None, budget: Budget | None = None
) -> EqualityCheck:
    """Target-only greedy vs speculative greedy on the same prompt, token by token.

    ``settings`` (from ``api.run_settings``: a preset named) are run greedily (temperature 0,
    seed 0) with both paths.  ``budget`` (default ``Budget.for_preset``): target alone gets half
    the time, speculative the rest; a run the limit stops is compared on the tokens both runs
    produced (greedy decoding is a prefix: the first k tokens do not depend on how many
    follow), and the divergence replay is skipped once the time is up."""
    ctx = LabContext(settings.preset, settings.drafter, settings.dtype)
    budget = budget if budget is not None else Budget(default_wall_s(ctx.preset))
    dtype = ctx.pair.dtype
    ids = ctx.encode(prompt)
    greedy = replace(settings, preset=ctx.preset.name, drafter=ctx.drafter_kind, temperature=0.0, seed=0, dtype=dtype)
    max_new_tokens = greedy.max_new_tokens
    g = greedy.gamma
    if progress:
        progress(0.1, Message("progress.target_greedy"))
    ar = run_within(prompt, greedy.autoregressive(), budget.share(0.5), prompt_ids=ids)
    if progress:
        progress(0.5, Message("progress.speculative_greedy"))
    spec = run_within(prompt, greedy, budget, prompt_ids=ids)
    ar_ids, spec_ids, stopped = _compared_ids(ar, spec, budget, max_new_tokens)
    ar_texts = _token_texts(ar_ids, ctx.tokenizer, ids)
    spec_texts = _token_texts(spec_ids, ctx.tokenizer, ids)
    rows, first = diff_tokens(ar_ids, ar_texts, spec_ids, spec_texts)
    div = None
    skipped_replay = False
    if first is not None and first < len(ar_ids) and first < len(spec_ids):
        if budget.expired():
            skipped_replay = True
        else:
            if progress:
                progress(0.8, Message("progress.replay_divergence"))
            div = divergence_logits(ctx, ids, ar, spec, first, (ar_texts[first], spec_texts[first]))
    settings = f"{dtype}, γ = {g}, {ctx.drafter_kind} drafter"
    summary = _summary(ar, spec, len(ar_ids), first, div, (ar_texts, spec_texts), settings, stopped, skipped_replay)
    if progress:
        progress(1.0, Message("progress.done"))
    return EqualityCheck(
        prompt=prompt,
        preset=ctx.preset.name,
        drafter=ctx.drafter_kind,
        dtype=dtype,
        gamma=int(g),
        ar=ar,
        spec=spec,
        rows=rows,
        identical=first is None,
        divergence=div,
        summary=summary,
        stopped=stopped,
    )
