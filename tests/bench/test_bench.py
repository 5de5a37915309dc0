"""Benchmark harness (``python -m tools bench``) on the tiny-random preset: fast, offline."""

import json
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from tools import bench
from tools.bench import ROW_FIELDS, BenchOptions, BenchPrompt

ROOT = Path(__file__).resolve().parents[2]

PROMPTS = (
    BenchPrompt("copy", "grounded", "Repeat after me: the cat sat on the mat. the cat sat on the mat."),
    BenchPrompt("open", "general", "Hello there, how are"),
)


@pytest.fixture(scope="module")
def report():
    opts = BenchOptions(
        preset="tiny-random",
        prompts=PROMPTS,
        max_new_tokens=12,
        gammas=(2, 4),
        temperatures=(0.0, 1.0),
        repeats=1,
        cost_reps=2,
        trace="both",
        rules=("lossless", "typical"),
        threads=1,
    )
    events = list(bench.iter_bench(opts))
    assert isinstance(events[-1], bench.BenchReport)
    progress = [e for e in events if isinstance(e, bench.Progress)]
    assert progress and progress[-1].done == progress[-1].total
    return events[-1]


def test_rows_have_every_field_and_every_method(report):
    rows = report.rows
    for row in rows:
        assert set(ROW_FIELDS) <= set(row)
    methods = {(r["method"], r["drafter"]) for r in rows}
    assert {
        ("hf_generate", None),
        ("autoregressive", None),
        ("speculative", "model"),
        ("speculative", "prompt-lookup"),
        ("hf_assisted", "prompt-lookup"),
        ("hf_assisted", "model"),
    } <= methods
    spec = [r for r in rows if r["method"] == "speculative"]
    assert {r["gamma"] for r in spec} == {2, 4}
    assert {r["prompts"] for r in rows} == {"grounded", "general"}
    for r in spec:
        assert len(r["acceptance_by_position"]) == r["gamma"]
        assert r["v"] is not None and r["v"] > 0
        assert r["c"] is not None and r["c"] >= 0
        assert r["tokens_per_target_call"] >= 1.0
        if r["acceptance_rate"] is not None:
            assert r["predicted_speedup"] is not None
    for r in rows:
        assert r["ms_per_token"] > 0 and r["tokens_per_s"] > 0
        assert r["peak_rss_mb"] is None or r["peak_rss_mb"] > 10
    # the traced rows exist for our loop only
    assert {r["method"] for r in rows if r["trace"]} == {"autoregressive", "speculative"}


def test_greedy_rows_are_identical_to_hf_generate(report):
    greedy = [r for r in report.rows if r["temperature"] == 0]
    assert greedy
    for r in greedy:
        assert r["identical_to_hf"] is True, r
        assert r["quality"] in ("identical to target", "reference")
    for r in report.rows:
        if r["temperature"] > 0:
            assert r["identical_to_hf"] is None
            if r["rule"] == "typical":
                assert r["quality"].startswith("lossy")


def test_markdown_csv_and_charts(report, tmp_path):
    md = bench.markdown_table(report.rows, report.meta)
    assert "| block size γ | latency (ms/token) | throughput (tokens/s) |" in md
    assert "acceptance rate" in md and "quality" in md
    paths = bench.write_outputs(report, tmp_path)
    import pandas as pd

    df = pd.read_csv(paths["csv"])
    assert list(df.columns) == list(ROW_FIELDS) and len(df) == len(report.rows)
    html = Path(paths["html"]).read_text()
    assert "plotly" in html.lower()
    assert json.loads(Path(paths["json"]).read_text())["rows"] == report.rows


def test_every_row_has_the_machines_ceiling_beside_its_throughput(report):
    """Plain decoding through passes of one row (measured in the same benchmark) and the row's share of it."""
    ceilings = {dt: c["ceiling_ms"] for dt, c in report.meta["costs"].items()}
    assert ceilings and all(ms is not None and ms > 0 for ms in ceilings.values())
    for r in report.rows:
        assert r["ceiling_tokens_per_s"] == pytest.approx(1000.0 / ceilings[r["dtype"]], rel=1e-4)
        assert r["of_ceiling"] == pytest.approx(r["tokens_per_s"] / r["ceiling_tokens_per_s"], rel=1e-4)
    md = bench.markdown_table(report.rows, report.meta)
    assert "| throughput (tokens/s) | ceiling (tokens/s) | of ceiling |" in md and "of ceiling = throughput" in md


