"""A second tokenizer for the tiny-random pair: the tiny drafter re-indexed for UTF-8 bytes.

``ByteTokenizer`` has 259 ids: the 256 byte values, then <bos> <eos> <pad>; the tiny
target's ``CharTokenizer`` has 100 (printable ASCII + newline, then <pad> <bos> <eos>
<unk>).  Same text, different ids and vocabulary sizes, so a drafter using it must go
through text to draft for the target (``drafters.other_tokenizer``).

``build_byte_drafter(drafter)`` copies the tiny char drafter into a model over the byte
vocabulary: each character's embedding and LM-head rows move from its char id to its byte
id (specials to theirs); bytes no character uses get zero rows (logit 0, far below the
drafter's scaled-up peaks).  Its argmax is therefore the char drafter's, spelt in bytes:
the pair agrees as often as tiny-random's two-model pair.  Knows no language; for tests
and fast statistics.  This module does not download anything.
"""

from __future__ import annotations

import torch
from transformers import LlamaForCausalLM

from playground.models.tiny import BOS as CHAR_BOS
from playground.models.tiny import CHARS, TinyTokenizer
from playground.models.tiny import EOS as CHAR_EOS
from playground.models.tiny import PAD as CHAR_PAD

BOS, EOS, PAD = 256, 257, 258
VOCAB = 259
SPECIALS = {BOS: "<bos>", EOS: "<eos>", PAD: "<pad>"}


class ByteTokenizer(TinyTokenizer):
    """UTF-8 bytes as tokens plus <bos>/<eos>/<pad>; the slice of the HF tokenizer interface
    the playground uses (encode/decode/__call__/convert_ids_to_tokens)."""

    bos_token_id = BOS
    eos_token_id = EOS
    pad_token_id = PAD
    unk_token_id = None
    vocab_size = VOCAB
    name_or_path = "tiny-random-bytes"
    all_special_ids = [BOS, EOS, PAD]

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        ids = list(text.encode("utf-8"))
        return ([BOS] + ids) if add_special_tokens else ids

    def decode(self, ids, skip_special_tokens: bool = False, **_: object) -> str:
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        out, run = [], bytearray()
        for i in (int(x) for x in ids):
            if i < 256:
                run.append(i)
                continue
            out.append(run.decode("utf-8", errors="replace"))
            run = bytearray()
            if not skip_special_tokens:
                out.append(SPECIALS.get(i, f"<{i}>"))
        out.append(run.decode("utf-8", errors="replace"))
        return "".join(out)

    def convert_ids_to_tokens(self, i: int) -> str:
        i = int(i)
        return SPECIALS.get(i, f"<0x{i:02X}>") if i >= 128 or i < 32 else chr(i)


def byte_id_of_char_id() -> dict[int, int]:
    """{char tokenizer id: byte tokenizer id} for every id both can spell (not <unk>)."""
    mapping = {i: ord(ch) for i, ch in enumerate(CHARS)}
    mapping.update({CHAR_BOS: BOS, CHAR_EOS: EOS, CHAR_PAD: PAD})
    return mapping


@torch.no_grad()
def build_byte_drafter(char_drafter) -> LlamaForCausalLM:
    """The char drafter over the byte vocabulary (a new model; the char drafter is untouched)."""
    cfg = char_drafter.config.__class__.from_dict(char_drafter.config.to_dict())
    cfg.vocab_size, cfg.bos_token_id, cfg.eos_token_id, cfg.pad_token_id = VOCAB, BOS, EOS, PAD
    model = LlamaForCausalLM(cfg).to(char_drafter.dtype)
    src = char_drafter.state_dict()
    own = model.state_dict()
    for name, tensor in own.items():
        if name in ("model.embed_tokens.weight", "lm_head.weight"):
            tensor.zero_()
            for char_id, byte_id in byte_id_of_char_id().items():
                tensor[byte_id] = src[name][char_id]
        else:
            tensor.copy_(src[name])
    model.eval()
    model.generation_config.eos_token_id = EOS
    model.generation_config.pad_token_id = PAD
    model.generation_config.bos_token_id = BOS
    return model
