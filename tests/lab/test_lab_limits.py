"""Issue 10: long lab runs are bounded, and crafted inputs are refused or neutralised.

* Time limit: the heavy lab actions (distribution check, compare all rules, equality check,
  theory-bench measurement) stop when their ``Budget`` runs out and report a labelled
  partial result.  The budget takes a clock, so these tests run out of time on purpose with a
  fake clock that ticks on every look (no sleeping, no dependence on machine speed).
* Stop: ``Budget.cancelled`` raises ``LabCancelled`` between continuations; the UI's Stop
  buttons cancel the heavy events and press ``lab_tab.STOPS`` for the session.
* ``MemoModel`` holds at most its byte cap of tensors, and answers exactly as without a cache.
* Shared links never render as markup; imported traces with wrong types or absurd values are
  refused naming the field; uploads over ``limits.max_upload_bytes`` are refused unread.

All on the built-in tiny-random models (float32, one thread).
"""

from __future__ import annotations

import builtins
import copy
import json
from types import SimpleNamespace

import pytest
import torch

from playground import trace_io
from playground.api import run_settings
from playground.config import load_config
from playground.decoding.engine import run
from playground.lab.budget import Budget, LabCancelled, default_wall_s
from playground.lab.context import LabContext
from playground.lab.distribution import DistributionSettings, distribution_check, sample_continuations
from playground.lab.equality import equality_check
from playground.lab.memo import MemoModel, _owned
from playground.lab.quiz import question, question_steps, reveal
from playground.lab.runs import STOPPED_TIME, partial_result
from playground.lab.theory import measure_run
from playground.settings import RunSettings
from playground.trace_io import TraceImportError, parse_trace, trace_to_json
from tests.clock import Ticks
from tests.markup import start_tags

PROMPT = "Once upon a time"


@pytest.fixture(scope="module")
def ctx():
    c = LabContext("tiny-random")
    torch.set_num_threads(1)
    return c


# --------------------------------------------------------------------------------------------
# A1. the budget
# --------------------------------------------------------------------------------------------


def test_budget_expires_shares_and_cancels():
    clock = SimpleNamespace(t=0.0)
    b = Budget(10.0, clock=lambda: clock.t)
    assert not b.expired() and b.remaining() == 10.0
    clock.t = 4.0
    half = b.share(0.5)  # 3 s of the 6 s left
    assert half.remaining() == pytest.approx(3.0) and not half.expired()
    clock.t = 7.0
    assert half.expired() and not b.expired()
    clock.t = 10.0
    assert b.expired() and b.remaining() == 0.0
    assert not Budget(None).expired() and Budget(None).share(0.1).wall_s is None
    stop = {"pressed": False}
    c = Budget(None, cancelled=lambda: stop["pressed"])
    assert not c.expired()
    stop["pressed"] = True
    with pytest.raises(LabCancelled):
        c.expired()
    with pytest.raises(LabCancelled):  # a part of the action sees the same Stop
        c.share(0.5).expired()
    with pytest.raises(ValueError):
        Budget(-1.0)


def test_default_budget_is_the_config_limit_on_real_models_only():
    lim = load_config().limits
    assert default_wall_s("tiny-random") is None  # the fast path keeps its old behaviour
    assert default_wall_s("gemma3-270m-lookup") == lim.lab_wall_s == 60.0
    assert default_wall_s("no-such-preset") == lim.lab_wall_s
    assert Budget.for_preset("gemma3-270m-lookup").wall_s == 60.0


