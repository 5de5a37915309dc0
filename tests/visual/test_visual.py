"""Renderers on synthetic traces (tests/synthetic.py): chip states, escaping, aria labels, figures, stats, tables."""

from __future__ import annotations

import json
import math
import re
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from playground.decoding.records import Correction, GenerationResult
from playground.decoding.sampling import accepted_length_pmf, expected_tokens_per_step, predicted_speedup
from tests import synthetic as syn
from visual import charts, drafter_info, replay, stats, tables, tokens
from visual.fmt import token_html, token_plain
from visual.replay import DRAFT, START, VERIFY, Frame

PROMPT = "The <b>capital</b> of\nFrance is"


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def parse(html_text: str) -> list[tuple[str, dict]]:
    p = _Tags()
    p.feed(html_text)
    p.close()
    return p.tags


def view(frame_index: int, steps=None) -> str:
    steps = steps if steps is not None else syn.spec_steps()
    return tokens.step_view(PROMPT, steps, replay.frame_at(steps, frame_index))


# ---------------------------------------------------------------------------- frames


def test_frames_two_per_drafted_step_one_per_plain_step():
    steps = syn.spec_steps()
    fs = replay.frames(steps)
    assert fs == [
        Frame(-1, START),
        Frame(0, DRAFT),
        Frame(0, VERIFY),
        Frame(1, DRAFT),
        Frame(1, VERIFY),
        Frame(2, VERIFY),
    ]
    assert replay.frame_count(steps) == 6
    assert replay.frame_count([]) == 1
    assert replay.clamp(99, steps) == 5 and replay.clamp(-3, steps) == 0
    assert replay.first_frame_of_step(steps, 2) == 5
    assert replay.frame_at(steps, 1000) == Frame(2, VERIFY)


# ---------------------------------------------------------------------------- chip states


@pytest.mark.parametrize(
    "frame, expected",
    [
        (0, {}),
        (1, {"drafted": 3}),
        (2, {"accepted": 1, "rejected": 1, "discarded": 1, "resampled": 1}),
        (3, {"accepted": 1, "resampled": 1, "drafted": 3}),
        (4, {"accepted": 4, "resampled": 1, "bonus": 1}),
        (5, {"accepted": 4, "resampled": 1, "bonus": 1, "target": 1}),
    ],
)
def test_chip_state_counts_per_frame(frame, expected):
    counts = tokens.count_states(view(frame))
    assert counts == {s: expected.get(s, 0) for s in tokens.STATES}


def test_committed_chips_hold_exactly_the_emitted_tokens():
    steps = syn.spec_steps()
    html_text = "".join(tokens.committed_chips(steps))
    emitted = sum(len(s.emitted_ids) for s in steps)
    assert sum(tokens.count_states(html_text).values()) == emitted == 7


def test_chip_rejects_unknown_state():
    with pytest.raises(ValueError, match="unknown chip state"):
        tokens.chip("a", "maybe")


# ---------------------------------------------------------------------------- escaping & whitespace


@pytest.mark.parametrize("frame", range(6))
def test_no_markup_from_token_or_prompt_text_survives(frame):
    html_text = view(frame)
    tags = [t for t, _ in parse(html_text)]
    assert "script" not in tags and "b" not in tags
    assert "<script" not in html_text.lower() and "<b>" not in html_text
    if frame == 2:
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html_text
    assert "&lt;b&gt;capital&lt;/b&gt;" in html_text  # the prompt, as text


def test_quotes_in_tokens_cannot_break_out_of_attributes():
    html_text = view(5)
    for tag, attrs in parse(html_text):
        for name in attrs:
            assert not name.startswith("on"), f"event handler attribute {name} leaked into <{tag}>"
    chip = [a for t, a in parse(html_text) if "chip--target" in a.get("class", "")][0]
    assert '"q"' in chip["aria-label"] and "<b>" in chip["aria-label"]  # unescaped back by the parser: it was data


def test_whitespace_is_visible():
    assert token_plain(" Paris") == "\u00b7Paris"
    assert token_plain("a\tb\n") == "a\u2192b\u21b5"
    assert token_plain("") == "\u2205"
    assert token_html(" <i>") == '<span class="ws">\u00b7</span>&lt;i&gt;'
    html_text = view(4)
    assert '<span class="ws">\u21b5</span>' in html_text  # the "\n" draft
    assert '<span class="br" aria-hidden="true"></span>' in html_text  # and its line break


