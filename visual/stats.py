"""The stats card: measured metrics of a run and the predicted speedup, each defined on screen.

``compute_metrics`` works from the StepRecords seen so far (live) and, once
they exist, the final results; ``stats_card`` renders them.  The predicted
speedup follows the cost model (README, "Design notes"):

    E = (1 − α^(γ+1)) / (1 − α)          expected tokens per step
    S = E / (γ·c + v_γ)                   predicted speedup over autoregressive

with α measured (accepted / judged drafts), c = drafter ms per drafted token
÷ t₁ and v_γ = target ms per verify pass over γ+1 tokens ÷ t₁, where t₁ is
the target's time for a pass over one token.  t₁ is only ever *measured*: by
the autoregressive run of Race mode, or by a short autoregressive
calibration run.  Without it the prediction is not shown.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from playground import repetition
from playground.decoding.records import GenerationResult, RunStats, StepRecord
from playground.decoding.sampling import expected_tokens_per_step, predicted_speedup
from playground.decoding.tally import Tally
from visual.fmt import count, esc, ms, num, pct, times


def _full_steps(steps: Sequence[StepRecord], gamma: int) -> list[StepRecord]:
    return [s for s in steps if gamma > 0 and len(s.drafted) == gamma]


def compute_metrics(
    steps: Sequence[StepRecord],
    gamma: int,
    *,
    result: GenerationResult | None = None,
    ar_result: GenerationResult | None = None,
    calibration: RunStats | None = None,
) -> dict[str, Any]:
    """Numbers for the card (None where not measured)."""
    m: dict[str, Any] = {"gamma": gamma, "steps": len(steps)}
    new = steps[-1].committed_tokens if steps else 0
    tally = Tally.of_records(steps, gamma)  # the one count of acceptance
    drafted, judged, accepted = tally.drafted, tally.judged, tally.accepted
    m.update(new_tokens=new, drafted=drafted, judged=judged, accepted=accepted)
    m["alpha"] = tally.alpha
    m["draft_efficiency"] = accepted / drafted if drafted else None
    m["mean_accepted"] = (accepted / len(steps)) if steps else None
    m["tokens_per_call"] = new / len(steps) if steps else None
    m["calls_saved"] = new - len(steps) if steps else None
    # steps whose drafter stopped before γ because it was unsure (playground.decoding.draft_stop)
    m["early_stops"] = sum(1 for s in steps if (s.drafter_info or {}).get("stopped_early") is True)
    wall = result.stats.wall_ms if result is not None else (steps[-1].elapsed_ms if steps else None)
    m["wall_ms"] = wall
    m["tokens_per_s"] = new / (wall / 1000.0) if wall else None

    # Measured single-token target time t1: never estimated.
    t1, t1_source = None, None
    if ar_result is not None and ar_result.stats.single_token_ms:
        t1 = ar_result.stats.single_token_ms
        t1_source = f"the autoregressive run of this race ({ar_result.stats.new_tokens} single-token passes)"
    elif calibration is not None and calibration.single_token_ms:
        t1 = calibration.single_token_ms
        t1_source = f"a {calibration.new_tokens}-token autoregressive calibration run after the speculative run"
    m["t1_ms"], m["t1_source"] = t1, t1_source

    full = _full_steps(steps, gamma)
    m["full_steps"] = len(full)
    # per drafted token over every step that drafted: a chain that stops early (draft_stop) or a
    # copy that ends still costs what it cost per token; v_γ needs passes over exactly γ+1 tokens
    drafting = [s for s in steps if s.drafted]
    n_drafted = sum(len(s.drafted) for s in drafting)
    draft_ms_per_token = (sum(s.draft_ms for s in drafting) / n_drafted) if n_drafted else None
    verify_ms = (sum(s.verify_ms for s in full) / len(full)) if full else None
    m["draft_ms_per_token"], m["verify_ms_per_pass"] = draft_ms_per_token, verify_ms
    m["c"] = draft_ms_per_token / t1 if (t1 and draft_ms_per_token is not None) else None
    m["v"] = verify_ms / t1 if (t1 and verify_ms is not None) else None
    alpha = m["alpha"]
    m["E"] = expected_tokens_per_step(alpha, gamma) if alpha is not None else None
    if alpha is not None and m["c"] is not None and m["v"] is not None:
        m["predicted_speedup"] = predicted_speedup(alpha, gamma, m["c"], m["v"])
    else:
        m["predicted_speedup"] = None

    m["mtp"] = _mtp_metrics(steps, m)
    # how much of the output repeats earlier text (the benchmark's measure); needs the prompt's ids
    m["repetition"] = repetition.measure(result.prompt_ids, result.token_ids) if result is not None else None
    m["drafter"] = next((s.drafter for s in steps if s.drafter), None)

    m["measured_speedup"] = None
    m["ar_tokens_per_s"] = None
    m["same_output"] = None
    m["first_difference"] = None
    if ar_result is not None and result is not None:
        ar = ar_result.stats
        if ar.wall_ms > 0 and ar.new_tokens and result.stats.wall_ms > 0:
            ar_tps = ar.new_tokens / (ar.wall_ms / 1000.0)
            spec_tps = result.stats.new_tokens / (result.stats.wall_ms / 1000.0)
            m["ar_tokens_per_s"] = ar_tps
            m["measured_speedup"] = spec_tps / ar_tps
        a, b = list(result.token_ids), list(ar_result.token_ids)
        m["same_output"] = a == b
        if a != b:
            m["first_difference"] = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return m


_MTP_KEYS = ("hidden_from_position", "candidates_scored", "target_kv_positions")


def _num_or_none(x) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return None
    return float(x)


def _mtp_metrics(steps: Sequence[StepRecord], m: dict[str, Any]) -> dict[str, Any] | None:
    """Numbers about an MTP drafter (from ``StepRecord.drafter_info``), or None for other drafters.

    Draft cost per token and the target's step time reuse the card's own measurements (every
    drafted token; verify passes of steps with all γ drafts; the measured t₁) so the numbers
    agree with c in the prediction; until a full step exists the verify time falls back to
    every drafting step.
    """
    mtp = [s for s in steps if isinstance(s.drafter_info, dict) and any(k in s.drafter_info for k in _MTP_KEYS)]
    if not mtp:
        return None
    # mtp+lookup: the run's draft cost mixes MTP steps with prompt-lookup steps (~0 ms)
    out: dict[str, Any] = {"steps": len(mtp), "hybrid": any(s.drafter == "mtp+lookup" for s in steps)}
    drafting = [s for s in mtp if s.drafted]
    per_tok, verify = m.get("draft_ms_per_token"), m.get("verify_ms_per_pass")  # per_tok: every drafted token
    if verify is None and drafting:
        verify = sum(s.verify_ms for s in drafting) / len(drafting)
    out["draft_ms_per_token"], out["verify_ms_per_pass"] = per_tok, verify
    out["vs_verify"] = per_tok / verify if (per_tok is not None and verify) else None
    out["c"] = m.get("c")
    # vocabulary narrowing, as of the latest step that reported it (the context part grows)
    last = next(
        (s.drafter_info for s in reversed(mtp) if _num_or_none(s.drafter_info.get("candidates_scored")) is not None),
        None,
    )
    scored = vocab = extra = None
    if last is not None:
        scored = int(last["candidates_scored"])
        extra = int(_num_or_none(last.get("context_candidates")) or 0)
        v = _num_or_none(last.get("vocab_size"))
        vocab = int(v) if v else None
    out["scored"], out["context"], out["vocab"] = scored, extra, vocab
    out["scored_share"] = scored / vocab if (scored is not None and vocab) else None
    return out


def _mtp_tiles(x: dict[str, Any], t1: float | None) -> list[str]:
    tiles = []
    per = x["draft_ms_per_token"]
    if per is not None:
        parts = []
        if x["c"] is not None and t1:
            parts.append(f"c = {ms(per)} \u00f7 t\u2081 {ms(t1)} = {num(x['c'], 3)}")
        if x["vs_verify"] is not None:
            parts.append(f"{pct(x['vs_verify'], 1)} of a target verify pass ({ms(x['verify_ms_per_pass'])})")
        if not parts:
            parts.append("no target step measured yet to compare with")
        if x.get("hybrid"):
            label, who = (
                "draft cost per token vs target step",
                "the drafter's time per drafted token (MTP and prompt-lookup drafts together; lookup costs ~0 ms)",
            )
        else:
            label, who = "MTP draft cost per token vs target step", "the MTP drafter's time per drafted token"
        tiles.append(_tile(f"{ms(per)}/token", label, who + ": " + "; ".join(parts), "mtp_cost"))
    if x["scored"] is not None:
        extra = x["context"] or 0
        fixed = x["scored"] - extra
        of = f" of {count(x['vocab'])}" if x["vocab"] else ""
        split = f" ({count(fixed)} fixed + {count(extra)} from the context)" if extra else ""
        tiles.append(
            _tile(
                pct(x["scored_share"], 1) if x["scored_share"] is not None else "\u2014",
                "vocabulary the MTP drafter scored",
                f"scored {count(x['scored'])}{of} tokens{split} per draft step, not the whole vocabulary; "
                "every other token has q = 0",
                "mtp_vocab",
            )
        )
    return tiles


def _tile(value: str, name: str, definition: str, key: str) -> str:
    return (
        f'<div class="tile" data-metric="{esc(key)}"><div class="tile__value">{esc(value)}</div>'
        f'<div class="tile__name">{esc(name)}</div><div class="tile__def">{esc(definition)}</div></div>'
    )


def stats_card(
    m: dict[str, Any],
    *,
    race: bool = False,
    running: bool = False,
    temperature: float | None = None,
    rule: str = "lossless",
) -> str:
    """The card for ``compute_metrics``' numbers; ``rule`` is the run's verification rule
    ("block" adds a note on what α and the prediction mean under block verification)."""
    if not m.get("steps"):
        return '<div class="stats stats--empty">Stats appear here once the first step has run.</div>'
    tiles = [
        _tile(
            pct(m["alpha"]),
            "acceptance rate \u03b1",
            f"accepted drafts \u00f7 drafts the target judged ({m['accepted']} / {m['judged']}); "
            + (
                "block verification judges every draft"
                if rule == "block"
                else "drafts after a rejection are never judged"
            ),
            "alpha",
        ),
        _tile(
            num(m["tokens_per_call"], 2),
            "tokens per target call",
            f"new tokens \u00f7 verify passes ({m['new_tokens']} / {m['steps']}); autoregressive decoding gets exactly 1",
            "tokens_per_call",
        ),
        _tile(
            str(m["calls_saved"]),
            "target calls saved",
            f"{m['new_tokens']} tokens needed {m['steps']} target passes instead of {m['new_tokens']}",
            "calls_saved",
        ),
        _tile(
            pct(m["draft_efficiency"]),
            "draft efficiency",
            f"accepted \u00f7 all drafted tokens ({m['accepted']} / {m['drafted']}), wasted drafts included",
            "draft_efficiency",
        ),
        _tile(
            f"{num(m['tokens_per_s'], 1)} tok/s",
            "speculative throughput",
            f"{m['new_tokens']} tokens in {ms(m['wall_ms'])} of wall time, prefill included",
            "tokens_per_s",
        ),
    ]
    tiles.append(_speedup_tile(m, race))
    rep = m.get("repetition")
    if rep is not None:
        tiles.append(
            _tile(
                pct(rep.share),
                "output that repeats earlier text",
                f"output tokens completing a 4-gram already in prompt + earlier output ({rep.repeated} / "
                f"{rep.tokens}); distinct-2 {num(rep.distinct2, 2)} (share of the output's word pairs that are new)",
                "repetition",
            )
        )
    if m.get("mtp"):
        tiles.extend(_mtp_tiles(m["mtp"], m.get("t1_ms")))
    pred = _prediction(m)
    same = _same_output_note(m, temperature)
    state = ' <span class="stats__live">live\u2026</span>' if running else ""
    block = _block_note() if rule == "block" else ""
    loop = _repetition_note(rep, m.get("drafter")) if rep is not None else ""
    return (
        f'<div class="stats"><h3>Run statistics{state}</h3><div class="tiles">{"".join(tiles)}</div>'
        f"{loop}{block}{pred}{same}</div>"
    )


LOOKUP_DRAFTERS = ("prompt-lookup", "mtp+lookup")


def _repetition_note(rep: repetition.Repetition, drafter: str | None) -> str:
    """Why it was fast, when most of the output repeats earlier text (empty otherwise)."""
    if not rep.high:
        return ""
    share = pct(rep.share)
    if drafter in LOOKUP_DRAFTERS:
        why = (
            f"{share} of this output repeats text that came before (the model is looping). Prompt lookup copies "
            "repeated text for free, so the speedup here comes from the repetition more than from the drafter "
            "predicting new text. Try a prompt whose answer does not repeat itself to see the drafter alone."
        )
    else:
        why = (
            f"{share} of this output repeats text that came before (the model is looping). Repeated text is easy "
            "to predict, so acceptance here says more about the loop than about the drafter."
        )
    return f'<p class="stats__loop" role="note">{esc(why)}</p>'


def _block_note() -> str:
    """What the card's numbers mean for a block-verified run (Sun et al. 2025)."""
    return (
        '<p class="pred__note stats__rule">Block verification (Sun et al. 2025): the target judges the \u03b3 drafts '
        "together and keeps the longest prefix that passes, so every draft is judged and \u03b1 here is kept "
        "\u00f7 drafted. The prediction below uses token verification\u2019s E, which assumes each draft is "
        "kept independently; block verification keeps at least as many tokens per step on average, so compare "
        "with the measured speedup.</p>"
    )


