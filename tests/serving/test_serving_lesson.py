"""The lesson "Serving a class" (visual.serving, tools.batch_sweep): the committed
measurement renders, numbers and text from the file are escaped, and an empty file gives
empty figures rather than an error; the pass-cost table measures a tiny model."""

from __future__ import annotations

import json

import pytest
import torch

from playground.serving import pass_cost
from tests.tiny_models import tiny_target
from tools import batch_sweep as sweep
from visual import serving as vserving

DATA = {
    "about": {"preset": "<b>x</b>", "dtype": "bfloat16", "knee_tokens": 36, "date": "2026-12-04",
              "machine": "x86_64, 2 threads", "command": "python -m tools batch-sweep <script>"},
    "pass_costs": [{"rows": 1, "tokens": 1, "ms": 50.0, "relative": 1.0},
                   {"rows": 8, "tokens": 9, "ms": 130.0, "relative": 2.6}],
    "class": [{"runs": r, "variant": v, "tokens_per_s": 10.0 * r, "p50_s": 1.0, "p95_s": 2.0,
               "mean_shared_rows": float(r), "ceiling_tokens_per_s": 16.0 * r} for r in (1, 8) for v in sweep.VARIANTS],
}  # fmt: skip


def test_the_lesson_renders_a_measurement():
    fig = vserving.throughput_figure(DATA)
    assert {t.name for t in fig.data} == {*sweep.VARIANTS, "ceiling"}
    assert list(fig.data[0].x) == [1, 8]
    assert list(fig.data[-1].x) == [1, 8] and list(fig.data[-1].y) == [16.0, 128.0]  # the ceiling, once per size
    costs = vserving.pass_cost_figure(DATA)
    assert list(costs.data[0].x) == [1, 72] and list(costs.data[0].y) == [1.0, 2.6]
    rows = vserving.class_rows(DATA)
    headers = vserving.class_headers(DATA)
    assert len(rows) == 6 and all(len(r) == len(headers) for r in rows)
    assert headers[3] == "share of the ceiling (tokens/s)" and rows[0][3] == "0.62 of 16"  # 10 of 16 tokens/s
    assert "ms per shared pass: model · scheduler · wait" not in headers  # no pass split measured


def test_the_table_splits_a_shared_pass_into_model_scheduler_and_wait():
    split = {"rows": 8.0, "model_ms": 93.4, "gather_ms": 6.0, "write_ms": 2.2, "read_ms": 11.5, "wait_ms": 30.0}
    data = {**DATA, "class": [{**DATA["class"][0], "per_pass": split}, {**DATA["class"][1], "per_pass": None}]}
    assert vserving.class_headers(data)[-1] == "ms per shared pass: model · scheduler · wait"
    by_variant = {r[1]: r[-1] for r in vserving.class_rows(data)}
    assert by_variant == {
        DATA["class"][0]["variant"]: "93 · 20 · 30",
        DATA["class"][1]["variant"]: "–",
    }  # 6 + 2.2 + 11.5


def test_a_measurement_without_a_ceiling_still_renders():
    """Files written before the ceiling was measured: no dashed line, and no share column."""
    old = {**DATA, "class": [{k: v for k, v in r.items() if k != "ceiling_tokens_per_s"} for r in DATA["class"]]}
    assert {t.name for t in vserving.throughput_figure(old).data} == set(sweep.VARIANTS)
    headers = vserving.class_headers(old)
    assert len(headers) == 6 and "share of the ceiling (tokens/s)" not in headers  # no column of dashes
    assert all(len(r) == 6 for r in vserving.class_rows(old))


def test_provenance_is_escaped():
    html = vserving.provenance_html(DATA)
    assert "<b>x</b>" not in html and "&lt;b&gt;x&lt;/b&gt;" in html
    assert "<script>" not in html


def test_no_measurement_is_not_an_error():
    assert vserving.throughput_figure({}).data == ()
    assert vserving.pass_cost_figure({}).data[0].x == ()
    assert "No measurement" in vserving.provenance_html({})


@pytest.mark.parametrize("native", [True, False], ids=["native-bf16", "avx2"])
def test_the_committed_measurements_have_every_variant_and_render(native):
    """One measurement per kind of CPU; the lesson shows the one like the server's."""
    data = pass_cost.measured(native)
    assert data, "a committed batch sweep is missing"
    assert {r["variant"] for r in data["class"]} == set(sweep.VARIANTS)
    assert data["about"]["knee_tokens"] > 0 and data["about"]["preset"] and data["about"]["date"]
    assert len(vserving.class_rows(data)[0]) == len(vserving.class_headers(data))
    assert vserving.throughput_figure(data).data and vserving.pass_cost_figure(data).data[0].x