def test_visual_builders(report):
    from visual.bench import bench_figures, bench_table

    figs = bench_figures(report.rows)
    assert set(figs) >= {"throughput", "speedup", "acceptance", "costs"}
    table = bench_table(report.rows)
    assert len(table) == len(report.rows)


def test_bench_restores_the_thread_count():
    before = torch.get_num_threads()
    opts = BenchOptions(
        preset="tiny-random",
        prompts=PROMPTS[:1],
        max_new_tokens=3,
        gammas=(2,),
        repeats=1,
        cost_reps=1,
        methods=("autoregressive",),
        threads=before + 1,
        warmup=False,
    )
    seen = []
    for item in bench.iter_bench(opts):
        seen.append(torch.get_num_threads())
    assert before + 1 in seen
    assert torch.get_num_threads() == before


def test_one_target_forward_per_speculative_step(tiny_pair):
    """No redundant passes: prefill + exactly one target forward per step, counted on the model."""
    from playground.decoding.engine import run
    from playground.drafters.model import ModelDrafter
    from playground.drafters.prompt_lookup import PromptLookupDrafter
    from playground.models.tiny import EOS
    from playground.settings import RunSettings

    target, drafter_model, tok = tiny_pair
    calls = []
    original = target.forward

    def counting_forward(*args, **kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        calls.append(int(ids.shape[-1]))
        return original(*args, **kwargs)

    target.forward = counting_forward
    try:
        for drafter in (ModelDrafter(drafter_model, 100), PromptLookupDrafter()):
            for temperature in (0.0, 1.0):
                calls.clear()
                ids = tok("abc abc abc abc")["input_ids"]
                cfg = RunSettings(gamma=4, temperature=temperature, max_new_tokens=24, trace=False)
                r = run(target, tok, ids, cfg, drafter=drafter, eos_token_ids=(EOS,))
                assert len(calls) == r.stats.steps + 1 == r.stats.target_calls
                assert calls[0] == len(ids) - 1  # the prefill
                # each step's pass covers the newest committed token plus its drafts
                assert calls[1:] == [1 + len(s.drafted) for s in r.steps]
    finally:
        del target.forward
    assert target.forward == original


def test_cost_measurement_uses_the_same_cache_length(tiny_pair):
    target = tiny_pair[0]
    costs = bench.measure_costs(target, list(range(3, 60)), sizes=(1, 3, 5), reps=2)
    assert set(costs.ms_by_tokens) == {1, 3, 5}
    assert costs.cache_len == 60 - 3 - 5
    assert costs.v(1) == 1.0
    assert costs.v(4) == pytest.approx((costs.ms_by_tokens[3] + costs.ms_by_tokens[5]) / 2 / costs.ms_by_tokens[1])


def _cli(*args, timeout=240):
    return subprocess.run(
        [sys.executable, "-m", "tools", "bench", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**__import__("os").environ, "OMP_NUM_THREADS": "1"},
    )


def test_cli_json_output_parses(tmp_path):
    prompts = tmp_path / "p.json"
    prompts.write_text(json.dumps({"prompts": ["abc abc abc", {"text": "hello hello", "kind": "grounded"}]}))
    out = tmp_path / "out"
    proc = _cli(
        "--preset", "tiny-random", "--prompts", str(prompts), "--max-new-tokens", "6", "--gammas", "2",
        "--repeats", "1", "--cost-reps", "1", "--threads", "1", "--json", "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(proc.stdout)
    assert data["rows"] and all(set(ROW_FIELDS) <= set(r) for r in data["rows"])
    assert all(r["identical_to_hf"] for r in data["rows"] if r["temperature"] == 0)
    assert (out / "bench.csv").exists() and (out / "bench.md").exists() and (out / "bench.html").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["--gammas", "0"],
        ["--gammas", "a,b"],
        ["--temperatures", "-1"],
        ["--preset", "nope"],
        ["--methods", "magic"],
        ["--drafters", "mtp", "--preset", "tiny-random"],
        ["--prompts", "/nonexistent.json"],
        ["--max-new-tokens", "0"],
        ["--dtype", "float16"],
        ["--bogus"],
        ["--set", "min_p=2"],  # out of range
        ["--set", "gamma=4"],  # swept by its own option
        ["--set", "colour=red"],  # not a run setting
    ],
)
def test_bad_args_exit_2_with_one_line(args, capsys):
    code = bench.main(args + ["--out", ""])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err and "\n" not in err and "Traceback" not in err