def test_distribution_check_stops_at_the_limit_and_labels_the_partial_result(ctx):
    n = 400
    side = {"speculative": True}
    clock = SimpleNamespace(t=0.0)

    def tick() -> float:  # time passes only while the speculative side runs (one second per look)
        clock.t += 1.0 if side["speculative"] else 0.0
        return clock.t

    def progress(fraction, message):
        side["speculative"] = message.startswith("speculative")

    check = distribution_check(
        DistributionSettings.of(PROMPT, n_samples=n, n_tokens=2, temperature=1.0, seed=0),
        ctx=ctx,
        budget=Budget(60.0, clock=tick),
        progress=progress,
    )
    k = check.spec.n
    assert 1 <= k < n and check.target.n == k  # the target side draws as many as the speculative side got
    assert sum(check.spec_counts) == sum(check.target_counts) == k
    assert check.partial and "Stopped after 60 s" in check.stopped and f"{k:,} of {n:,}" in check.stopped
    assert check.reading.startswith("PARTIAL RESULT") and f"N = {k:,} continuations per side" in check.reading
    # sample i always uses generator (seed, i): the stopped sample is exactly the first k of a full one
    full = distribution_check(
        DistributionSettings.of(PROMPT, n_samples=k, n_tokens=2, temperature=1.0, seed=0), ctx=ctx, budget=Budget(None)
    )
    assert not full.partial and full.stopped == ""
    as_dict = lambda c: {o: (s, t) for o, s, t in zip(c.outcomes, c.spec_counts, c.target_counts)}  # noqa: E731
    assert as_dict(check) == as_dict(full)

    from visual import lab as vlab

    html = vlab.distribution_html(check)
    assert "Partial result." in html and f"{k:,} + {k:,} of {n:,}" in html
    assert "partial" in vlab.rules_table([check]).iloc[0]["N"]
    assert "PARTIAL" in vlab.distribution_figure(check).layout.title.text
    assert "Partial" not in vlab.distribution_html(full)


def test_a_spent_budget_still_gives_one_continuation_per_side(ctx):
    check = distribution_check(
        DistributionSettings.of(PROMPT, n_samples=100, n_tokens=2, temperature=1.0, seed=0), ctx=ctx, budget=Budget(0.0)
    )
    assert check.spec.n == check.target.n == 1 and check.partial
    assert 0.0 <= check.tv <= 1.0  # statistics on what was collected, no crash


def test_stop_raises_between_continuations(ctx):
    looks = {"n": 0}

    def cancelled() -> bool:
        looks["n"] += 1
        return looks["n"] > 5

    seen = []
    with pytest.raises(LabCancelled):
        distribution_check(
            DistributionSettings.of(PROMPT, n_samples=1000, n_tokens=2, temperature=1.0, seed=0),
            ctx=ctx,
            budget=Budget(None, cancelled=cancelled),
            progress=lambda f, m: seen.append(m),
        )
    assert looks["n"] == 6  # raised at the first look after Stop, i.e. before continuation 6
    assert all("speculative" in m for m in seen)  # never reached the target-only side or the statistics


def test_sample_continuations_counts_what_it_drew(ctx):
    ids = ctx.encode(PROMPT)
    cfg = RunSettings(mode="speculative", gamma=4, temperature=1.0, max_new_tokens=2, trace=False)
    counts, st = sample_continuations(ctx, ids, cfg, 50, 0, budget=Budget(3.5, clock=Ticks(1.0)))
    assert st.n == sum(counts.values()) == 3  # looks at t = 2, 3, 4: continuations 0, 1, 2 and then stop


def test_compare_all_rules_has_one_budget_and_names_the_rules_it_skipped():
    from visual import lab_tab

    values = {"preset": "tiny-random", "temperature": 1.0, "gamma": 4, "seed": 0}
    outs = lab_tab.compare_all_rules(values, PROMPT, 100, 2, [], None, None, budget=Budget(2.0, clock=Ticks(1.0)))
    _, _, _, history, status = outs
    torch.set_num_threads(1)
    assert len(history) == 1 and history[0].settings.rule == "lossless" and history[0].partial
    assert "1 of 7 rules checked" in status and "not checked: block, softmax-q" in status and "typical" in status


