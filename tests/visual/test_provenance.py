"""Where each token came from (visual/provenance.py), the chips' confidence bar (visual/tokens.py)
and the stats card's repetition tile and note (visual/stats.py), on synthetic traces."""

from __future__ import annotations

from dataclasses import replace

from tests import synthetic as syn
from visual import provenance, stats, tokens
from visual.replay import VERIFY, Frame


def _hybrid(steps):
    """Step 1 drafted by prompt lookup, step 2 by the MTP head (as mtp+lookup records them)."""
    s1, s2, s3 = steps
    s1 = replace(s1, drafter="mtp+lookup", drafter_info={"source": "prompt-lookup"})
    s2 = replace(s2, drafter="mtp+lookup", drafter_info={"source": "mtp"})
    return [s1, s2, s3]


def test_each_committed_token_has_its_source():
    ps = provenance.pieces(_hybrid(syn.spec_steps()))
    # step 1: " Paris" (lookup) + resample " the"; step 2: three MTP drafts + bonus; step 3: the target alone
    assert [p.source for p in ps] == ["lookup", "target", "mtp", "mtp", "mtp", "bonus", "target"]
    assert [p.text for p in ps][:2] == [" Paris", " the"]
    assert provenance.counts(ps) == {"mtp": 3, "lookup": 1, "tree": 0, "drafter": 0, "target": 2, "bonus": 1}


def test_a_plain_drafter_and_a_tree():
    steps = syn.spec_steps()  # drafter "model", no source: another drafter
    assert [p.source for p in provenance.pieces(steps)][:1] == ["drafter"]
    treed = replace(steps[0], drafted=tuple(replace(d, parent=d.position - 2) for d in steps[0].drafted))
    assert [p.source for p in provenance.pieces([treed])] == ["tree", "target"]


def test_the_view_and_the_file_escape_every_text():
    steps = _hybrid(syn.spec_steps())
    evil = [replace(steps[0], correction=replace(steps[0].correction, text=syn.SCRIPT)), *steps[1:]]
    for html in (provenance.provenance_html("<b>p</b>", evil), provenance.provenance_document("<b>p</b>", evil)):
        assert "<script>" not in html and "&lt;script&gt;" in html and "<b>p" not in html
        assert html.count('class="src src--mtp"') == 3 + 1  # three tokens + its legend entry
        assert 'class="src src--lookup"' in html and 'class="src src--bonus"' in html
    doc = provenance.provenance_document("p", evil)
    assert doc.startswith("<!DOCTYPE html>") and "<style>" in doc and "<script" not in doc
    assert provenance.provenance_html("", ()).count("prov--empty") == 1


def test_chips_draw_the_targets_confidence_and_say_the_drafters():
    s1 = syn.spec_steps()[0]
    d0 = replace(s1.drafted[0], target_conf=0.25, draft_conf=0.4)
    s1 = replace(s1, drafted=(d0, *s1.drafted[1:]), correction=replace(s1.correction, target_conf=0.8))
    html = "".join(tokens.current_chips(s1, VERIFY))
    assert 'class="chip__sure" style="width:25%"' in html and 'class="chip__sure" style="width:80%"' in html
    assert "target&#x27;s own top choice here: 25% sure" in html
    assert "drafter&#x27;s own probability of it: 40%" in html
    assert html.count("chip__sure") == 2  # drafts without a recorded confidence get no bar
    assert "bar under a token" in tokens.legend_html()
    view = tokens.step_view("p", [s1], Frame(0, VERIFY))
    assert "chip__sure" in view


def _result(steps, prompt_ids, token_ids):
    return replace(syn.result(steps), prompt_ids=tuple(prompt_ids), token_ids=tuple(token_ids))


def test_stats_card_reports_repetition_and_says_why_it_was_fast():
    steps = _hybrid(syn.spec_steps())
    loop = [1, 2, 3, 4] * 5  # 20 tokens: the first 7 end new 4-grams (1234, 2341, 3412, 4123), 13 repeat
    r = _result(steps, [9, 9], loop)
    m = stats.compute_metrics(steps, 3, result=r)
    rep = m["repetition"]
    assert (rep.tokens, rep.repeated) == (20, 13)
    card = stats.stats_card(m)
    assert 'data-metric="repetition"' in card and "65%" in card and "(13 / 20)" in card
    assert "Prompt lookup copies repeated text for free" in card  # mtp+lookup drafted it
    plain = [replace(s, drafter="model") for s in syn.spec_steps()]
    card = stats.stats_card(stats.compute_metrics(plain, 3, result=_result(plain, [9], loop)))
    assert "Prompt lookup" not in card and "says more about the loop" in card
    fresh = stats.stats_card(stats.compute_metrics(steps, 3, result=_result(steps, [9], list(range(20)))))
    assert 'data-metric="repetition"' in fresh and "stats__loop" not in fresh  # low: no note
    assert 'data-metric="repetition"' not in stats.stats_card(stats.compute_metrics(steps, 3))  # live: no prompt ids
