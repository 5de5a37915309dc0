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
    return generate(
        PROMPT, preset="tiny-random", drafter="prompt-lookup", gamma=4, tree_nodes=8, max_new_tokens=24, **kw
    )


def first_branching_step(result):
    for s in result.steps:
        if (
            is_tree_step(s)
            and len({d.parent for d in s.drafted}) < len(s.drafted)
            and any(d.judged and not d.accepted for d in s.drafted)
        ):
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
    from playground.config import load_config
    from playground.decoding.records import GenerationResult
    from visual.speculate import make_speculate

    speculate = make_speculate(load_config())
    out = speculate(PROMPT, preset="tiny-random", drafter="prompt-lookup", gamma=4, max_new_tokens=16, tree_nodes=8)
    parents = [d["parent"] for s in out["steps"] for d in s["drafted"]]
    assert parents and all(isinstance(p, int) and p >= -1 for p in parents)
    back = GenerationResult.from_dict(out)
    assert [d.parent for s in back.steps for d in s.drafted] == parents
    old = {
        **out,
        "steps": [
            {**s, "drafted": [{k: v for k, v in d.items() if k != "parent"} for d in s["drafted"]]}
            for s in out["steps"]
        ],
    }
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


# ------------------------------------------- residual bars at branching points, the KV-cache strip

SCRIPT = "<script>alert(1)</script>"


def node(i, tid, text, parent, depth, q, r, u, judged=True, residual=(), target_top=()):
    from playground.decoding.records import DraftDecision

    a = min(1.0, r / q)
    return DraftDecision(
        position=depth,
        token_id=tid,
        text=text,
        draft_prob=q,
        target_prob=r,
        ratio=r / q,
        accept_prob=a,
        u=u if judged else None,
        judged=judged,
        accepted=bool(judged and u < a),
        target_top=target_top,
        draft_top=(),
        parent=parent,
        residual_top=residual,
    )


def hand_tree_step(cache_len=44, resample=False):
    """Root children “ a” (rejected; “ a2” under it never judged) and “ b” (accepted); under “ b”:
    SCRIPT (rejected), then “ c” (accepted, a leaf: bonus) — or, with ``resample``, “ c” rejected
    too and a resample drawn at “ b”."""
    from playground.decoding.records import Candidate as C
    from playground.decoding.records import Correction, StepRecord

    p_root = (C(10, "x", 0.5), C(1, " a", 0.3), C(2, " b", 0.2))
    res_a = (C(10, "x", 0.714), C(2, " b", 0.286))  # p without “ a”, renormalised
    p_b = (C(13, " c", 0.6), C(3, SCRIPT, 0.4))
    res_script = (C(13, " c", 0.875), C(14, " d", 0.125))
    res_c = (C(14, " d", 1.0),)
    drafted = (
        node(0, 1, " a", -1, 1, 1.0, 0.3, 0.9, residual=res_a, target_top=p_root),
        node(1, 5, " a2", 0, 2, 1.0, 0.0, None, judged=False),
        node(2, 2, " b", -1, 1, 1.0, 0.286, 0.1, target_top=p_root),
        node(3, 3, SCRIPT, 2, 2, 1.0, 0.4, 0.95, residual=res_script, target_top=p_b),
        node(
            4, 13, " c", 2, 2, 1.0, 0.875, 0.99 if resample else 0.5, residual=res_c if resample else (), target_top=p_b
        ),
    )
    if resample:
        corr = Correction(
            kind="resample",
            position=2,
            token_id=14,
            text=" d",
            prob=1.0,
            target_prob=0.05,
            distribution_top=res_c,
            target_top=p_b,
            draft_top=(),
        )
        emitted = (2, 14)
    else:
        corr = Correction(
            kind="bonus",
            position=3,
            token_id=20,
            text=" e",
            prob=0.9,
            target_prob=0.9,
            distribution_top=(C(20, " e", 0.9),),
            target_top=(),
            draft_top=(),
        )
        emitted = (2, 13, 20)
    return StepRecord(
        index=3,
        mode="speculative",
        drafter="prompt-lookup",
        gamma=4,
        drafted=drafted,
        n_accepted=sum(d.accepted for d in drafted),
        correction=corr,
        emitted_ids=emitted,
        emitted_text="",
        draft_ms=1.0,
        verify_ms=5.0,
        step_ms=7.0,
        elapsed_ms=30.0,
        committed_tokens=9,
        target_cache_len=cache_len,
        drafter_cache_len=None,
        eos=False,
    )