# ---------------------------------------------------------------------------- accessibility


def test_every_chip_is_focusable_and_labelled():
    html_text = view(2)
    chips = [a for t, a in parse(html_text) if a.get("class", "").startswith("chip chip--")]
    assert len(chips) == 4
    for a in chips:
        assert a["tabindex"] == "0"
        assert a["role"] == "listitem"
        assert a["aria-label"].split()[0] in tokens.STATES
        assert "data-tip" in a
    rejected = next(a for a in chips if "chip--rejected" in a["class"])
    assert "u = 0.7 \u2265 0.2 \u2192 reject" in rejected["aria-label"]
    assert "q(x) drafter = 0.5" in rejected["data-tip"] and "p(x) target = 0.1" in rejected["data-tip"]


def test_narration_is_an_aria_live_status():
    html_text = view(2)
    live = [a for t, a in parse(html_text) if a.get("aria-live")]
    assert len(live) == 1 and live[0]["aria-live"] == "polite" and live[0]["role"] == "status"
    lists = [a for t, a in parse(html_text) if a.get("role") == "list"]
    assert lists and lists[0]["aria-label"]


def test_number_line_shows_u_against_min_one_p_over_q():
    d = syn.spec_steps()[0].drafted[1]
    html_text = tokens.number_line(d)
    assert 'style="width:20.0%"' in html_text  # accept region [0, 0.2)
    assert 'nl__u nl__u--rej" style="left:70.0%"' in html_text
    (label,) = [a["aria-label"] for t, a in parse(html_text) if a.get("role") == "img"]
    assert label == "u = 0.7 landed at or above min(1, p/q) = 0.2: rejected"
    not_judged = tokens.number_line(syn.spec_steps()[0].drafted[2])
    assert "nl__u" not in not_judged and "not judged" in not_judged


# ---------------------------------------------------------------------------- table, bars, narration


def test_step_table_hides_the_targets_numbers_until_verify():
    s = syn.spec_steps()[0]
    drafting = tokens.step_table(s, DRAFT)
    assert drafting.count('<tr class="row--drafted"') == 3 and "waiting for the target" in drafting
    assert "0.6" not in drafting  # p of “ Paris” not shown yet
    verified = tokens.step_table(s, VERIFY)
    assert verified.count('class="row--accepted"') == 1
    assert verified.count('class="row--rejected"') == 1
    assert verified.count('class="row--discarded"') == 1
    assert '<td data-label="p/q">1.5</td>' in verified  # p/q of “ Paris” = 0.6 / 0.4, in the p/q column


def test_distribution_panel_at_rejection_shows_p_q_and_residual_with_the_pick():
    panel = tokens.distribution_panel(syn.spec_steps()[0])
    titles = re.findall(r"<h4>(.*?)</h4>", panel)
    assert titles == ["target p at position 2", "drafter q at position 2", "residual norm(max(0, p \u2212 q))"]
    assert panel.count("bar-row is-pick") == 2  # “ the” marked in p and the residual (it is not in q's top list)
    assert panel.count("is-struck") == 2  # the rejected draft in p and q
    bonus = tokens.distribution_panel(syn.spec_steps()[1])
    assert "(\u03b3+1)" in bonus and bonus.count("bar-row is-pick is-pick--bonus") == 1


def test_narration_sentences():
    s1, s2, s3 = syn.spec_steps()
    assert tokens.narration(s1, DRAFT).startswith("Step 1: the drafter model proposes 3 tokens")
    n1 = tokens.narration(s1, VERIFY)
    assert "accepted 1 of 3 drafts (\u201c\u00b7Paris\u201d)" in n1
    assert "p/q = 0.2, u = 0.7 \u2265 0.2" in n1 and "resampled \u201c\u00b7the\u201d from the residual" in n1
    assert n1.endswith("2 tokens from one target pass (10 ms).")
    assert "all 3 drafts accepted" in tokens.narration(s2, VERIFY) and "bonus token" in tokens.narration(s2, VERIFY)
    assert "no draft this step" in tokens.narration(s3, VERIFY)
    assert tokens.draft_sentence(s1.drafted[0]) == (
        "Draft 1 \u201c\u00b7Paris\u201d: drafter gave it 0.4, target 0.6, ratio 1.5 \u2265 1 \u2192 accepted (always)."
    )
    assert tokens.draft_sentence(s1.drafted[1]).endswith("ratio 0.2 < 1; u = 0.7 \u2265 0.2 \u2192 rejected.")


