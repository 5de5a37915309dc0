"""The stats card: measured metrics of a run and the predicted speedup, each defined on screen.

``compute_metrics`` works from the StepRecords seen so far (live) and, once
they exist, the final results; ``stats_card`` renders them.  The predicted
speedup follows the cost model (docs/concepts/algorithm.md, "The cost model"):

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
import statistics
from collections.abc import Sequence
from typing import Any

from playground import repetition
from playground.decoding.records import GenerationResult, RunStats, StepRecord
from playground.decoding.sampling import expected_tokens_per_step, predicted_speedup
from playground.decoding.tally import Tally
from playground.rules import DEFAULT_RULE, RULES
from visual.fmt import count, esc, ms, num, pct, times
from visual.i18n import t


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
        t1_source = t("st.t1_race", n=ar_result.stats.new_tokens)
    elif calibration is not None and calibration.single_token_ms:
        t1 = calibration.single_token_ms
        t1_source = t("st.t1_calibration", n=calibration.new_tokens)
    m["t1_ms"], m["t1_source"] = t1, t1_source

    full = _full_steps(steps, gamma)
    m["full_steps"] = len(full)
    # per drafted token over every step that drafted: a chain that stops early (draft_stop) or a
    # copy that ends still costs what it cost per token; v_γ needs passes over exactly γ+1 tokens
    drafting = [s for s in steps if s.drafted]
    n_drafted = sum(len(s.drafted) for s in drafting)
    draft_ms_per_token = (sum(s.draft_ms for s in drafting) / n_drafted) if n_drafted else None
    verify_ms = (sum(s.verify_ms for s in full) / len(full)) if full else None
    # every pass's own time, as /speculate returns it (steps[].verify_ms): the figure to compare with the API's
    passes = [s.verify_ms for s in steps]
    m["verify_passes"], m["verify_median_ms"] = len(passes), (statistics.median(passes) if passes else None)
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
            parts.append(t("st.c_formula", per=ms(per), t1=ms(t1), c=num(x["c"], 3)))
        if x["vs_verify"] is not None:
            parts.append(t("st.of_verify", share=pct(x["vs_verify"], 1), ms=ms(x["verify_ms_per_pass"])))
        if not parts:
            parts.append(t("st.no_target_step"))
        if x.get("hybrid"):
            label, who = t("st.cost_hybrid"), t("st.cost_hybrid_def")
        else:
            label, who = t("st.cost_mtp"), t("st.cost_mtp_def")
        tiles.append(_tile(t("st.per_token", ms=ms(per)), label, who + ": " + "; ".join(parts), "mtp_cost"))
    if x["scored"] is not None:
        extra = x["context"] or 0
        fixed = x["scored"] - extra
        of = t("st.of_vocab", n=count(x["vocab"])) if x["vocab"] else ""
        split = t("st.split", fixed=count(fixed), extra=count(extra)) if extra else ""
        tiles.append(
            _tile(
                pct(x["scored_share"], 1) if x["scored_share"] is not None else "\u2014",
                t("st.vocab"),
                t("st.vocab_def", n=count(x["scored"]), of=of, split=split),
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
    rule: str = DEFAULT_RULE,
) -> str:
    """The card for ``compute_metrics``' numbers; ``rule`` is the run's verification rule
    ("block" adds a note on what α and the prediction mean under block verification)."""
    if not m.get("steps"):
        return f'<div class="stats stats--empty">{esc(t("st.empty"))}</div>'
    tiles = [
        _tile(
            pct(m["alpha"]),
            t("st.alpha"),
            t("st.alpha_def", a=m["accepted"], j=m["judged"])
            + (t("st.alpha_block") if RULES[rule].judges_jointly else t("st.alpha_token")),
            "alpha",
        ),
        _tile(
            num(m["tokens_per_call"], 2),
            t("st.tpc"),
            t("st.tpc_def", n=m["new_tokens"], steps=m["steps"]),
            "tokens_per_call",
        ),
        _tile(
            str(m["calls_saved"]), t("st.saved"), t("st.saved_def", n=m["new_tokens"], steps=m["steps"]), "calls_saved"
        ),
        _tile(
            pct(m["draft_efficiency"]),
            t("st.eff"),
            t("st.eff_def", a=m["accepted"], d=m["drafted"]),
            "draft_efficiency",
        ),
        _tile(
            t("st.tps_value", v=num(m["tokens_per_s"], 1)),
            t("st.tps"),
            t("st.tps_def", n=m["new_tokens"], ms=ms(m["wall_ms"])),
            "tokens_per_s",
        ),
    ]
    tiles.append(_speedup_tile(m, race))
    rep = m.get("repetition")
    if rep is not None:
        tiles.append(
            _tile(
                pct(rep.share),
                t("st.rep"),
                t("st.rep_def", repeated=rep.repeated, tokens=rep.tokens, d2=num(rep.distinct2, 2)),
                "repetition",
            )
        )
    if m.get("mtp"):
        tiles.extend(_mtp_tiles(m["mtp"], m.get("t1_ms")))
    pred = _prediction(m)
    same = _same_output_note(m, temperature)
    state = f' <span class="stats__live">{esc(t("st.live"))}</span>' if running else ""
    block = _block_note() if RULES[rule].judges_jointly else ""
    loop = _repetition_note(rep, m.get("drafter")) if rep is not None else ""
    return (
        f'<div class="stats"><h3>{esc(t("st.title"))}{state}</h3><div class="tiles">{"".join(tiles)}</div>'
        f"{loop}{block}{pred}{same}{_verify_note(m)}</div>"
    )


def pending_card() -> str:
    """The card while a run computes: its numbers come once the run has finished."""
    return f'<div class="stats stats--empty">{esc(t("st.pending"))}</div>'


def _verify_note(m: dict[str, Any]) -> str:
    """The median of the run's own verify-pass times, the figure to compare with an API run's."""
    if not m.get("verify_passes"):
        return ""
    text = esc(t("st.verify_median", ms=ms(m["verify_median_ms"]), n=m["verify_passes"], field="{f}", api="{a}"))
    text = text.replace("{f}", "<code>steps[].verify_ms</code>").replace("{a}", "<code>/speculate</code>")
    return f'<p class="pred__note stats__passes">{text}</p>'


LOOKUP_DRAFTERS = ("prompt-lookup", "mtp+lookup")


def _repetition_note(rep: repetition.Repetition, drafter: str | None) -> str:
    """Why it was fast, when most of the output repeats earlier text (empty otherwise)."""
    if not rep.high:
        return ""
    share = pct(rep.share)
    why = t("st.loop_lookup" if drafter in LOOKUP_DRAFTERS else "st.loop", share=share)
    return f'<p class="stats__loop" role="note">{esc(why)}</p>'


def _block_note() -> str:
    """What the card's numbers mean for a block-verified run (Sun et al. 2025)."""
    return f'<p class="pred__note stats__rule">{esc(t("st.block_note"))}</p>'


