"""English and Chinese (visual.i18n): the catalogue is complete, the Playground's props all go
through it, and its server-rendered HTML in Chinese holds no English words.

Two guards against a visible string added in English only:

* every string prop of a Playground component (label, info, placeholder, a button's or Markdown's
  value, choice labels) must be a catalogue key (``L``), unless it has no English word in it;
* the Playground's HTML rendered in Chinese (a chain step with every verdict, a bonus, a block
  step, a tree step, the MTP / early-exit / other-tokenizer boxes, the stats card, the charts'
  text, the per-token table) must hold no English word beyond the formula's symbols and the
  tokens' own text.
"""

from __future__ import annotations

import html
import re
from dataclasses import replace

import gradio as gr
import pytest

import tests.synthetic as syn
from playground.config import load_config
from visual import charts, stats, tables, tokens
from visual.i18n import (
    CATALOGUE,
    L,
    accept_language,
    config_zh,
    gradio_i18n,
    lang_of,
    localized,
    normalize,
    placeholders,
    t,
    text_of,
    use_lang,
)
from visual.i18n.errors import engine_message
from visual.replay import DRAFT, START, VERIFY, Frame

# Words that are the same in both languages: symbols of the formulas, names, units, formats.
ALLOWED = {
    "min", "max", "norm", "argmax", "id", "MTP", "KV", "LM", "top", "bfloat16", "float32", "dtype", "ms",
    "Leviathan", "Sun", "Gemma", "SmolLM2", "Qwen2", "GGUF", "UTF", "gram", "tiny", "random", "playground",
    "weights", "exit", "hub", "Hub", "Instruct", "Space", "GPU", "CPU", "softmax", "transformers", "E2B",
    "x", "y", "extra", "customdata", "distinct", "sub", "sup", "br", "draft_stop", "top_p", "top_k",
}  # fmt: skip


def english_words(markup: str, tokens_text: set[str] = frozenset()) -> list[str]:
    """English words a visitor would read in ``markup``: text and the aria/title/tooltip attributes,
    without the tokens' own text (chips, code, “quoted” tokens) and the allowed symbols."""
    s = re.sub(r"<style>.*?</style>|<!DOCTYPE[^>]*>", " ", markup, flags=re.S)
    s = re.sub(r'<span class="chip__text">.*?</span>', " ", s, flags=re.S)
    s = re.sub(r"<code[^>]*>.*?</code>", " ", s, flags=re.S)
    attrs = " ".join(m.group(2) for m in re.finditer(r'(aria-label|title|data-tip)="([^"]*)"', s))
    text = re.sub(r"<[^>]+>", " ", s) + " " + attrs
    text = html.unescape(text)
    text = re.sub(r"\u201c.*?\u201d", " ", text, flags=re.S)  # quoted tokens
    words = re.findall(r"[A-Za-z][A-Za-z0-9_]+", text)
    return sorted({w for w in words if w not in ALLOWED and w not in tokens_text})


def _token_words(steps) -> set[str]:
    out: set[str] = set()
    for s in steps:
        texts = [d.text for d in s.drafted] + ([s.correction.text] if s.correction else [])
        for c in (
            (s.correction.distribution_top + s.correction.target_top + s.correction.draft_top) if s.correction else ()
        ):
            texts.append(c.text)
        for d in s.drafted:
            texts += [c.text for c in (d.residual_top or ())] + [c.text for c in (d.target_top or ())]
        for x in texts:
            out |= set(re.findall(r"[A-Za-z][A-Za-z0-9_]+", x))
    return out


# ---------------------------------------------------------------------------- the catalogue


def test_every_key_has_both_languages_and_the_same_values():
    en, zh = CATALOGUE["en"], CATALOGUE["zh"]
    assert set(en) == set(zh), f"missing in zh: {set(en) - set(zh)}; missing in en: {set(zh) - set(en)}"
    for key in en:
        assert zh[key].strip(), key
        need = placeholders(en[key]) - {"s"}  # {s}: the English plural ending
        assert placeholders(zh[key]) == need, f"{key}: zh fills {placeholders(zh[key])}, en {need}"