def test_equality_check_stops_and_compares_what_both_runs_produced(ctx):
    settings = run_settings(preset="tiny-random", gamma=4, max_new_tokens=24)
    full = equality_check("The capital of France is", settings, budget=Budget(None))
    cut = equality_check("The capital of France is", settings, budget=Budget(8.0, clock=Ticks(1.0)))
    torch.set_num_threads(1)
    assert full.stopped == "" and len(full.rows) == 24
    assert cut.ar.stats.stopped == STOPPED_TIME
    k = len(cut.rows)
    assert 1 <= k < 24 and cut.identical  # float32: the compared prefix agrees
    assert cut.ar.token_ids[:k] == full.ar.token_ids[:k] == cut.spec.token_ids[:k]
    assert cut.summary.startswith("PARTIAL RESULT") and "Stopped after 8 s" in cut.stopped

    from visual import lab as vlab

    assert "Partial result." in vlab.equality_html(cut) and "Partial result." not in vlab.equality_html(full)


def test_partial_result_rebuilds_the_engines_stats(ctx):
    ids = ctx.encode(PROMPT)
    cfg = RunSettings(mode="speculative", gamma=3, temperature=1.0, max_new_tokens=20)
    make, target = ctx.drafter_factory(False, memo=False)
    res = run(
        target,
        ctx.tokenizer,
        ids,
        cfg,
        drafter=make(),
        eos_token_ids=ctx.pair.eos_token_ids,
        generator=torch.Generator().manual_seed(5),
    )
    part = partial_result(res.prompt, ids, res.steps, mode="speculative", gamma=3)
    a, b = res.stats, part.stats
    for name in (
        "new_tokens",
        "steps",
        "target_calls",
        "drafted_tokens",
        "judged_tokens",
        "accepted_tokens",
        "acceptance_rate",
        "acceptance_by_position",
        "accepted_length_hist",
        "mean_accepted_length",
        "tokens_per_target_call",
        "draft_ms",
        "verify_ms",
        "gamma",
        "mode",
        "drafter",
    ):
        assert getattr(b, name) == pytest.approx(getattr(a, name)), name
    assert part.token_ids == res.token_ids and b.stopped == STOPPED_TIME
    assert b.wall_ms == pytest.approx(res.steps[-1].elapsed_ms)
    half = partial_result(res.prompt, ids, res.steps[:2], mode="speculative", gamma=3)
    assert half.token_ids == tuple(t for s in res.steps[:2] for t in s.emitted_ids)
    assert half.stats.steps == 2 and half.stats.new_tokens == len(half.token_ids)
    empty = partial_result("p", ids, (), mode="autoregressive", gamma=3)
    assert empty.stats.new_tokens == 0 and empty.stats.gamma == 0


def test_measure_run_stops_and_says_the_point_is_partial(ctx):
    spec, base, point = measure_run(
        "The capital of France is",
        run_settings(preset="tiny-random", gamma=3, max_new_tokens=32),
        budget=Budget(10.0, clock=Ticks(1.0)),
    )
    torch.set_num_threads(1)
    assert STOPPED_TIME in (spec.stats.stopped, base.stats.stopped)
    assert base.stats.new_tokens < 32 and point.note.startswith("Partial")
    done = measure_run(
        "The capital of France is", run_settings(preset="tiny-random", gamma=3, max_new_tokens=8), budget=Budget(None)
    )[2]
    assert done.note == ""


# --------------------------------------------------------------------------------------------
# A2. Stop from the page
# --------------------------------------------------------------------------------------------


def test_stop_requests_are_per_session_and_only_count_after_the_action_started():
    from visual.lab_tab import StopRequests

    t = SimpleNamespace(now=0.0)
    stops = StopRequests(max_sessions=3, clock=lambda: t.now)
    stops.press("a")  # a press left over from an earlier action ...
    t.now = 1.0
    watch_a, watch_b = stops.watcher("a"), stops.watcher("b")
    assert not watch_a() and not watch_b()  # ... does not stop the next one
    t.now = 2.0
    stops.press("a")
    assert watch_a() and not watch_b()
    assert not stops.press(None) and not stops.watcher(None)()
    for s in "cdefg":
        stops.press(s)
    assert len(stops) == 3  # bounded


