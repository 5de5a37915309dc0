"""playground/repetition.py on hand-built token lists, a brute-force reference, and mutants.

Letters stand for token ids (a = 0, b = 1, ...) so the expected values can be checked by eye.
"""

from __future__ import annotations

import random

import pytest

from playground import repetition
from playground.repetition import HIGH_SHARE, distinct_n, measure, repeated_count, repeated_share


def ids(text: str) -> list[int]:
    return [ord(c) - ord("a") for c in text.replace(" ", "")]


# (prompt, output, 4-gram repeated count); each line says which output tokens repeat.
CASES = [
    ("", "", 0),
    ("", "abcd", 0),  # nothing earlier
    ("", "abcdabcd", 1),  # only the second "d" completes "abcd"; the second a, b, c end new 4-grams
    ("", "abcabcabc", 3),  # "abca" at 3 new; "bcab","cabc" new; then "abca","bcab","cabc" again: 3
    ("", "aaaaa", 1),  # overlapping: the fifth a completes "aaaa" (which ended at the fourth)
    ("", "aaa", 0),  # too short for any 4-gram
    ("abcd", "abcd", 1),  # the copy's last token completes the prompt's "abcd"
    ("abcdx", "bcd", 0),  # "xbcd" straddles the boundary and is new
    ("xabc", "d", 0),  # "abcd" is new
    ("abcdab", "cd", 1),  # "abcd" again, straddling the boundary: the "d" repeats, "c" ends "dabc" (new)
    ("abcd", "", 0),
    ("abcdabcd", "e", 0),  # a repeat inside the prompt is not counted
]


@pytest.mark.parametrize("prompt,output,expected", CASES)
def test_repeated_count_by_hand(prompt, output, expected):
    assert repeated_count(ids(prompt), ids(output)) == expected


def test_share_divides_by_output_tokens_only():
    assert repeated_share(ids("abcd"), ids("abcd")) == pytest.approx(1 / 4)
    assert repeated_share(ids("abcdabcd"), ids("abcdabcd")) == 1.0  # each token completes a prompt 4-gram (not 8/16)
    assert repeated_share([], []) == 0.0


def test_share_of_a_long_loop_is_high_and_of_new_text_is_zero():
    loop = ids("thecatsat" * 6)
    r = measure([], loop)
    # the first pass (9 tokens) and the first three of the second are new: 54 - 12 = 42 repeat
    assert (r.tokens, r.repeated) == (54, 42)
    assert r.share == pytest.approx(42 / 54)
    assert r.high
    assert not measure([], ids("abcdefghij")).high
    assert measure([], ids("abcdefghij")).share == 0.0


def test_other_n():
    assert repeated_count([], ids("abab"), n=2) == 1  # the second "b" completes "ab"
    assert repeated_count([], ids("abab"), n=3) == 0
    assert repeated_count([], ids("aab"), n=1) == 1  # unigram: the second a
    with pytest.raises(ValueError):
        repeated_count([], [1], n=0)


@pytest.mark.parametrize(
    "output,expected",
    [
        ("", 1.0),
        ("a", 1.0),
        ("ab", 1.0),
        ("abab", 2 / 3),  # ab, ba, ab -> 2 distinct of 3
        ("aaaa", 1 / 3),
        ("abcabc", 3 / 5),  # ab bc ca ab bc
    ],
)
def test_distinct_2_by_hand(output, expected):
    assert distinct_n(ids(output)) == pytest.approx(expected)


def test_measure_gathers_both():
    r = measure(ids("xy"), ids("abab"))
    assert r == repetition.Repetition(tokens=4, repeated=0, share=0.0, distinct2=pytest.approx(2 / 3))
    assert not r.high
    assert not measure([], []).high  # no tokens is never "high"


def test_high_threshold_is_inclusive():
    # 2 of 4 tokens repeat: share exactly HIGH_SHARE
    assert HIGH_SHARE == 0.5
    r = measure(ids("abcd"), ids("xabcd"))  # only the last token completes an earlier "abcd"
    assert (r.repeated, r.high) == (1, False)
    r = measure(ids("aaaa"), ids("aaxy"))
    assert (r.tokens, r.repeated, r.high) == (4, 2, True)


def brute_force(prompt, output, n=4):
    """The definition, literally: output token j repeats iff seq[j-n+1 : j+1] occurs at some start s < j - n + 1."""
    seq = list(prompt) + list(output)
    count = 0
    for j in range(len(prompt), len(seq)):
        if j - n + 1 < 0:
            continue
        gram = seq[j - n + 1 : j + 1]
        if any(seq[s : s + n] == gram for s in range(0, j - n + 1)):
            count += 1
    return count


def test_matches_the_definition_on_random_lists():
    rng = random.Random(7)
    for _ in range(300):
        vocab = rng.choice([2, 3, 5])
        prompt = [rng.randrange(vocab) for _ in range(rng.randrange(0, 12))]
        output = [rng.randrange(vocab) for _ in range(rng.randrange(0, 30))]
        for n in (1, 2, 4):
            assert repeated_count(prompt, output, n) == brute_force(prompt, output, n), (prompt, output, n)


# ---------------------------------------------------------------- mutants


def _counts_the_current_gram(prompt, output, n=4):
    """Adds the n-gram before looking it up: every completed n-gram 'repeats'."""
    seq = [*prompt, *output]
    seen, count = set(), 0
    for end in range(n - 1, len(seq)):
        gram = tuple(seq[end - n + 1 : end + 1])
        seen.add(gram)
        if end >= len(prompt) and gram in seen:
            count += 1
    return count


def _ignores_the_prompt(prompt, output, n=4):
    return brute_force([], output, n)


def _drops_boundary_grams(prompt, output, n=4):
    """Only n-grams wholly inside the output can repeat."""
    seq = [*prompt, *output]
    count = 0
    for end in range(len(prompt), len(seq)):
        if end - n + 1 < len(prompt):
            continue
        gram = seq[end - n + 1 : end + 1]
        if any(seq[s : s + n] == gram for s in range(0, end - n + 1)):
            count += 1
    return count


def _no_overlap(prompt, output, n=4):
    """Requires the earlier occurrence to end before this n-gram starts."""
    seq = [*prompt, *output]
    count = 0
    for end in range(len(prompt), len(seq)):
        start = end - n + 1
        if start < 0:
            continue
        gram = seq[start : end + 1]
        if any(seq[s : s + n] == gram for s in range(0, start - n + 1)):
            count += 1
    return count


@pytest.mark.parametrize("mutant", [_counts_the_current_gram, _ignores_the_prompt, _drops_boundary_grams, _no_overlap])
def test_mutants_fail_a_hand_built_case(mutant):
    assert any(mutant(ids(p), ids(o)) != expected for p, o, expected in CASES), mutant.__name__


def test_distinct_mutant_over_whole_sequence_fails():
    """Counting unigrams instead of bigrams (n - 1) would give "abab" 2/4, not 2/3."""
    assert distinct_n(ids("abab"), 1) != pytest.approx(2 / 3)
