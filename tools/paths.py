"""Where the tools find the engine's data and weights (paths only, no I/O)."""

from __future__ import annotations

from pathlib import Path

import playground

PLAYGROUND = Path(playground.__file__).resolve().parent  # the ``playground`` package directory
ROOT = PLAYGROUND.parent  # the repository
DATA = PLAYGROUND / "data"  # prompt sets (training, held-out, bench) and committed measurements
WEIGHTS = PLAYGROUND / "weights"  # the shipped drafter heads
