"""How much of an output repeats earlier text: one measure for the stats card and the benchmark.

``repeated_share(prompt, output)`` is the share of output tokens that *complete* an n-gram
(n = 4 by default) already present earlier in prompt + output, i.e. an occurrence that ends
before this token. The n-gram may straddle the prompt/output boundary; overlapping
occurrences count ("a a a a a": the fifth "a" completes "a a a a", which ended at the fourth).
An output token with fewer than n - 1 tokens before it cannot complete an n-gram and counts
as new. This is the measure DESIGN §8 quotes (76–85 % on Gemma 3 270M's greedy loops):
prompt lookup copies such text for free, so a speedup on it says more about the loop than
about the drafter.

``distinct_n(output)`` is the usual distinct-n: distinct n-grams / n-grams of the output
alone (n = 2 by default); 1.0 when every bigram is new, near 0 for a loop.

This module works on token id lists only: it does not tokenize, decide what counts as
"high" for a caption beyond the one threshold below, or render anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

#: A repeated share at or above this is "mostly repetition" in the stats card's wording.
HIGH_SHARE = 0.5


def repeated_count(prompt_ids: Sequence[int], output_ids: Sequence[int], n: int = 4) -> int:
    """Output tokens that complete an n-gram which already occurred (ending earlier)."""
    if n < 1:
        raise ValueError("n must be >= 1")
    seq = [*prompt_ids, *output_ids]
    start = len(prompt_ids)
    seen: set[tuple[int, ...]] = set()
    repeated = 0
    for end in range(n - 1, len(seq)):  # the n-gram seq[end - n + 1 : end + 1] ends at `end`
        gram = tuple(seq[end - n + 1 : end + 1])
        if end >= start and gram in seen:
            repeated += 1
        seen.add(gram)
    return repeated


def repeated_share(prompt_ids: Sequence[int], output_ids: Sequence[int], n: int = 4) -> float:
    """repeated_count / len(output); 0.0 for an empty output."""
    if not output_ids:
        return 0.0
    return repeated_count(prompt_ids, output_ids, n) / len(output_ids)


def distinct_n(output_ids: Sequence[int], n: int = 2) -> float:
    """Distinct n-grams / n-grams of the output; 1.0 when it has fewer than n tokens."""
    if n < 1:
        raise ValueError("n must be >= 1")
    grams = [tuple(output_ids[i : i + n]) for i in range(len(output_ids) - n + 1)]
    if not grams:
        return 1.0
    return len(set(grams)) / len(grams)


@dataclass(frozen=True)
class Repetition:
    tokens: int  # output tokens
    repeated: int  # of them, completing an earlier 4-gram
    share: float  # repeated / tokens (0.0 for no tokens)
    distinct2: float  # distinct-2 of the output

    @property
    def high(self) -> bool:
        return self.tokens > 0 and self.share >= HIGH_SHARE


def measure(prompt_ids: Sequence[int], output_ids: Sequence[int]) -> Repetition:
    """The 4-gram repeated share and distinct-2 of one output, together."""
    repeated = repeated_count(prompt_ids, output_ids, 4)
    tokens = len(output_ids)
    return Repetition(
        tokens=tokens,
        repeated=repeated,
        share=repeated / tokens if tokens else 0.0,
        distinct2=distinct_n(output_ids, 2),
    )