def test_bad_prompts_file_is_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"prompts": [1, 2]}')
    assert bench.main(["--preset", "tiny-random", "--prompts", str(bad)]) == 2
    assert "\n" not in capsys.readouterr().err.strip()


def test_default_prompts_are_grounded_and_general_and_not_training_prompts():
    prompts = bench.load_prompts()
    kinds = {p.kind for p in prompts}
    assert {"grounded", "general"} <= kinds
    train = json.loads((ROOT / "playground" / "data" / "train_prompts.json").read_text())
    train = [t.strip() for t in train if isinstance(t, str)]
    for p in prompts:
        for t in train:
            assert t not in p.text and p.text.strip() not in t, (p.id, t)


def test_engine_import_does_not_pull_in_plotting():
    code = "import sys, playground, tools.bench; print(any(m.split('.')[0] in ('plotly', 'pandas', 'gradio', 'visual') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False", out.stderr


def test_bench_leaves_global_rng_alone(tiny_pair):
    from playground.config import load_config
    from playground.models.loading import load_pair

    preset = load_config().preset("tiny-random")
    pair = load_pair(preset)
    before = torch.random.get_rng_state()
    bench._hf_run(pair, [5, 6, 7], 4, 1.0, 123, bench.Spec.of("hf_generate"))
    assert torch.equal(before, torch.random.get_rng_state())


def test_benchmark_tab_builds_and_runs_live():
    gr = pytest.importorskip("gradio")
    from visual.bench_tab import build_benchmark_tab, cli_command, live_options, run_live

    with gr.Blocks():
        with gr.Tab("Benchmark"):
            comps = build_benchmark_tab()
    assert {"run", "table", "fig_throughput", "fig_costs"} <= set(comps)
    outs = list(
        run_live("tiny-random", "custom", "abc abc abc abc", ["prompt-lookup"], [2], 4, 0.0, True, 1,
                 progress=lambda *a, **k: None)
    )  # fmt: skip
    final = outs[-1]
    assert final[0].startswith("Done") and len(final[2]) >= 4
    with pytest.raises(gr.Error):
        live_options("tiny-random", "custom", "", ["prompt-lookup"], [2], 4, 0.0, True, 1)
    opts = live_options("tiny-random", "grounded", "", ["prompt-lookup", "mtp"], [2, 4], 8, 0.0, False, 1)
    assert opts.drafters == ("prompt-lookup",) and "hf_generate" not in opts.methods
    assert cli_command(opts).startswith("python -m tools bench --preset tiny-random")


def test_benchmark_tab_passes_tree_sizes_through(monkeypatch):
    gr = pytest.importorskip("gradio")
    from visual import bench_tab

    opts = bench_tab.live_options("tiny-random", "custom", "abc abc", ["prompt-lookup"], [2], 4, 0.0, False, 1, [8, 1])
    assert opts.tree_nodes == (1, 8) and "--tree-nodes 1,8" in bench_tab.cli_command(opts)
    assert bench_tab.live_options(
        "tiny-random", "custom", "abc", ["prompt-lookup"], [2], 4, 0.0, False, 1
    ).tree_nodes == (1,)
    for bad in ([], [1, 4, 8, 16], [0], [bench_tab.MAX_TREE_NODES + 1]):
        with pytest.raises(gr.Error):
            bench_tab.live_options("tiny-random", "custom", "abc", ["prompt-lookup"], [2], 4, 0.0, False, 1, bad)
    monkeypatch.setattr(bench_tab.bench, "BRANCHING", ("prompt-lookup",))
    with pytest.raises(gr.Error, match="branch"):  # no picked drafter can draft a tree
        bench_tab.live_options("tiny-random", "custom", "abc", ["model"], [2], 4, 0.0, False, 1, [4])

    seen = []

    def fake_iter_bench(o):
        seen.append(o)
        raise bench.BenchError("stop here")
        yield  # a generator, like the real one

    monkeypatch.setattr(bench_tab.bench, "iter_bench", fake_iter_bench)
    with pytest.raises(gr.Error, match="stop here"):
        list(
            bench_tab.run_live(
                "tiny-random",
                "custom",
                "abc abc",
                ["prompt-lookup"],
                [2],
                4,
                0.0,
                False,
                1,
                [1, 4],
                progress=lambda *a, **k: None,
            )
        )
    assert seen and seen[0].tree_nodes == (1, 4)


