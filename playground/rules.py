"""The verification rules: one table read by the engine, the validator, the app and the lab.

Each ``Rule`` says what it is called, whether it is lossless, whether the Playground and
``/speculate`` offer it (``app_label``), and how the classroom lab presents it (its selector
label, category, what it does, what the distribution check should show).  "lossless" (token
verification) and "block" are correct; the others exist so the lab (and the tests, as mutants)
can show what real implementations got wrong.

This module does not implement any rule (``playground.decoding.engine.verify`` does) or check
a user's choice (``playground.validate``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    key: str  # the engine's name (RunSettings.rule, traces, links)
    description: str  # one line: what the engine does with it
    lossless: bool  # the output law is the target's
    category: str  # "correct" | "wrong" | "wasteful" | "lossy"
    lab_label: str  # the lab's selector label: the category tag comes first
    what: str  # the lab: one sentence, what the rule does
    expect: str  # the lab: what the distribution check should show
    app_label: str | None = None  # the Playground's Verification control (None: the lab only)
    chains_only: bool = False  # judges a chain of drafts: a tree needs another rule


_RULES = (
    Rule(
        "lossless",
        "Lossless speculative sampling (correct)",
        True,
        "correct",
        "✓ Correct: lossless speculative sampling",
        "Accept d with probability min(1, p(d)/q(d)); after a rejection resample from norm(max(0, p − q)); "
        "after all drafts, a bonus token from p at position γ+1.",
        "No drift: the speculative histogram matches the target's up to sampling noise.",
        app_label="Token verification (Leviathan et al.)",
    ),
    Rule(
        "block",
        "Block verification: the drafts judged jointly, longest passing prefix kept (lossless)",
        True,
        "correct",
        "✓ Correct: block verification — the drafts judged jointly (Sun et al., ICLR 2025)",
        "Every draft gets its own u; keep the longest prefix whose last draft has u < h, where h mixes the "
        "weight w = min(1, w·p/q) carried along the block with the residual mass left at that position "
        "(a draft can be kept although its own u failed). Then resample from norm(max(0, w·p − q)), or the "
        "bonus after the whole block.",
        "No drift, like the token-by-token rule, and at least as many drafts kept on average: compare "
        "tokens/pass (vs correct) with the first rule's. Its acceptance counts every draft as judged, the "
        "token-by-token rule's only those before the first rejection.",
        app_label="Block verification (Sun et al. 2025)",
        chains_only=True,
    ),
    Rule(
        "softmax-q",
        "WRONG: argmax drafts verified against the drafter's softmax q (transformers #32867)",
        False,
        "wrong",
        "✗ WRONG (a): argmax drafts checked against the drafter's softmax q — transformers #32867",
        "The drafter drafts its argmax (q is really a point mass) but the verifier plugs in the drafter's softmax "
        "as q. The draft is accepted too often, and the residual wrongly excludes it.",
        "Drift towards the drafter's favourite tokens. Needs a model drafter at temperature > 0.",
    ),
    Rule(
        "exact-match",
        "Exact match: accept iff the draft equals a fresh target sample (lossless, wastes drafts)",
        True,
        "wasteful",
        "≈ Wasteful (b): exact-match acceptance at T > 0 — lossless, but rejects good drafts",
        "Draw a fresh token from p and accept the draft only if it is the same token; on a mismatch emit that "
        "sample. When p = q a draft survives with probability Σp² instead of 1.",
        "By the math this is lossless: no drift (p-value not small), but the acceptance rate drops — "
        "compare it with the correct rule's.",
    ),
    Rule(
        "target-sample",
        "WRONG: after a rejection, emit a plain target sample instead of the residual",
        False,
        "wrong",
        "✗ WRONG (c): on rejection emit a plain target sample instead of the residual",
        "After a rejection the token is drawn from p instead of norm(max(0, p − q)), so tokens the drafter "
        "already proposes often are counted twice.",
        "Drift towards tokens both models like (overlap of p and q is over-represented).",
    ),
    Rule(
        "bonus-wrong-position",
        "WRONG: bonus token drawn from position γ instead of γ+1",
        False,
        "wrong",
        "✗ WRONG (d): bonus token drawn from the wrong position (γ instead of γ+1)",
        "When every draft is accepted, the bonus token is sampled from the distribution of the last draft's "
        "position (which does not see that draft) instead of the next position.",
        "Drift in the token after a fully accepted step: visible in 2- and 3-token continuations.",
    ),
    Rule(
        "typical",
        "LOSSY: Medusa typical acceptance, p(x) > min(ε, δ·exp(−H(p)))",
        False,
        "lossy",
        "~ LOSSY but faster: Medusa typical acceptance",
        "Accept d if p(d) > min(ε, δ·exp(−H(p))) (ε = 0.09, δ = 0.3); on rejection emit a sample from p.",
        "Higher acceptance (faster) and a measurable drift: the trade-off a serving system may choose.",
    ),
)
RULES: dict[str, Rule] = {r.key: r for r in _RULES}
DEFAULT_RULE = "lossless"
APP_RULES = tuple(k for k, r in RULES.items() if r.app_label)  # what the Playground and /speculate offer
LOSSLESS_RULES = tuple(k for k, r in RULES.items() if r.lossless)


def lab_choices() -> list[tuple[str, str]]:
    """(label, key) pairs for the lab's selector, in the table's order (the correct rules first)."""
    return [(r.lab_label, k) for k, r in RULES.items()]


def app_choices() -> list[tuple[str, str]]:
    """(label, key) pairs for the Playground's Verification control."""
    return [(RULES[k].app_label, k) for k in APP_RULES]
