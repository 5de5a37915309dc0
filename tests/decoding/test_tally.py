"""One count of acceptance: the stats the loop builds as it runs equal the stats the lab
rebuilds from the same run's step records (``partial_result``), chain and tree."""

from __future__ import annotations

import pytest

from playground.decoding.engine import stream
from playground.decoding.records import GenerationResult
from playground.drafters.prompt_lookup import PromptLookupDrafter
from playground.lab.runs import partial_result
from playground.models.tiny import CharTokenizer
from playground.settings import RunSettings
from tests.tiny_models import sliding_pair

COUNTS = (
    "new_tokens",
    "steps",
    "target_calls",
    "drafted_tokens",
    "judged_tokens",
    "accepted_tokens",
    "acceptance_rate",
    "draft_efficiency",
    "acceptance_by_position",
    "accepted_length_hist",
    "mean_accepted_length",
    "tokens_per_target_call",
    "draft_ms",
    "verify_ms",
)


@pytest.mark.parametrize("nodes", [1, 8])
@pytest.mark.parametrize("gamma", [2, 4])
def test_records_rebuild_the_loops_counts(gamma, nodes):
    target, _ = sliding_pair(window=4)
    tok = CharTokenizer()
    prompt = "abcabcabd abcabx abcab"
    ids = tok.encode(prompt)
    config = RunSettings(gamma=gamma, max_new_tokens=30, tree_nodes=nodes)
    items = list(stream(target, tok, ids, config, drafter=PromptLookupDrafter()))
    result = items[-1]
    assert isinstance(result, GenerationResult)
    rebuilt = partial_result(prompt, ids, result.steps, mode="speculative", gamma=gamma, stopped=result.stats.stopped)
    assert result.stats.judged_tokens > result.stats.accepted_tokens > 0  # some drafts were rejected
    if nodes > 1:  # tree steps draft more nodes than their depth
        assert any(len(s.drafted) > gamma for s in result.steps)
    for name in COUNTS:
        a, b = getattr(result.stats, name), getattr(rebuilt.stats, name)
        assert a == pytest.approx(b), name