def test_stop_buttons_cancel_the_heavy_events_and_the_running_loop():
    import gradio as gr

    from visual import lab_tab

    with gr.Blocks() as demo:
        tabs = lab_tab.build_lab_tabs()
    c = tabs.components
    deps = demo.get_config_file()["dependencies"]

    def dep_ids(button) -> set[int]:
        return {d["id"] for d in deps if [button._id, "click"] in [list(t) for t in d["targets"]]}

    for stop, runs in (("eq_stop", ["eq_run"]), ("d_stop", ["d_run", "d_all"]), ("t_stop", ["t_measure"])):
        stop_deps = [d for d in deps if d["id"] in dep_ids(c[stop])]
        cancelled = {i for d in stop_deps for i in d["cancels"]}
        assert cancelled == set().union(*(dep_ids(c[r]) for r in runs)), stop
        (press,) = [d for d in stop_deps if d["backend_fn"]]  # the handler that tells the running loop
        assert demo.fns[press["id"]].concurrency_limit is None  # never queued behind the run it stops

    # the running loop sees this session's Stop (gradio lets a running function finish otherwise)
    req = SimpleNamespace(session_hash="stop-test")

    def progress(fraction, desc=None):
        lab_tab.STOPS.press("stop-test")  # pressed while the check runs

    values = {"preset": "tiny-random", "rule": "lossless", "temperature": 1.0, "gamma": 4, "seed": 0}
    out = lab_tab.run_distribution(values, PROMPT, 2000, 2, [], req, progress)
    torch.set_num_threads(1)
    assert out[3] == [] and out[4].startswith("Stopped")  # history unchanged, nothing drawn
    assert lab_tab.press_stop(SimpleNamespace(session_hash="x")) == "Stopping…"


# --------------------------------------------------------------------------------------------
# A3. MemoModel byte cap
# --------------------------------------------------------------------------------------------


def _held_bytes(memo: MemoModel) -> int:
    """Bytes the table really keeps alive: the storages of every stored tensor, each counted once."""
    seen: dict[int, int] = {}
    for logits, hidden, kv in memo._table.values():
        for t in (logits, hidden, *[x for pair in kv for x in pair]):
            if t is not None:
                st = t.untyped_storage()
                seen[st.data_ptr()] = st.nbytes()
    return sum(seen.values())


@pytest.mark.parametrize("cap", [0, 60_000, 10**12])
def test_memo_cache_holds_at_most_its_byte_cap_and_changes_nothing(ctx, cap):
    ids = ctx.encode(PROMPT)
    cfg = RunSettings(mode="speculative", gamma=4, temperature=1.0, max_new_tokens=3, trace=False)
    make_memo, target_memo = ctx.drafter_factory(False, memo=True, cache_bytes=cap)
    make_real, target_real = ctx.drafter_factory(False, memo=False)
    drafter_memo = make_memo().model
    assert isinstance(target_memo, MemoModel) and isinstance(drafter_memo, MemoModel)
    assert target_memo.budget is drafter_memo.budget  # one cap for both tables
    for seed in range(30):
        a = run(
            target_memo, ctx.tokenizer, ids, cfg, drafter=make_memo(), generator=torch.Generator().manual_seed(seed)
        )
        b = run(
            target_real, ctx.tokenizer, ids, cfg, drafter=make_real(), generator=torch.Generator().manual_seed(seed)
        )
        assert a.token_ids == b.token_ids and a.stats.accepted_tokens == b.stats.accepted_tokens
    held = _held_bytes(target_memo) + _held_bytes(drafter_memo)
    assert held == target_memo.stored_bytes + drafter_memo.stored_bytes == target_memo.budget.used <= cap
    if cap == 0:
        assert target_memo.hits == 0 and not target_memo._table and target_memo.not_stored > 0
    elif cap == 60_000:
        assert target_memo.not_stored > 0 and target_memo._table  # full: some stored, the rest just ran
    else:
        assert target_memo.not_stored == 0 and target_memo.hits > target_memo.misses


