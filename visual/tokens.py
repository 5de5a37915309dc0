"""The step view: token chips, legend, per-draft table with the u number line,
distribution bars, and a one-sentence narration per step.

Chip states (class ``chip--STATE``), each with its own icon and border so they
differ without colour (Okabe-Ito palette in ``style.css``):

=========  ====  ==============================================================
drafted    …     proposed by the drafter, not judged yet (dashed border)
accepted   ✓     draft the target accepted (solid border)
rejected   ✗     draft the target rejected (struck through)
discarded  ⊘     drafted after a rejection: never judged, thrown away (dotted, struck)
resampled  ↻     the target's correction, drawn from norm(max(0, p − q)) (wavy underline)
bonus      ★     drawn from p at position γ+1 after every draft was accepted (double border)
target     ●     produced by the target alone (no draft this step)
=========  ====  ==============================================================

Every token text is HTML-escaped and its whitespace made visible
(``visual.fmt``).  Each chip is focusable (tabindex 0) and carries its
numbers in ``aria-label`` and in ``data-tip`` (a CSS tooltip on hover/focus).
The narration is an ``aria-live`` status region.

The drafter's own box under the table (MTP, early exit, another tokenizer) is
rendered by ``visual.drafter_info``; this module only places it.

Block-verified steps (rule "block", ``playground.decoding.block_verify``; their drafts carry a
weight w) are told differently: every draft is judged, u is compared with h instead of
min(1, p/q), and a draft can be kept with u >= h because a later draft passed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from playground.decoding.records import Correction, DraftDecision, StepRecord
from playground.drafters.registry import KINDS as DRAFTER_KINDS
from visual.bars import bars as _bars
from visual.drafter_info import drafter_panel
from visual.fmt import esc, ms, num, pct, quoted, token_html, token_plain
from visual.i18n import plural, t
from visual.replay import DRAFT, START, VERIFY, Frame
from visual.tree_view import is_tree_step, tree_narration, tree_panel

STATES = ("drafted", "accepted", "rejected", "discarded", "resampled", "bonus", "target")
ICONS = {
    "drafted": "\u2026",  # …
    "accepted": "\u2713",  # ✓
    "rejected": "\u2717",  # ✗
    "discarded": "\u2298",  # ⊘
    "resampled": "\u21bb",  # ↻
    "bonus": "\u2605",  # ★
    "target": "\u25cf",  # ●
}
LEGEND = STATES  # the legend's entries, in order: their names and meanings are catalogue keys state.* / legend.*
DRAFTER_NAMES = {k.name: k.label for k in DRAFTER_KINDS.values()}
CORRECTION_STATE = {"resample": "resampled", "bonus": "bonus", "target": "target"}
PROMPT_TAIL_CHARS = 600


def is_block_step(step: StepRecord) -> bool:
    """The step was block-verified: its judged drafts carry the weight w."""
    return any(d.weight is not None for d in step.drafted)


# --------------------------------------------------------------------------- chips


def chip(
    text: str, state: str, tip: Sequence[str] = (), anim: str | None = None, order: int = 0, sure: float | None = None
) -> str:
    """One token chip.  ``tip`` lines become the tooltip and the aria label.

    sure: the target's own probability of its top choice at this position
    (``playground.decoding.confidence``); drawn as a bar along the chip's foot, full width = certain."""
    if state not in STATES:
        raise ValueError(f"unknown chip state {state!r}")
    name = t(f"state.{state}")
    label = t("chip.aria", state=name, token=quoted(text)) + ("; " + "; ".join(tip) if tip else "")
    classes = f"chip chip--{state}" + (f" anim-{anim}" if anim else "")
    tip_text = "\n".join([f"{name}: {quoted(text)}", *tip])
    bar = ""
    if sure is not None and sure == sure:
        bar = f'<span class="chip__sure" style="width:{100 * max(0.0, min(1.0, sure)):.0f}%" aria-hidden="true"></span>'
    out = (
        f'<span class="{classes}" style="--i:{int(order)}" tabindex="0" role="listitem" '
        f'aria-label="{esc(label)}" data-tip="{esc(tip_text)}">'
        f'<span class="chip__icon" aria-hidden="true">{ICONS[state]}</span>'
        f'<span class="chip__text">{token_html(text)}</span>{bar}</span>'
    )
    if "\n" in text:  # keep the text's line breaks
        out += '<span class="br" aria-hidden="true"></span>'
    return out


