"""The verification rules as the lab presents them: a label, a category, what it does, what to expect.

One ``RuleInfo`` per rule of ``engine.RULES`` (two correct ones, three wrong on purpose,
one wasteful, one lossy), the selector's choices (``rule_choices``) and ``DEFAULT_RULE``.
This module does not implement any rule (``playground.decoding.engine`` does) or run anything.
"""

from __future__ import annotations

from dataclasses import dataclass

from playground.decoding.engine import RULES


@dataclass(frozen=True)
class RuleInfo:
    key: str
    label: str  # selector label: the category tag comes first
    category: str  # "correct" | "wrong" | "wasteful" | "lossy"
    what: str  # one sentence: what the rule does
    expect: str  # what the distribution check should show


RULE_INFO: dict[str, RuleInfo] = {
    "lossless": RuleInfo(
        "lossless",
        "✓ Correct: lossless speculative sampling",
        "correct",
        "Accept d with probability min(1, p(d)/q(d)); after a rejection resample from norm(max(0, p − q)); "
        "after all drafts, a bonus token from p at position γ+1.",
        "No drift: the speculative histogram matches the target's up to sampling noise.",
    ),
    "block": RuleInfo(
        "block",
        "✓ Correct: block verification — the drafts judged jointly (Sun et al., ICLR 2025)",
        "correct",
        "Every draft gets its own u; keep the longest prefix whose last draft has u < h, where h mixes the "
        "weight w = min(1, w·p/q) carried along the block with the residual mass left at that position "
        "(a draft can be kept although its own u failed). Then resample from norm(max(0, w·p − q)), or the "
        "bonus after the whole block.",
        "No drift, like the token-by-token rule, and at least as many drafts kept on average: compare "
        "tokens/pass (vs correct) with the first rule's. Its acceptance counts every draft as judged, the "
        "token-by-token rule's only those before the first rejection.",
    ),
    "softmax-q": RuleInfo(
        "softmax-q",
        "✗ WRONG (a): argmax drafts checked against the drafter's softmax q — transformers #32867",
        "wrong",
        "The drafter drafts its argmax (q is really a point mass) but the verifier plugs in the drafter's softmax "
        "as q. The draft is accepted too often, and the residual wrongly excludes it.",
        "Drift towards the drafter's favourite tokens. Needs a model drafter at temperature > 0.",
    ),
    "exact-match": RuleInfo(
        "exact-match",
        "≈ Wasteful (b): exact-match acceptance at T > 0 — lossless, but rejects good drafts",
        "wasteful",
        "Draw a fresh token from p and accept the draft only if it is the same token; on a mismatch emit that "
        "sample. When p = q a draft survives with probability Σp² instead of 1.",
        "By the math this is lossless: no drift (p-value not small), but the acceptance rate drops — "
        "compare it with the correct rule's.",
    ),
    "target-sample": RuleInfo(
        "target-sample",
        "✗ WRONG (c): on rejection emit a plain target sample instead of the residual",
        "wrong",
        "After a rejection the token is drawn from p instead of norm(max(0, p − q)), so tokens the drafter "
        "already proposes often are counted twice.",
        "Drift towards tokens both models like (overlap of p and q is over-represented).",
    ),
    "bonus-wrong-position": RuleInfo(
        "bonus-wrong-position",
        "✗ WRONG (d): bonus token drawn from the wrong position (γ instead of γ+1)",
        "wrong",
        "When every draft is accepted, the bonus token is sampled from the distribution of the last draft's "
        "position (which does not see that draft) instead of the next position.",
        "Drift in the token after a fully accepted step: visible in 2- and 3-token continuations.",
    ),
    "typical": RuleInfo(
        "typical",
        "~ LOSSY but faster: Medusa typical acceptance",
        "lossy",
        "Accept d if p(d) > min(ε, δ·exp(−H(p))) (ε = 0.09, δ = 0.3); on rejection emit a sample from p.",
        "Higher acceptance (faster) and a measurable drift: the trade-off a serving system may choose.",
    ),
}
assert set(RULE_INFO) == set(RULES), "RULE_INFO must describe every engine rule"
DEFAULT_RULE = "lossless"


def rule_choices() -> list[tuple[str, str]]:
    """(label, key) pairs for a selector; the correct rules first (the default first of all)."""
    return [(info.label, key) for key, info in RULE_INFO.items()]