def test_memo_stores_compact_copies_of_views():
    big = torch.arange(1000, dtype=torch.float32).reshape(1, 10, 100)
    view = big[..., -2:, :]  # a KV-cache slice: keeps all of ``big`` alive
    own = _owned(view)
    assert torch.equal(own, view) and own.untyped_storage().nbytes() == 2 * 100 * 4
    fresh = torch.zeros(3, 4)
    assert _owned(fresh) is fresh


# --------------------------------------------------------------------------------------------
# B1. shared links never render as markup
# --------------------------------------------------------------------------------------------


HOSTILE_QUERY = {
    "prompt": "[sign in](https://evil.example)",
    "preset": "<img src=x onerror=alert(1)>",
    "classroom": "[Sign in to continue](https://evil.example/login) " + "x" * 300,
    "gamma": "<a href='https://evil.example'>4</a>",
    "[click](https://evil.example)": "<script>alert(1)</script>",
}


def test_a_shared_link_never_renders_as_link_or_markup():
    from visual import lab as vlab
    from visual import lab_tab
    from visual.share import prefill_from_query

    pf = prefill_from_query(SimpleNamespace(query_params=HOSTILE_QUERY))
    assert pf.get("prompt") == HOSTILE_QUERY["prompt"]  # a valid prompt: it goes into the prompt box as text
    assert pf.get("preset") is None and pf.get("gamma") is None and pf.classroom is None and len(pf.errors) == 4
    for e in pf.errors:  # at most a short excerpt of anything the link said
        assert "x" * 30 not in e and "onerror=alert(1)" not in e and "<script>" not in e
    html = vlab.prefill_note_html(pf)
    tags = start_tags(html)
    assert [t for t, _ in tags] == ["p", "b"]  # only our own tags: no <a>, <img>, <script>
    assert all(set(attrs) <= {"class", "style"} for _, attrs in tags)  # no href, src or on... attribute
    assert "<img" not in html and "&lt;img" in html and "&lt;a href" in html  # shown as text, escaped
    # the page's load event renders exactly that, into an HTML (not Markdown) component
    import gradio as gr

    with gr.Blocks():
        tabs = lab_tab.build_lab_tabs()
    assert isinstance(tabs.components["prefill_note"], gr.HTML)
    out = tabs.on_load(SimpleNamespace(query_params=HOSTILE_QUERY))
    assert out[0] == html
    assert tabs.on_load(SimpleNamespace(query_params={}))[0] == ""


def test_markdown_messages_quoting_a_file_render_as_plain_text():
    from markdown_it import MarkdownIt

    from visual import lab as vlab

    md = MarkdownIt("commonmark")
    hostile = "[sign in](https://evil.example) ![x](https://evil.example/x.png) <img src=x onerror=alert(1)> **b**"
    raw = md.render(hostile)
    assert "<a href" in raw and "<img" in raw  # the test can see markup when it is there
    safe = vlab.md_escape(hostile + "\n# heading\nwww.evil.example")
    out = md.render(safe)
    assert "<a" not in out and "<img" not in out and "<strong>" not in out and "<h1>" not in out
    assert "[sign in](https://evil.example)" in out.replace("&lt;", "<")  # shown as written
    assert "://" not in safe and "www." not in safe  # nothing left for GFM's autolinks either


def test_import_messages_escape_what_the_file_said(tmp_path):
    from visual import lab_tab

    bad = tmp_path / "bad.json"
    bad.write_text('{"[sign in](https://evil.example)": 1, "[sign in](https://evil.example)": 2}', encoding="utf-8")
    *_, msg = lab_tab.import_trace(str(bad), None)
    assert msg.startswith("⛔") and "repeats the key" in msg
    assert "](" not in msg and "://" not in msg  # escaped: no Markdown link survives


# --------------------------------------------------------------------------------------------
# B2. crafted traces: refused at import, naming the field
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def trace(ctx):
    from playground.api import generate

    res = generate("Hello there", preset="tiny-random", gamma=3, temperature=1.0, seed=3, max_new_tokens=12)
    torch.set_num_threads(1)
    assert res.steps[0].drafted and res.steps[0].correction is not None
    return json.loads(trace_to_json(res))