def sure_lines(target_conf: float | None, draft_conf: float | None = None, drafted: bool = False) -> list[str]:
    """How sure each model was, in words (tooltip and aria label): the target's own top-choice
    probability here and, for a draft, the drafter's own probability of it."""
    lines = []
    if target_conf is not None:
        lines.append(t("sure.target", share=pct(target_conf)))
    if drafted:
        lines.append(t("sure.drafter", share=pct(draft_conf)) if draft_conf is not None else t("sure.copy"))
    return lines


def _draft_tip(d: DraftDecision, judged_view: bool) -> list[str]:
    lines = [t("tip.draft", position=d.position, id=d.token_id), t("tip.q", q=num(d.draft_prob))]
    if judged_view and d.weight is not None:
        lines.append(t("tip.p", p=num(d.target_prob)))
        lines.append(t("tip.ratio_block", ratio=num(_ratio(d)), w=num(d.weight), h=num(d.accept_prob)))
        lines.append(_block_outcome(d))
    elif judged_view:
        lines.append(t("tip.p", p=num(d.target_prob)))
        lines.append(t("tip.ratio", ratio=num(_ratio(d)), a=num(d.accept_prob)))
        if d.judged and d.u is not None:
            rel = "<" if d.accepted else "\u2265"
            verdict = t("tip.accept") if d.accepted else t("tip.reject")
            lines.append(t("tip.u", u=num(d.u), rel=rel, a=num(d.accept_prob), verdict=verdict))
        elif not d.judged:
            lines.append(t("tip.never_judged"))
    else:
        lines.append(t("tip.waiting"))
    return lines + sure_lines(d.target_conf if judged_view else None, d.draft_conf, drafted=True)


def _block_why(d: DraftDecision) -> str:
    """The verdict on a judged, block-verified draft, in words."""
    if d.accepted:
        return t("block.kept") if d.u < d.accept_prob else t("block.kept_anyway")
    return t("block.rejected")


def _block_outcome(d: DraftDecision) -> str:
    """'u = 0.91 ≥ h = 0.23 → kept anyway: a later draft passed' (a block-verified draft)."""
    if d.u is None:
        return t("block.not_judged")
    rel = "<" if d.u < d.accept_prob else "\u2265"
    return f"u = {num(d.u)} {rel} h = {num(d.accept_prob)} \u2192 {_block_why(d)}"


def _correction_tip(c: Correction) -> list[str]:
    lines = [t("tip.token_id", id=c.token_id)]
    if c.kind == "resample":
        lines.append(t("tip.resample", position=c.position, prob=num(c.prob)))
        lines.append(t("tip.p", p=num(c.target_prob)))
    elif c.kind == "bonus":
        lines.append(t("tip.bonus", position=c.position, prob=num(c.prob)))
    else:
        lines.append(t("tip.from_p", prob=num(c.prob)))
    return lines + sure_lines(c.target_conf)


def _ratio(d: DraftDecision) -> float | None:
    if d.ratio is not None:
        return d.ratio
    return d.target_prob / d.draft_prob if d.draft_prob > 0 else None


def committed_chips(steps: Sequence[StepRecord]) -> list[str]:
    """Chips for everything these (finished) steps committed, in order."""
    out: list[str] = []
    for s in steps:
        for d in s.drafted:  # the accepted drafts (a chain's first n_accepted, a tree's path)
            if d.accepted:
                out.append(
                    chip(d.text, "accepted", [t("tip.step", n=s.index + 1), *_draft_tip(d, True)], sure=d.target_conf)
                )
        if s.correction is not None:
            c = s.correction
            out.append(
                chip(
                    c.text,
                    CORRECTION_STATE.get(c.kind, "target"),
                    [t("tip.step", n=s.index + 1), *_correction_tip(c)],
                    sure=c.target_conf,
                )
            )
    return out


