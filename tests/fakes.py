"""Table-driven fake causal LMs: the next-token logits depend only on the current token.

``BigramLM(table)``: table[t] is the logits row after token t ([V, V]).  It
speaks the slice of the transformers interface the engine uses (``config``,
``device``, ``__call__(input_ids, cache, logits_to_keep, output_hidden_states)``)
and really writes one entry per token into the DynamicCache it is given, so
cache lengths and rollbacks are checked for real.

``bigram_table(next_of, V)``: a greedy table; ``disagreeing_tables()``: the target's and
a related but clearly different drafter's random tables (V = ``TABLE_V``) of the
statistical tests.  ``LetterTokenizer``: id i is the letter chr(65 + i % 26);
``ByteTokenizer``: UTF-8 bytes as tokens.
"""

from types import SimpleNamespace

import torch
from transformers import LlamaConfig


class BigramLM(torch.nn.Module):
    def __init__(self, table: torch.Tensor, eos_token_id: int | None = None):
        super().__init__()
        self.table = table.float()  # [V, V]
        V = table.shape[0]
        self.config = LlamaConfig(
            vocab_size=V,
            num_hidden_layers=1,
            hidden_size=8,
            num_attention_heads=1,
            num_key_value_heads=1,
            intermediate_size=8,
        )
        self.device = torch.device("cpu")
        self.generation_config = SimpleNamespace(eos_token_id=eos_token_id)
        self.calls = []  # number of input tokens per call

    def forward(self, input_ids, cache=None, use_cache=True, logits_to_keep=0, output_hidden_states=False, **_):
        ids = input_ids[0]
        n = ids.shape[0]
        self.calls.append(n)
        if cache is not None:
            pos = cache.get_seq_length() + torch.arange(n, dtype=torch.float32)
            kv = pos.view(1, 1, n, 1)  # the "key" of a token is its position: easy to check
            cache.update(kv, kv.clone(), 0)
        logits = self.table[ids][None]  # [1, n, V]
        if logits_to_keep:
            logits = logits[:, -logits_to_keep:]
        hidden = torch.nn.functional.one_hot(ids, self.table.shape[0]).float()[None]
        return SimpleNamespace(logits=logits, hidden_states=(hidden,) if output_hidden_states else None)


def bigram_table(next_of: dict[int, int], V: int, peak: float = 30.0) -> torch.Tensor:
    """Greedy bigram: after token t the argmax is next_of[t] (default: t+1 mod V)."""
    table = torch.zeros(V, V)
    for t in range(V):
        table[t, next_of.get(t, (t + 1) % V)] = peak
    return table


TABLE_V = 6  # the vocabulary of disagreeing_tables()


def disagreeing_tables(V: int = TABLE_V):
    """(target, drafter) logit tables [V, V]: the drafter's is the target's plus noise."""
    g = torch.Generator().manual_seed(7)
    target = torch.randn(V, V, generator=g) * 1.5
    drafter = target + torch.randn(V, V, generator=g) * 1.5  # related but clearly different
    return target, drafter


class LetterTokenizer:
    """Id i reads as the letter chr(65 + i % 26): A, B, C, ..."""

    def decode(self, ids, **_):
        return "".join(chr(65 + int(i) % 26) for i in ids)

    def convert_ids_to_tokens(self, i):
        return chr(65 + int(i) % 26)


class ByteTokenizer:
    """UTF-8 bytes as tokens (ids 0..255): splits every non-ASCII character."""

    def decode(self, ids, skip_special_tokens=False, **_):
        return bytes(int(i) for i in ids).decode("utf-8", errors="replace")

    def convert_ids_to_tokens(self, i):
        return f"<0x{int(i):02X}>"

    def encode(self, text):
        return list(text.encode("utf-8"))