def test_legend_names_every_state_once():
    legend = tokens.legend_html()
    for key in tokens.LEGEND:
        assert legend.count(f"swatch chip--{key}") == 1
    assert tokens.count_states(legend) == {s: 0 for s in tokens.STATES}  # legend swatches are not chips


# ---------------------------------------------------------------------------- charts


def _dark_mode_ready(fig):
    assert fig.layout.paper_bgcolor == charts.TRANSPARENT and fig.layout.plot_bgcolor == charts.TRANSPARENT
    assert fig.layout.font.color == charts.FONT_COLOR


def test_running_speedup_values():
    got = charts.running_speedup(syn.spec_steps(), syn.ar_steps())
    assert got == [(0.02, 2.0), (0.03, 1.0), (0.04, 3.0), (0.045, 2.0), (0.05, pytest.approx(7 / 3))]
    assert charts.running_speedup(syn.spec_steps(), []) == []


def test_race_figure_traces():
    fig = charts.race_figure(syn.spec_steps(), syn.ar_steps())
    _dark_mode_ready(fig)
    assert [t.name for t in fig.data] == ["speculative", "autoregressive", "running speedup"]
    assert list(fig.data[0].x) == [0.0, 0.02, 0.04, 0.05] and list(fig.data[0].y) == [0, 2, 6, 7]
    assert fig.data[2].yaxis == "y2"
    assert "one after the other" in fig.layout.annotations[0].text
    solo = charts.race_figure(syn.spec_steps())
    assert [t.name for t in solo.data] == ["speculative"]
    assert "Race mode" in solo.layout.annotations[0].text


def test_acceptance_by_position_figure():
    fig = charts.acceptance_by_position_figure(syn.spec_steps(), 3)
    _dark_mode_ready(fig)
    assert list(fig.data[0].y) == [1.0, 0.5, 1.0]  # position 1: 2/2, 2: 1/2, 3: 1/1
    assert list(fig.data[0].text) == ["n=2", "n=2", "n=1"]


def test_accepted_length_figure_against_prediction():
    fig = charts.accepted_length_figure(syn.spec_steps(), 3)
    _dark_mode_ready(fig)
    assert list(fig.data[0].y) == [0.0, 0.5, 0.0, 0.5]  # two full steps: 1 and 3 accepted
    assert list(fig.data[1].y) == pytest.approx(accepted_length_pmf(0.8, 3))
    assert "1 shorter step left out" in fig.layout.xaxis.title.text


def test_timeline_and_tokens_per_call_figures():
    fig = charts.timeline_figure(syn.spec_steps())
    _dark_mode_ready(fig)
    assert [t.name for t in fig.data] == ["draft", "verify (1 target pass)", "other (sampling, trace)"]
    assert list(fig.data[2].y) == pytest.approx([1.0, 1.0, 1.0])
    assert fig.layout.barmode == "stack"
    tpc = charts.tokens_per_call_figure(syn.spec_steps())
    assert list(tpc.data[0].y) == [2, 4, 1] and list(tpc.data[1].y) == pytest.approx([2, 3, 7 / 3])


def test_empty_figures_say_what_to_do():
    for fig in (
        charts.race_figure([]),
        charts.timeline_figure([]),
        charts.acceptance_by_position_figure([], 4),
        charts.accepted_length_figure([], 4),
        charts.tokens_per_call_figure([]),
    ):
        _dark_mode_ready(fig)
        assert len(fig.data) == 0 and fig.layout.annotations


# ---------------------------------------------------------------------------- stats


def test_metrics_and_predicted_speedup_from_measured_terms():
    steps = syn.spec_steps()
    cal = syn.run_stats(syn.ar_steps(), "autoregressive", single_token_ms=10.0)
    m = stats.compute_metrics(steps, 3, result=syn.result(steps), calibration=cal)
    assert (m["judged"], m["accepted"], m["drafted"], m["new_tokens"]) == (5, 4, 6, 7)
    assert m["alpha"] == 0.8 and m["tokens_per_call"] == pytest.approx(7 / 3) and m["calls_saved"] == 4
    assert m["full_steps"] == 2
    assert m["c"] == pytest.approx((5 / 6) / 10) and m["v"] == pytest.approx(1.1)
    assert m["E"] == pytest.approx(expected_tokens_per_step(0.8, 3))
    assert (
        m["predicted_speedup"] == pytest.approx(predicted_speedup(0.8, 3, 1 / 12, 1.1)) == pytest.approx(2.952 / 1.35)
    )
    assert m["measured_speedup"] is None  # no autoregressive run: not measured, not invented
    card = stats.stats_card(m)
    assert "2.19\u00d7" in card and "calibration run" in card
    for term in ("\u03b1", "E", "t\u2081", "c", "v<sub>\u03b3</sub>"):
        assert f"<dt>{term}</dt>" in card