def current_chips(step: StepRecord, phase: str) -> list[str]:
    """Chips of the step on screen: pending drafts, or drafts with their verdicts plus the correction."""
    out: list[str] = []
    if is_tree_step(step):  # the tree is drawn in its own panel; the text shows what it committed
        if phase == DRAFT:
            return out
        path = [d for d in step.drafted if d.accepted]
        for i, d in enumerate(path):
            out.append(chip(d.text, "accepted", _draft_tip(d, True), anim="flip", order=i, sure=d.target_conf))
        if step.correction is not None:
            c = step.correction
            state = CORRECTION_STATE.get(c.kind, "target")
            out.append(chip(c.text, state, _correction_tip(c), anim="flip", order=len(path), sure=c.target_conf))
        return out
    if phase == DRAFT:
        for i, d in enumerate(step.drafted):
            out.append(chip(d.text, "drafted", _draft_tip(d, False), anim="appear", order=i))
        return out
    for i, d in enumerate(step.drafted):
        state = "accepted" if d.accepted else ("rejected" if d.judged else "discarded")
        out.append(chip(d.text, state, _draft_tip(d, True), anim="flip", order=i, sure=d.target_conf))
    if step.correction is not None:
        c = step.correction
        state = CORRECTION_STATE.get(c.kind, "target")
        out.append(chip(c.text, state, _correction_tip(c), anim="flip", order=len(step.drafted), sure=c.target_conf))
    return out


def prompt_html(prompt: str) -> str:
    shown = prompt
    cut = ""
    if len(prompt) > PROMPT_TAIL_CHARS:
        shown = prompt[-PROMPT_TAIL_CHARS:]
        cut = f'<span class="prompt__cut">{esc(t("prompt.cut", n=len(prompt) - PROMPT_TAIL_CHARS))}</span>'
    body = token_html(shown).replace('<span class="ws">\u21b5</span>', '<span class="ws">\u21b5</span><br>')
    return f'<span class="prompt" role="listitem" aria-label="{esc(t("prompt.aria", text=token_plain(prompt)))}">{cut}{body}</span>'


def legend_html() -> str:
    items = "".join(
        f'<li class="legend__item" title="{esc(desc)}"><span class="swatch chip--{key}" aria-hidden="true">'
        f'<span class="chip__icon">{ICONS[key]}</span><span class="chip__text">Aa</span></span>'
        f'<span class="legend__name">{esc(name)}</span><span class="legend__desc">{esc(desc)}</span></li>'
        for key, name, desc in ((k, t(f"state.{k}"), t(f"legend.{k}")) for k in LEGEND)
    )
    sure = (
        '<li class="legend__item legend__item--sure"><span class="swatch swatch--sure" aria-hidden="true">'
        '<span class="chip__text">Aa</span><span class="chip__sure" style="width:60%"></span></span>'
        f'<span class="legend__name">{esc(t("legend.sure_name"))}</span>'
        f'<span class="legend__sure">{esc(t("legend.sure_desc"))}</span></li>'
    )
    return f'<ul class="legend" aria-label="{esc(t("legend.aria"))}">{items}{sure}</ul>'


# --------------------------------------------------------------------------- per-step table


def number_line(d: DraftDecision) -> str:
    """A 0–1 line: the accept region [0, min(1, p/q)) shaded, a marker where u landed."""
    a = max(0.0, min(1.0, d.accept_prob))
    acc = f'<span class="nl__acc" style="width:{100 * a:.1f}%"></span>'
    thr = f'<span class="nl__thr" style="left:{100 * a:.1f}%"></span>'
    name = "min(1, p/q)" if d.weight is None else "h"
    if d.u is None:
        marker = ""
        label = t("nl.not_judged", name=name, a=num(a))
    else:
        u = max(0.0, min(1.0, d.u))
        side = "acc" if d.accepted else "rej"
        marker = f'<span class="nl__u nl__u--{side}" style="left:{100 * u:.1f}%" aria-hidden="true">\u25bc</span>'
        below = d.u < d.accept_prob
        why = (t("verdict.accepted") if d.accepted else t("verdict.rejected")) if d.weight is None else _block_why(d)
        label = t("nl.landed_below" if below else "nl.landed_above", u=num(d.u), name=name, a=num(a), why=why)
    return (
        f'<span class="nl" role="img" aria-label="{esc(label)}">{acc}{thr}{marker}</span>'
        f'<span class="nl__scale" aria-hidden="true"><span>0</span><span>1</span></span>'
    )


