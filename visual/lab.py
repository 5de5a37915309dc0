"""Renderers for the classroom lab (``playground.lab`` computes; this module draws).

Also the link note (``visual.share``) and the classroom preset card (``visual.classroom``).

Plotly figures use ``visual.charts.style`` (transparent background, explicit
font colours, Okabe-Ito palette).  Every model or user text that reaches HTML
goes through ``visual.fmt`` (escaped, whitespace made visible).  Pure
functions: lab result objects in, HTML strings / figures / DataFrames out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go

from playground.decoding.records import GenerationResult
from playground.lab.distribution import DISPLAY_BINS, DistributionCheck, display_bins
from playground.lab.equality import EqualityCheck
from playground.lab.quiz import Question, Reveal, Scoreboard
from playground.lab.stats import format_p
from playground.lab.theory import MeasuredPoint, TheoryCurve
from playground.rules import DEFAULT_RULE, RULES
from visual import replay, tokens
from visual.charts import COLORS, FONT_COLOR, GRID_COLOR, empty_figure, style
from visual.classroom import ClassroomPreset
from visual.fmt import esc, num, pct, times, token_html
from visual.share import Prefill

CATEGORY_BADGE = {
    "correct": ("✓ correct", "#009E73"),
    "wrong": ("✗ WRONG", "#D55E00"),
    "wasteful": ("≈ lossless, wasteful", "#E69F00"),
    "lossy": ("~ lossy", "#CC79A7"),
}

_BOX = (
    "border:1px solid var(--border-color-primary);border-radius:8px;padding:10px 14px;"
    "background:var(--block-background-fill);color:var(--body-text-color);"
)
_SUB = "color:var(--body-text-color-subdued);font-size:0.88em;"
_WARN = (
    "border-left:4px solid #E69F00;background:var(--background-fill-secondary);color:var(--body-text-color);"
    "padding:6px 10px;margin:6px 0;border-radius:4px;"
)

# Every ASCII punctuation character may be backslash-escaped in CommonMark, and escaped it is
# plain text: no link, image, emphasis, HTML tag, entity, or autolink ("https\:\/\/…" and
# "www\.…" no longer match GFM's autolink patterns).  Line breaks become spaces so the text
# cannot start a heading, list or block of its own.
_MD_SPECIAL = re.compile(r"([!-/:-@\[-`{-~])")


def md_escape(text: object) -> str:
    """Text that a gr.Markdown shows exactly as written (for messages quoting untrusted input)."""
    one_line = re.sub(r"[\r\n\u2028\u2029]+", " ", str(text))
    return _MD_SPECIAL.sub(r"\\\1", one_line)


def stopped_html(what: str) -> str:
    """What a panel shows when its action was stopped with the Stop button."""
    return f'<div style="{_BOX}">Stopped: {esc(what)} was cancelled before it finished; nothing new to show.</div>'


def _partial_banner(message: str) -> str:
    if not message:
        return ""
    return f'<div role="status" style="{_WARN}"><b>Partial result.</b> {esc(message)}</div>'


def _tile(value: str, name: str, hint: str = "") -> str:
    return (
        f'<div style="min-width:120px;padding:6px 10px;border-left:3px solid {COLORS["spec"]};'
        f'background:var(--background-fill-secondary);border-radius:4px">'
        f'<div style="font-size:1.35em;font-weight:700">{esc(value)}</div>'
        f'<div style="font-size:0.85em">{esc(name)}</div>'
        + (f'<div style="{_SUB}">{esc(hint)}</div>' if hint else "")
        + "</div>"
    )


def _tiles(items: Sequence[str]) -> str:
    return f'<div style="display:flex;flex-wrap:wrap;gap:8px;margin:8px 0">{"".join(items)}</div>'


# --------------------------------------------------------------------------- distribution check


def distribution_figure(check: DistributionCheck | None, max_bins: int = DISPLAY_BINS) -> go.Figure:
    """Overlaid histograms: speculative vs target-only frequencies, exact target probability as markers."""
    title = "Continuations: speculative vs target alone"
    if check is None:
        return empty_figure(title, "Press Run check to draw the histograms.")
    rows = display_bins(check, max_bins)
    labels = [r["label"] for r in rows]
    fig = go.Figure()
    fig.add_bar(
        x=labels,
        y=[r["target"] for r in rows],
        name=f"target alone (N = {check.target.n:,})",
        marker=dict(color=COLORS["ar"]),
        opacity=0.75,
        hovertemplate="%{x}<br>target alone: %{y:.4f}<extra></extra>",
    )
    fig.add_bar(
        x=labels,
        y=[r["speculative"] for r in rows],
        name=f"speculative · {check.rule}" + (f" (N = {check.spec.n:,}, partial)" if check.partial else ""),
        marker=dict(color=COLORS["spec"]),
        opacity=0.75,
        hovertemplate="%{x}<br>speculative: %{y:.4f}<extra></extra>",
    )
    if check.exact_probs is not None:
        fig.add_scatter(
            x=labels,
            y=[r["exact"] for r in rows],
            mode="markers",
            name="target, exact probability",
            marker=dict(symbol="line-ew-open", size=22, line=dict(width=3, color=FONT_COLOR)),
            hovertemplate="%{x}<br>exact: %{y:.4f}<extra></extra>",
        )
    fig.update_layout(barmode="overlay", bargap=0.15)
    fig.update_xaxes(
        title_text=f"continuation ({check.n_tokens} token{'s' if check.n_tokens > 1 else ''}, · between tokens)",
        tickangle=-45,
        type="category",
    )
    fig.update_yaxes(title_text="frequency", rangemode="tozero")
    if check.partial:
        title += " — PARTIAL (time limit)"
    return style(fig, title, height=380)


def distribution_html(check: DistributionCheck | None) -> str:
    if check is None:
        return f'<div style="{_BOX}">Choose a rule and press <b>Run check</b>.</div>'
    info = RULES[check.rule]
    p_ex = check.chi2_exact.p_value if check.chi2_exact is not None else None
    tiles = [
        _tile(num(check.tv), "TV distance", f"noise level ≈ {num(check.tv_noise)}"),
        _tile(format_p(check.p_value), "chi-square p-value", f"two samples · {check.chi2.bins} bins"),
    ]
    if p_ex is not None:
        tiles.append(_tile(format_p(p_ex), "p vs exact target", f"{check.chi2_exact.bins} bins"))
    tiles += [
        _tile(pct(check.spec.acceptance_rate), "acceptance rate", "accepted / judged drafts"),
        _tile(num(check.spec.tokens_per_target_call, 2), "tokens per target pass", "target alone: 1"),
        _tile(
            f"{check.spec.seconds + check.target.seconds:.1f} s",
            "time",
            f"{check.n_samples:,} × 2 continuations"
            if not check.partial
            else f"{check.spec.n:,} + {check.target.n:,} of {check.n_samples:,} × 2 continuations",
        ),
    ]
    notes = "".join(f'<p style="{_SUB}">Note: {esc(n)}</p>' for n in check.notes)
    settings = (
        f"{esc(check.preset)} · {esc(check.drafter)} drafter · T = {check.temperature:g} · γ = {check.gamma} · "
        f"{check.n_tokens}-token continuations · seed {check.seed}" + (" · argmax drafts" if check.draft_argmax else "")
    )
    return (
        f'<div style="{_BOX}">'
        f'<div style="font-weight:700;color:{CATEGORY_BADGE.get(info.category, ("", FONT_COLOR))[1]}">'
        f"{esc(info.lab_label)}</div>"
        f"{_partial_banner(check.stopped)}"
        f'<p style="{_SUB}">{esc(info.what)}</p>'
        f"{_tiles(tiles)}"
        f'<p style="margin:6px 0"><b>Reading:</b> {esc(check.reading)}</p>'
        f'<p style="{_SUB}">Expected for this rule: {esc(info.expect)}</p>{notes}'
        f'<p style="{_SUB}">{settings}</p>'
        "</div>"
    )


RULES_COLUMNS = [
    "rule",
    "kind",
    "N",
    "TV",
    "noise TV",
    "p-value",
    "p vs exact",
    "acceptance",
    "tokens/pass",
    "vs correct",
    "verdict",
]
_SETTINGS = ("prompt", "preset", "temperature", "top_k", "top_p", "gamma", "n_tokens", "n_samples", "seed", "dtype")


def _baseline(c: DistributionCheck, checks: Sequence[DistributionCheck]) -> DistributionCheck | None:
    return next(
        (b for b in checks if b.rule == DEFAULT_RULE and all(getattr(b, k) == getattr(c, k) for k in _SETTINGS)), None
    )


def rules_table(checks: Sequence[DistributionCheck]) -> pd.DataFrame:
    """One row per rule checked in this session (latest first): drift vs acceptance, side by side."""
    rows = []
    for c in checks:
        base = _baseline(c, checks)
        ratio = None
        if base is not None and base.spec.tokens_per_target_call and c.spec.tokens_per_target_call:
            ratio = c.spec.tokens_per_target_call / base.spec.tokens_per_target_call
        verdict = "drift detected" if c.p_value < 0.001 else ("unclear" if c.p_value < 0.05 else "no drift detected")
        if c.partial:
            verdict += " (partial sample)"
        rows.append(
            {
                "rule": c.rule,
                "kind": CATEGORY_BADGE.get(c.category, (c.category,))[0],
                "N": f"{c.spec.n:,} of {c.n_samples:,} (partial)" if c.partial else f"{c.n_samples:,}",
                "TV": round(c.tv, 4),
                "noise TV": round(c.tv_noise, 4),
                "p-value": format_p(c.p_value),
                "p vs exact": format_p(c.chi2_exact.p_value) if c.chi2_exact is not None else "—",
                "acceptance": pct(c.spec.acceptance_rate),
                "tokens/pass": num(c.spec.tokens_per_target_call, 2),
                "vs correct": times(ratio),
                "verdict": verdict,
            }
        )
    return pd.DataFrame(rows, columns=RULES_COLUMNS)


# --------------------------------------------------------------------------- equality check


def equality_html(eq: EqualityCheck | None) -> str:
    if eq is None:
        return (
            f'<div style="{_BOX}">Press <b>Run both</b> to compare target-only and speculative greedy decoding.</div>'
        )
    colour = COLORS["speedup"] if eq.identical else COLORS["predicted"]
    head = (
        f'<p style="font-weight:700;color:{colour};margin:0 0 6px 0">{"✓ identical" if eq.identical else "≠ diverged"}'
        f"</p>{_partial_banner(eq.stopped)}<p>{esc(eq.summary)}</p>"
    )
    cells = []
    for r in eq.rows:
        if r.status == "same":
            cells.append(tokens.chip(r.ar_text, "accepted", (f"token {r.position}: id {r.ar_id}", "same in both")))
        else:
            st = "rejected" if r.status == "diverged" else "discarded"
            tip_a = f"target alone: {r.ar_text!r} (id {r.ar_id})"
            tip_s = f"speculative: {r.spec_text!r} (id {r.spec_id})"
            cells.append(
                '<span style="display:inline-flex;flex-direction:column;gap:2px;vertical-align:top">'
                + tokens.chip(r.ar_text, st, (f"token {r.position}", tip_a))
                + tokens.chip(
                    r.spec_text, "resampled" if r.status == "diverged" else "discarded", (f"token {r.position}", tip_s)
                )
                + "</span>"
            )
    legend = (
        f'<p style="{_SUB}">Each chip is one token. Matching tokens show once; from the first difference on, the top '
        "chip is target-alone greedy and the bottom chip is speculative greedy.</p>"
    )
    body = f'<div class="sd-text" role="list" aria-label="token-by-token comparison">{"".join(cells)}</div>'
    div = ""
    if eq.divergence is not None:
        d = eq.divergence
        a_tok, s_tok = d.ar[0], d.ar[1]

        def row(path: str, pair) -> str:
            return (
                f"<tr><td>{esc(path)}</td><td>{num(pair[0].logit, 4)}</td><td>{num(pair[1].logit, 4)}</td>"
                f"<td><b>{pair[0].logit - pair[1].logit:+.4f}</b></td><td>{num(pair[0].prob)}</td><td>{num(pair[1].prob)}</td></tr>"
            )

        div = (
            f'<h4 style="margin:10px 0 4px 0">First divergence: token {d.position}</h4>'
            '<table style="border-collapse:collapse;font-variant-numeric:tabular-nums" cellpadding="4">'
            f"<tr><th>logits as computed by</th><th>{token_html(a_tok.text)} (target alone)</th>"
            f"<th>{token_html(s_tok.text)} (speculative)</th><th>gap</th><th>p({token_html(a_tok.text)})</th>"
            f"<th>p({token_html(s_tok.text)})</th></tr>"
            + row("target alone · 1-token pass", d.ar)
            + row(f"speculative · {d.spec_rows}-token verify pass", d.spec)
            + f"</table><p>{esc(d.explanation)}</p>"
        )
    stats_line = (
        f'<p style="{_SUB}">{esc(eq.preset)} · {esc(eq.drafter)} drafter · {esc(eq.dtype)} · γ = {eq.gamma} · '
        f"target passes: {eq.ar.stats.target_calls} alone vs {eq.spec.stats.target_calls} speculative · "
        f"acceptance {pct(eq.spec.stats.acceptance_rate)}</p>"
    )
    return f'<div style="{_BOX}">{head}{body}{legend}{div}{stats_line}</div>'


# --------------------------------------------------------------------------- theory bench


FORMULAS_MD = r"""
**Expected tokens per step** with γ drafts, each accepted with probability α (independently):
$$E = \frac{1 - \alpha^{\gamma+1}}{1 - \alpha}$$
**Predicted speedup** over the target alone, in units of one single-token target pass:
$$S = \frac{E}{\gamma\, c + v_\gamma}$$
*c* = cost of one draft token ÷ cost of one target pass over 1 token; *v*<sub>γ</sub> = cost of one target pass over
γ+1 tokens ÷ cost of a pass over 1 token (≈ 1 on a GPU, 1.3–2 on a CPU). Speculation pays off only where S > 1.
"""


def theory_figure(curve: TheoryCurve, point: MeasuredPoint | None = None) -> go.Figure:
    g = [p.gamma for p in curve.points]
    fig = go.Figure()
    fig.add_scatter(
        x=g,
        y=[p.speedup for p in curve.points],
        mode="lines+markers",
        name="predicted speedup S",
        line=dict(color=COLORS["speedup"], width=3),
        hovertemplate="γ = %{x}<br>S = %{y:.2f}×<extra></extra>",
    )
    fig.add_scatter(
        x=g,
        y=[p.expected_tokens for p in curve.points],
        mode="lines",
        name="tokens per step E",
        line=dict(color=COLORS["other"], dash="dot"),
        yaxis="y2",
        hovertemplate="γ = %{x}<br>E = %{y:.2f}<extra></extra>",
    )
    fig.add_scatter(
        x=[curve.best_gamma],
        y=[curve.best_speedup],
        mode="markers+text",
        name=f"best γ = {curve.best_gamma}",
        marker=dict(size=13, color=COLORS["speedup"], symbol="diamond"),
        text=[f"best γ = {curve.best_gamma}: {curve.best_speedup:.2f}×"],
        textposition="top center",
        textfont=dict(color=FONT_COLOR),
    )
    fig.add_hline(
        y=1.0,
        line=dict(color=GRID_COLOR, dash="dash"),
        annotation_text="break-even (S = 1)",
        annotation_font_color=FONT_COLOR,
    )
    if point is not None and point.gamma:
        y = point.measured if point.measured is not None else point.predicted
        if y is not None and math.isfinite(y):
            if point.measured is not None:
                how = "measured"
            elif point.c is None or point.v is None:
                how = "measured α, c and v_γ from the sliders"
            else:
                how = "predicted from measured α, c, v_γ"
            fig.add_scatter(
                x=[point.gamma],
                y=[y],
                mode="markers+text",
                name=f"you are here ({how})",
                marker=dict(size=16, color=COLORS["predicted"], symbol="star", line=dict(width=1, color=FONT_COLOR)),
                text=["you are here"],
                textposition="bottom center",
                textfont=dict(color=FONT_COLOR),
                hovertemplate=(
                    f"γ = %{{x}}<br>{how}: %{{y:.2f}}×<br>α = {num(point.alpha)}, "
                    f"c = {num(point.c)}, v = {num(point.v)}<extra></extra>"
                ),
            )
    fig.update_layout(
        yaxis2=dict(
            overlaying="y",
            side="right",
            title="E (tokens per step)",
            showgrid=False,
            color=FONT_COLOR,
            rangemode="tozero",
        )
    )
    fig.update_xaxes(title_text="γ (drafts per step)", dtick=1)
    fig.update_layout(yaxis=dict(title=dict(text="S (× speed of the target alone)"), rangemode="tozero"))
    title = f"α = {curve.alpha:.2f}, c = {curve.c:.2f}, v_γ = {curve.v:.2f}"
    fig = style(fig, title, height=380)
    fig.update_layout(yaxis2=dict(title=dict(text="E (tokens per step)", font=dict(color=FONT_COLOR)), showgrid=False))
    return fig


def theory_html(curve: TheoryCurve, gamma: int, point: MeasuredPoint | None = None) -> str:
    here = next((p for p in curve.points if p.gamma == gamma), None)
    tiles = []
    if here is not None:
        tiles += [
            _tile(num(here.expected_tokens, 2), f"E at γ = {gamma}", "tokens per step"),
            _tile(times(here.speedup), f"S at γ = {gamma}", "predicted"),
        ]
    tiles.append(_tile(f"γ = {curve.best_gamma}", "best γ", f"S = {times(curve.best_speedup)}"))
    verdict = (
        f"With these numbers speculation pays off: best at γ = {curve.best_gamma} ({times(curve.best_speedup)})."
        if curve.pays_off
        else "With these numbers speculation is SLOWER than the target alone at every γ: drafts are too costly "
        "(c, v_γ) for how often they are accepted (α)."
    )
    meas = ""
    if point is not None:
        meas = (
            f"<p>Measured run: α = {num(point.alpha)}, c = {num(point.c)}, v<sub>γ</sub> = {num(point.v)}, "
            f"γ = {point.gamma}, mean accepted drafts per step = {num(point.mean_accepted_length, 2)}; "
            f"predicted S = {times(point.predicted)}, measured S = {times(point.measured)}.</p>"
            + (
                f'<p style="{_SUB}">This trace has no single-token target pass to time against, so c and v<sub>γ</sub> '
                "could not be measured from it: the point uses the measured α with the sliders' c and v<sub>γ</sub>. "
                "Use <b>Measure</b> for a full measurement.</p>"
                if point.c is None or point.v is None
                else ""
            )
            + (_partial_banner(point.note) if point.note else "")
            + f'<p style="{_SUB}">α here is the fraction of judged drafts that were accepted; the formula assumes '
            "every draft is accepted independently with the same α, which real text does not quite do.</p>"
        )
    return f'<div style="{_BOX}">{_tiles(tiles)}<p>{esc(verdict)}</p>{meas}</div>'


# --------------------------------------------------------------------------- predict, then reveal


def question_html(q: Question | None, n_left: int = 0) -> str:
    if q is None:
        return f'<div style="{_BOX}">Press <b>New round</b>: the app generates a run and stops before each verification.</div>'
    chips = "".join(
        tokens.chip(t, "drafted", (f"draft {i + 1}", f"drafter's q = {num(p)}"))
        for i, (t, p) in enumerate(zip(q.drafts, q.draft_probs))
    )
    qs = " · ".join(f"{i + 1}: q = {num(p)}" for i, p in enumerate(q.draft_probs))
    hint = (
        "These drafts are deterministic (q = 1), so a draft survives with probability p(draft)."
        if q.deterministic
        else "A draft survives with probability min(1, p/q): a confident drafter (large q) needs the target to agree strongly."
    )
    return (
        f'<div style="{_BOX}"><div><b>Step {q.step_index + 1}</b> · {n_left} more step(s) with drafts after this</div>'
        f'<div class="sd-text">{token_html(q.context)}{chips}</div>'
        f'<p style="{_SUB}">Drafter confidence: {esc(qs)}. {esc(hint)} Tick the drafts you think the target will '
        "accept, then press Reveal.</p></div>"
    )


def reveal_html(r: Reveal | None, q: Question | None = None) -> str:
    if r is None or q is None:
        return ""
    rows = []
    for i, (text, out) in enumerate(zip(q.drafts, r.outcome)):
        state = {"accepted": "accepted", "rejected": "rejected", "not judged": "discarded"}[out]
        ok = r.guess[i] == (out == "accepted")
        u = "—" if r.us[i] is None else num(r.us[i])
        rows.append(
            f"<tr><td>{i + 1}</td><td>{tokens.chip(text, state)}</td><td>{'accept' if r.guess[i] else 'reject'}</td>"
            f"<td>{esc(out)}</td><td>{num(q.draft_probs[i])}</td><td>{num(r.target_probs[i])}</td>"
            f"<td>{num(r.accept_probs[i])}</td><td>{u}</td><td>{'✓' if ok else '✗'}</td></tr>"
        )
    return (
        f'<div style="{_BOX}"><p><b>{r.points} / {r.max_points}</b> right{" — perfect!" if r.exact else ""}. '
        f"The target then added {esc(r.correction)}.</p>"
        '<table cellpadding="4" style="border-collapse:collapse;font-variant-numeric:tabular-nums">'
        "<tr><th>#</th><th>draft</th><th>your guess</th><th>outcome</th><th>q</th><th>p</th><th>min(1, p/q)</th>"
        "<th>u</th><th></th></tr>" + "".join(rows) + "</table>"
        f'<p style="{_SUB}">A draft is accepted when u &lt; min(1, p/q). After the first rejection the remaining drafts '
        "are thrown away without being judged.</p></div>"
    )


def score_card(board: Scoreboard) -> str:
    pct_right = (board.step_points / board.step_max) if board.step_max else None
    tiles = [
        _tile(f"{board.total} / {board.total_max}", "session score"),
        _tile(pct(pct_right), "drafts guessed right", f"{board.steps} step(s), {board.exact_steps} perfect"),
        _tile(
            f"{board.rate_points} / {10 * board.rate_rounds}", "acceptance-rate guesses", f"{board.rate_rounds} run(s)"
        ),
    ]
    hist = "".join(f"<li>{esc(h)}</li>" for h in reversed(board.history[-8:]))
    return f'<div style="{_BOX}"><b>Your score (this session)</b>{_tiles(tiles)}<ul style="{_SUB}">{hist}</ul></div>'


# --------------------------------------------------------------------------- replay & share


def replay_html(result: GenerationResult | None, frame_index: int) -> str:
    if result is None:
        return tokens.step_view(
            "", (), replay.Frame(-1, replay.START), message="Run a generation or import a trace JSON to replay it."
        )
    frame = replay.frame_at(result.steps, int(frame_index))
    return tokens.step_view(
        result.prompt, result.steps, frame, stagger_s=0.05, prompt_tokens=len(result.prompt_ids) or None
    )


def trace_summary_html(result: GenerationResult | None, source: str = "") -> str:
    if result is None:
        return ""
    st = result.stats
    cfg = result.config or {}
    bits = [
        f"{st.steps} steps",
        f"{st.new_tokens} tokens",
        f"acceptance {pct(st.acceptance_rate)}",
        f"γ = {st.gamma}",
        f"drafter {st.drafter or '—'}",
    ]
    for key in ("preset", "temperature", "seed", "rule"):
        if key in cfg:
            bits.append(f"{key} {cfg[key]}")
    return f'<p style="{_SUB}">{esc(source)} {esc(" · ".join(str(b) for b in bits))}</p>'


def prefill_note(prefill: Prefill) -> str:
    """What the link set and what it ignored, as plain text (escape it for any markup).

    The values named are validated ones (a preset from the config, numbers); the reasons in
    ``errors`` quote at most a short excerpt of what the link said
    (``playground.validate.excerpt``).  The prompt itself is never repeated here: it goes
    into the prompt box, where it is only text."""
    parts = []
    vals = prefill.values()
    if prefill.classroom:
        parts.append(f"Classroom preset “{prefill.classroom}” loaded from the link.")
    elif vals:
        parts.append(
            "Settings loaded from the link: "
            + ", ".join(f"{k} = {v!r}" if k != "prompt" else "prompt" for k, v in vals.items())
            + "."
        )
    if prefill.errors:
        parts.append("Ignored: " + "; ".join(prefill.errors) + ".")
    return " ".join(parts)


def prefill_note_html(prefill: Prefill) -> str:
    """The link note for the page (a gr.HTML): every character of it escaped, so nothing a link
    says can become a link, image or tag; empty when the URL had no parameters."""
    note = prefill_note(prefill)
    if not note:
        return ""
    return f'<p class="lab-link-note" style="{_SUB}"><b>Link:</b> {esc(note)}</p>'


def classroom_md(cp: ClassroomPreset | None) -> str:
    if cp is None:
        return ""
    return (
        f"**{cp.label}** — {cp.explanation}\n\n"
        f"`{cp.preset}` · γ = {cp.gamma} · T = {cp.temperature:g} · seed {cp.seed} · share with `{cp.query()}`"
    )
