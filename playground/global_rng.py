"""torch's one global random generator, for the code that cannot be given a generator of its own.

Our loop, the lab and the drafters draw from ``torch.Generator`` objects of their own, so a
seed gives the same run whatever else the process does.  Two things can only use the global
generator: building the built-in tiny models (module constructors initialise their weights
from it) and transformers' ``generate()`` when it samples (it takes no generator).  Both hold
``seeded`` for as long as they draw, so neither draws from the other's stream, and the global
state is put back afterwards.  Nothing else in the process may seed or read it.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import torch

_LOCK = threading.Lock()


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """The global generator, seeded with ``seed``, held by this thread until the block ends."""
    with _LOCK:
        state = torch.random.get_rng_state()
        try:
            torch.manual_seed(seed)
            yield
        finally:
            torch.random.set_rng_state(state)