def verdict(d: DraftDecision) -> str:
    if not d.judged:
        return f'<span class="verdict verdict--discarded">\u2298 {esc(t("verdict.not_judged"))}</span>'
    if d.weight is not None and d.accepted and not d.u < d.accept_prob:
        return (
            f'<span class="verdict verdict--accepted">\u2713 {esc(t("verdict.kept_later"))} '
            f"<small>{esc(t('verdict.kept_later_why', a=num(d.accept_prob)))}</small></span>"
        )
    if d.accepted:
        return (
            f'<span class="verdict verdict--accepted">\u2713 {esc(t("verdict.accepted"))} '
            f"<small>(u &lt; {num(d.accept_prob)})</small></span>"
        )
    return (
        f'<span class="verdict verdict--rejected">\u2717 {esc(t("verdict.rejected"))} '
        f"<small>(u \u2265 {num(d.accept_prob)})</small></span>"
    )


def draft_sentence(d: DraftDecision) -> str:
    """'Draft 3 “·Paris”: drafter gave it 0.41, target 0.62, ratio 1.51 ≥ 1 → accepted.'"""
    head = t("sentence.head", position=d.position, token=quoted(d.text), q=num(d.draft_prob), p=num(d.target_prob))
    r = _ratio(d)
    if r is None:
        ratio = t("sentence.ratio_undefined")
    elif r >= 1:
        ratio = t("sentence.ratio_ge", r=num(r, 2))
    else:
        ratio = t("sentence.ratio_lt", r=num(r, 2))
    if d.weight is not None:
        return t("sentence.block", head=head, ratio=ratio, w=num(d.weight), outcome=_block_outcome(d))
    if not d.judged:
        return t("sentence.not_judged", head=head, ratio=ratio)
    if r is not None and r >= 1:
        return t("sentence.always", head=head, ratio=ratio)
    rel = "<" if d.accepted else "\u2265"
    verdict = t("verdict.accepted") if d.accepted else t("verdict.rejected")
    return t("sentence.judged", head=head, ratio=ratio, u=num(d.u), rel=rel, a=num(d.accept_prob), verdict=verdict)


def step_table(step: StepRecord, phase: str) -> str:
    if not step.drafted:
        return ""
    judged_view = phase == VERIFY
    block = is_block_step(step)
    names = ("#", t("table.draft_token"), t("table.q"), t("table.p"), "p/q", t("table.h") if block else "min(1, p/q)")
    names += (t("table.u"), t("table.verdict"))
    head = "<tr>" + "".join(f"<th scope=col>{esc(n)}</th>" for n in names) + "</tr>"
    lab = [f' data-label="{esc(n)}"' for n in names]  # a phone shows each row as a card, each value labelled
    rows = []
    for d in step.drafted:
        tok = f'<code class="tok">{token_html(d.text)}</code>'
        if judged_view:
            h = num(d.accept_prob) + (f" <small>(w {num(d.weight)})</small>" if d.weight is not None else "")
            cells = (
                f"<td{lab[3]}>{num(d.target_prob)}</td><td{lab[4]}>{num(_ratio(d), 2)}</td><td{lab[5]}>{h}</td>"
                f'<td{lab[6]} class="cell--u">{number_line(d)}</td><td{lab[7]} class="cell--verdict">{verdict(d)}</td>'
            )
            rclass = "accepted" if d.accepted else ("rejected" if d.judged else "discarded")
        else:
            cells = f'<td class="pending" colspan=5>{esc(t("table.pending"))}</td>'
            rclass = "drafted"
        rows.append(
            f'<tr class="row--{rclass}" title="{esc(draft_sentence(d) if judged_view else "")}">'
            f'<td{lab[0]} class="cell--pos">{d.position}</td><td{lab[1]} class="cell--tok">{tok}</td>'
            f"<td{lab[2]}>{num(d.draft_prob)}</td>{cells}</tr>"
        )
    if not judged_view:
        caption = esc(t("table.caption.draft"))
    elif block:
        caption = esc(t("table.caption.block"))
    else:
        caption = esc(t("table.caption.token"))
    return (
        f'<table class="steptable" aria-label="{esc(t("table.aria", n=step.index + 1))}">'
        f"<caption>{caption}</caption><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"
    )


# --------------------------------------------------------------------------- distribution bars