def test_chinese_messages_are_chinese():
    """A key copied over untranslated is caught: every Chinese message that has words has Han characters."""
    han = re.compile(r"[\u4e00-\u9fff]")
    untranslated = [
        k
        for k, v in CATALOGUE["zh"].items()
        if re.search(r"[A-Za-z]{4,}", re.sub(r"\{[^}]*\}", "", v))
        and not han.search(v)
        and not set(english_words(v.replace("%{", "{"))) <= ALLOWED
    ]
    assert not untranslated, untranslated


def test_the_config_text_has_chinese_for_every_preset_and_example():
    cfg = load_config()
    assert {p.name for p in cfg.presets} <= set(config_zh.PRESETS)
    assert {e["label"] for e in cfg.examples} <= set(config_zh.EXAMPLES)
    i18n = gradio_i18n(cfg).translations_dict
    assert set(i18n["en"]) == set(i18n["zh"])


def test_numbers_in_static_messages_match_the_code():
    from visual.playground_run import CALIBRATION_TOKENS

    for lang in ("en", "zh"):
        assert str(CALIBRATION_TOKENS) in CATALOGUE[lang]["pg.calibrate"]


def test_a_missing_key_is_an_error_not_a_raw_key():
    with pytest.raises(KeyError):
        L("no.such.key")
    with pytest.raises(KeyError):
        t("no.such.key")


# ---------------------------------------------------------------------------- choosing the language


class _Req:
    def __init__(self, referer=None, accept=None, query=None):
        self.headers = {k: v for k, v in (("referer", referer), ("accept-language", accept)) if v}
        self.query_params = query or {}


@pytest.mark.parametrize(
    ("req", "lang"),
    [
        (_Req("http://h/?lang=zh", "en-US,en"), "zh"),  # ?lang= beats the browser
        (_Req("http://h/?lang=en", "zh-CN,zh;q=0.9"), "en"),
        (_Req("http://h/", "zh-CN,zh;q=0.9,en;q=0.8"), "zh"),  # the browser's language
        (_Req("http://h/", "fr-FR,en;q=0.5,zh;q=0.4"), "en"),  # its first language we have
        (_Req("http://h/?lang=fr", "de"), "en"),  # nothing we have: English
        (_Req(None, None, {"lang": "zh-Hans"}), "zh"),
        (None, "en"),
    ],
)
def test_the_language_comes_from_lang_then_the_browser(req, lang):
    assert lang_of(req) == lang


def test_normalize_and_accept_language():
    assert normalize("zh_CN") == normalize("ZH-tw") == "zh" and normalize("en-GB") == "en" and normalize("fr") is None
    assert accept_language("en;q=0.1, zh;q=0.9") == "zh" and accept_language("") is None


def test_localized_handlers_render_in_the_requests_language():
    def plain(x):
        return t("pg.starting") + x

    def gen(n):
        for _ in range(n):
            yield t("pg.starting")

    zh = _Req("http://h/?lang=zh")
    assert localized(plain)(zh, "!") == CATALOGUE["zh"]["pg.starting"] + "!"
    assert list(localized(gen)(zh, 2)) == [CATALOGUE["zh"]["pg.starting"]] * 2
    assert t("pg.starting") == CATALOGUE["en"]["pg.starting"]  # nothing leaks out of the handler

    def takes_request(request: gr.Request):
        return t("pg.starting"), request

    out, got = localized(takes_request)(zh)
    assert out == CATALOGUE["zh"]["pg.starting"] and got is zh


