"""A tree step in the app: drawn as a tree with its verdicts, the accepted path in the text,
escaped, and old chain steps unchanged."""

from __future__ import annotations

from dataclasses import replace

from playground.api import generate
from visual.replay import DRAFT, VERIFY, Frame
from visual.tokens import committed_chips, count_states, narration, step_view
from visual.tree_view import is_tree_step, tree_panel

PROMPT = "abc abd abe abc abd ab"


def tree_run(**kw):
    return generate(PROMPT, preset="tiny-random", drafter="prompt-lookup", gamma=4, tree_nodes=8, max_new_tokens=24, **kw)


def first_branching_step(result):
    for s in result.steps:
        if is_tree_step(s) and len({d.parent for d in s.drafted}) < len(s.drafted) and any(
                d.judged and not d.accepted for d in s.drafted):
            return s
    raise AssertionError("no step with siblings and a rejection")


def test_a_tree_step_is_drawn_as_a_tree_with_verdicts():
    r = tree_run()
    step = first_branching_step(r)
    html = tree_panel(step, VERIFY)
    assert html.count('class="tree"') >= 1 and html.count("tree__node") == len(step.drafted)
    assert html.count("tree__node--path") == sum(d.accepted for d in step.drafted)
    assert "rejected sibling" in html or "chip--rejected" in html
    draft_html = tree_panel(step, DRAFT)
    assert "chip--drafted" in draft_html and "chip--rejected" not in draft_html
    words = narration(step, VERIFY)
    assert "one target pass checked all" in words


def test_the_text_shows_the_accepted_path_and_the_correction_only():
    r = tree_run()
    chips = committed_chips(r.steps)
    assert len(chips) == len(r.token_ids)  # one chip per committed token, none for rejected branches
    view = step_view(r.prompt, r.steps, Frame(step=len(r.steps) - 1, phase=VERIFY))
    states = count_states(view)
    assert states.get("accepted", 0) >= 1


def test_node_text_is_escaped():
    r = tree_run()
    step = first_branching_step(r)
    evil = replace(step, drafted=tuple(replace(d, text='<img src=x onerror="alert(1)">') for d in step.drafted))
    html = tree_panel(evil, VERIFY)
    assert "<img" not in html and "&lt;img" in html


def test_chain_steps_have_no_tree_panel():
    r = generate(PROMPT, preset="tiny-random", drafter="prompt-lookup", gamma=4, max_new_tokens=12)
    assert not any(is_tree_step(s) for s in r.steps)
    view = step_view(r.prompt, r.steps, Frame(step=0, phase=VERIFY))
    assert "sd-tree" not in view


def test_speculate_carries_the_tree_and_it_round_trips():
    """/speculate with tree_nodes: every draft has its parent; the JSON imports back."""
    from playground.records import GenerationResult
    from visual.playground_tab import make_speculate
    from playground.config import load_config

    speculate = make_speculate(load_config())
    out = speculate(PROMPT, preset="tiny-random", drafter="prompt-lookup", gamma=4, max_new_tokens=16, tree_nodes=8)
    parents = [d["parent"] for s in out["steps"] for d in s["drafted"]]
    assert parents and all(isinstance(p, int) and p >= -1 for p in parents)
    back = GenerationResult.from_dict(out)
    assert [d.parent for s in back.steps for d in s.drafted] == parents
    old = {**out, "steps": [{**s, "drafted": [{k: v for k, v in d.items() if k != "parent"} for d in s["drafted"]]}
                            for s in out["steps"]]}
    assert all(d.parent is None for s in GenerationResult.from_dict(old).steps for d in s.drafted)  # old traces import


def test_tree_traces_import_and_crafted_parents_are_refused():
    import json

    import pytest

    from playground.lab import TraceImportError, parse_trace, trace_to_json

    r = tree_run()
    back = parse_trace(trace_to_json(r))
    assert [d.parent for s in back.steps for d in s.drafted] == [d.parent for s in r.steps for d in s.drafted]
    data = json.loads(trace_to_json(r))
    step = next(i for i, s in enumerate(data["steps"]) if len(s["drafted"]) > 1)
    data["steps"][step]["drafted"][0]["parent"] = 5  # a parent after the draft itself
    with pytest.raises(TraceImportError, match="parent"):
        parse_trace(json.dumps(data))