def test_benchmark_tab_draws_tree_rows_as_their_own_series():
    pytest.importorskip("gradio")
    from visual.bench import bench_figures, summary_markdown
    from visual.bench_tab import run_live

    final = list(
        run_live(
            "tiny-random",
            "custom",
            "abc abd abc abd abc ab",
            ["prompt-lookup"],
            [3],
            6,
            0.0,
            False,
            1,
            [1, 4],
            progress=lambda *a, **k: None,
        )
    )[-1]
    assert final[0].startswith("Done") and "--tree-nodes 1,4" in final[0]
    assert "tree nodes" in list(final[2].columns) and sorted(final[2]["tree nodes"].dropna()) == [1, 1, 4]
    names = [t.name for t in final[3].data]
    assert any("tree 4" in n for n in names) and any(n.endswith("prompt-lookup") for n in names)
    assert not any("tree" in (t.name or "") for t in final[6].data)  # γ·c + v_γ: chain rows only
    assert "Draft trees: prompt-lookup γ=3 tree 4" in final[1]
    assert bench_figures([]) and summary_markdown([]) == "No results yet."


# ------------------------------------------------- the engine's fast paths give the same records


def test_greedy_fast_argmax_takes_the_first_of_tied_maxima():
    from playground.decoding.engine import run
    from playground.settings import RunSettings
    from tests.fakes import BigramLM, ByteTokenizer

    V = 40
    table = torch.zeros(V, V)
    for t in range(V):
        table[t, (t + 7) % V] = 5.0
        table[t, (t + 3) % V] = 5.0  # a tie: the lower id must win, as torch.argmax
    target = BigramLM(table.bfloat16().float())
    r = run(target, ByteTokenizer(), [1, 2], RunSettings(mode="autoregressive", max_new_tokens=6, trace=False))
    expect, t = [], 2
    for _ in range(6):
        t = min((t + 7) % V, (t + 3) % V)
        expect.append(t)
    assert list(r.token_ids) == expect


@pytest.mark.parametrize("rule", ["lossless", "typical", "bonus-wrong-position"])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("kind", ["model", "prompt-lookup"])
def test_point_mass_fast_paths_give_the_same_trace(tiny_pair, monkeypatch, kind, temperature, rule):
    """Lazy one-hot rows and the top-k shortcut for point masses change nothing in the trace."""
    from playground.decoding import engine, rows
    from playground.drafters.model import ModelDrafter
    from playground.drafters.prompt_lookup import PromptLookupDrafter
    from playground.models.tiny import EOS
    from playground.settings import RunSettings

    target, drafter_model, tok = tiny_pair
    ids = tok("abc abc abc abc abd")["input_ids"]

    def go():
        d = ModelDrafter(drafter_model, 100) if kind == "model" else PromptLookupDrafter()
        cfg = RunSettings(gamma=4, temperature=temperature, max_new_tokens=20, seed=3, rule=rule)
        r = engine.run(target, tok, ids, cfg, drafter=d, eos_token_ids=(EOS,))
        return [{k: v for k, v in s.to_dict().items() if not k.endswith("_ms")} for s in r.steps], r.token_ids

    fast = go()
    full_top = engine._top
    monkeypatch.setattr(engine, "_top", lambda probs, n, texts, point=None, known=None: full_top(probs, n, texts))
    monkeypatch.setattr(
        engine, "_row_top", lambda rows, i, n, texts, point, known=None: full_top(rows[i], n, texts) if texts else ()
    )
    # dense one-hot rows instead of PointRows: the original code path
    monkeypatch.setattr(engine, "PointRows", lambda ids, V: engine.one_hot(torch.tensor(ids, dtype=torch.long), V))
    # ... for the target's rows too (rows.target_rows, shared by chain and tree steps)
    monkeypatch.setattr(rows, "PointRows", lambda ids, V: engine.one_hot(torch.tensor(ids, dtype=torch.long), V))
    slow = go()
    assert fast == slow


