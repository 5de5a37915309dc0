"""``to_dict`` of the trace records: what ``dataclasses.asdict`` gives, and a copy."""

from __future__ import annotations

from dataclasses import asdict, replace

import pytest

from playground.decoding.records import GenerationResult
from tests import synthetic as syn


def _steps():
    steps = syn.spec_steps()
    # drafter_info is the one field whose values are the drafter's own: nested containers included
    info = {"chain": [3, 1], "scores": {"a": 0.5, "b": None}, "pair": (1, 2.5), "stopped": True}
    return [*steps, replace(steps[0], index=9, drafter_info=info)]


@pytest.mark.parametrize("i", range(len(_steps())))
def test_a_step_is_what_asdict_gives(i):
    step = _steps()[i]
    assert step.to_dict() == asdict(step)  # tuples stay tuples: (1,) != [1]


def test_the_stats_and_the_result_too():
    result = syn.result(_steps())
    assert result.stats.to_dict() == asdict(result.stats)
    data = result.to_dict()
    assert data["steps"] == [asdict(s) for s in result.steps]
    assert GenerationResult.from_dict(data) == result


def test_containers_are_copies():
    step = _steps()[-1]
    data = step.to_dict()
    data["drafter_info"]["chain"].append(7)
    data["drafter_info"]["scores"]["a"] = 1.0
    assert step.drafter_info == {"chain": [3, 1], "scores": {"a": 0.5, "b": None}, "pair": (1, 2.5), "stopped": True}