def test_the_lesson_reads_the_measurement_of_this_kind_of_cpu(monkeypatch):
    from playground.models import bf16_matmul

    for native, name in ((True, "batch_sweep.json"), (False, "batch_sweep_avx2.json")):
        monkeypatch.setattr(bf16_matmul, "native_bf16", lambda n=native: n)
        assert pass_cost.measured() == json.loads((pass_cost.DATA / name).read_text(encoding="utf-8"))
    assert "ceiling_tokens_per_s" in pass_cost.measured(False)["class"][0]  # the AVX2 sweep has the ceiling


def test_pass_costs_on_a_tiny_model():
    torch.manual_seed(0)
    model = tiny_target().float().eval()
    costs = pass_cost.pass_costs(model, [(1, 1), (4, 3)], ctx=8, repeats=1)
    assert [(c.rows, c.tokens) for c in costs] == [(1, 1), (4, 3)]
    assert all(c.ms > 0 and c.relative > 0 for c in costs)
    assert "4 × 3" in sweep.cost_table(costs)


def test_the_batch_sweep_command_writes_its_tables(tmp_path, capsys):
    from tools import cli

    code = cli.main(["batch-sweep", "--preset", "tiny-random", "--batches", "1,3", "--tokens", "4",
                     "--ctx", "8", "--out", str(tmp_path)])  # fmt: skip
    assert code == 0
    out = capsys.readouterr().out
    assert "| B rows × k tokens |" in out and "speculative, capped" in out
    data = json.loads((tmp_path / "batch_sweep.json").read_text())
    assert [(r["runs"], r["variant"]) for r in data["class"]] == [(b, v) for b in (1, 3) for v in sweep.VARIANTS]
    assert all(r["tokens_per_s"] > 0 for r in data["class"])
    assert max(r["mean_shared_rows"] for r in data["class"] if r["runs"] == 3) > 1
    assert "batch-sweep --preset tiny-random" in data["about"]["command"]


def test_the_batch_sweep_prints_and_stores_the_ceiling_beside_each_class(tmp_path, capsys):
    """Each class figure has the machine's ceiling (plain decoding through passes of B rows alone,
    measured in the same run) and the class's share of it."""
    from tools import cli

    code = cli.main(["batch-sweep", "--preset", "tiny-random", "--batches", "1,2", "--tokens", "3",
                     "--ctx", "8", "--out", str(tmp_path)])  # fmt: skip
    assert code == 0
    out = capsys.readouterr().out
    assert "| class tokens/s | ceiling tokens/s | of ceiling |" in out and "of ceiling = class tokens/s" in out
    data = json.loads((tmp_path / "batch_sweep.json").read_text())
    for r in data["class"]:
        assert r["ceiling_tokens_per_s"] > 0
        assert r["of_ceiling"] == pytest.approx(r["tokens_per_s"] / r["ceiling_tokens_per_s"])
        assert f"| {r['runs']} | {r['variant']} | {r['tokens_per_s']:.1f} | {r['ceiling_tokens_per_s']:.1f} |" in out
    # the scheduler's own time per shared pass beside the model's (a class of 1 shares no pass)
    assert "shared pass ms: model · gather · write · read · wait" in out
    assert all(r["per_pass"] is None for r in data["class"] if r["runs"] == 1)
    shared = [r["per_pass"] for r in data["class"] if r["runs"] == 2 and r["per_pass"]]
    assert shared, "a class of 2 shared no pass"
    for split in shared:
        assert set(split) == {"rows", "wait_ms", "gather_ms", "model_ms", "write_ms", "read_ms"}
        assert 1 <= split["rows"] <= 2 and all(v >= 0 for v in split.values()) and split["model_ms"] > 0


def test_the_pass_split_reads_as_the_table_says():
    split = {"rows": 8.0, "model_ms": 93.4, "gather_ms": 6.0, "write_ms": 2.2, "read_ms": 11.5, "wait_ms": 30.0}
    assert sweep.pass_split(split) == "93 · 6 · 2 · 12 · 30"
    assert sweep.pass_split(None) == "–" and sweep.pass_split({}) == "–"


def test_the_status_says_how_many_runs_shared_the_passes():
    from types import SimpleNamespace as Step

    from visual.playground_run import _shared_note

    alone = [Step(shared_rows=1, mode="speculative", gamma=8)] * 3
    assert _shared_note(alone) == ""
    shared = [Step(shared_rows=12, mode="speculative", gamma=0), Step(shared_rows=8, mode="speculative", gamma=2),
              Step(shared_rows=1, mode="speculative", gamma=8)]  # fmt: skip
    note = _shared_note(shared)
    assert "2 of 3 target passes" in note and "10.0 runs on average" in note
    assert "1 step(s) decoded plainly" in note and "temperature 0 that changes only the speed" in note
    assert "in bfloat16 a pass over many rows rounds differently" in note
