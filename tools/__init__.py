"""The tools beside the engine: they measure it, load-test it, check a Space and train drafters.

    python -m tools bench           # side-by-side speed of drafters (also the app's Benchmark tab)
    python -m tools batch-sweep     # what sharing target passes buys on this machine
    python -m tools loadtest        # a class of simulated students against a running server
    python -m tools check-space     # what Hugging Face will see when this repository is a Space
    python -m tools train-drafter   # fit the MTP head or the early-exit adapter

Each imports ``playground`` (the engine); the engine never imports these.  The app imports only
``tools.bench``, for its Benchmark tab.
"""
