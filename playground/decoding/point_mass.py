"""Point masses: one-hot rows, and ``PointRows``, [n, V] of them made only when read whole.

Greedy target rows and deterministic drafts (argmax, copied, tree children) are point
masses.  This module only builds them (torch alone, so the verification rules can use it
without the sampling code); it does not sample or verify.
"""

from __future__ import annotations

import torch


def one_hot(token_ids: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Point masses: token_ids [...] -> [..., V] float32."""
    out = torch.zeros(*token_ids.shape, vocab_size, dtype=torch.float32, device=token_ids.device)
    return out.scatter_(-1, token_ids.unsqueeze(-1), 1.0)


class PointRows:
    """[n, V] rows of point masses (one-hot on ``ids[i]``), made only when read whole.

    ``rows[i, t]`` is the probability of t in row i (1.0 or 0.0); ``rows[i]`` is the
    one-hot [V] float32 row, exactly ``one_hot(ids[i], V)``.  Greedy target rows and
    deterministic drafts are point masses: a step reads one or two rows whole (a
    residual, a draw), so this saves filling n x V floats (17 x 262k at γ = 16)."""

    def __init__(self, ids: list[int], vocab_size: int) -> None:
        self.ids = [int(i) for i in ids]
        self.vocab_size = int(vocab_size)
        self.shape = (len(self.ids), self.vocab_size)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, index):
        if isinstance(index, tuple):
            i, token = index
            return 1.0 if self.ids[i] == int(token) else 0.0
        return one_hot(torch.tensor(self.ids[index], dtype=torch.long), self.vocab_size)  # [V]