def test_prediction_is_not_shown_without_a_measured_single_token_time():
    steps = syn.spec_steps()
    m = stats.compute_metrics(steps, 3, result=syn.result(steps))
    assert m["t1_ms"] is None and m["c"] is None and m["predicted_speedup"] is None
    card = stats.stats_card(m)
    assert "was not measured" in card and "\u00d7</strong>" not in card


def test_race_metrics_measured_speedup_and_equality():
    spec, ar = syn.spec_steps(), syn.ar_steps()
    r_spec = syn.result(spec, token_ids=(1, 2, 3, 4, 5, 6, 7))
    r_ar = syn.result(ar, "autoregressive", single_token_ms=15.0, token_ids=(1, 2, 3, 9, 5, 6, 7))
    m = stats.compute_metrics(spec, 3, result=r_spec, ar_result=r_ar)
    assert m["measured_speedup"] == pytest.approx((7 / 0.05) / (7 / 0.105))
    assert m["t1_ms"] == 15.0 and "race" in m["t1_source"]
    assert m["same_output"] is False and m["first_difference"] == 3
    card = stats.stats_card(m, race=True, temperature=0.0)
    assert "Outputs differ from token 4 on" in card and "2.10\u00d7" in card


def test_empty_stats_card():
    assert "once the first step has run" in stats.stats_card({})


# ---------------------------------------------------------------------------- tables & exports


def test_token_table_rows_and_exports(tmp_path):
    steps = syn.spec_steps()
    df = tables.token_table(steps, syn.ar_steps(2))
    assert list(df.columns) == tables.COLUMNS
    spec = df[df.run == "speculative"]
    assert len(spec) == 6 + 3  # six drafts, three target tokens
    assert list(spec.verdict) == [
        "accepted",
        "rejected",
        "not judged",
        "resampled",
        "accepted",
        "accepted",
        "accepted",
        "bonus",
        "target",
    ]
    assert spec.committed.sum() == 7
    assert len(df[df.run == "autoregressive"]) == 2
    assert math.isnan(spec.iloc[2].u)
    shown = tables.display_table(df)
    assert "\u00b7Paris" in list(shown.token)
    result = syn.result(steps)
    json_path, csv_path = tables.write_exports(df, tables.trace_payload(result), tmp_path)
    back = pd.read_csv(csv_path, keep_default_na=False, na_values=[""])
    assert list(back.token) == list(df.token)  # raw text, newline and <script> included, survives CSV
    data = json.loads(open(json_path, encoding="utf-8").read())
    assert set(data) >= {"text", "token_ids", "steps", "stats"}
    assert GenerationResult.from_dict(data).steps == result.steps


FORMULAS = ['=HYPERLINK("http://evil.example","click")', "+1+2", "-3", "@SUM(A1)", "\tx", "\rx"]


def _formula_steps():
    from dataclasses import replace

    steps = syn.spec_steps()
    s1 = steps[0]
    drafted = tuple(replace(d, text=t) for d, t in zip(s1.drafted, FORMULAS[:3]))
    corr = replace(s1.correction, text=FORMULAS[3])
    s2 = replace(steps[1], drafted=tuple(replace(d, text=t) for d, t in zip(steps[1].drafted, FORMULAS[4:] + ["a=b"])))
    return [replace(s1, drafted=drafted, correction=corr), s2, steps[2]]