def distribution_panel(step: StepRecord) -> str:
    """Bars of p, q and the residual at a rejection; of p at the bonus/target position."""
    c = step.correction
    if c is None:
        return ""
    pick = (c.token_id, c.text, c.prob)
    if c.kind == "resample" and is_tree_step(step):
        parts = [
            _bars(
                t("bars.target_depth", position=c.position),
                c.target_top,
                c.token_id,
                "resampled",
                None,
                (c.token_id, c.text, c.target_prob),
            ),
            _bars(t("bars.left_after_children"), c.distribution_top, c.token_id, "resampled", None, pick),
        ]
        note = esc(t("bars.note.tree"))
    elif c.kind == "resample" and is_block_step(step):
        parts, note = _block_resample_bars(step, c, pick)
    elif c.kind == "resample":
        parts = [
            *_p_and_q_bars(step, c),
            _bars(t("bars.residual"), c.distribution_top, c.token_id, "resampled", None, pick),
        ]
        note = esc(t("bars.note.resample"))
    elif c.kind == "bonus":
        parts = [
            _bars(t("bars.target_bonus", position=c.position), c.distribution_top, c.token_id, "bonus", None, pick)
        ]
        note = esc(t("bars.note.bonus"))
    else:
        parts = [_bars(t("bars.target_at", position=c.position), c.distribution_top, c.token_id, "chosen", None, pick)]
        note = esc(t("bars.note.target"))
    return f'<div class="dists">{"".join(parts)}</div><p class="dists__note">{note}</p>'


def _p_and_q_bars(step: StepRecord, c: Correction) -> list[str]:
    """The target's p and the drafter's q at a resample's position, the first draft not kept marked."""
    first_out = next((d for d in step.drafted if d.judged and not d.accepted), None)
    rej_id = first_out.token_id if first_out else None
    return [
        _bars(
            t("bars.target_at", position=c.position),
            c.target_top,
            c.token_id,
            "resampled",
            rej_id,
            (c.token_id, c.text, c.target_prob),
        ),
        _bars(t("bars.drafter_at", position=c.position), c.draft_top, c.token_id, "resampled", rej_id)
        if c.draft_top
        else "",
    ]


def _block_resample_bars(step: StepRecord, c: Correction, pick) -> tuple[list[str], str]:
    """Bars and note of a block step's correction after τ < γ kept drafts."""
    kept = [d for d in step.drafted if d.accepted]
    w = kept[-1].weight if kept and kept[-1].weight is not None else 1.0
    parts = [
        *_p_and_q_bars(step, c),
        _bars(
            t("bars.block_residual", w=num(w)), c.distribution_top, c.token_id, "resampled",
            None, pick,
        ),
    ]  # fmt: skip
    return parts, esc(t("bars.note.block", n=len(kept), s=plural(len(kept))))


# --------------------------------------------------------------------------- narration


def narration(step: StepRecord, phase: str) -> str:
    """One plain-words sentence about the step (plain text, not escaped)."""
    if is_tree_step(step):
        return tree_narration(step, phase)
    n = step.index + 1
    k = len(step.drafted)
    c = step.correction
    if phase == DRAFT:
        toks = t("list.sep").join(quoted(d.text) for d in step.drafted)
        source = (step.drafter_info or {}).get("source") or step.drafter or ""
        who = t(f"drafter.{source}") if source in DRAFTER_NAMES else t("narr.the_drafter")
        return t("narr.draft", n=n, drafter=who, k=k, s=plural(k), tokens=toks, ms=ms(step.draft_ms))
    emitted = len(step.emitted_ids)
    tail = t("narr.tail_eos" if step.eos else "narr.tail", n=emitted, s=plural(emitted), ms=ms(step.verify_ms))
    if k == 0:
        what = t("narr.target_itself", token=quoted(c.text), p=num(c.prob)) if c else t("narr.nothing")
        why = "" if step.mode == "autoregressive" else t("narr.no_draft")
        return t("narr.no_drafts", n=n, why=why, what=what, tail=tail)
    if is_block_step(step):
        return _block_narration(step, n, c, tail)
    acc = [d for d in step.drafted if d.accepted]
    rej = next((d for d in step.drafted if d.judged and not d.accepted), None)
    parts = [t("narr.step", n=n)]
    if rej is None and c is not None and c.kind == "bonus":
        parts.append(t("narr.all_bonus", k=k, token=quoted(c.text), position=c.position))
    else:
        if acc:
            toks = t("list.sep").join(quoted(d.text) for d in acc)
            parts.append(t("narr.accepted_some", a=len(acc), k=k, tokens=toks))
        else:
            parts.append(t("narr.accepted_none", k=k))
        if rej is not None:
            parts.append(
                t(
                    "narr.rejected",
                    token=quoted(rej.text),
                    ratio=num(_ratio(rej), 2),
                    u=num(rej.u),
                    a=num(rej.accept_prob),
                )
            )
            if c is not None and c.kind == "resample":
                parts.append(t("narr.resampled", token=quoted(c.text)))
        elif c is None:
            parts.append(t("narr.stopped"))
    return "".join(parts) + tail


