"""The decoding core: one lossless speculative decoder and the records it writes.

``engine`` runs the loop (chain and tree steps, the autoregressive baseline); ``sampling``,
``block_verify``, ``rows``, ``tree*`` and ``draft_stop`` are the math it calls; ``target`` drives
the target model one pass at a time; ``records`` and ``tally`` are what a run leaves behind.
This package does not load models (``playground.models``), does not build drafters
(``playground.drafters``) and does not know about the UI.
"""