def test_engine_errors_are_rendered_by_code_and_kept_in_english():
    from playground import validate

    with pytest.raises(validate.Invalid) as err:
        validate.temperature(5, 2.0)
    msg = "temperature must be 0 (greedy) or between 0.01 and 2.0, got 5"
    assert str(err.value) == engine_message(err.value) == msg  # English: the engine's own words
    with use_lang("zh"):
        zh = engine_message(err.value)
        assert "温度" in zh and "0.01" in zh and "5" in zh
        assert engine_message(ValueError(msg)) == msg  # no code: as the engine wrote it, never parsed
        assert engine_message("something new") == "something new"
        from playground.serving.trace_cache import describe_replay

        for live in (True, False):
            said = engine_message(describe_replay({"recorded_at": "2026-01-02 03:04:05 UTC", "live": live}))
            assert "2026-01-02 03:04:05 UTC" in said and not re.search(r"[a-z]{4,}", said.replace("UTC", "")), said


def test_the_labs_progress_lines_are_in_the_visitors_language():
    """playground.lab reports its progress as Messages (English text with a code); the lab shows
    them in the visitor's language, numbers kept (a plain line is shown as written)."""
    from playground.errors import ENGLISH, Message
    from visual.lab_tabs.common import progress_adapter

    lines = [
        Message(code, done="1,234", n="2,000") if "{done}" in text else Message(code)
        for code, text in ENGLISH.items()
        if code.startswith("progress.")
    ]
    seen: list[str] = []
    report = progress_adapter(lambda fraction, desc: seen.append(desc))
    for line in [*lines, "something new"]:
        report(0.5, line)
    assert seen == [*lines, "something new"]  # English: as written
    seen.clear()
    with use_lang("zh"):
        for line in [*lines, "something new"]:
            report(0.5, line)
    assert seen.pop() == "something new"
    assert sum("1,234 / 2,000" in said for said in seen) == 2
    for line, said in zip(lines, seen, strict=True):
        assert said != line and not re.search(r"[A-Za-z]{3,}", said), (line, said)


def test_share_links_carry_the_language():
    from visual.share import share_url, validate_query

    assert share_url(_Req("http://h:1/?lang=zh"), "?seed=3") == "http://h:1/?seed=3&lang=zh"
    assert share_url(_Req("http://h:1/", "en-US"), "?seed=3") == "http://h:1/?seed=3"
    assert not validate_query({"lang": "zh"}).errors  # ?lang= is a known parameter


# ---------------------------------------------------------------------------- the Playground's props


def _prop_strings(comp) -> list[tuple[str, object]]:
    out = []
    for prop in ("label", "info", "placeholder"):
        v = getattr(comp, prop, None)
        if v is not None:
            out.append((prop, v))
    if isinstance(comp, (gr.Button, gr.Markdown, gr.DownloadButton)):
        out.append(("value", comp.value))
    for ch in getattr(comp, "choices", None) or ():
        if isinstance(ch, (tuple, list)):
            out.append(("choice", ch[0]))
    if isinstance(comp, (gr.Accordion, gr.Tab)):
        out.append(("label", comp.label))
    return out


def _english_props(tab_key: str, reloads: tuple[str, ...]) -> list:
    """(component, elem_id, prop, value) for every string prop inside the tab titled ``tab_key`` that has
    English words and is not a catalogue key; what the page load re-renders in the visitor's language is
    left to the render tests."""
    import app

    demo = app.build_demo()
    title = CATALOGUE["en"][tab_key]
    top = next(b for b in demo.blocks.values() if isinstance(b, gr.Tab) and text_of(b.label) == title)
    inside: list = []

    def walk(block):
        for child in getattr(block, "children", []) or []:
            inside.append(child)
            walk(child)

    walk(top)
    reloaded = set()  # what a page load re-renders in the visitor's language
    for dep in demo.fns.values():
        if dep.name in reloads:
            reloaded |= set(dep.outputs)
    inside += [b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "lang-switch"]
    bad = []
    for comp in inside:
        if type(comp).__name__ == "Api":
            continue  # the /speculate endpoint's parameters: not on the page
        if isinstance(comp, gr.HTML) or getattr(comp, "elem_id", None) in ("prompt",) or comp in reloaded:
            continue  # server-rendered HTML (re-rendered on load): the render tests; the prompt is the visitor's text
        if isinstance(comp, gr.Textbox) and comp.label is not None and text_of(comp.label) == "Prompt":
            continue  # a prompt box's value is the visitor's text (the example prompt)
        for prop, v in _prop_strings(comp):
            if isinstance(v, gr.i18n.I18nData) or v in (None, "") or str(v).startswith("__i18n__"):
                continue
            if english_words(str(v)):
                bad.append((type(comp).__name__, getattr(comp, "elem_id", None), prop, v))
    return [b for b in bad if b[3] not in ("English",)]  # language names are written in their own language


