"""``python -m tools {bench,batch-sweep,loadtest,check-space,train-drafter} ...``.

Each command has its own parser and is imported only when chosen (each brings its own stack:
the load test's HTTP client, the bench's reports, the training code).  Failures are one line
on stderr, as in ``python -m playground`` (``SPECPLAY_DEBUG=1`` re-raises).
"""

from __future__ import annotations

import importlib
import os
import sys

COMMANDS = {  # command -> module with a ``main(argv)``
    "bench": "tools.bench",
    "batch-sweep": "tools.batch_sweep",
    "loadtest": "tools.loadtest",
    "check-space": "tools.space_check",
    "train-drafter": "tools.training.train_drafter",
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in COMMANDS:
        sys.stderr.write(f"usage: python -m tools {{{','.join(COMMANDS)}}} ...\n")
        return 2
    try:
        return importlib.import_module(COMMANDS[argv[0]]).main(argv[1:])
    except KeyboardInterrupt:
        sys.stderr.write("\ninterrupted\n")
        return 130
    except Exception as exc:
        if os.environ.get("SPECPLAY_DEBUG"):
            raise
        message = " ".join(str(exc).split()) or "(no message)"
        sys.stderr.write(f"error: the run failed: {type(exc).__name__}: {message}\n")
        return 1
