"""Shared test setup.

Tiny models run fastest on one thread (and the CI machine has two cores), so
tests default to one torch thread; tests on the real packaged models raise it
with the ``all_threads`` fixture (to this worker's share of the cores: pytest.ini runs the
suite on every core with pytest-xdist), tests of the thread settings with ``every_core``.
``server`` and ``tiny_default`` (the app launched in-process on tiny-random, module-scoped)
come from ``tests/app_server.py``; ``gemma_fp32`` is the packaged Gemma 3 270M in float32,
loaded once for every real-model test on a worker (pytest.ini: ``--dist loadfile`` keeps a
module's tests, and so its module-scoped fixtures, on one worker).

Test modules never import from one another: what several of them use lives in a helper
module named for what it holds — ``contract`` (the checks every drafter's tests make),
``stats`` (goodness of fit, exact laws), ``tiny_models`` (tiny random transformers models),
``fakes`` (table-driven fake models, toy tokenizers), ``prompts``, ``markup`` (reading
rendered HTML), ``synthetic`` (synthetic traces) and ``app_server``.
"""

import os

import pytest
import torch

# The shared helper modules assert on behalf of the tests: rewrite their asserts as pytest
# does a test module's, so that a failure says what differed.
pytest.register_assert_rewrite("tests.contract", "tests.stats", "tests.fakes", "tests.tiny_models", "tests.laws")

torch.set_num_threads(1)
os.environ.setdefault("SPECPLAY_THREADS", "1")  # load_pair() would otherwise use every core
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # tests never download weights
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# After the environment above: importing it loads playground (and transformers).
from tests.app_server import server, tiny_default  # noqa: E402, F401  (fixtures for every test module)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover
        return os.cpu_count() or 1


def _threads(n: int):
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    yield n
    torch.set_num_threads(before)


@pytest.fixture
def all_threads():
    """This process's share of the cores: all of them, or, while pytest-xdist runs the suite on
    several workers at once, the cores divided among them (more threads than cores would make
    every worker wait on threads that are not running)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    yield from _threads(max(1, _cores() // workers))


@pytest.fixture
def every_core():
    """Every core this process may run on, however many workers share them (tests of how
    threads are spread, not of speed)."""
    yield from _threads(_cores())


@pytest.fixture(scope="session")
def tiny_pair():
    from playground.models.tiny import build_tiny_pair

    return build_tiny_pair()


@pytest.fixture(scope="session")
def gemma_fp32():
    """(model, tokenizer, eos ids) of the packaged Gemma 3 270M in float32; skipped where absent.
    Shared read-only: tests give every run its own cache."""
    from playground.models import convert

    try:
        convert.gguf_path("gemma3-270m")
    except convert.ModelUnavailable as exc:
        pytest.skip(f"packaged Gemma 3 270M not installed: {exc}")
    model, tok = convert.load_packaged("gemma3-270m", dtype=torch.float32)
    return model, tok, convert.eos_token_ids(model, tok)
