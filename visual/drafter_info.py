"""What the drafter did in one step, from ``StepRecord.drafter_info``: a short box per drafter kind.

The MTP drafter (what it read from the target, how much of the vocabulary it scored), the
early-exit drafter (which of the target's layers ran) and the drafter with another
tokenizer (the drafted text in both tokenizations), each with the step's draft cost
against the verify pass.  Other drafters get no box.

This module renders those boxes only; the step view around them (chips, table, bars,
narration) is ``visual.tokens``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from playground.decoding.records import StepRecord
from visual.fmt import count, esc, ms, pct, token_html
from visual.i18n import plural, t
from visual.replay import VERIFY


def drafter_panel(steps: Sequence[StepRecord], index: int, phase: str, prompt_tokens: int | None = None) -> str:
    """The box for step ``index`` (whichever drafter made it), or "" for drafters without one.

    prompt_tokens: the prompt's length in tokens, when known (see ``hidden_state_token``)."""
    step = steps[index]
    if is_mtp_info(step.drafter_info):
        return mtp_panel(step, phase, hidden_state_token(steps, index, prompt_tokens))
    if is_early_exit_info(step.drafter_info):
        return early_exit_panel(step, phase)
    if is_other_tokenizer_info(step.drafter_info):
        return tokenizations_panel(step, phase)
    return ""


def _stop_line(info: dict, drafted: int) -> str:
    """The early-stop rule in words (empty when the run has none); numbers from a trace are checked."""
    tau, path = _num(info.get("draft_stop")), _num(info.get("path_confidence"))
    if tau is None or tau <= 0:
        return ""
    rule = t("di.threshold", tau=f"{tau:.2g}")
    if info.get("stopped_early") is True and "tree_nodes" in info:
        return esc(t("di.tree_stopped", rule=rule))
    if info.get("stopped_early") is True and path is not None:
        return esc(t("di.chain_stopped", n=count(drafted), s=plural(drafted), path=f"{path:.2f}", rule=rule))
    return esc(t("di.may_stop", rule=rule))


def _draft_cost(step: StepRecord, phase: str) -> str:
    """The "Draft:" line: n tokens in X ms (Y ms/token) vs the verify pass (not shown while drafting)."""
    n = len(step.drafted)
    draft_ms = _num(step.draft_ms)
    per = draft_ms / n if draft_ms is not None and n else None
    cost = t("di.cost", n=n, s=plural(n), ms=ms(draft_ms), per=ms(per))
    if phase == VERIFY:
        verify_ms = _num(step.verify_ms)
        cost += t("di.cost_vs", ms=ms(verify_ms))
        if per is not None and verify_ms is not None and verify_ms > 0:
            cost += t("di.cost_share", share=pct(per / verify_ms, 1))
        return esc(cost + t("di.end"))
    return esc(cost + t("di.cost_next"))


def is_early_exit_info(info) -> bool:
    return isinstance(info, dict) and "exit_layer" in info


def early_exit_panel(step: StepRecord, phase: str) -> str:
    """What the early-exit drafter ran (the target's first k of L layers, its norm and head),
    what the verify pass reused (``Draft.info["reused"]``) and what drafting cost.  Empty for
    other drafters."""
    info = step.drafter_info or {}
    if not is_early_exit_info(info) or not step.drafted:
        return ""
    k, n_layers = _int(info.get("exit_layer")), _int(info.get("layers"))
    if k is None:
        return ""
    stack = t("di.ee.stack", k=k, n=n_layers) if n_layers else t("di.ee.first", k=k)
    cached = count(step.drafter_cache_len or 0)
    items = [
        (
            t("di.key.ran"),
            esc(
                t("di.ee.ran", stack=stack)
                + (t("di.ee.shared", k=k, n=cached) if info.get("shared_cache") else t("di.ee.own", n=cached))
            ),
        ),
        (t("di.key.exit"), esc(_exit_words(info.get("exit")))),
        (t("di.key.reused"), esc(str(info.get("reused") or t("di.ee.nothing")))),
        (t("di.key.draft"), _draft_cost(step, phase)),
    ]
    lis = "".join(f'<li><strong class="mtp-info__key">{esc(a)}</strong> {b}</li>' for a, b in items)
    return (
        f'<div class="mtp-info exit-info" role="note" aria-label="{esc(t("di.ee.aria", n=step.index + 1))}">'
        f'<h4>{esc(t("di.ee.title", k=k))}</h4><ul class="mtp-info__facts">{lis}</ul></div>'
    )