def test_every_visible_prop_of_the_playground_is_a_catalogue_key():
    """Fails when a label, info, placeholder, button text or choice label is added in English only."""
    bad = _english_props("tab.playground", ("on_load",))
    assert not bad, "\n".join(map(repr, bad))


def test_every_visible_prop_of_the_lab_and_the_benchmark_is_a_catalogue_key():
    """The same guard for the Classroom lab (every sub-tab) and the Benchmark tab.  The classroom presets'
    own names are the config's text, like the prompts (not in the catalogue)."""
    for tab in ("tab.lab", "tab.bench"):
        bad = _english_props(tab, ("values",))  # the lab's localized starting panels (not its URL prefill)
        bad = [b for b in bad if not _is_classroom_text(b)]
        assert not bad, tab + ":\n" + "\n".join(map(repr, bad))


def _is_classroom_text(bad) -> bool:
    """A classroom preset's name (a choice) or its card (name — explanation): the config's own text."""
    from visual.classroom import classroom_presets

    labels = {cp.label for cp in classroom_presets(load_config())}
    _, _, prop, value = bad
    drafters = {d for p in load_config().presets for d in p.drafters}  # drafter names: the same in both languages
    if prop == "choice":
        return value in labels or value in drafters
    return any(str(value).startswith(f"**{x}**") for x in labels)


def test_the_pages_static_text_is_translated_in_chinese():
    import app

    demo = app.build_demo()
    cfg = demo.get_config_file()
    keys = set(re.findall(r'__i18n__\{[^}]*"key": "([^"]+)"', str(cfg)))
    zh = gradio_i18n(load_config()).translations_dict["zh"]
    assert keys and keys <= set(zh), keys - set(zh)
    assert {"tab.playground", "pg.run", "pg.prompt", "app.header"} <= keys


# ---------------------------------------------------------------------------- the server-rendered HTML


def _all_kinds_of_steps():
    from tests.visual.test_tree_view import hand_tree_step
    from tests.visual.test_visual import MTP_PROMPT_TOKENS, mtp_steps

    chain = syn.spec_steps()
    block = [
        replace(
            chain[0],
            drafted=tuple(replace(d, weight=0.5) for d in chain[0].drafted),
        )
    ]
    early = replace(chain[1], drafter="early-exit", drafter_info={"exit_layer": 2, "layers": 4, "exit": "trained"})
    other = replace(
        chain[1],
        drafter="other-tokenizer",
        drafter_info={"drafter_tokens": [" is", " a"], "target_tokens": [" is"], "retokenized": "alone"},
    )
    return (
        chain,
        block,
        [hand_tree_step(), hand_tree_step(resample=True)],
        mtp_steps(),
        MTP_PROMPT_TOKENS,
        [early, other],
    )


