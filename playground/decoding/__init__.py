"""The decoding core: one lossless speculative decoder and the records it writes.

``engine`` runs the loop (chain steps, the autoregressive baseline) and ``tree_step`` the tree
step, both over a ``step.LoopState``; ``draft`` is the protocol drafters implement;
``sampling``, ``block_verify``, ``rows``, ``tree``, ``tree_grow``, ``tree_pass`` and
``draft_stop`` are the math they call; ``target`` (with ``batch_pass`` and ``hf_calls``) drives
the target model one pass at a time; ``records``, ``tally``, ``text`` and ``confidence`` are
what a run leaves behind.  This package does not load models (``playground.models``), build
drafters (``playground.drafters``) or know about the UI; it reads a run's ``RunSettings``.
"""
