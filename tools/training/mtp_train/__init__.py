"""The stages of training the MTP drafter head; ``tools.training.train_drafter`` runs them in order.

``paths`` (prompts, default output and work cache), ``gen`` (the target writes its training
text), ``features`` (one prefill per sequence caches what the drafter sees), ``vocab`` (the
candidate vocabulary and token clusters), ``batches`` (training batches and each chain's
candidate set), ``loss``, ``train`` (the optimisation loop and its checkpoints), ``evaluate``
(acceptance on held-out text), ``bench`` (the decoding loop with the exported head) and
``card`` (MODEL_CARD.md).  Nothing here runs in the app.
"""