def _renders():
    chain, block, trees, mtp, mtp_prompt, others = _all_kinds_of_steps()
    out = [
        tokens.step_view("", (), Frame(-1, START)),
        tokens.step_view("p", chain, Frame(-1, START)),
        tokens.legend_html(),
    ]
    for steps, prompt_tokens in ((chain, None), (block, None), (trees, None), (mtp, mtp_prompt), (others, None)):
        for i in range(len(steps)):
            for phase in (DRAFT, VERIFY):
                out.append(tokens.step_view("提示", steps, Frame(i, phase), running=True, prompt_tokens=prompt_tokens))
    ar = syn.ar_steps()
    m = stats.compute_metrics(
        chain,
        3,
        result=syn.result(chain, single_token_ms=10.0),
        ar_result=syn.result(ar, mode="autoregressive", single_token_ms=10.0),
    )
    from visual import provenance

    for steps in (chain, trees, mtp):
        out.append(provenance.provenance_html("提示", steps))
        out.append(provenance.provenance_document("提示", steps))
    out.append(provenance.provenance_html("", ()))
    out.append(stats.stats_card({}))
    out.append(stats.stats_card(m, race=True, running=True, temperature=0.0, rule="block"))
    out.append(stats.stats_card(stats.compute_metrics(mtp, 3), temperature=1.0))
    df = tables.display_table(tables.token_table(chain, ar))
    out.append(
        " ".join(map(str, df.columns))
        + " "
        + " ".join(df[c].astype(str).str.cat(sep=" ") for c in (df.columns[0], df.columns[3], df.columns[10]))
    )
    return out, set().union(*(_token_words(s) for s in (chain, block, trees, mtp, others)))


def _figure_text(fig) -> str:
    j = fig.to_plotly_json()
    parts = [str(j["layout"].get("title", {}).get("text", ""))]
    for ax in ("xaxis", "yaxis", "yaxis2"):
        parts.append(str(j["layout"].get(ax, {}).get("title", {}).get("text", "")))
    parts += [str(a.get("text", "")) for a in j["layout"].get("annotations", ())]
    for tr in j["data"]:
        parts += [str(tr.get("name", "")), re.sub(r"%\{[^}]*\}", " ", str(tr.get("hovertemplate", "")))]
    return " ".join(parts)


def test_the_playground_html_in_chinese_has_no_english_words():
    with use_lang("zh"):
        renders, token_words = _renders()
        chain = syn.spec_steps()
        figs = [
            charts.race_figure((), ()),
            charts.race_figure(chain, syn.ar_steps()),
            charts.race_figure(chain, ()),
            charts.tokens_per_call_figure(chain),
            charts.acceptance_by_position_figure(chain, 3),
            charts.acceptance_by_position_figure((), 3),
            charts.accepted_length_figure(chain, 3),
            charts.timeline_figure(chain),
        ]
    leftovers = {w for r in renders for w in english_words(r, token_words)}
    leftovers |= {w for f in figs for w in english_words(_figure_text(f), token_words)}
    assert not leftovers, sorted(leftovers)


def test_the_same_renders_in_english_are_english():
    """The check above can fail: in English the same renders are full of English words."""
    renders, token_words = _renders()
    assert len({w for r in renders for w in english_words(r, token_words)}) > 100


# ---------------------------------------------------------------------------- the lab and the benchmark