def test_call_counter_counts_only_its_own_runs_passes(tiny_pair):
    """Another user's forward passes on the shared target (another thread) are not counted:
    the counter hooks the run's own view of the model, never the shared one."""
    import threading

    from playground.models.view import model_view

    target = tiny_pair[0]
    view = model_view(target)
    ids = torch.tensor([[5, 6, 7]])
    other_started, other_done = threading.Event(), threading.Event()

    def other_user():
        other_started.set()
        with torch.inference_mode():
            for _ in range(5):
                target(input_ids=ids)
        other_done.set()

    with bench._CallCounter(view) as counter:
        t = threading.Thread(target=other_user)
        t.start()
        assert other_done.wait(30)
        assert not target._forward_hooks  # nothing hooked on the shared model
        with torch.inference_mode():
            assert torch.equal(view(input_ids=ids).logits, target(input_ids=ids).logits)
            view(input_ids=ids)
    t.join()
    assert counter.calls == 2


def test_concurrent_sampled_hf_runs_give_their_sequential_answers(tiny_pair):
    """Two users sampling with transformers' generate() at once each get what they would
    alone: the global RNG is theirs for the length of the run."""
    import threading

    from playground.config import load_config
    from playground.models.loading import load_pair

    pair = load_pair(load_config().preset("tiny-random"))
    spec = bench.Spec.of("hf_generate")
    alone = {seed: bench._hf_run(pair, [5, 6, 7], 12, 1.0, seed, spec)[0] for seed in (1, 2)}
    assert alone[1] != alone[2]  # different seeds differ, or the test could not fail
    got: dict[int, list] = {1: [], 2: []}

    def user(seed):
        for _ in range(4):
            got[seed].append(bench._hf_run(pair, [5, 6, 7], 12, 1.0, seed, spec)[0])

    threads = [threading.Thread(target=user, args=(s,)) for s in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert got[1] == [alone[1]] * 4 and got[2] == [alone[2]] * 4


def test_tree_rows_report_nodes_per_pass_and_stay_identical():
    opts = bench.BenchOptions(
        preset="tiny-random",
        max_new_tokens=12,
        gammas=(3,),
        tree_nodes=(1, 6),
        drafters=("prompt-lookup", "model"),
        methods=("autoregressive", "speculative"),
        repeats=1,
        warmup=False,
        cost_reps=1,
    )
    rows = [item for item in bench.iter_bench(opts) if isinstance(item, bench.BenchReport)][0].rows
    spec = [r for r in rows if r["method"] == "speculative"]
    trees = [r for r in spec if r["tree_nodes"] == 6]
    assert {r["drafter"] for r in trees} == {"prompt-lookup", "model"}  # both branch
    assert all(r["identical_to_autoregressive"] for r in spec if r["temperature"] == 0)
    assert all(r["nodes_per_pass"] is not None and r["predicted_speedup"] is None for r in trees)
    assert all(r["speedup_vs_chain"] > 0 and r["v_measured"] > 0 for r in trees)
    assert all(r["speedup_vs_chain"] is None for r in spec if r["tree_nodes"] == 1)
    # tree columns appear only when some row drafts a tree
    assert "| tree nodes | nodes / pass |" in bench.markdown_table(rows)
    assert "tree nodes" not in bench.markdown_table([r for r in rows if r["tree_nodes"] == 1])
    # the charts draw a drafter's chain and its tree as separate lines, never one line through both
    figs = bench.build_figures(rows)
    names = [t.name.split(" · ")[0] for t in figs["throughput"].data]  # " · kind · T · dtype" follows
    assert "ours model" in names and "ours model tree 6" in names
    speed = [t.name.split(" · ")[0] for t in figs["speedup"].data]
    assert "model tree 6 measured" in speed and not any("tree 6 predicted" in n for n in speed)
    for t in figs["throughput"].data:
        if t.mode == "lines+markers":  # a drafter's line (the baselines are flat lines)
            assert len(t.x) == len(set(t.x)), t.name  # one point per γ


def test_a_wall_time_budget_stops_between_complete_rounds(monkeypatch):
    """A live benchmark on real models stops after limits.lab_wall_s and says so; every spec
    has the same prompts in what it reports (only complete rounds are kept)."""
    clock = iter(range(0, 10_000, 10))  # each reading of the clock is 10 s later
    monkeypatch.setattr(time, "perf_counter", lambda: float(next(clock)))  # the module every bench file reads
    opts = bench.BenchOptions(
        preset="tiny-random",
        max_new_tokens=4,
        gammas=(2,),
        drafters=("prompt-lookup",),
        methods=("autoregressive", "speculative"),
        repeats=3,
        warmup=False,
        cost_reps=1,
        wall_s=25.0,
    )
    report = [x for x in bench.iter_bench(opts) if isinstance(x, bench.BenchReport)][0]
    assert report.meta["partial"] and "stopped after 25 s" in report.meta["partial"]
    per_spec = {}
    for r in report.runs:
        per_spec.setdefault(r.spec, []).append((r.rep, r.prompt_id))
    rounds = list(per_spec.values())
    assert rounds and all(sorted(x) == sorted(rounds[0]) for x in rounds)  # same rounds for every spec
    full = len(bench.load_prompts()) * 3
    assert len(rounds[0]) < full  # it really stopped early


def test_draft_stop_rows_sweep_only_drafters_that_stop():
    """--draft-stop adds a row per threshold for the MTP drafters (chains and trees), never for
    drafters that cannot stop; without it they run at the preset's threshold; bad values are refused."""
    from tools.bench.run import _specs

    opts = bench.BenchOptions(gammas=(4,), tree_nodes=(1, 8), draft_stops=(0.0, 0.2), methods=("speculative",))
    specs = _specs(opts, ("mtp+lookup", "prompt-lookup"), hf_assistant=False, preset_stop=0.1)
    got = sorted((s.run.drafter, s.run.tree_nodes, s.run.draft_stop) for s in specs)
    assert got == [
        ("mtp+lookup", 1, 0.0), ("mtp+lookup", 1, 0.2), ("mtp+lookup", 8, 0.0), ("mtp+lookup", 8, 0.2),
        ("prompt-lookup", 1, None), ("prompt-lookup", 8, None),
    ]  # fmt: skip
    plain = _specs(replace(opts, draft_stops=None, tree_nodes=(1,)), ("mtp",), False, preset_stop=0.1)
    assert [s.run.draft_stop for s in plain] == [0.1] and "stop<0.1" in plain[0].label
    rows = [{"method": "speculative", "drafter": "mtp", "tree_nodes": 1, "draft_stop": s} for s in (0.0, 0.2)]
    from tools.bench.report import table_columns

    assert [c for c, _ in table_columns(rows)].count("draft_stop") == 1
    assert "draft_stop" not in [c for c, _ in table_columns(rows[:1])]


@pytest.mark.parametrize("value", ["-0.1", "1", "x"])
def test_bad_draft_stop_exits_2(value, capsys):
    code = bench.main(["--preset", "tiny-random", "--draft-stop", value, "--out", ""])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err and "\n" not in err


def test_set_gives_every_row_a_run_setting_and_generate_the_same_filters():
    """--set name=value: every row, ours and transformers', runs with it (checked as the setting)."""
    from tools.bench.cli import build_parser, options_from_args
    from tools.bench.measure import _hf_generation_config
    from tools.bench.run import _specs

    args = build_parser().parse_args(["--preset", "tiny-random", "--set", "min_p=0.1", "--set", "top-p=0.9"])
    opts = replace(options_from_args(args), methods=("hf_generate", "autoregressive", "speculative"), gammas=(2,))
    specs = _specs(opts, ("model",), hf_assistant=False)
    assert [(s.run.min_p, s.run.top_p) for s in specs] == [(0.1, 0.9)] * 3
    gc = _hf_generation_config(None, 8, 1.0, (), 0, {}, specs[0].run)
    assert (gc.min_p, gc.top_p, gc.top_k) == (0.1, 0.9, 0)
