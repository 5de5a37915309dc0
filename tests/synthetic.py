"""Synthetic traces built from the records dataclasses, for renderer tests (no model runs).

The trace has three steps with every verdict the UI knows:

* step 1 (γ = 3): “ Paris” accepted, “<script>alert(1)</script>” rejected, “x” drafted after the
  rejection (never judged); the target resamples “ the” from the residual.
* step 2 (γ = 3): “ is”, “ a”, “\\n” all accepted; bonus “ big” from p at position 4.
* step 3: no draft (prompt lookup found nothing); the target produces “ \"q\" <b>”.
"""

from __future__ import annotations

from playground.decoding.records import Candidate, Correction, DraftDecision, GenerationResult, RunStats, StepRecord

SCRIPT = "<script>alert(1)</script>"
TRICKY = ' "q" <b>'


def cand(tid, text, prob):
    return Candidate(token_id=tid, text=text, prob=prob)


def draft(pos, tid, text, q, p, u, judged=True):
    a = min(1.0, p / q) if q > 0 else 0.0
    return DraftDecision(
        position=pos,
        token_id=tid,
        text=text,
        draft_prob=q,
        target_prob=p,
        ratio=(p / q if judged and q > 0 else None),
        accept_prob=a,
        u=u if judged else None,
        judged=judged,
        accepted=bool(judged and u < a),
        target_top=(cand(tid, text, p),),
        draft_top=(cand(tid, text, q),),
    )


def step(
    index,
    drafted,
    correction,
    emitted_ids,
    elapsed_ms,
    committed,
    draft_ms=2.0,
    verify_ms=10.0,
    step_ms=13.0,
    eos=False,
    gamma=3,
):
    return StepRecord(
        index=index,
        mode="speculative",
        drafter="model",
        gamma=gamma if drafted else 0,
        drafted=tuple(drafted),
        n_accepted=sum(d.accepted for d in drafted),
        correction=correction,
        emitted_ids=tuple(emitted_ids),
        emitted_text="",
        draft_ms=draft_ms,
        verify_ms=verify_ms,
        step_ms=step_ms,
        elapsed_ms=elapsed_ms,
        committed_tokens=committed,
        target_cache_len=0,
        drafter_cache_len=None,
        eos=eos,
    )


def spec_steps() -> list[StepRecord]:
    s1 = step(
        0,
        [
            draft(1, 11, " Paris", 0.4, 0.6, 0.2),
            draft(2, 12, SCRIPT, 0.5, 0.1, 0.7),
            draft(3, 13, "x", 0.9, 0.3, None, judged=False),
        ],
        Correction(
            kind="resample",
            position=2,
            token_id=14,
            text=" the",
            prob=0.55,
            target_prob=0.3,
            distribution_top=(cand(14, " the", 0.55), cand(15, " a", 0.45)),
            target_top=(cand(14, " the", 0.3), cand(12, SCRIPT, 0.1)),
            draft_top=(cand(12, SCRIPT, 0.5), cand(15, " a", 0.2)),
        ),
        [11, 14],
        elapsed_ms=20.0,
        committed=2,
    )
    s2 = step(
        1,
        [draft(1, 21, " is", 0.5, 0.9, 0.95), draft(2, 22, " a", 0.6, 0.3, 0.1), draft(3, 23, "\n", 1.0, 0.8, 0.5)],
        Correction(
            kind="bonus",
            position=4,
            token_id=24,
            text=" big",
            prob=0.7,
            target_prob=0.7,
            distribution_top=(cand(24, " big", 0.7),),
            target_top=(),
            draft_top=(),
        ),
        [21, 22, 23, 24],
        elapsed_ms=40.0,
        committed=6,
        draft_ms=3.0,
        verify_ms=12.0,
        step_ms=16.0,
    )
    s3 = step(
        2,
        [],
        Correction(
            kind="target",
            position=1,
            token_id=31,
            text=TRICKY,
            prob=0.8,
            target_prob=0.8,
            distribution_top=(cand(31, TRICKY, 0.8),),
            target_top=(),
            draft_top=(),
        ),
        [31],
        elapsed_ms=50.0,
        committed=7,
        draft_ms=0.0,
        verify_ms=8.0,
        step_ms=9.0,
        gamma=0,
    )
    return [s1, s2, s3]


def ar_steps(n=7, ms_per_token=15.0) -> list[StepRecord]:
    out = []
    for i in range(n):
        c = Correction(
            kind="target",
            position=1,
            token_id=40 + i,
            text=f" w{i}",
            prob=1.0,
            target_prob=1.0,
            distribution_top=(),
            target_top=(),
            draft_top=(),
        )
        s = step(
            i,
            [],
            c,
            [40 + i],
            elapsed_ms=(i + 1) * ms_per_token,
            committed=i + 1,
            draft_ms=0.0,
            verify_ms=ms_per_token,
            step_ms=ms_per_token,
        )
        out.append(StepRecord(**{**s.__dict__, "mode": "autoregressive", "drafter": None}))
    return out


def run_stats(steps, mode="speculative", single_token_ms=None, wall_ms=None, gamma=3) -> RunStats:
    new = steps[-1].committed_tokens if steps else 0
    wall = wall_ms if wall_ms is not None else (steps[-1].elapsed_ms if steps else 0.0)
    return RunStats(
        mode=mode,
        drafter="model" if mode == "speculative" else None,
        gamma=gamma,
        new_tokens=new,
        steps=len(steps),
        target_calls=len(steps) + 1,
        drafter_calls=0,
        drafted_tokens=0,
        judged_tokens=0,
        accepted_tokens=0,
        acceptance_rate=None,
        draft_efficiency=None,
        acceptance_by_position=(),
        accepted_length_hist=(),
        mean_accepted_length=None,
        tokens_per_target_call=1.0,
        prefill_ms=0.0,
        draft_ms=0.0,
        verify_ms=0.0,
        wall_ms=wall,
        tokens_per_s=new / (wall / 1000) if wall else float("nan"),
        draft_ms_per_token=None,
        verify_ms_per_call=None,
        single_token_ms=single_token_ms,
        stopped="max_new_tokens",
    )


def result(steps, mode="speculative", single_token_ms=None, text="", token_ids=None) -> GenerationResult:
    ids = token_ids if token_ids is not None else tuple(t for s in steps for t in s.emitted_ids)
    return GenerationResult(
        prompt="The <b>capital</b>",
        prompt_ids=(1, 2, 3),
        token_ids=tuple(ids),
        text=text,
        steps=tuple(steps),
        stats=run_stats(steps, mode, single_token_ms),
        config={"mode": mode},
    )