def _set(path, value):
    def fn(obj):
        for key in path[:-1]:
            obj = obj[key]
        obj[path[-1]] = value

    return fn


S0 = ["steps", 0]
D0 = S0 + ["drafted", 0]
C0 = S0 + ["correction"]
CRAFTED = {
    "list for the text": (["text"], ["a", "b"], "'text' must be text"),
    "list for a step's text": (S0 + ["emitted_text"], ["a"], "field 'emitted_text'"),
    "list for a draft's text": (D0 + ["text"], ["a"], "field 'text'"),
    "string for a number": (D0 + ["draft_prob"], "0.5", "field 'draft_prob'"),
    "string for a count": (["stats", "new_tokens"], "12", "field 'new_tokens'"),
    "nested dict for a token id": (D0 + ["token_id"], {"id": 5}, "field 'token_id'"),
    "nested dict for a candidate": (
        D0 + ["target_top", 0],
        {"token_id": {"x": 1}, "text": "a", "prob": 0.5},
        "field 'token_id'",
    ),
    "string for the drafts": (S0 + ["drafted"], "abc", "field 'drafted' must be a list of objects"),
    "list of lists for candidates": (D0 + ["target_top"], [["a"]], "field 'target_top' must be a list of objects"),
    "list for the correction": (C0, [1, 2], "field 'correction' must be an object"),
    "string for the step": (["steps", 0], "step", "step 1 must be an object"),
    "huge token id": (D0 + ["token_id"], 10**30, "field 'token_id' must be between"),
    "huge candidate id": (D0 + ["target_top", 0, "token_id"], 2**40, "field 'token_id' must be between"),
    "huge gamma": (["stats", "gamma"], 10**30, "field 'gamma' must be between 0 and 16"),
    "huge step gamma": (S0 + ["gamma"], 10**9, "field 'gamma' must be between 0 and 16"),
    "huge time": (S0 + ["draft_ms"], 1e300, "field 'draft_ms' is not a plausible time"),
    "negative draft position": (D0 + ["position"], -1, "field 'position' must be 1"),
    "negative correction position": (C0 + ["position"], -3, "field 'position' must be between 1 and"),
    "correction past the drafts": (C0 + ["position"], 99, "field 'position' must be between 1 and"),
    "negative count": (S0 + ["committed_tokens"], -5, "field 'committed_tokens' must be a count"),
    "negative rate": (["stats", "acceptance_rate"], -1e308, "field 'acceptance_rate' must be a fraction"),
    "rate list entry": (["stats", "acceptance_by_position"], [0.5, 7.0], "field 'acceptance_by_position'"),
    "negative histogram": (["stats", "accepted_length_hist"], [1, -1], "field 'accepted_length_hist'"),
    "candidate probability": (D0 + ["target_top", 0, "prob"], 3.0, "field 'prob' is a probability outside"),
    "string for an MTP position": (
        S0 + ["drafter_info"],
        {"hidden_from_position": "7"},
        "field 'hidden_from_position'",
    ),
    "list for a config value": (["config", "temperature"], [1.0], "field 'temperature' must be"),
    "string mode": (["stats", "mode"], "<b>fast</b>", "field 'mode' must be one of"),
}


@pytest.mark.parametrize("name", list(CRAFTED))
def test_crafted_trace_is_refused_naming_the_field(trace, name):
    path, value, message = CRAFTED[name]
    obj = copy.deepcopy(trace)
    _set(path, value)(obj)
    with pytest.raises(TraceImportError) as err:
        parse_trace(json.dumps(obj))
    assert message in str(err.value), str(err.value)
    assert "Traceback" not in str(err.value) and "object is not" not in str(err.value)