def _exit_words(exit_kind) -> str:
    """What sits between layer k and the final norm (traces without the field: untrained)."""
    if str(exit_kind or "").startswith("trained"):
        return t("di.ee.trained")
    return t("di.ee.untrained")


def is_other_tokenizer_info(info) -> bool:
    return isinstance(info, dict) and "drafter_tokens" in info and "target_tokens" in info


def tokenizations_panel(step: StepRecord, phase: str) -> str:
    """The drafted text in both tokenizations, side by side: the drafter's own tokens and
    the target tokens it was re-encoded into (cut at γ), so a student sees where drafts get
    cut or split.  Empty for other drafters."""
    info = step.drafter_info or {}
    if not is_other_tokenizer_info(info):
        return ""

    def toks(pieces) -> str:
        return " ".join(f'<code class="tok">{token_html(str(p))}</code>' for p in pieces) or esc(t("di.tok.none"))

    d_pieces, t_pieces = list(info.get("drafter_tokens") or []), list(info.get("target_tokens") or [])
    how = {
        "in context": t("di.tok.in_context"),
        "alone": t("di.tok.alone"),
    }.get(str(info.get("retokenized") or ""), "")
    end = esc(t("di.end"))
    items = [
        (
            t("di.key.drafter"),
            t("di.tok.drafter", n=count(len(d_pieces)), tokens=toks(d_pieces))
            + (esc(t("di.tok.ended")) if info.get("drafter_ended") else "")
            + end,
        ),
        (
            t("di.key.target"),
            t("di.tok.target", n=count(len(t_pieces)), tokens=toks(t_pieces))
            + (esc(t("list.sep") + how) if how else "")
            + end,
        ),
        (t("di.key.draft"), _draft_cost(step, phase)),
    ]
    lis = "".join(f'<li><strong class="mtp-info__key">{esc(k)}</strong> {v}</li>' for k, v in items)
    return (
        f'<div class="mtp-info tok-info" role="note" aria-label="{esc(t("di.tok.aria", n=step.index + 1))}">'
        f"<h4>{esc(t('di.tok.title'))}</h4>"
        f'<ul class="mtp-info__facts">{lis}</ul></div>'
    )


# --------------------------------------------------------------------------- the MTP drafter

# Keys the MTP drafter (playground/drafters/mtp.py, ``MTPDrafter._info``) puts in
# ``StepRecord.drafter_info``; other drafters leave it empty or use other keys.
MTP_KEYS = ("hidden_from_position", "candidates_scored", "target_kv_positions")


def is_mtp_info(info) -> bool:
    return isinstance(info, dict) and any(k in info for k in MTP_KEYS)


def _num(x) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return None
    return float(x)


def _int(x) -> int | None:
    v = _num(x)
    return None if v is None else int(v)


def _generated_texts(steps: Sequence[StepRecord]) -> list[str]:
    """The text of every token these steps committed, in order."""
    out: list[str] = []
    for s in steps:
        texts = [d.text for d in s.drafted[: s.n_accepted]]
        if s.correction is not None:
            texts.append(s.correction.text)
        out.extend(texts[: len(s.emitted_ids)])  # EOS/budget may cut the tail
    return out


