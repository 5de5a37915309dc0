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
    rule = f"threshold {tau:.2g}"
    if info.get("stopped_early") is True and "tree_nodes" in info:
        return (
            f"the tree stopped growing early: no further node’s path confidence (the product of the "
            f"probabilities the head gave the tokens on its path) reached the {rule}. The shape is decided "
            "before each level is drawn, so the output is unchanged."
        )
    if info.get("stopped_early") is True and path is not None:
        return (
            f"stopped after {count(drafted)} draft{'s' if drafted != 1 else ''}: the head\u2019s confidence in "
            f"its chain (the product of the probabilities it gave its drafts, {path:.2f}) fell below the {rule}, "
            "so no step was spent on drafts the target would likely reject. Stopping depends only on drafts "
            "already made, so the output is unchanged."
        )
    return f"the chain may stop early when the head\u2019s confidence in it falls below the {rule}; it did not here."


def _draft_cost(step: StepRecord, phase: str) -> str:
    """The "Draft:" line: n tokens in X ms (Y ms/token) vs the verify pass (not shown while drafting)."""
    n = len(step.drafted)
    draft_ms = _num(step.draft_ms)
    per = draft_ms / n if draft_ms is not None and n else None
    cost = f"{n} token{'s' if n != 1 else ''} in {ms(draft_ms)} ({ms(per)}/token)"
    if phase == VERIFY:
        verify_ms = _num(step.verify_ms)
        cost += f" vs {ms(verify_ms)} for the target\u2019s verify pass"
        if per is not None and verify_ms is not None and verify_ms > 0:
            cost += f": one draft token cost {pct(per / verify_ms, 1)} of it"
        return cost + "."
    return cost + "; the target\u2019s verify pass comes next."


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
    stack = f"layers 1\u2013{k} of its {n_layers}" if n_layers else f"its first {k} layers"
    items = [
        (
            "Ran:",
            f"the target\u2019s own {esc(stack)}, then its final norm and its full LM head, "
            + (
                f"in the target\u2019s own cache (its layers 1\u2013{k}: {count(step.drafter_cache_len or 0)} "
                "tokens after this step)."
                if info.get("shared_cache")
                else f"on the drafter\u2019s own cache ({count(step.drafter_cache_len or 0)} tokens after this step)."
            ),
        ),
        ("Exit:", esc(_exit_words(info.get("exit")))),
        ("Reused:", esc(str(info.get("reused") or "nothing"))),
        ("Draft:", _draft_cost(step, phase)),
    ]
    lis = "".join(f'<li><strong class="mtp-info__key">{esc(a)}</strong> {b}</li>' for a, b in items)
    return (
        f'<div class="mtp-info exit-info" role="note" aria-label="Early-exit drafter, step {step.index + 1}">'
        f'<h4>Early exit: the target drafts with its first {k} layers</h4><ul class="mtp-info__facts">{lis}</ul></div>'
    )


def _exit_words(exit_kind) -> str:
    """What sits between layer k and the final norm (traces without the field: untrained)."""
    if str(exit_kind or "").startswith("trained"):
        return (
            "trained: a learned linear map A turns the layer\u2019s state into one the final norm and head "
            "expect (it changes the drafts only; the target verifies unchanged)."
        )
    return "untrained: the layer\u2019s state goes straight into the final norm and head."


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
        return " ".join(f'<code class="tok">{token_html(str(p))}</code>' for p in pieces) or "none"

    d_pieces, t_pieces = list(info.get("drafter_tokens") or []), list(info.get("target_tokens") or [])
    how = {
        "in context": "re-encoded together with the committed text",
        "alone": "re-encoded on its own (in context it would have changed committed tokens)",
    }.get(str(info.get("retokenized") or ""), "")
    items = [
        (
            "Drafter:",
            f"{count(len(d_pieces))} of its own tokens: {toks(d_pieces)}"
            + (" (then it ended the text)" if info.get("drafter_ended") else "")
            + ".",
        ),
        ("Target:", f"{count(len(t_pieces))} target tokens: {toks(t_pieces)}" + (f", {esc(how)}" if how else "") + "."),
        ("Draft:", _draft_cost(step, phase)),
    ]
    lis = "".join(f'<li><strong class="mtp-info__key">{esc(k)}</strong> {v}</li>' for k, v in items)
    return (
        f'<div class="mtp-info tok-info" role="note" aria-label="Drafter with another tokenizer, step {step.index + 1}">'
        f"<h4>Another tokenizer: the drafter\u2019s text, re-tokenized for the target</h4>"
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
            read.append("no target hidden state (none yet), so it began from its learned start state")
        else:
            kind, text = hidden
            where = ""
            if kind == "generated" and text is not None:
                where = f' (token <code class="tok">{token_html(text)}</code>)'
            elif kind == "prompt":
                where = " (in the prompt)"
            read.append(f"the target\u2019s final hidden state at position {pos}{where}")
    n_kv = _int(info.get("target_kv_positions"))
    if n_kv is not None:
        layer = _int(info.get("target_kv_layer"))
        n_layers = _int(info.get("target_layers"))
        if layer is None:
            which = "the target\u2019s cached keys/values"
        elif n_layers and layer == n_layers - 1:
            which = f"the keys/values of the target\u2019s layer {layer} (the last of its {n_layers})"
        elif n_layers:
            which = f"the keys/values of the target\u2019s layer {layer} (of layers 0\u2013{n_layers - 1})"
        else:
            which = f"the keys/values of the target\u2019s layer {layer}"
        if n_kv > 0:
            read.append(f"{which} at {count(n_kv)} position{'s' if n_kv != 1 else ''}")
        else:
            read.append("no target keys/values (nothing cached yet)")
    if read:
        own = " \u2014 no drafter cache of its own" if step.drafter_cache_len is None else ""
        items.append(("Read:", " and ".join(read) + own + "."))

    # 2. the narrowed vocabulary (candidates_scored counts the context tokens too)
    total = _int(info.get("candidates_scored"))
    if total is not None:
        extra = max(0, _int(info.get("context_candidates")) or 0)
        vocab = _int(info.get("vocab_size"))
        what = f"{count(total - extra)} candidate" + (f" + {count(extra)} context" if extra else "") + " tokens"
        share = f" of {count(vocab)} ({pct(total / vocab, 1)} of the vocabulary)" if vocab else ""
        items.append(("Scored:", f"{what}{share} per draft step; every other token gets q = 0."))

    # 3. draft cost against the target's verify pass
    items.append(("Draft:", _draft_cost(step, phase)))

    # 4. the early-stop rule (playground.decoding.draft_stop), when the run uses one
    stop_line = _stop_line(info, len(step.drafted))
    if stop_line:
        items.append(("Length:", stop_line))

    lis = "".join(f'<li><strong class="mtp-info__key">{esc(k)}</strong> {v}</li>' for k, v in items)
    return (
        f'<div class="mtp-info" role="note" aria-label="MTP drafter, step {step.index + 1}">'
        f'<h4>MTP drafter: built on the target\u2019s own state</h4><ul class="mtp-info__facts">{lis}</ul></div>'
    )