def _speedup_tile(m: dict[str, Any], race: bool) -> str:
    """The measured-speedup tile: the measured ratio, waiting for the race's baseline, or not measured."""
    if m["measured_speedup"] is not None:
        return _tile(
            times(m["measured_speedup"]),
            "measured speedup",
            f"speculative tok/s \u00f7 autoregressive tok/s ({num(m['tokens_per_s'], 1)} / {num(m['ar_tokens_per_s'], 1)}), "
            "each run timed on its own, one after the other",
            "measured_speedup",
        )
    if race:
        return _tile("\u2026", "measured speedup", "waiting for the autoregressive run to finish", "measured_speedup")
    return _tile(
        "\u2014",
        "measured speedup",
        "not measured: choose Race mode to time the autoregressive baseline",
        "measured_speedup",
    )


def _same_output_note(m: dict[str, Any], temperature: float | None) -> str:
    """Whether the speculative and autoregressive outputs match, and why they may not ("" without an autoregressive run to compare)."""
    if m["same_output"] is None:
        return ""
    if m["same_output"]:
        same = '<p class="same same--yes">\u2713 Speculative and autoregressive outputs are identical, token for token.</p>'
    else:
        why = (
            "With sampling (temperature &gt; 0) both runs are different samples from the same distribution, so they may differ."
            if temperature
            else "At temperature 0 they should match; a difference comes from floating-point near-ties "
            "(batched vs single-token matmuls), most often in bfloat16."
        )
        same = f'<p class="same same--no">\u2260 Outputs differ from token {m["first_difference"] + 1} on. {why}</p>'
    return same