def test_crafted_values_are_refused_or_replay_without_crashing(trace):
    """Every field × a list, a string, an object, huge and negative numbers: refused, or replayed."""
    from visual import lab as vlab
    from visual import lab_tab, replay

    values = [["a"], "x", {"a": 1}, 10**30, -5, 1.5, True, None, 1e308, -1e308]
    paths = [["prompt"], ["text"], ["prompt_ids"], ["config", "preset"], ["config", "seed"]]
    paths += [S0 + [k] for k in trace["steps"][0] if k not in ("drafted", "correction")]
    paths += [D0 + [k] for k in trace["steps"][0]["drafted"][0]] + [C0 + [k] for k in trace["steps"][0]["correction"]]
    paths += [["stats", k] for k in trace["stats"]]
    accepted = 0
    for path in paths:
        for value in values:
            obj = copy.deepcopy(trace)
            _set(path, value)(obj)
            try:
                res = parse_trace(json.dumps(obj))
            except TraceImportError:
                continue
            accepted += 1
            for f in range(replay.frame_count(res.steps)):
                vlab.replay_html(res, f)
            vlab.trace_summary_html(res, "imported")
            lab_tab.theory_from_trace(res, 0.5, 4, 0.1, 1.3)
            for i in question_steps(res):
                q = question(res, i)
                vlab.reveal_html(reveal(res, i, [True] * len(q.drafts)), q)
    assert accepted > 0  # the harmless ones (a float for a time, null for an optional field) still import


def test_a_real_trace_still_imports(trace):
    back = parse_trace(json.dumps(trace))
    assert list(back.token_ids) == trace["token_ids"]


# --------------------------------------------------------------------------------------------
# B3. uploads over the limit are refused unread
# --------------------------------------------------------------------------------------------


def test_upload_over_the_limit_is_refused_before_reading(tmp_path, monkeypatch):
    from visual import lab_tab

    limit = load_config().limits.max_upload_bytes
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:  # sparse: costs no disk
        fh.truncate(limit + 1)
    real_open = builtins.open

    def guarded_open(file, *a, **k):
        if str(file) == str(big):
            raise AssertionError("an oversized upload must not be opened")
        return real_open(file, *a, **k)

    monkeypatch.setattr(builtins, "open", guarded_open)
    monkeypatch.setattr(trace_io, "load_trace_file", lambda *a, **k: pytest.fail("must not be parsed"))
    kept = object()
    state, *_, msg = lab_tab.import_trace(str(big), kept)
    assert state is kept and msg.startswith("⛔") and "limited to 20\\.0 MB" in msg and "not read" in msg
    monkeypatch.undo()

    small = tmp_path / "small.json"
    small.write_bytes(b"x" * 10)
    assert lab_tab.upload_too_large(str(small), limit=10) is None  # exactly at the limit is fine
    assert "limited to 9 bytes" in lab_tab.upload_too_large(str(small), limit=9)
    assert "could not be found" in lab_tab.upload_too_large(str(tmp_path / "gone.json"))


def test_the_n_slider_follows_the_presets_cap():
    """Choosing a real model with tiny-random's default N (5,000) used to end in "N must be
    between 10 and 2000"; the slider now moves into the chosen preset's range."""
    from playground.lab.distribution import MAX_SAMPLES, MAX_SAMPLES_SLOW, sample_cap
    from visual.lab_tabs.distribution import n_for_preset

    assert sample_cap("tiny-random") == MAX_SAMPLES and sample_cap("gemma3-270m-mtp") == MAX_SAMPLES_SLOW
    assert sample_cap("no-such-preset") == MAX_SAMPLES_SLOW  # the check itself names the unknown preset
    real = n_for_preset("gemma3-270m-mtp", 5000)
    assert real["maximum"] == MAX_SAMPLES_SLOW and real["value"] == MAX_SAMPLES_SLOW
    assert n_for_preset("gemma3-270m-mtp", 300)["value"] == 300
    tiny = n_for_preset("tiny-random", 5000)
    assert tiny["maximum"] == MAX_SAMPLES and tiny["value"] == 5000
    assert n_for_preset("tiny-random", None)["value"] == 5000  # an emptied box gets the default N
    assert n_for_preset("gemma3-270m-mtp", None)["value"] == MAX_SAMPLES_SLOW
