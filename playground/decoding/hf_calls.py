"""Small helpers for calling transformers models, shared by the loop, the drafters, the lab
and the bench (a module below all of them, so imports flow one way).

This module holds no state and loads no model.
"""

from __future__ import annotations

import torch
from transformers.utils import logging as hf_logging


def logits_to_keep_arg(n_tokens: int, keep: int, device=None):
    """The ``logits_to_keep`` argument for keeping the last ``keep`` of ``n_tokens`` rows.

    Keeping fewer rows than the pass computes (a prefill): give the rows as positions,
    not a count.  transformers then gathers them into a contiguous tensor; a count
    slices a strided view, for which torch.matmul copies the whole transposed LM head
    (262k x 640 for Gemma 3) in bfloat16: 1-7 s per prefill on this CPU instead of
    ~0.1 s.  Same rows, same logits.
    """
    if keep >= n_tokens:
        return keep
    return torch.arange(n_tokens - keep, n_tokens, device=device)


class quiet_warnings:
    """Silence transformers' warnings (deprecation chatter of assisted generation) for a block."""

    def __enter__(self):

        self._level = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()
        return self

    def __exit__(self, *exc):

        hf_logging.set_verbosity(self._level)