def _speedup_tile(m: dict[str, Any], race: bool) -> str:
    """The measured-speedup tile: the measured ratio, waiting for the race's baseline, or not measured."""
    if m["measured_speedup"] is not None:
        return _tile(
            times(m["measured_speedup"]),
            t("st.measured"),
            t("st.measured_def", spec=num(m["tokens_per_s"], 1), ar=num(m["ar_tokens_per_s"], 1)),
            "measured_speedup",
        )
    if race:
        return _tile("\u2026", t("st.measured"), t("st.measured_wait"), "measured_speedup")
    return _tile("\u2014", t("st.measured"), t("st.measured_none"), "measured_speedup")


def _same_output_note(m: dict[str, Any], temperature: float | None) -> str:
    """Whether the speculative and autoregressive outputs match, and why they may not ("" without an autoregressive run to compare)."""
    if m["same_output"] is None:
        return ""
    if m["same_output"]:
        same = f'<p class="same same--yes">{esc(t("st.same"))}</p>'
    else:
        why = t("st.differ_sampling") if temperature else t("st.differ_greedy")
        same = f'<p class="same same--no">{esc(t("st.differ", n=m["first_difference"] + 1, why=why))}</p>'
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
        # these messages hold <sub> markup of their own (catalogue text, not user text)
        missing = f'<p class="pred__missing">{t("st.t1_missing")}</p>'
    elif not m["full_steps"]:
        missing = f'<p class="pred__missing">{t("st.no_full_step", g=g)}</p>'
    else:
        missing = ""
    if m.get("early_stops"):
        k_mean = m["drafted"] / m["steps"] if m["steps"] else 0.0
        early = t("st.early", early=m["early_stops"], steps=m["steps"], mean=num(k_mean, 2), g=g)
        missing += f'<p class="pred__missing">{esc(early)}</p>'
    if v is not None and v < 0.9:
        missing += f'<p class="pred__missing">{t("st.v_low").replace(" < ", " &lt; ")}</p>'
    terms = [
        ("\u03b1", num(alpha, 3), esc(t("st.term.alpha"))),
        ("\u03b3", str(g), esc(t("st.term.gamma"))),
        ("E", num(E, 3), t("st.term.E")),
        ("t\u2081", ms(t1), esc(t("st.term.t1", source=m["t1_source"] or t("st.term.t1_none")))),
        ("c", num(c, 3), esc(t("st.term.c", per=ms(m["draft_ms_per_token"]), t1=ms(t1)))),
        ("v<sub>\u03b3</sub>", num(v, 2), esc(t("st.term.v", verify=ms(m["verify_ms_per_pass"]), t1=ms(t1)))),
    ]
    rows = "".join(f'<dt>{k}</dt><dd><span class="pred__val">{esc(val)}</span> {d}</dd>' for k, val, d in terms)
    return (
        f'<div class="pred"><h4>{t("st.pred_title")}</h4>'
        f'<p class="pred__formula">{formula}</p>{missing}<dl class="pred__terms">{rows}</dl>'
        f'<p class="pred__note">{esc(t("st.pred_note"))}</p></div>'
    )