def test_branching_points_show_the_residual_after_each_rejected_sibling():
    from visual.tree_residuals import sibling_residuals

    step = hand_tree_step()
    html = tree_panel(step, VERIFY)
    assert html.count('class="tree__residuals"') == 2  # at the root and at “ b”; none under “ a”
    root_block = html[html.index('class="tree__residuals"') : html.index('<ul class="tree')]
    assert "p at this node" in root_block and "after \u201c\u00b7a\u201d was rejected" in root_block
    assert ">0.714<" in root_block and ">0.286<" in root_block  # the residual's numbers
    assert "is-pick--accepted" in root_block  # “ b” was judged against it and kept
    assert "is-struck" in root_block  # “ a” struck in p's bars
    second = html[html.index('class="tree__residuals"', html.index('class="tree__residuals"') + 1) :]
    assert ">0.875<" in second and ">0.125<" in second
    # the rejected <script> token is escaped everywhere, bars titles included
    assert "<script" not in html and "&lt;script&gt;" in html
    # the resample is marked in the residual it was drawn from
    rs = hand_tree_step(resample=True)
    block = sibling_residuals(rs.drafted, [3, 4], rs.correction)
    assert block.count('class="dist"') == 3 and "is-pick--resampled" in block and ">1<" in block
    # a single child, or siblings never tried, is no branching point; nor is the draft phase
    assert sibling_residuals(step.drafted, [1], None) == ""
    assert "tree__residuals" not in tree_panel(step, DRAFT)


def test_an_old_trace_without_residuals_says_so():
    old = hand_tree_step()
    old = replace(old, drafted=tuple(replace(d, residual_top=()) for d in old.drafted))
    html = tree_panel(old, VERIFY)
    assert "p at this node" in html and "recorded without the residuals" in html and "0.714" not in html


def test_the_kv_strip_shows_what_the_pass_wrote_and_what_compaction_kept():
    html = tree_panel(hand_tree_step(cache_len=44), VERIFY)
    assert (
        "The verify pass wrote 6 cache entries (the root + 5 nodes); kept 3 (root + accepted path), "
        "compacted to positions 41\u201343; discarded 3."
    ) in html
    strip = html[html.index('class="kv"') :]
    assert strip.count("kv__cell--dropped") == 3 and strip.count("kv__cell--kept") == 3 + 3  # written + compacted
    assert "pos 42" in strip and "&lt;script&gt;" in strip and "<script" not in strip
    rel = tree_panel(hand_tree_step(cache_len=0), VERIFY)  # a record without cache lengths: relative positions
    assert "compacted to contiguous positions" in rel and "pos +2" in rel
    assert "kv__cell" not in tree_panel(hand_tree_step(), DRAFT)  # nothing written before the pass


def test_a_chain_step_has_neither_residual_bars_per_sibling_nor_a_kv_strip():
    from tests import synthetic as syn

    steps = syn.spec_steps()
    view = step_view("p", steps, Frame(step=0, phase=VERIFY))
    assert "tree__residuals" not in view and "kv__cell" not in view
    assert "residual norm(max(0, p \u2212 q))" in view  # the chain's own residual bars are still there


def test_the_loop_records_the_residual_each_rejected_sibling_left():
    """residual_top is what the next sibling / the resample was judged against: a resample at a
    branching node was drawn from the last rejected sibling's residual; greedy residuals are point
    masses; accepted and unjudged nodes carry none."""
    checked = 0
    for temperature in (0.0, 1.0):
        r = tree_run(temperature=temperature, seed=3)
        for s in r.steps:
            for d in s.drafted:
                assert bool(d.residual_top) == (d.judged and not d.accepted)
                if temperature == 0 and d.residual_top:
                    assert len(d.residual_top) == 1 and d.residual_top[0].prob == 1.0
            c = s.correction
            if c is None or c.kind != "resample":
                continue
            path = [i for i, d in enumerate(s.drafted) if d.accepted]
            at = path[-1] if path else -1
            kids = [i for i, d in enumerate(s.drafted) if d.parent == at]
            if kids:
                last = s.drafted[kids[-1]]
                assert last.judged and not last.accepted
                assert last.residual_top == c.distribution_top
                checked += 1
    assert checked >= 2


def test_residuals_round_trip_through_trace_import():
    import json

    import pytest

    from playground.lab import TraceImportError, parse_trace, trace_to_json

    r = tree_run(temperature=1.0, seed=3)
    back = parse_trace(trace_to_json(r))
    assert [d.residual_top for s in back.steps for d in s.drafted] == [
        d.residual_top for s in r.steps for d in s.drafted
    ]
    data = json.loads(trace_to_json(r))
    where = next((i, j) for i, s in enumerate(data["steps"]) for j, d in enumerate(s["drafted"]) if d["residual_top"])
    old = json.loads(json.dumps(data))
    for s in old["steps"]:
        for d in s["drafted"]:
            del d["residual_top"]
    assert all(d.residual_top == () for s in parse_trace(json.dumps(old)).steps for d in s.drafted)
    data["steps"][where[0]]["drafted"][where[1]]["residual_top"][0]["prob"] = 7.0
    with pytest.raises(TraceImportError, match="residual_top"):
        parse_trace(json.dumps(data))


def test_a_tree_resample_is_explained_as_the_remainder_after_every_rejected_child():
    """Below a tree step the final panel speaks of what is left of p after the rejected
    children, not of one chain residual norm(max(0, p - q)); a chain resample keeps its words."""
    from visual.tokens import distribution_panel

    html = distribution_panel(hand_tree_step(resample=True))
    assert "what is left of p after every rejected child" in html and "Every child tried at this node" in html
    assert "norm(max(0, p" not in html and "target p at depth 2" in html
    assert ">1<" in html  # the remainder's numbers: only “ d” is left
    bonus = distribution_panel(hand_tree_step())
    assert "bonus" in bonus.lower() and "rejected child" not in bonus