def _lab_and_bench_renders():
    """The lab's and the Benchmark's server-rendered text: every panel, figure and table in its
    starting state and after a (synthetic) result, and the handlers' status lines."""
    import pandas as pd

    from playground.lab.quiz import Scoreboard
    from playground.lab.theory import MeasuredPoint, theory_curve
    from visual import bench as vbench
    from visual import lab as vlab
    from visual import serving as vserving

    out, figs = [], []
    curve = theory_curve(0.7, 0.1, 1.3)
    slow = theory_curve(0.2, 0.9, 2.0)
    point = MeasuredPoint(
        alpha=0.6, c=None, v=None, gamma=4, mean_accepted_length=1.5, predicted=1.2, measured=None, note=""
    )
    out += [
        vlab.stopped_html(t("vlab.what.equality")),
        vlab.equality_html(None),
        vlab.distribution_html(None),
        vlab.theory_html(curve, 4),
        vlab.theory_html(slow, 4, point),
        vlab.question_html(None),
        vlab.score_card(Scoreboard()),
        vlab.replay_html(None, 0),
        vlab._partial_banner("x"),
        " ".join(vlab.rules_table([]).columns),
    ]
    figs += [vlab.distribution_figure(None), vlab.theory_figure(curve), vlab.theory_figure(slow, point)]
    data = {
        "about": {
            "knee_tokens": 32,
            "date": "2026-01-01",
            "machine": "CPU",
            "command": "python -m playground",
            "preset": "gemma3-270m",
            "dtype": "float32",
            "gamma": 4,
            "temperature": 0,
            "tokens": 16,
        },  # fmt: skip
        "class": [
            {"runs": r, "variant": v, "tokens_per_s": 1.0, "p50_s": 1.0, "p95_s": 2.0, "mean_shared_rows": 1.0}
            for r in (1, 2)
            for v in ("speculative, capped", "speculative", "autoregressive")
        ],
        "pass_costs": [{"rows": 1, "tokens": 1, "relative": 1.0}, {"rows": 4, "tokens": 8, "relative": 2.0}],
    }
    figs += [vserving.throughput_figure(data), vserving.pass_cost_figure(data)]
    out += [vserving.provenance_html({}), vserving.provenance_html(data, live=True)]
    out.append(" ".join(vserving.class_headers(data)) + " " + " ".join(str(r[1]) for r in vserving.class_rows(data)))
    rows = [
        {"method": m, "drafter": d, "gamma": 4, "tree_nodes": n, "prompts": "grounded", "temperature": 0.0,
         "tokens_per_s": 10.0, "speedup_vs_autoregressive": 1.5, "speedup_vs_hf_generate": 1.2, "acceptance_rate": 0.5,
         "predicted_speedup": 1.4, "speedup_non_repetitive": 1.1, "speedup_repetitive": 2.0, "repetitive_runs": 1,
         "n_runs": 2, "v": 1.3, "nodes_per_pass": 3.0, "speedup_vs_chain": 1.1, "rule": "lossless"}
        for m, d, n in (("speculative", "prompt-lookup", 1), ("speculative", "prompt-lookup", 4),
                        ("autoregressive", None, 1))
    ]  # fmt: skip
    out.append(vbench.summary_markdown(rows, {"machine": {"cpu": "x86_64", "threads": 2, "load_avg_1m": 0.5}}))
    out.append(vbench.summary_markdown([]))
    table = vbench.bench_table(rows)
    out.append(" ".join(table.columns) + " " + " ".join(str(v) for v in table[table.columns[0]]))
    figs += list(vbench.bench_figures([]).values())
    assert isinstance(table, pd.DataFrame)
    return out, figs


# Lab/bench words that are names in both languages: presets, drafters, the CLI, libraries, units.
LAB_ALLOWED = {
    "lookup", "prompt", "python", "CLI", "HF", "generate", "x86_64", "AR", "TV", "JSON", "ICLR", "Medusa", "SGLang",
    "TGI", "vLLM", "torch", "bench", "tools", "lab_wall_s", "limits", "chi", "f_spec", "f_target", "logits", "p50", "p95", "ms",
    "tiny", "random", "v_", "MB", "u", "q", "p", "gemma3", "exp", "AVX", "AVX2", "AMX", "BF16",
}  # fmt: skip


def _lab_leftovers(out, figs) -> set[str]:
    words = {w for r in out for w in english_words(r)}
    words |= {w for f in figs for w in english_words(_figure_text(f))}
    return {w for w in words if w not in LAB_ALLOWED}


def test_the_lab_and_benchmark_renders_in_chinese_have_no_english_words():
    with use_lang("zh"):
        out, figs = _lab_and_bench_renders()
        out += [
            CATALOGUE["zh"][k]
            for k in CATALOGUE["zh"]
            if k.startswith(("lab.", "bench.", "sv.", "vlab.")) and "{" not in CATALOGUE["zh"][k]
        ]
    leftovers = _lab_leftovers(out, figs)
    assert not leftovers, sorted(leftovers)


