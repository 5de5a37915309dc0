"""Shared test setup.

Tiny models run fastest on one thread (and the CI machine has two cores), so
tests default to one torch thread; tests on the real packaged models raise it
with the ``all_threads`` fixture.  ``server`` and ``tiny_default`` (the app
launched in-process on tiny-random, module-scoped) come from ``tests/app_server.py``.
"""

import os

import pytest
import torch

torch.set_num_threads(1)
os.environ.setdefault("SPECPLAY_THREADS", "1")  # load_pair() would otherwise use every core
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # tests never download weights
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# After the environment above: importing it loads playground (and transformers).
from tests.app_server import server, tiny_default  # noqa: F401  (fixtures for every test module)


@pytest.fixture
def all_threads():
    before = torch.get_num_threads()
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover
        n = os.cpu_count() or 1
    torch.set_num_threads(n)
    yield n
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny_pair():
    from playground.tiny import build_tiny_pair

    return build_tiny_pair()
