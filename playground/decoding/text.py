"""Token text that survives multi-byte characters split across tokens.

Byte-level and byte-fallback tokenizers can split one character (a Chinese
character, an emoji) over several tokens; decoding one such token alone gives
U+FFFD.  ``IncrementalText`` only ever releases text that is complete, and
``TokenTexts`` gives each token a display string: its text in context, or a
visible byte form (``<0xE4>``) while the character is still incomplete.
``token_label`` is the visible plain form the lab's messages quote a token in.

This module does not tokenize prompts or render HTML.
"""

from __future__ import annotations

from functools import lru_cache

REPLACEMENT = "\ufffd"


def token_label(text: str) -> str:
    """A visible form of a token's text (spaces and newlines shown)."""
    return text.replace("\n", "⏎").replace("\t", "⇥").replace(" ", "␣") or "∅"


class TokenTexts:
    """Display strings for single tokens, optionally in context."""

    def __init__(self, tokenizer, context: int = 4) -> None:
        self.tokenizer = tokenizer
        self.context = context
        self._solo = lru_cache(maxsize=65536)(self._solo_uncached)

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def _solo_uncached(self, token_id: int) -> str:
        text = self._decode([token_id])
        if REPLACEMENT in text or text == "":
            raw = self.tokenizer.convert_ids_to_tokens(token_id)
            return raw if isinstance(raw, str) else str(raw)
        return text

    def solo(self, token_id: int) -> str:
        """Text of a token on its own (cached), e.g. for top-k candidate lists."""
        return self._solo(int(token_id))

    def in_context(self, previous: list[int], token_id: int) -> str:
        """Text the token adds after ``previous`` (leading spaces kept)."""
        ctx = previous[-self.context :]
        if not ctx:
            return self.solo(token_id)
        before = self._decode(ctx).rstrip(REPLACEMENT)  # an incomplete char completes here
        after = self._decode(ctx + [token_id])
        if after.startswith(before) and REPLACEMENT not in after[len(before) :]:
            piece = after[len(before) :]
            return piece if piece else self.solo(token_id)
        return self.solo(token_id)


class IncrementalText:
    """Committed text, released only when complete (never a trailing U+FFFD)."""

    def __init__(self, tokenizer, skip_special_tokens: bool = True) -> None:
        self.tokenizer = tokenizer
        self.skip = skip_special_tokens
        self.ids: list[int] = []
        self.text = ""

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=self.skip, clean_up_tokenization_spaces=False)

    def extend(self, new_ids: list[int]) -> str:
        """Add tokens; return the newly completed text (may be empty)."""
        self.ids.extend(int(i) for i in new_ids)
        full = self._decode(self.ids)
        stable = full.rstrip(REPLACEMENT)
        if not stable.startswith(self.text):  # tokenizer re-normalised earlier text
            delta = stable
            self.text = stable
            return delta
        delta = stable[len(self.text) :]
        self.text = stable
        return delta

    def finish(self) -> str:
        """All text, including any incomplete tail (shown as U+FFFD by the tokenizer)."""
        return self._decode(self.ids)