def test_the_lab_and_benchmark_renders_in_english_are_english():
    """The check above can fail: in English the same renders are full of English words."""
    out, figs = _lab_and_bench_renders()
    assert len(_lab_leftovers(out, figs)) > 100


def test_lab_and_bench_handlers_answer_in_the_visitors_language():
    from types import SimpleNamespace

    from visual.lab_tabs.predict import reveal_rate
    from visual.lab_tabs.stop import press_stop

    zh = _Req("http://h/?lang=zh")
    zh.session_hash = "s"
    assert localized(press_stop)(zh) == CATALOGUE["zh"]["lab.stopping"]
    assert press_stop(SimpleNamespace(session_hash="s")) == CATALOGUE["en"]["lab.stopping"]
    with pytest.raises(gr.Error) as err:
        localized(reveal_rate)(zh, None, None)
    assert str(err.value.message) == CATALOGUE["zh"]["lab.p.start_first"]


def test_the_lab_re_renders_its_starting_panels_in_the_visitors_language():
    from visual.lab_tab import build_lab_tabs

    with gr.Blocks():
        tabs = build_lab_tabs()
    with use_lang("zh"):
        values = tabs.localized_values()
    assert len(values) == len(tabs.localized_outputs)
    assert "tiny-random" in values[0] and not set(english_words(values[0])) - {"tiny", "random", "LOSSY", "WRONG"}
    by = dict(zip((getattr(c, "elem_id", None) or i for i, c in enumerate(tabs.localized_outputs)), values))
    from visual import lab as vlab

    texts = [v for v in values if isinstance(v, str)]
    assert vlab.equality_html(None) not in texts  # English
    with use_lang("zh"):
        assert vlab.equality_html(None) in texts and vlab.formulas_md() in texts and by


def test_every_tab_title_is_re_rendered_in_the_visitors_language():
    """After ?lang=zh gradio re-renders only the selected tab's title of each tab set; one script
    run in the browser on load sets them all, the lab's sub-tabs included (without it five of
    them stayed English).  It carries every title in every language, and no event outputs a tab."""
    import json

    import app
    from visual.i18n import LANGS
    from visual.lab_tab import TABS

    demo = app.build_demo()
    tabs = [b for b in demo.blocks.values() if isinstance(b, gr.Tab)]
    assert len(tabs) == len(app.TABS) + len(TABS)  # the top tabs and the lab's sub-tabs
    assert not [f for f in demo.fns.values() if set(f.outputs) & set(tabs)]
    scripts = [f.js for f in demo.fns.values() if f.js and "tablist" in f.js]
    assert len(scripts) == 1
    titles = [{lang: CATALOGUE[lang][tab.label.key] for lang in LANGS} for tab in tabs]
    assert json.dumps(titles, ensure_ascii=False) in scripts[0]
    zh = [t["zh"] for t in titles]
    assert {"课堂实验", "为全班服务"} <= set(zh) and not any(english_words(label) for label in zh)


def test_numbers_in_the_lab_and_bench_messages_match_the_code():
    from playground.repetition import HIGH_SHARE
    from visual import bench_tab

    for lang in ("en", "zh"):
        assert f"{HIGH_SHARE:.0%}" in CATALOGUE[lang]["bench.metric_help"]
        assert str(bench_tab.MAX_LIVE_GAMMAS) in CATALOGUE[lang]["bench.gammas"]
        assert str(bench_tab.MAX_LIVE_TREES) in CATALOGUE[lang]["bench.trees"]