def test_csv_export_neutralises_formulas_and_json_keeps_the_text(tmp_path):
    import csv

    steps = _formula_steps()
    df = tables.token_table(steps)
    before = df.copy()
    json_path, csv_path = tables.write_exports(df, tables.trace_payload(syn.result(steps)), tmp_path)
    with open(csv_path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    tokens_in_csv = [r["token"] for r in rows]
    for f in FORMULAS:
        assert "'" + f in tokens_in_csv, f  # starts with a quote: a spreadsheet shows it as text
        assert f not in tokens_in_csv
    assert "a=b" in tokens_in_csv and " Paris" not in tokens_in_csv  # only cells that start like a formula change
    assert all(not r[c].startswith(tables.FORMULA_START) for r in rows for c in r)  # no cell anywhere starts so
    assert rows[0]["q_draft"] == str(df.iloc[0].q_draft)  # numbers stay numbers
    pd.testing.assert_frame_equal(df, before)  # the table shown in the app is untouched
    data = json.loads(open(json_path, encoding="utf-8").read())
    assert [d["text"] for d in data["steps"][0]["drafted"]] == FORMULAS[:3]  # JSON: the exact text
    assert tables.csv_cell(-0.5) == -0.5 and tables.csv_cell("x=1") == "x=1" and tables.csv_cell("") == ""


def test_exports_stay_bounded_and_keep_the_latest(tmp_path):
    root = tmp_path / "exports"
    df = tables.token_table(syn.spec_steps())
    paths = []
    for i in range(12):
        payload = {"text": f"export {i}"}
        paths.append(tables.write_exports(df, payload, root=root, keep=5))
    dirs = [p for p in root.iterdir() if p.is_dir()]
    assert len(dirs) == 5  # never more than keep
    for json_path, csv_path in paths[-5:]:  # the newest are intact
        assert json.loads(open(json_path, encoding="utf-8").read())["text"].startswith("export ")
        assert open(csv_path, encoding="utf-8").read().startswith("run,")
    assert json.loads(open(paths[-1][0], encoding="utf-8").read())["text"] == "export 11"
    for json_path, _ in paths[:7]:
        assert not Path(json_path).exists()  # the oldest were removed
    with pytest.raises(ValueError):
        tables.new_export_dir(root, keep=0)
    # a planted symlink is never followed: exports go to a fresh private folder instead
    target = tmp_path / "elsewhere"
    target.mkdir()
    link = tmp_path / "link"
    link.symlink_to(target)
    d = tables.new_export_dir(link, keep=5)
    assert target not in d.parents and not list(target.iterdir())


def test_lab_trace_export_goes_to_the_bounded_folder(tmp_path, monkeypatch):
    import tempfile

    from visual import lab_tab

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    path = Path(lab_tab.export_trace(syn.result(syn.spec_steps())))
    assert path.parent.parent == tmp_path / tables.EXPORT_DIR_NAME and path.exists()


def test_clean_json_makes_strict_json():
    out = tables.clean_json({"a": float("nan"), "b": (1.0, float("inf")), "c": {"d": 2}})
    assert out == {"a": None, "b": [1.0, None], "c": {"d": 2}}
    json.dumps(out, allow_nan=False)


def test_prediction_warns_when_the_machine_speed_drifted():
    steps = syn.spec_steps()
    cal = syn.run_stats(syn.ar_steps(), "autoregressive", single_token_ms=40.0)  # verify passes took 11 ms: v < 1
    m = stats.compute_metrics(steps, 3, result=syn.result(steps), calibration=cal)
    assert m["v"] == pytest.approx(11 / 40)
    assert "prediction is unreliable" in stats.stats_card(m)


# ---------------------------------------------------------------------------- the MTP drafter

MTP_INFO = {
    "target_kv_layer": 17,
    "target_layers": 18,
    "candidates_scored": 8197,
    "context_candidates": 5,
    "vocab_size": 262144,
    "draft_steps": 3,
    "draft_ms_per_token": 2.4,
}
MTP_PROMPT_TOKENS = 42


def mtp_steps():
    """Two MTP steps after a 42-token prompt.  Step 1 commits “a”, “<i>b</i>”, “c”, so step 2's
    hidden state (position 43 = the second-newest committed token) is over “<i>b</i>”."""
    from dataclasses import replace

    bonus = Correction(
        kind="bonus",
        position=3,
        token_id=53,
        text="c",
        prob=0.9,
        target_prob=0.9,
        distribution_top=(syn.cand(53, "c", 0.9),),
        target_top=(),
        draft_top=(),
    )
    s1 = syn.step(
        0,
        [syn.draft(1, 51, "a", 0.5, 0.9, 0.1), syn.draft(2, 52, "<i>b</i>", 0.5, 0.9, 0.1)],
        bonus,
        [51, 52, 53],
        elapsed_ms=100.0,
        committed=3,
        draft_ms=5.0,
        verify_ms=80.0,
        gamma=2,
    )
    s1 = replace(
        s1,
        drafter="mtp",
        drafter_info={
            **MTP_INFO,
            "hidden_from_position": 40,
            "target_kv_positions": 41,
            "candidates_scored": 8195,
            "context_candidates": 3,
        },
    )
    resample = Correction(
        kind="resample",
        position=2,
        token_id=64,
        text="e",
        prob=0.5,
        target_prob=0.4,
        distribution_top=(),
        target_top=(),
        draft_top=(),
    )
    s2 = syn.step(
        1,
        [
            syn.draft(1, 61, "d", 0.5, 0.9, 0.1),
            syn.draft(2, 62, "x", 0.5, 0.1, 0.9),
            syn.draft(3, 63, "y", 0.5, 0.1, None, judged=False),
        ],
        resample,
        [61, 64],
        elapsed_ms=200.0,
        committed=5,
        draft_ms=7.5,
        verify_ms=96.0,
        gamma=3,
    )
    s2 = replace(s2, drafter="mtp", drafter_info={**MTP_INFO, "hidden_from_position": 43, "target_kv_positions": 42})
    return [s1, s2]


def test_mtp_panel_states_what_the_drafter_read_scored_and_cost():
    steps = mtp_steps()
    html_text = tokens.step_view(PROMPT, steps, Frame(1, VERIFY))
    (box,) = re.findall(r'<div class="mtp-info".*?</div>', html_text)
    assert (
        'Read:</strong> the target\u2019s final hidden state at position 43 (token <code class="tok">&lt;i&gt;b&lt;/i&gt;</code>)'
        in box
    )
    assert "the keys/values of the target\u2019s layer 17 (the last of its 18) at 42 positions" in box
    assert "no drafter cache of its own" in box
    assert (
        "Scored:</strong> 8,192 candidate + 5 context tokens of 262,144 (3.1% of the vocabulary) per draft step" in box
    )
    assert "3 tokens in 7.5 ms (2.5 ms/token) vs 96 ms for the target\u2019s verify pass" in box
    assert "one draft token cost 2.6% of it" in box  # 2.5 / 96
    tags = [t for t, _ in parse(html_text)]
    assert "i" not in tags and "<i>" not in html_text  # the token's markup is text, not HTML
    # step 1: the hidden state came from inside the prompt (position 40 of a 42-token prompt)
    first = tokens.step_view(PROMPT, steps, Frame(0, VERIFY))
    assert "final hidden state at position 40 (in the prompt)" in first
    assert "8,192 candidate + 3 context tokens of 262,144 (3.1% of the vocabulary)" in first
    assert "2 tokens in 5.0 ms (2.5 ms/token) vs 80 ms" in first


def test_mtp_hidden_state_token_uses_the_prompt_length_when_known():
    steps = mtp_steps()
    assert drafter_info.hidden_state_token(steps, 1) == ("generated", "<i>b</i>")
    assert drafter_info.hidden_state_token(steps, 1, prompt_tokens=MTP_PROMPT_TOKENS) == ("generated", "<i>b</i>")
    assert drafter_info.hidden_state_token(steps, 1, prompt_tokens=41) == ("generated", "c")  # exact mapping wins
    assert drafter_info.hidden_state_token(steps, 0) == ("prompt", None)
    html_text = tokens.step_view(PROMPT, steps, Frame(1, VERIFY), prompt_tokens=41)
    assert 'position 43 (token <code class="tok">c</code>)' in html_text


def test_mtp_panel_while_drafting_does_not_show_the_verify_time():
    html_text = tokens.step_view(PROMPT, mtp_steps(), Frame(1, DRAFT))
    assert (
        "mtp-info" in html_text
        and "3 tokens in 7.5 ms (2.5 ms/token); the target\u2019s verify pass comes next." in html_text
    )
    assert "96 ms" not in html_text


def test_mtp_panel_absent_for_other_drafters_and_tolerates_missing_keys():
    from dataclasses import replace

    for frame in range(6):
        html_text = view(frame)  # drafter "model", empty drafter_info
        assert "mtp-info" not in html_text and "MTP drafter" not in html_text
    lookup = [
        replace(s, drafter="prompt-lookup", drafter_info={"ngram": 3, "match_position": 7}) for s in syn.spec_steps()
    ]
    for frame in range(6):
        assert "mtp-info" not in tokens.step_view(PROMPT, lookup, replay.frame_at(lookup, frame))
    bare = replace(mtp_steps()[1], drafter_info={"hidden_from_position": None})
    box = drafter_info.mtp_panel(bare, VERIFY)
    assert "learned start state" in box and "vocabulary" not in box and "keys/values" not in box
    assert "3 tokens in 7.5 ms" in box


def test_stats_card_shows_mtp_cost_and_vocabulary_narrowing():
    steps = mtp_steps()
    cal = syn.run_stats(syn.ar_steps(), "autoregressive", single_token_ms=50.0)
    m = stats.compute_metrics(steps, 3, result=syn.result(steps), calibration=cal)
    x = m["mtp"]
    assert x["draft_ms_per_token"] == pytest.approx(2.5) and x["c"] == pytest.approx(0.05)  # the full γ=3 step
    assert (x["scored"], x["context"], x["vocab"]) == (8197, 5, 262144)  # as of the latest step
    card = stats.stats_card(m)
    assert "MTP draft cost per token vs target step" in card and "2.5 ms/token" in card
    assert "c = 2.5 ms \u00f7 t\u2081 50 ms = 0.05" in card and "2.6% of a target verify pass (96 ms)" in card
    assert "scored 8,197 of 262,144 tokens (8,192 fixed + 5 from the context)" in card and "3.1%" in card
    # without t₁ the draft cost is still compared with the target's verify pass
    card = stats.stats_card(stats.compute_metrics(steps, 3))
    assert "2.6% of a target verify pass (96 ms)" in card and "c = " not in card
    # mtp+lookup: the run's draft cost mixes in prompt-lookup steps, and the tile says so
    from dataclasses import replace

    hybrid = [replace(s, drafter="mtp+lookup") for s in steps]
    card = stats.stats_card(stats.compute_metrics(hybrid, 3, result=syn.result(hybrid), calibration=cal))
    assert "MTP draft cost per token" not in card and "MTP and prompt-lookup drafts together" in card


def test_stats_card_has_no_mtp_rows_for_other_drafters():
    steps = syn.spec_steps()
    m = stats.compute_metrics(steps, 3, result=syn.result(steps))
    assert m["mtp"] is None and "MTP" not in stats.stats_card(m)


def test_early_stopped_mtp_steps_are_explained():
    """The MTP box says why a chain was short (playground.decoding.draft_stop), and the stats card
    says the formula is for full chains; trace numbers are checked, HTML escaped."""
    from dataclasses import replace

    steps = mtp_steps()
    stopped = {**steps[1].drafter_info, "draft_stop": 0.15, "path_confidence": 0.08, "stopped_early": True}
    kept = {**steps[0].drafter_info, "draft_stop": 0.15, "path_confidence": 0.4, "stopped_early": False}
    steps = [replace(steps[0], drafter_info=kept), replace(steps[1], drafter_info=stopped)]
    box = drafter_info.mtp_panel(steps[1], VERIFY)
    assert "stopped after" in box and "0.08" in box and "threshold 0.15" in box and "unchanged" in box
    assert "it did not here" in drafter_info.mtp_panel(steps[0], VERIFY)
    tree = {**stopped, "tree_nodes": 5}
    assert "tree stopped growing" in drafter_info.mtp_panel(replace(steps[1], drafter_info=tree), VERIFY)
    for bad in ({"draft_stop": "<b>x</b>"}, {"draft_stop": float("nan")}, {"draft_stop": 0.0}):
        assert "Length:" not in drafter_info.mtp_panel(replace(steps[1], drafter_info={**stopped, **bad}), VERIFY)
    cal = syn.run_stats(syn.ar_steps(), "autoregressive", single_token_ms=50.0)
    card = stats.stats_card(stats.compute_metrics(steps, 3, result=syn.result(steps), calibration=cal))
    assert "stopped early (it was unsure) in 1 of 2 steps" in card
    # c counts every drafted token, so short (stopped) chains are not left out of the draft cost
    m = stats.compute_metrics(steps, 3, result=syn.result(steps), calibration=cal)
    want = sum(s.draft_ms for s in steps) / sum(len(s.drafted) for s in steps)
    assert m["draft_ms_per_token"] == pytest.approx(want) and m["c"] == pytest.approx(want / 50.0)
    plain = mtp_steps()
    assert "stopped early" not in stats.stats_card(stats.compute_metrics(plain, 3, result=syn.result(plain)))
