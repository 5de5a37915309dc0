"""Training drafters offline: the MTP head and the early exit's adapters, with their eval data.

``train_drafter`` is the command line; ``mtp_train/`` holds its stages; ``mtp_corpus``,
``mtp_clusters`` and ``mtp_eval`` are the corpus, the token clusters and the held-out eval;
``exit_train`` / ``exit_scan`` train and choose early exits.  Nothing here runs in the app: the
drafters read only the files this package writes (``playground/weights/``).
"""
