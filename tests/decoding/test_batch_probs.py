"""batch_probs.read_rows: every run's rows, read with the others', equal what the run
computes alone (rows.target_rows, rows.top, confidence.top_probs), bit for bit."""

from __future__ import annotations

import pytest
import torch

from playground.decoding.batch_probs import ReadSpec, read_rows
from playground.decoding.confidence import top_probs
from playground.decoding.rows import PointRows, target_rows
from playground.decoding.sampling import SamplingParams
from playground.decoding.top_n import top_entries

V = 262_144  # Gemma 3's vocabulary: the size where a sum or a top-k could be split across threads

GREEDY = SamplingParams(0.0)
WARM = SamplingParams(0.7)
TOP_K = SamplingParams(1.0, top_k=40)
PLAIN = SamplingParams(1.0)
TOP_P = SamplingParams(0.9, top_p=0.8)


def _logits(keep: int, seed: int, dtype=torch.bfloat16) -> torch.Tensor:  # [keep, V]
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(keep, V, generator=g) * 4
    x[:, seed % 7] += 12  # a confident row, as most of a model's are
    return x.to(dtype)


def _alone_top(probs: torch.Tensor, n: int) -> tuple[list[float], list[int]]:
    return top_entries(probs, n)  # what rows.top computes for one row


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_each_run_reads_what_it_would_alone(dtype):
    # Runs of a class: different settings, chains of 1-4 rows, some without a trace.
    specs = [
        ReadSpec(WARM, top_n=5, confidence=True),
        ReadSpec(WARM, top_n=3, confidence=True),
        ReadSpec(GREEDY, top_n=5, confidence=True),
        ReadSpec(TOP_K, top_n=5, confidence=False),
        None,  # a run that reads its logits itself
        ReadSpec(TOP_P, top_n=0, confidence=True),
        ReadSpec(WARM, top_n=0, confidence=False),
        ReadSpec(GREEDY, top_n=0, confidence=False),
        ReadSpec(WARM, top_n=5, confidence=False),  # its top-n rows apart from the first run's
        ReadSpec(PLAIN, top_n=5, confidence=True),  # T = 1, no filter: the confidence is p's maximum
        ReadSpec(PLAIN, top_n=0, confidence=False),
        ReadSpec(TOP_K, top_n=0, confidence=True),  # T = 1 with a filter: p is not the plain softmax
    ]
    logits = [_logits(1 + b % 4, seed=b, dtype=dtype) for b in range(len(specs))]
    reads = read_rows(logits, specs)
    for b, (spec, x, got) in enumerate(zip(specs, logits, reads)):
        if spec is None:
            assert got is None
            continue
        probs, argmax = target_rows(x, spec.params)  # the run alone
        if spec.params.greedy:
            assert got.probs is None and got.argmax == argmax, b
            assert isinstance(target_rows(x, spec.params, got)[0], PointRows)
        else:
            assert torch.equal(got.probs, probs), b
            assert got.argmax is None
        if spec.top_n and not spec.params.greedy:
            assert got.top == [_alone_top(probs[i], spec.top_n) for i in range(x.shape[0])], b
        else:
            assert got.top is None
        if spec.confidence:
            assert got.confidence == top_probs(x, range(x.shape[0])), b
        else:
            assert got.confidence is None


@pytest.mark.parametrize("params", [WARM, TOP_K, TOP_P, GREEDY])
@pytest.mark.parametrize("batch", [1, 2, 30])
def test_a_row_does_not_depend_on_the_rows_beside_it(params, batch):
    spec = ReadSpec(params, top_n=5, confidence=True)
    logits = [_logits(1, seed=100 + b) for b in range(batch)]
    together = read_rows(logits, [spec] * batch)
    for b in range(batch):
        alone = read_rows([logits[b]], [spec])[0]
        assert together[b].argmax == alone.argmax
        assert together[b].top == alone.top and together[b].confidence == alone.confidence
        if not params.greedy:
            assert torch.equal(together[b].probs, alone.probs)


MIN_P = SamplingParams(1.3, min_p=0.05)


@pytest.mark.parametrize("params", [WARM, TOP_K, TOP_P, MIN_P, GREEDY])
def test_a_read_on_one_core_equals_the_run_alone(params):
    """The scheduler's worker reads on one core (``threads.on_one_core``); a run alone reads
    its rows with every core.  Each row is reduced by one thread either way: the same bits."""
    from playground import threads

    specs = [ReadSpec(params, top_n=5, confidence=True)] * 3
    logits = [_logits(k, seed=20 + k) for k in (1, 2, 4)]
    with threads.on_one_core():
        assert torch.get_num_threads() == 1 or not threads.available()
        reads = read_rows(logits, specs)
    for x, got in zip(logits, reads):
        probs, argmax = target_rows(x, params)  # every core
        assert got.argmax == argmax and (params.greedy or torch.equal(got.probs, probs))
        assert got.confidence == top_probs(x, range(x.shape[0]))
        if not params.greedy:
            assert got.top == [_alone_top(probs[i], 5) for i in range(x.shape[0])]


def test_runs_at_different_temperatures_keep_their_own():
    # Mutant guard: one row's logits read at T = 0.5 and at T = 1.5 in one call must
    # differ, as each run's own reading would (a worker that used one run's settings for
    # every row would give both the same rows).
    x = _logits(1, seed=3, dtype=torch.float32)
    cold, hot = read_rows([x, x], [ReadSpec(SamplingParams(0.5)), ReadSpec(SamplingParams(1.5))])
    assert torch.equal(cold.probs, target_rows(x, SamplingParams(0.5))[0])
    assert torch.equal(hot.probs, target_rows(x, SamplingParams(1.5))[0])
    assert cold.probs.max() > hot.probs.max()


def test_top_of_answers_only_rows_it_read():
    x = _logits(2, seed=5)
    (got,) = read_rows([x], [ReadSpec(WARM, top_n=2)])
    assert got.top_of(1) == _alone_top(target_rows(x, WARM)[0][1], 2)
    assert got.top_of(2) is None and got.top_of(-1) is None


def test_specs_and_logits_must_pair_up():
    with pytest.raises(ValueError, match="specs"):
        read_rows([_logits(1, seed=0)], [])