def hidden_state_token(
    steps: Sequence[StepRecord], index: int, prompt_tokens: int | None = None
) -> tuple[str, str | None]:
    """Which token sits at the position whose target hidden state seeded step ``index``'s MTP draft.

    Returns ("generated", text), ("prompt", None) when the position is inside the prompt (whose
    per-token text is not in the records), or ("", None) when it cannot be told.  With
    ``prompt_tokens`` (the prompt's length in tokens) the position maps exactly; without it
    (a run still streaming) the drafter's own convention is used: the hidden state is the
    one the target computed over the second-newest committed token (the state that
    predicted the newest one).
    """
    step = steps[index]
    pos = _int(step.drafter_info.get("hidden_from_position"))
    if pos is None or pos < 0:
        return "", None
    texts = _generated_texts(steps[:index])
    before = steps[index - 1].committed_tokens if index > 0 else 0
    if len(texts) != before:
        return "", None  # records do not add up: say nothing rather than name a wrong token
    n_prompt = prompt_tokens if prompt_tokens else pos + 2 - before
    if n_prompt < 1:
        return "", None
    k = pos - n_prompt
    if k < 0:
        return "prompt", None
    if k < len(texts):
        return "generated", texts[k]
    return "", None


def mtp_panel(step: StepRecord, phase: str, hidden: tuple[str, str | None] = ("", None)) -> str:
    """A short box on what the MTP drafter did this step: what it read from the target, how
    much of the vocabulary it scored, and what drafting cost.  Empty for other drafters.
    ``hidden``: ``hidden_state_token``'s answer for this step."""
    info = step.drafter_info or {}
    if not is_mtp_info(info) or not step.drafted:
        return ""
    items: list[tuple[str, str]] = []

    # 1. what it read from the target
    read: list[str] = []
    if "hidden_from_position" in info:
        pos = _int(info.get("hidden_from_position"))
        if pos is None:
            read.append(esc(t("di.mtp.no_hidden")))
        else:
            kind, text = hidden
            where = ""
            if kind == "generated" and text is not None:
                where = esc(t("di.mtp.token", token="\x00")).replace(
                    "\x00", f'<code class="tok">{token_html(text)}</code>'
                )
            elif kind == "prompt":
                where = esc(t("di.mtp.in_prompt"))
            read.append(esc(t("di.mtp.hidden", pos=pos, where="\x00")).replace("\x00", where))
    n_kv = _int(info.get("target_kv_positions"))
    if n_kv is not None:
        layer = _int(info.get("target_kv_layer"))
        n_layers = _int(info.get("target_layers"))
        if layer is None:
            which = t("di.mtp.kv_any")
        elif n_layers and layer == n_layers - 1:
            which = t("di.mtp.kv_last", layer=layer, n=n_layers)
        elif n_layers:
            which = t("di.mtp.kv_of", layer=layer, last=n_layers - 1)
        else:
            which = t("di.mtp.kv_layer", layer=layer)
        if n_kv > 0:
            read.append(esc(t("di.mtp.kv_at", which=which, n=count(n_kv), s=plural(n_kv))))
        else:
            read.append(esc(t("di.mtp.no_kv")))
    if read:
        own = t("di.mtp.no_cache") if step.drafter_cache_len is None else ""
        items.append((t("di.key.read"), esc(t("di.mtp.and")).join(read) + esc(own + t("di.end"))))

    # 2. the narrowed vocabulary (candidates_scored counts the context tokens too)
    total = _int(info.get("candidates_scored"))
    if total is not None:
        extra = max(0, _int(info.get("context_candidates")) or 0)
        vocab = _int(info.get("vocab_size"))
        what = (
            t("di.mtp.candidates_ctx", n=count(total - extra), extra=count(extra))
            if extra
            else t("di.mtp.candidates", n=count(total - extra))
        )
        share = t("di.mtp.share", vocab=count(vocab), share=pct(total / vocab, 1)) if vocab else ""
        items.append((t("di.key.scored"), esc(t("di.mtp.scored", what=what, share=share))))

    # 3. draft cost against the target's verify pass
    items.append((t("di.key.draft"), _draft_cost(step, phase)))

    # 4. the early-stop rule (playground.decoding.draft_stop), when the run uses one
    stop_line = _stop_line(info, len(step.drafted))
    if stop_line:
        items.append((t("di.key.length"), stop_line))

    lis = "".join(f'<li><strong class="mtp-info__key">{esc(k)}</strong> {v}</li>' for k, v in items)
    return (
        f'<div class="mtp-info" role="note" aria-label="{esc(t("di.mtp.aria", n=step.index + 1))}">'
        f'<h4>{esc(t("di.mtp.title"))}</h4><ul class="mtp-info__facts">{lis}</ul></div>'
    )
