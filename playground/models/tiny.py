"""The ``tiny-random`` model pair: built in-process, no files, loads in well under a second.

A character tokenizer (newline, printable ASCII, <pad> <bos> <eos> <unk>: 100 tokens) and two small Llama
models with fixed seeds.  The drafter is a one-layer copy of the target's
first layer plus seeded noise, and the output heads are scaled up, so both
distributions are peaked and the models agree often but not always — every
path of the verifier (accept, reject + resample, bonus) runs within a few
steps.  These models know no language; they exist for tests and for fast
statistics in the classroom lab.  This module does not download anything.
"""

from __future__ import annotations

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from playground import global_rng

CHARS = "\n" + "".join(chr(c) for c in range(32, 127))  # newline + printable ASCII
PAD, BOS, EOS, UNK = len(CHARS), len(CHARS) + 1, len(CHARS) + 2, len(CHARS) + 3
VOCAB = len(CHARS) + 4  # 100
SPECIALS = {PAD: "<pad>", BOS: "<bos>", EOS: "<eos>", UNK: "<unk>"}
_INDEX = {ch: i for i, ch in enumerate(CHARS)}


class TinyTokenizer:
    """What every tiny tokenizer shares: ``len()`` is ``vocab_size``, and calling it returns
    input ids (a [1, n] tensor with an attention mask for ``return_tensors="pt"``), as a
    transformers tokenizer does.  Subclasses give ``vocab_size`` and ``encode``."""

    vocab_size: int

    def __len__(self) -> int:
        return self.vocab_size

    def __call__(self, text: str, add_special_tokens: bool = True, return_tensors=None):
        ids = self.encode(text, add_special_tokens)
        if return_tensors == "pt":
            return {"input_ids": torch.tensor([ids]), "attention_mask": torch.ones(1, len(ids), dtype=torch.long)}
        return {"input_ids": ids}


class CharTokenizer(TinyTokenizer):
    """One token per printable ASCII character (others become <unk>); the HF tokenizer
    interface the playground uses: encode/decode/__call__/convert_ids_to_tokens."""

    pad_token_id = PAD
    bos_token_id = BOS
    eos_token_id = EOS
    unk_token_id = UNK
    vocab_size = VOCAB
    name_or_path = "tiny-random-chars"
    all_special_ids = [PAD, BOS, EOS, UNK]

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        ids = [_INDEX.get(ch, UNK) for ch in text]
        return ([BOS] + ids) if add_special_tokens else ids

    def decode(self, ids, skip_special_tokens: bool = False, **_: object) -> str:
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        out = []
        for i in ids:
            i = int(i)
            if i < len(CHARS):
                out.append(CHARS[i])
            elif not skip_special_tokens:
                out.append(SPECIALS.get(i, f"<{i}>"))
        return "".join(out)

    def convert_ids_to_tokens(self, i: int) -> str:
        return self.decode([i])


def tiny_config(num_layers: int, seed_name: str = "") -> LlamaConfig:
    return LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        bos_token_id=BOS,
        eos_token_id=EOS,
        pad_token_id=PAD,
        tie_word_embeddings=False,
        attn_implementation="eager",
    )


def build_tiny_pair(
    dtype: torch.dtype = torch.float32, head_scale: float = 20.0, noise: float = 0.35, drafter_layers: int = 2
):
    """Return (target, drafter, tokenizer), deterministic for given arguments."""
    # module constructors initialise weights from the global generator (playground.global_rng)
    with global_rng.seeded(1234):
        target = LlamaForCausalLM(tiny_config(2))
    with torch.no_grad():
        target.lm_head.weight.mul_(head_scale)
    with global_rng.seeded(5678):
        drafter = LlamaForCausalLM(tiny_config(drafter_layers))
    with torch.no_grad():
        sd = target.state_dict()
        own = drafter.state_dict()
        for name, tensor in own.items():
            src = sd.get(name)
            if src is not None and src.shape == tensor.shape:
                tensor.copy_(src)
        gen = torch.Generator().manual_seed(91011)
        for name, tensor in own.items():
            if tensor.ndim == 2 and "embed" not in name:
                tensor.add_(torch.randn(tensor.shape, generator=gen) * noise * tensor.std())
    target = target.to(dtype).eval()
    drafter = drafter.to(dtype).eval()
    for m in (target, drafter):
        m.generation_config.eos_token_id = EOS
        m.generation_config.pad_token_id = PAD
        m.generation_config.bos_token_id = BOS
    return target, drafter, CharTokenizer()
