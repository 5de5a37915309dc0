"""Token text across multi-byte characters split over several tokens."""

import pytest

from playground.decoding.text import REPLACEMENT, IncrementalText, TokenTexts
from tests.fakes import ByteTokenizer

SAMPLES = ["北京是中国的首都", "emoji 🎉🚀 ok", "naïve café", "plain ascii"]


@pytest.mark.parametrize("text", SAMPLES)
def test_incremental_text_never_emits_broken_characters(text):
    tok = ByteTokenizer()
    inc = IncrementalText(tok)
    pieces = [inc.extend([b]) for b in tok.encode(text)]  # one byte token at a time
    assert all(REPLACEMENT not in p for p in pieces)
    assert "".join(pieces) == text == inc.text


def test_incomplete_tail_is_held_back():
    tok = ByteTokenizer()
    inc = IncrementalText(tok)
    b = "中".encode()  # 3 bytes
    assert inc.extend([b[0]]) == "" and inc.extend([b[1]]) == ""
    assert inc.extend([b[2]]) == "中"


def test_token_texts_show_bytes_for_partial_characters():
    tok = ByteTokenizer()
    texts = TokenTexts(tok)
    b = list("é".encode())
    assert texts.solo(b[0]) == "<0xC3>"  # alone it is half a character: show the byte
    assert texts.in_context([b[0]], b[1]) == "é"  # the token that completes a character shows it
    assert texts.in_context(tok.encode("ab"), ord("c")) == "c"