def _prediction(m: dict[str, Any]) -> str:
    g = m["gamma"]
    alpha, c, v, E, S, t1 = m["alpha"], m["c"], m["v"], m["E"], m["predicted_speedup"], m["t1_ms"]
    if S is not None and math.isfinite(S):
        formula = (
            f"S = E / (\u03b3\u00b7c + v<sub>\u03b3</sub>) = {num(E, 2)} / ({g}\u00b7{num(c, 3)} + {num(v, 2)}) "
            f"= <strong>{esc(times(S))}</strong>"
        )
    else:
        formula = "S = E / (\u03b3\u00b7c + v<sub>\u03b3</sub>) = <strong>\u2014</strong>"
    if t1 is None:
        missing = (
            '<p class="pred__missing">t\u2081 (one target pass over a single token) was not measured in this run, so c, '
            "v<sub>\u03b3</sub> and S are not shown. Use Race mode, or tick \u201cmeasure t\u2081\u201d for a short "
            "autoregressive calibration run.</p>"
        )
    elif not m["full_steps"]:
        missing = f'<p class="pred__missing">No step drafted all \u03b3 = {g} tokens yet, so v<sub>\u03b3</sub> is not measured.</p>'
    else:
        missing = ""
    if m.get("early_stops"):
        k_mean = m["drafted"] / m["steps"] if m["steps"] else 0.0
        missing += (
            f'<p class="pred__missing">The drafter stopped early (it was unsure) in {m["early_stops"]} of '
            f"{m['steps']} steps, drafting {num(k_mean, 2)} tokens per step on average instead of γ = {g}. "
            "The formula is for chains of γ drafts: it predicts the same drafter without early stopping; "
            "the measured speedup includes what stopping saved.</p>"
        )
    if v is not None and v < 0.9:
        missing += (
            '<p class="pred__missing">v<sub>\u03b3</sub> &lt; 1 means a pass over \u03b3+1 tokens looked faster than '
            "one over a single token: the machine's speed changed between the measurements (a shared or busy "
            "CPU), so this prediction is unreliable. Run again, or use Race mode.</p>"
        )
    terms = [
        ("\u03b1", num(alpha, 3), "measured acceptance rate: accepted \u00f7 judged drafts"),
        ("\u03b3", str(g), "drafts proposed per step"),
        (
            "E",
            num(E, 3),
            "(1 \u2212 \u03b1<sup>\u03b3+1</sup>) / (1 \u2212 \u03b1): expected tokens per step if each draft is accepted independently with probability \u03b1",
        ),
        (
            "t\u2081",
            ms(t1),
            f"the target's time for one forward pass over a single token, measured by {esc(m['t1_source'] or 'nothing yet')}",
        ),
        (
            "c",
            num(c, 3),
            f"drafter ms per drafted token \u00f7 t\u2081 = {esc(ms(m['draft_ms_per_token']))} \u00f7 {esc(ms(t1))} (every drafted token)",
        ),
        (
            "v<sub>\u03b3</sub>",
            num(v, 2),
            f"target ms per verify pass over \u03b3+1 tokens \u00f7 t\u2081 = {esc(ms(m['verify_ms_per_pass']))} \u00f7 {esc(ms(t1))}",
        ),
    ]
    rows = "".join(f'<dt>{k}</dt><dd><span class="pred__val">{esc(val)}</span> {d}</dd>' for k, val, d in terms)
    return (
        f'<div class="pred"><h4>Predicted speedup from the measured \u03b1, c and v<sub>\u03b3</sub></h4>'
        f'<p class="pred__formula">{formula}</p>{missing}<dl class="pred__terms">{rows}</dl>'
        '<p class="pred__note">The prediction ignores prefill and per-step bookkeeping and assumes i.i.d. acceptance; '
        "compare it with the measured speedup.</p></div>"
    )
