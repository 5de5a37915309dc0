"""The app: `/speculate` through gradio_client against a launched Blocks (tiny-random), bad inputs,
the Run/replay handlers, and the Spaces header in README.md vs spaces_config.yaml."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from playground.config import CONFIG_PATH
from playground.decoding.records import GenerationResult

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def client(server):
    from gradio_client import Client

    return Client(server, verbose=False)


# ---------------------------------------------------------------------------- /speculate


def test_speculate_returns_the_trace_as_json(client):
    out = client.predict(
        prompt="The capital of France is",
        preset="tiny-random",
        gamma=3,
        temperature=0.8,
        top_k=20,
        top_p=0.95,
        seed=7,
        max_new_tokens=12,
        api_name="/speculate",
    )
    assert {"text", "token_ids", "steps", "stats"} <= set(out)
    assert 1 <= len(out["token_ids"]) <= 12
    assert out["stats"]["new_tokens"] == len(out["token_ids"])
    assert sum(len(s["emitted_ids"]) for s in out["steps"]) == len(out["token_ids"])
    assert all(len(s["drafted"]) <= 3 for s in out["steps"])
    assert out["config"]["preset"] == "tiny-random" and out["config"]["gamma"] == 3
    r = GenerationResult.from_dict(out)  # the JSON round-trips into the engine's records
    assert list(r.token_ids) == out["token_ids"]

    from playground import generate

    direct = generate(
        "The capital of France is",
        preset="tiny-random",
        gamma=3,
        temperature=0.8,
        top_k=20,
        top_p=0.95,
        seed=7,
        max_new_tokens=12,
    )
    assert list(direct.token_ids) == out["token_ids"]  # the endpoint is the engine, same seed, same tokens


def test_speculate_takes_block_verification(client):
    kw = dict(prompt="The capital of France is", preset="tiny-random", gamma=3, temperature=1.0, seed=3)
    out = client.predict(**kw, max_new_tokens=12, verification="block", api_name="/speculate")
    assert out["config"]["rule"] == "block"
    judged = [d for s in out["steps"] for d in s["drafted"]]
    assert judged and all(d["weight"] is not None for d in judged)  # block steps carry the weight w
    token = client.predict(**kw, max_new_tokens=12, api_name="/speculate")
    assert token["config"]["rule"] == "lossless" and all(
        d["weight"] is None for s in token["steps"] for d in s["drafted"]
    )


def test_speculate_needs_only_the_prompt(client, tiny_default):
    out = client.predict("Monday, Tuesday,", api_name="/speculate")
    assert out["config"]["preset"] == tiny_default.default_preset == "tiny-random"
    assert out["config"]["max_new_tokens"] == 64 and out["config"]["temperature"] == 0.0
    assert out["config"]["gamma"] == tiny_default.preset("tiny-random").gamma


def test_speculate_signature_is_keyword_friendly(client):
    info = client.view_api(return_format="dict", print_info=False)["named_endpoints"]["/speculate"]
    params = {p["parameter_name"]: p for p in info["parameters"]}
    assert list(params) == [
        "prompt",
        "preset",
        "drafter",
        "gamma",
        "temperature",
        "top_k",
        "top_p",
        "seed",
        "max_new_tokens",
        "tree_nodes",
        "verification",
        "draft_stop",
        "min_p",
        "dtype",
    ]
    assert not params["prompt"]["parameter_has_default"]
    assert all(p["parameter_has_default"] for name, p in params.items() if name != "prompt")


BAD = [
    (dict(prompt=""), "prompt is empty"),
    (dict(prompt="   \n"), "prompt is empty"),
    (dict(prompt="x" * 4001), "too long: 4001 characters"),
    (dict(prompt="hi", preset="no-such-preset"), "unknown preset 'no-such-preset'"),
    (dict(prompt="hi", drafter="telepathy"), "no 'telepathy' drafter"),
    (dict(prompt="hi", gamma=0), "gamma must be between 1 and 16"),
    (dict(prompt="hi", gamma=17), "gamma must be between 1 and 16"),
    (dict(prompt="hi", temperature=2.5), "temperature must be 0 (greedy) or between 0.01 and 2.0"),
    (dict(prompt="hi", temperature=1e-40), "temperature must be 0 (greedy) or between 0.01 and 2.0, got 1e-40"),
    (dict(prompt="hi", top_p=0.0), "top_p must be in (0, 1]"),
    (dict(prompt="hi", top_k=-1), "top_k must be between 0"),
    (dict(prompt="hi", max_new_tokens=0), "max_new_tokens must be between 1 and 256"),
    (dict(prompt="hi", max_new_tokens=100000), "max_new_tokens must be between 1 and 256"),
    (dict(prompt="hi", seed=-1), "seed must be >= 0"),
    (dict(prompt="hi", gamma="four"), "gamma must be a whole number"),
    (dict(prompt="hi", verification="typical"), "verification must be one of lossless, block"),
    (dict(prompt="hi", verification="block", tree_nodes=4), "block verification judges a chain of drafts"),
    (dict(prompt="hi", draft_stop=1.5), "draft_stop must be a number in [0, 1) (0 = off), got 1.5"),
]


@pytest.mark.parametrize("kwargs, message", BAD, ids=[m for _, m in BAD])
def test_bad_input_gets_a_clear_message(client, kwargs, message):
    from gradio_client.exceptions import AppError

    kwargs = {"preset": "tiny-random", "max_new_tokens": 4, **kwargs}
    with pytest.raises(AppError) as err:
        client.predict(**kwargs, api_name="/speculate")
    assert message in str(err.value)


@pytest.mark.parametrize("position, name", [(4, "temperature"), (6, "top_p")])
def test_nan_over_raw_http_gets_a_clear_message(server, position, name):
    """gradio_client refuses to send NaN; a raw HTTP caller can (JSON's NaN extension), and is told why it fails."""
    import httpx

    # /speculate's parameters in order: prompt, preset, drafter, gamma, temperature, top_k, top_p, seed,
    # max_new_tokens, tree_nodes, verification, draft_stop, min_p, dtype
    data = ["hi", "tiny-random", "null", "null", "0.0", "0", "1.0", "0", "4", "null", '"lossless"', "null", "0.0", "null"]  # fmt: skip
    data[position] = "NaN"
    base = server + "/gradio_api/call/speculate"
    r = httpx.post(
        base,
        content=('{"data": [' + ", ".join(['"hi"', '"tiny-random"'] + data[2:]) + "]}").encode(),
        headers={"Content-Type": "application/json"},
        timeout=30,
    )
    event_id = r.json()["event_id"]
    with httpx.stream("GET", f"{base}/{event_id}", timeout=60) as resp:
        body = "".join(resp.iter_text())
    assert "event: error" in body and f"{name} must be a finite number, got nan" in body


def test_app_keeps_serving_after_bad_input(client):
    from gradio_client.exceptions import AppError

    with pytest.raises(AppError):
        client.predict(prompt="", preset="tiny-random", api_name="/speculate")
    out = client.predict(
        prompt="<script>alert(1)</script>", preset="tiny-random", max_new_tokens=5, api_name="/speculate"
    )
    assert len(out["token_ids"]) >= 1


# ---------------------------------------------------------------------------- the Run handler and replay


def _run(tiny_default, mode="Speculative", calibrate=True, **overrides):
    from visual import playground_tab as pt

    choices = pt.preset_choices(tiny_default)
    handler = pt.make_run_handler(tiny_default, choices)
    args = dict(
        trace=pt.empty_trace(),
        prompt="The capital of <b>France</b> is",
        preset="tiny-random",
        drafter="model",
        gamma=4,
        temperature=0.7,
        top_k=0,
        top_p=1.0,
        seed=3,
        max_new_tokens=16,
        dtype="preset default",
        mode=mode,
        calibrate=calibrate,
    )
    args.update(overrides)
    return list(handler(args))


def test_run_handler_streams_steps_then_finishes(tiny_default):
    outs = _run(tiny_default)
    traces = [o[0] for o in outs]
    counts = [len(t["spec_steps"]) for t in traces]
    assert counts == sorted(counts) and counts[-1] >= 1  # steps arrive one by one
    final = traces[-1]
    assert final["done"] and final["phase"] == "done" and final["error"] is None
    assert final["spec"].stats.steps == counts[-1]
    assert final["calibration"] is not None and final["calibration"].single_token_ms > 0
    status, stats_html, table, json_dl, csv_dl, text = (
        outs[-1][1],
        outs[-1][7],
        outs[-1][8],
        outs[-1][9],
        outs[-1][10],
        outs[-1][11],
    )
    assert status.startswith("**Done.**")
    assert "calibration run" in stats_html and "Predicted speedup" in stats_html
    assert len(table) == sum(len(s.drafted) + (s.correction is not None) for s in final["spec_steps"])
    assert Path(json_dl.value["path"]).name == "speculative_trace.json" and Path(csv_dl.value["path"]).exists()
    assert text == final["spec"].text


def test_race_runs_both_and_measures_the_speedup(tiny_default):
    outs = _run(tiny_default, mode="Race", temperature=0.0, max_new_tokens=10)
    final = outs[-1][0]
    assert final["ar"] is not None and final["ar"].stats.mode == "autoregressive"
    assert len(final["ar_steps"]) == final["ar"].stats.steps == final["ar"].stats.new_tokens
    assert final["calibration"] is None  # the race's own autoregressive run measures t1
    stats_html = outs[-1][7]
    assert "measured speedup" in stats_html and "each run timed on its own" in stats_html
    # greedy and float32: speculative decoding reproduces the target's own output exactly
    assert final["spec"].token_ids == final["ar"].token_ids
    assert "outputs are identical" in stats_html


def test_run_handler_rejects_bad_input_with_gr_error(tiny_default):
    import gradio as gr

    with pytest.raises(gr.Error, match="prompt is empty"):
        _run(tiny_default, prompt="  ")
    with pytest.raises(gr.Error, match="temperature must be a finite number"):
        _run(tiny_default, temperature=float("nan"))


_FORM_ORDER = ("prompt", "preset", "drafter", "gamma", "temperature", "top_k", "top_p", "seed", "max_new_tokens",
               "tree_nodes", "verification", "draft_stop", "dtype")  # fmt: skip


def _check(cfg, choices, *values):
    """``check_params`` on the form's values given in this order (``_FORM_ORDER``)."""
    from visual import playground_tab as pt

    return pt.check_params(cfg, choices, dict(zip(_FORM_ORDER, values)))


def test_check_params_messages(tiny_default):
    from visual import playground_tab as pt

    choices = pt.preset_choices(tiny_default)
    ok = _check(tiny_default, choices, "hi", "tiny-random", "model", 4, 0.0, 0, 1.0, 0, 16)
    assert ok == {}
    errs = _check(tiny_default, choices, "", "nope", None, 0, math.nan, -1, 0.0, -5, 999)
    assert set(errs) == {"prompt", "preset", "gamma", "temperature", "top_k", "top_p", "seed", "max_new_tokens"}
    assert errs["temperature"].startswith("temperature must be a finite number")


# ---------------------------------------------------------------------------- the verification rule


def test_verification_control_defaults_to_token_verification():
    """The Playground has a Verification radio (token verification by default) and Run passes it on."""
    import gradio as gr

    from visual.i18n import text_of
    from visual.playground_tab import VERIFICATION, build_playground_tab

    with gr.Blocks() as demo:
        tab = build_playground_tab()
    radio = tab.components["verification"]
    assert isinstance(radio, gr.Radio) and radio.value == "lossless"
    assert [(text_of(label), value) for label, value in radio.choices] == [
        ("Token verification (Leviathan et al.)", "lossless"),
        ("Block verification (Sun et al. 2025)", "block"),
    ]
    assert list(VERIFICATION) == ["lossless", "block"] and "temperature 0" in text_of(radio.info)
    radio_id, run_id = radio._id, tab.components["run"]._id
    deps = demo.get_config_file()["dependencies"]
    plot = tab.components["race_plot"]._id
    runs = [d for d in deps if any(t[0] == run_id for t in d["targets"]) and plot in d["outputs"]]
    assert len(runs) == 1  # one event: it validates, resets the view and runs
    (fn,) = [f for f in demo.fns.values() if f._id == runs[0]["id"]]
    assert fn.validator is not None  # the validator gets the event's inputs, as the run handler does
    stop = tab.components["draft_stop"]
    assert isinstance(stop, gr.Slider)
    assert radio_id in runs[0]["inputs"] and stop._id in runs[0]["inputs"]  # the run handler gets them (by name)


def _spy_on_api(monkeypatch):
    """Record the settings of every ``playground.api.stream_run`` call (every run goes through it)."""
    import playground.api

    calls = []
    real = playground.api.stream_run

    def spy(prompt, settings, **kwargs):
        calls.append(settings)
        return real(prompt, settings, **kwargs)

    monkeypatch.setattr(playground.api, "stream_run", spy)
    return calls


def test_block_verification_run_gives_block_steps_and_the_greedy_output(tiny_default, monkeypatch):
    """verification=block: block-verified steps (every judged draft carries its weight w), the
    greedy tokens of token verification, the rule in the trace, the export and the stats card;
    the race's autoregressive run is asked for no rule."""
    import json

    from visual.tokens import is_block_step

    token = _run(tiny_default, calibrate=False, temperature=0.0, max_new_tokens=12)[-1][0]
    calls = _spy_on_api(monkeypatch)
    outs = _run(tiny_default, mode="Race", temperature=0.0, max_new_tokens=12, tree_nodes=1, verification="block")
    final = outs[-1][0]
    assert final["error"] is None and final["rule"] == "block" and token["rule"] == "lossless"
    steps = final["spec_steps"]
    assert any(s.drafted for s in steps)
    assert all(is_block_step(s) for s in steps if any(d.judged for d in s.drafted))
    assert all(d.weight is not None for s in steps for d in s.drafted if d.judged)
    assert not any(is_block_step(s) for s in token["spec_steps"])
    assert final["spec"].token_ids == token["spec"].token_ids == final["ar"].token_ids  # point masses: same tokens
    assert final["spec"].config["rule"] == "block" and token["spec"].config["rule"] == "lossless"
    spec_call, ar_call = calls
    assert spec_call.mode == "speculative" and spec_call.rule == "block" and spec_call.tree_nodes == 1
    # the race's baseline has no rule (or tree) of its own: the same request whatever the rule
    assert ar_call.mode == "autoregressive" and ar_call == replace(spec_call, rule="lossless").autoregressive()
    exported = json.loads(Path(outs[-1][9].value["path"]).read_text(encoding="utf-8"))
    assert exported["config"]["rule"] == "block"
    assert "Block verification (Sun et al. 2025)" in outs[-1][7]  # the stats card's note
    assert "block verification judges every draft" in outs[-1][7]


def test_block_verification_of_a_tree_gets_a_clear_message(tiny_default):
    import gradio as gr

    from visual import playground_tab as pt

    with pytest.raises(gr.Error, match="Block verification judges a chain of drafts, not a tree: set the draft tree"):
        _run(tiny_default, tree_nodes=4, verification="block")
    choices = pt.preset_choices(tiny_default)
    args = (tiny_default, choices, "hi", "tiny-random", "model", 4, 0.0, 0, 1.0, 0, 16)
    assert _check(*args, 1, "block") == {} and _check(*args, 4, "lossless") == {}
    errs = _check(*args, 4, "block")
    assert set(errs) == {"verification"} and errs["verification"].startswith("Block verification judges a chain")
    errs = _check(*args, 0, "typical")  # a lab-only rule is not offered here
    assert set(errs) == {"tree_nodes", "verification"} and "lossless, block" in errs["verification"]


@pytest.mark.parametrize("bad", [1.0, -0.05, math.nan, "x"])
def test_draft_stop_is_checked_with_the_other_settings(tiny_default, bad):
    import gradio as gr

    from visual import playground_tab as pt

    args = (tiny_default, pt.preset_choices(tiny_default), "hi", "tiny-random", "model", 4, 0.0, 0, 1.0, 0, 16)
    assert _check(*args, 1, "lossless", 0.3) == {} and _check(*args, 1, "lossless", None) == {}
    errs = _check(*args, 1, "lossless", bad)
    assert set(errs) == {"draft_stop"} and errs["draft_stop"].startswith("draft_stop must be a number in [0, 1)")
    with pytest.raises(gr.Error, match="draft_stop"):
        _run(tiny_default, tree_nodes=1, verification="lossless", draft_stop=bad)


def test_preset_choice_and_links_reset_the_stop_threshold_to_the_presets():
    import gradio as gr

    from playground.config import load_config
    from visual.playground_tab import LINK_KEYS, build_playground_tab
    from visual.share import validate_query

    with gr.Blocks():
        tab = build_playground_tab()
    want = load_config().preset("gemma3-270m-mtp").draft_stop
    ups = dict(zip(LINK_KEYS, tab.link_updates(validate_query({"preset": "gemma3-270m-mtp"})), strict=True))
    assert ups["draft_stop"].value == want
    ups = dict(zip(LINK_KEYS, tab.link_updates(validate_query({"seed": "2"})), strict=True))
    assert ups["draft_stop"] == gr.skip()


def test_a_shared_link_can_preselect_block_verification():
    """?verification=block selects it (and a chain); a bad value is ignored with a reason, the
    control keeps token verification; share_query writes it only when it is not the default."""
    import gradio as gr

    from visual.playground_tab import LINK_KEYS, build_playground_tab
    from visual.share import share_query, validate_query

    with gr.Blocks():
        tab = build_playground_tab()
    pf = validate_query({"verification": "block", "gamma": "3"})
    assert (
        pf.get("verification") == "block" and pf.errors == () and pf.values() == {"gamma": 3, "verification": "block"}
    )
    ups = dict(zip(LINK_KEYS, tab.link_updates(pf), strict=True))
    assert ups["verification"]["value"] == "block" and ups["gamma"]["value"] == 3
    assert ups["tree_nodes"] == gr.skip()  # no preset in the link: its settings stay
    ups = dict(zip(LINK_KEYS, tab.link_updates(validate_query({"verification": "BLOCK", "preset": "tiny-random"}))))
    assert ups["verification"]["value"] == "block" and ups["tree_nodes"].value == 1
    assert validate_query({"verification": "token"}).get("verification") == "lossless"
    for bad in ("typical", "<script>", "x" * 200):
        pf = validate_query({"verification": bad, "seed": "5"})
        assert pf.get("verification") is None and pf.values() == {"seed": 5}
        assert any("verification must be one of lossless, block" in e for e in pf.errors), pf.errors
        assert all(len(e) < 120 for e in pf.errors)  # only an excerpt of the link's text
        ups = dict(zip(LINK_KEYS, tab.link_updates(pf), strict=True))
        assert ups["verification"] == gr.skip() and ups["seed"]["value"] == 5
    assert share_query({"gamma": 3, "verification": "lossless"}) == "?gamma=3"
    assert (
        validate_query({"verification": share_query({"verification": "block"}).split("=")[1]}).get("verification")
        == "block"
    )


def test_replay_handlers_walk_the_frames(tiny_default):
    from visual import playground_replay as pt
    from visual.replay import frame_count

    trace = _run(tiny_default, calibrate=False, max_new_tokens=8)[-1][0]
    n = frame_count(trace["spec_steps"])
    view = {**pt.empty_view(), "run_id": trace["run_id"], "playing": True}
    seen = []
    for _ in range(n + 2):
        view, html_out, timer, button = pt.on_tick(trace, view, 0.5)
        seen.append(view["frame"])
    assert seen[: n - 1] == list(range(1, n)) and view["frame"] == n - 1
    assert view["playing"] is False and timer.active is False  # stopped at the end of a finished run
    view, html_out, _, _ = pt.on_back(trace, view, 0.5)
    assert view["frame"] == n - 2 and "Step" in html_out
    view, *_ = pt.on_reset(trace, view, 0.5)
    assert view["frame"] == 0
    view, html_out, _, _ = pt.on_step(trace, view, 0.5)
    assert view["frame"] == 1 and "chip--drafted" in html_out and "&lt;b&gt;France&lt;/b&gt;" in html_out
    view, _, timer, button = pt.on_play_pause(trace, view, 0.5)
    assert view["playing"] and timer.active and "Pause" in button.value


# ---------------------------------------------------------------------------- launch settings & Spaces header


def test_port_env_overrides(monkeypatch):
    import app

    monkeypatch.setenv("PORT", "7999")
    kw = app.launch_kwargs()
    assert kw["server_name"] == "0.0.0.0" and kw["server_port"] == 7999
    monkeypatch.delenv("PORT")
    assert app.launch_kwargs()["server_port"] == 7860
    assert Path(kw["css_paths"][0]).is_file()


def test_readme_spaces_header_matches_spaces_config():
    """The header Spaces reads agrees with requirements.txt, the installed gradio and the config
    (the checks themselves live in tools/space_check.py; tests/test_space_check.py has mutants)."""
    import gradio

    from tools import space_check

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme.startswith("---\n"), "README.md must begin with the Spaces YAML header"
    raw = yaml.safe_load(CONFIG_PATH.read_text(encoding="utf-8"))
    findings = space_check.check_header(readme, (ROOT / "requirements.txt").read_text(encoding="utf-8"), raw, ROOT)
    assert [f for f in findings if f.level != "ok"] == []
    head = space_check.front_matter(readme)
    assert str(head["sdk_version"]) == gradio.__version__  # Spaces installs gradio from this
    assert head["python_version"] == "3.11"
    assert head["title"] == raw["app"]["title"]
    assert head["license"] == "apache-2.0"


def test_a_shared_link_keeps_its_gamma_and_resets_the_rest_to_its_preset():
    """A link with ?preset=..&gamma=.. shows the link's γ (a preset `change` listener used to
    reset it to the preset's own on page load); without γ the preset's own; the visitor's own
    preset choice is an `input` event, so only it resets the settings."""
    import gradio as gr

    from visual.playground_tab import LINK_KEYS, build_playground_tab
    from visual.share import Prefill

    with gr.Blocks() as demo:
        tab = build_playground_tab()
    ups = dict(zip(LINK_KEYS, tab.link_updates(Prefill({"preset": "gemma3-270m-early-exit", "gamma": 3})), strict=True))
    own = tab.by_name["gemma3-270m-early-exit"].preset
    assert own.gamma != 3 and ups["gamma"]["value"] == 3
    assert ups["drafter"].value == own.drafter and ups["tree_nodes"].value == own.tree_nodes
    ups = dict(zip(LINK_KEYS, tab.link_updates(Prefill({"preset": "gemma3-270m-early-exit"})), strict=True))
    assert ups["gamma"].value == own.gamma
    ups = dict(zip(LINK_KEYS, tab.link_updates(Prefill({"prompt": "hi"})), strict=True))
    assert [ups[k] for k in ("drafter", "tree_nodes", "draft_stop")] == [gr.skip()] * 3  # the preset's settings stay
    deps = demo.get_config_file()["dependencies"]
    preset_id = tab.components["preset"]._id
    triggers = {tuple(t) for d in deps for t in d["targets"] if t[0] == preset_id}
    assert (preset_id, "input") in triggers and (preset_id, "change") not in triggers


@pytest.mark.parametrize("env, expected", [(None, 100_000), ("7", 7)])
def test_gradio_summarises_its_events_rarely_unless_told(tiny_default, monkeypatch, env, expected):
    """gradio's monitoring summary (pandas over its last 10,000 events) costs 5-13 ms after every
    event when rebuilt each time; the app rebuilds it once per ``ANALYTICS_EVERY`` events, and
    the environment variable still wins.  (``ANAYLTICS`` is gradio's own spelling.)"""
    import app

    if env is None:
        monkeypatch.delenv("GRADIO_ANALYTICS_CACHE_FREQUENCY", raising=False)
    else:
        monkeypatch.setenv("GRADIO_ANALYTICS_CACHE_FREQUENCY", env)
    assert app.ANALYTICS_EVERY == 100_000
    assert app.build_demo()._queue.ANAYLTICS_CACHE_FREQUENCY == expected


def test_gradio_queue_looks_for_events_every_10_ms(tiny_default):
    """gradio's queue wakes its event loop every ``sleep_when_free`` seconds while no event
    waits; at gradio's 1 ms a lone run took 13 % longer.  The pinned gradio still names the
    setting so and still defaults to 1 ms, or this tuning would silently do nothing."""
    import platform

    import gradio as gr

    import app

    with gr.Blocks() as plain:
        gr.Markdown("x")
    assert plain.queue()._queue.sleep_when_free == (0.05 if platform.system() == "Windows" else 0.001)
    assert app.QUEUE_POLL_S == 0.01
    assert app.build_demo()._queue.sleep_when_free == app.QUEUE_POLL_S


def test_no_event_outputs_a_container(tiny_default):
    """gradio's page reads every output's whole subtree again on each status message of any later
    event, so a tab, column or row among an event's outputs makes every replay tick walk its
    contents (the tab titles are set in the browser instead: ``visual.i18n.RETITLE_JS``)."""
    import app

    cfg = app.build_demo().get_config_file()
    types = {c["id"]: c["type"] for c in cfg["components"]}
    containers = {"tabitem", "tabs", "column", "row", "group", "accordion", "form"}
    outputs = [(d["id"], types[o]) for d in cfg["dependencies"] for o in d["outputs"] if types[o] in containers]
    assert not outputs
    assert any("tablist" in (d.get("js") or "") for d in cfg["dependencies"])  # the titles still change


def test_the_run_and_the_page_loads_show_progress_on_one_small_output(tiny_default):
    """gradio's page re-reads the value of every component that ever showed progress on each
    status change of any event: with the Run's figures and table, or the page load's HTML and
    charts, among them, every replay tick would read them again (about a fifth of the page's
    work while a replay plays).  Their progress shows on one output, never a figure or table."""
    import app

    cfg = app.build_demo().get_config_file()
    types = {c["id"]: c["type"] for c in cfg["components"]}
    (run_btn,) = [c["id"] for c in cfg["components"] if c.get("props", {}).get("elem_id") == "run-btn"]
    heavy = {"plot", "dataframe", "file"}
    loads = [d for d in cfg["dependencies"] if d["outputs"] and any(t[1] == "load" for t in d["targets"])]
    runs = [
        d
        for d in cfg["dependencies"]
        if "plot" in {types[o] for o in d["outputs"]} and any(t == [run_btn, "click"] for t in map(list, d["targets"]))
    ]
    assert len(loads) >= 3 and len(runs) == 1
    for d in loads + runs:
        targets = d.get("show_progress_on") or d["outputs"]
        assert len(targets) == 1 and types[targets[0]] not in heavy, (d["id"], [types[o] for o in targets])
    assert types[runs[0]["show_progress_on"][0]] == "markdown"  # the Run's status line