def _block_narration(step: StepRecord, n: int, c: Correction | None, tail: str) -> str:
    """The sentence of a block-verified step (plain text, not escaped)."""
    k = len(step.drafted)
    kept = [d for d in step.drafted if d.accepted]
    anyway = [d for d in kept if not d.u < d.accept_prob]
    sep = t("list.sep")
    parts = [t("narr.block", n=n, rule=t("block.rule"), kept=len(kept), k=k)]
    if kept:
        parts.append(f" ({sep.join(quoted(d.text) for d in kept)})")
    if anyway:
        key = "narr.block_anyway_one" if len(anyway) == 1 else "narr.block_anyway_many"
        parts.append(t(key, tokens=sep.join(quoted(d.text) for d in anyway)))
    if c is not None and c.kind == "bonus":
        parts.append(t("narr.block_bonus", token=quoted(c.text), position=c.position))
    elif c is not None and c.kind == "resample":
        parts.append(t("narr.block_resampled", token=quoted(c.text)))
    return "".join(parts) + tail


# --------------------------------------------------------------------------- the whole view


def step_view(
    prompt: str,
    steps: Sequence[StepRecord],
    frame: Frame,
    *,
    running: bool = False,
    stagger_s: float = 0.12,
    message: str | None = None,
    prompt_tokens: int | None = None,
) -> str:
    """The full step view for one frame of the replay.

    prompt_tokens: the prompt's length in tokens, when known (it names the token whose
    hidden state an MTP draft read; without it that is inferred)."""
    total = len(steps)
    more = "+" if running else ""
    if frame.phase == START or not steps:
        head = t("view.before_first") if steps else t("view.no_run")
        say = message or (t("view.press_step") if steps else t("view.press_run"))
        chips: list[str] = []
        body = ""
        sr = say
    else:
        step = steps[frame.step]
        phase_name = t("view.drafting") if frame.phase == DRAFT else t("view.verified")
        head = t("view.head", n=frame.step + 1, total=total, more=more, phase=phase_name)
        chips = committed_chips(steps[: frame.step]) + current_chips(step, frame.phase)
        sentences = ""
        if frame.phase == VERIFY and step.drafted:
            sentences = "".join(f"<li>{esc(draft_sentence(d))}</li>" for d in step.drafted)
            sentences = (
                f'<details class="why"><summary>{esc(t("view.each_draft"))}</summary><ol>{sentences}</ol></details>'
            )
        mtp = drafter_panel(steps, frame.step, frame.phase, prompt_tokens)
        table = tree_panel(step, frame.phase) if is_tree_step(step) else step_table(step, frame.phase)
        body = table + mtp + (distribution_panel(step) if frame.phase == VERIFY else "") + sentences
        say = narration(step, frame.phase)
        sr = say
    return (
        f'<div class="sd-view" style="--stagger:{max(0.0, stagger_s):.3f}s">'
        f'<div class="sd-head"><span class="sd-step">{esc(head)}</span></div>'
        f'<p class="sd-narration" role="status" aria-live="polite" aria-atomic="true">{esc(sr)}</p>'
        f'<div class="sd-text" role="list" aria-label="{esc(t("view.text_aria"))}">'
        f"{prompt_html(prompt) if prompt else ''}{''.join(chips)}</div>"
        f"{body}</div>"
    )


def count_states(html_text: str) -> dict[str, int]:
    """How many chips of each state an HTML fragment holds (legend chips excluded)."""
    counts = {s: 0 for s in STATES}
    for m in re.finditer(r'class="chip chip--(\w+)', html_text):
        if m.group(1) in counts:
            counts[m.group(1)] += 1
    return counts