def test_the_catalogue_words_every_rule_of_the_engine_and_no_other():
    """The engine names its verification rules by key only; the page's words for each (the lab's
    selector label, what it does, what to expect; the Playground's label for the rules it
    offers) are the catalogue's, in both languages, and the catalogue words no rule the engine lacks."""
    from playground.rules import APP_RULES, RULES

    for lang in ("en", "zh"):
        for key in RULES:
            for part in (f"lab.d.rule.{key}", f"vlab.rule.{key}.what", f"vlab.rule.{key}.expect"):
                assert CATALOGUE[lang].get(part), (lang, part)
        for key in APP_RULES:
            assert CATALOGUE[lang].get(f"pg.verification.{key}"), (lang, key)
        worded = {k.split(".")[2] for k in CATALOGUE[lang] if k.startswith("vlab.rule.")}
        worded |= {
            k.split(".", 3)[3] for k in CATALOGUE[lang] if k.startswith("lab.d.rule.") and k != "lab.d.rule.info"
        }
        worded |= {
            k.split(".", 2)[2]
            for k in CATALOGUE[lang]
            if k.startswith("pg.verification.") and k != "pg.verification.info"
        }
        assert worded == set(RULES), lang


def test_the_benchmarks_quality_column_is_rendered_by_code():
    from tools.bench.aggregate import QUALITY, Quality
    from visual.bench import quality_text

    for code, text in QUALITY.items():  # the catalogue's English is the bench's own, with the same placeholders
        assert CATALOGUE["en"][f"bench.q.{code}"] == text, code
        assert placeholders(CATALOGUE["zh"][f"bench.q.{code}"]) == placeholders(text), code
    samples = [Quality("reference"), Quality("identical"), Quality("differs_bf16", fd=7),
               Quality("lossy_drift", tv="0.012"), Quality("lossy"), Quality("differs_hf", fd=3)]  # fmt: skip
    assert samples[2] == "differs from token 7 (bfloat16 rounding of the multi-token pass; exact in float32)"
    assert [quality_text(x) for x in samples] == samples  # English: as the bench wrote it
    with use_lang("zh"):
        said = [quality_text(x) for x in samples]
        assert "7" in said[2] and "0.012" in said[3] and "3" in said[5]
        assert not {w for x in said for w in english_words(x)} - {"bfloat16", "float32", "TV", "HF", "generate"}
        assert quality_text("something new") == "something new"
        assert quality_text("identical to target") == "identical to target"  # plain text is never parsed


def test_the_playground_re_renders_every_server_html_panel_in_the_visitors_language():
    """Every gr.HTML the Playground renders on the server before a run is re-rendered at page
    load in the visitor's language (the provenance view's empty state once stayed English)."""
    from visual.playground_tab import build_playground_tab

    with gr.Blocks():
        tab = build_playground_tab()
    html_keys = {k for k, c in tab.components.items() if isinstance(c, gr.HTML)}
    localized = {getattr(c, "elem_id", None) for c in tab.localized_outputs()} | {
        k for k, c in tab.components.items() if c in tab.localized_outputs()
    }
    first_render = {k for k in html_keys if tab.components[k].value}  # panels with something to read
    assert first_render <= localized, first_render - localized
    with use_lang("zh"):
        values = tab.localized_values()
    prov = [v for v in values if isinstance(v, str) and "prov--empty" in v]
    assert prov == [f'<div class="prov prov--empty">{CATALOGUE["zh"]["prov.empty"]}</div>']


def test_every_handler_that_writes_the_provenance_panel_renders_in_the_visitors_language():
    """Run clears the coloured text at once (its own event, before the run's): that clearing
    rendered the empty state in English on the Chinese page until the run had finished."""
    import app

    demo = app.build_demo()
    panel = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "provenance")
    writers = [f for f in demo.fns.values() if f.outputs and f.outputs[0] is panel and not f.inputs]
    assert writers, "no event without inputs writes the provenance panel"  # Run's own clearing event
    zh = _Req("http://h/?lang=zh")
    for dep in writers:
        html = dep.fn(zh)[0]
        assert CATALOGUE["zh"]["prov.empty"] in html, (dep.name, html)
