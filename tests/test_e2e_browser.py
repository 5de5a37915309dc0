"""End to end in headless Chromium: load the page, Run on tiny-random, watch accepted chips appear.

Debian's ``chromium`` package driven by the ``playwright`` pip package with
``executable_path="/usr/bin/chromium"`` (never ``playwright install``).  Skipped,
with the reason, where either is missing.  Screenshots and the measured time from
pressing Run to the first animated step go to tests/artifacts/.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
XSS_PROMPT = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script> Once upon a time'


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        pytest.skip(f"Chromium not found at {CHROMIUM} (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright pip package is not installed")
    with sync_api.sync_playwright() as p:
        exe = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
        b = p.chromium.launch(executable_path=exe, args=FLAGS)
        yield b
        b.close()


def _pause(page) -> None:
    """Stop the step view's replay and wait until no tick is left on its way."""
    for _ in range(5):
        if "❚❚" not in page.locator("#play-btn").inner_text():
            page.wait_for_timeout(1500)  # longer than a tick's interval: one in flight has landed
            if "❚❚" not in page.locator("#play-btn").inner_text():
                return
        else:
            page.click("#play-btn")
            page.wait_for_timeout(300)


def _wait_for(page, selector: str, timeout: int) -> None:
    """``page.wait_for_selector``; on a timeout the failure says what the page showed instead."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_selector(selector, timeout=timeout)
    except PlaywrightTimeout:
        shown = {sel: page.locator(sel).first.inner_text()[:300] for sel in ("#status", "#step-view", "#play-btn")}
        pytest.fail(f"{selector} not seen in {timeout / 1000:.0f} s; the page showed {shown}")


def test_run_animates_steps_and_shows_accepted_chips(browser, server):
    ARTIFACTS.mkdir(exist_ok=True)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(server + "/", wait_until="load", timeout=120_000)
    page.wait_for_selector("#run-btn", timeout=60_000)
    assert "tiny-random" in page.locator("#preset input").input_value()

    # Bad input is caught before anything runs, with the message next to the field.  A click in
    # the page's first moments sometimes shows no message (1 in 8 under load, with or without
    # the tab-title script: the page's load events, whose outputs include the prompt, were still
    # finishing); a second click does.
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page.locator("#prompt textarea").fill("   ")
    for attempt in range(2):
        page.click("#run-btn")
        try:
            page.get_by_text("The prompt is empty: type at least one word.").first.wait_for(timeout=15_000)
            break
        except PlaywrightTimeout:
            if attempt:
                raise
    assert page.locator("#step-view .chip").count() == 0

    page.locator("#prompt textarea").fill(XSS_PROMPT)
    t0 = time.perf_counter()
    page.click("#run-btn")
    _wait_for(page, "#step-view .chip", timeout=120_000)
    first_chip_s = time.perf_counter() - t0
    _wait_for(page, "#step-view .chip--accepted", timeout=180_000)
    accepted_s = time.perf_counter() - t0
    _wait_for(page, "#status:has-text('Done.')", timeout=300_000)
    done_s = time.perf_counter() - t0

    # The prompt's markup is shown as text and never runs.
    assert page.evaluate("window.__xss") is None
    assert "<script>window.__xss=2</script>" in page.locator("#step-view .prompt").inner_text()
    assert page.locator("#step-view script, #step-view img").count() == 0

    # The narration is an aria-live status; a chip shows its numbers on keyboard focus.
    live = page.locator("#step-view [aria-live=polite]")
    assert live.count() == 1 and live.inner_text().startswith("Step ")
    chip = page.locator("#step-view .chip--accepted").first
    chip.focus()
    tip = chip.evaluate("el => getComputedStyle(el, '::after').content")
    assert "q(x) drafter" in tip and "p(x) target" in tip

    # Replay controls: Reset goes back before the first step, Step shows step 1's drafts.  Reset
    # is pressed while the replay plays: a tick on its way must not undo it.
    if "❚❚" not in page.locator("#play-btn").inner_text():
        page.click("#play-btn")  # the replay had ended: play it again
    page.wait_for_selector("#play-btn:has-text('❚❚')", timeout=10_000)
    page.wait_for_timeout(1000)  # ticks are flowing
    page.click("#reset-btn")
    _wait_for(page, "#step-view .sd-step:has-text('Before the first step')", timeout=30_000)
    page.wait_for_timeout(1500)  # longer than a tick's interval: one on its way has landed
    assert page.locator("#step-view .sd-step:has-text('Before the first step')").count() == 1
    assert "❚❚" not in page.locator("#play-btn").inner_text()
    page.click("#step-btn")
    _wait_for(page, "#step-view .sd-step:has-text('Step 1 of')", timeout=30_000)
    assert page.locator("#step-view .chip--drafted").count() >= 1
    page.click("#step-btn")
    _wait_for(page, "#step-view .sd-step:has-text('verified')", timeout=30_000)
    page.wait_for_timeout(800)  # let the flip animation finish before the picture

    page.screenshot(path=str(ARTIFACTS / "e2e_light.png"), full_page=True)

    # A second run, models already loaded: time from Run to its first animated step.
    t0 = time.perf_counter()
    page.click("#run-btn")
    _wait_for(page, "#step-view .sd-narration:has-text('Generating')", timeout=60_000)
    _wait_for(page, "#step-view .sd-step:has-text('Step 1 of')", timeout=120_000)
    warm_first_s = time.perf_counter() - t0
    _wait_for(page, "#status:has-text('Done.')", timeout=300_000)
    page.click("#step-btn")  # pause the replay on a fixed frame for the dark picture
    page.wait_for_timeout(800)
    page.evaluate("document.body.classList.add('dark')")
    page.wait_for_timeout(300)
    page.screenshot(path=str(ARTIFACTS / "e2e_dark.png"), full_page=True)
    (ARTIFACTS / "e2e_timings.json").write_text(
        json.dumps(
            {
                "preset": "tiny-random",
                "run_to_first_animated_chip_s": round(first_chip_s, 2),
                "run_to_first_accepted_chip_s": round(accepted_s, 2),
                "run_to_done_s": round(done_s, 2),
                "warm_run_to_first_animated_step_s": round(warm_first_s, 2),
            },
            indent=1,
        )
    )
    assert not errors, errors
    page.close()


LATE_TICK_S = 1.5  # longer than a tick's interval (0.8 s): a tick is always on its way


@pytest.fixture(scope="module")
def late_tick_server(tiny_default):
    """The app with every replay tick's response held ``LATE_TICK_S`` after the tick has updated
    the view: what a busy server or page does to the order in which responses arrive."""
    import app
    import visual.playground_tab as tab
    from tests.app_server import free_port

    real = tab.one_at_a_time

    def late(handler):
        locked = real(handler)
        if handler.__name__ != "on_tick":
            return locked

        def tick(*args):
            out = locked(*args)
            time.sleep(LATE_TICK_S)
            return out

        return tick

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tab, "one_at_a_time", late)
        demo = app.build_demo()
    _, url, _ = demo.launch(
        prevent_thread_lock=True, quiet=True, **{**app.launch_kwargs(port=free_port()), "server_name": "127.0.0.1"}
    )
    yield url.rstrip("/")
    demo.close()


def test_a_late_tick_never_shows_over_a_click(browser, late_tick_server):
    """A tick's response that reaches the page after Reset's or Pause's is dropped: the page keeps
    showing the frame the click asked for, and the Play button its label."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(late_tick_server + "/", wait_until="load", timeout=120_000)
    page.wait_for_selector("#run-btn", timeout=60_000)
    page.click("#run-btn")
    _wait_for(page, "#status:has-text('Done.')", timeout=300_000)
    page.wait_for_timeout(1000 * (LATE_TICK_S + 1))  # the run's last tick has landed
    page.click("#reset-btn")
    _wait_for(page, "#step-view .sd-step:has-text('Before the first step')", timeout=30_000)
    for _ in range(2):
        page.click("#play-btn")
        page.wait_for_timeout(2500)  # playing, with a tick on its way
        page.click("#reset-btn")
        page.wait_for_timeout(1000 * (LATE_TICK_S + 1.5))
        assert page.locator("#step-view .sd-step:has-text('Before the first step')").count() == 1
        assert "Play" in page.locator("#play-btn").inner_text()
    page.click("#play-btn")
    page.wait_for_timeout(2500)
    page.click("#play-btn")  # Pause
    page.wait_for_timeout(500)
    paused_on = page.locator("#step-view .sd-step").inner_text()
    page.wait_for_timeout(1000 * (LATE_TICK_S + 1.5))
    assert page.locator("#step-view .sd-step").inner_text() == paused_on
    assert "Play" in page.locator("#play-btn").inner_text()
    page.close()


# Everything in the step view must end inside the viewport, except what lies inside a box
# that scrolls or clips on its own (the tree view, the KV strip): those boxes are checked.
OVERFLOW_JS = """() => {
  const vw = document.documentElement.clientWidth;
  const bad = [];
  for (const el of document.querySelectorAll('#step-view *')) {
    let inBox = false;
    for (let a = el.parentElement; a && a.id !== 'step-view'; a = a.parentElement) {
      if (['auto', 'scroll', 'hidden'].includes(getComputedStyle(a).overflowX)) { inBox = true; break; }
    }
    const r = el.getBoundingClientRect();
    if (!inBox && r.width > 0 && r.right > vw + 0.5) bad.push(`${el.tagName}.${el.className} ends at ${Math.round(r.right)}`);
  }
  return bad;
}"""


def _run_and_show_a_verified_step(page, steps: int = 2) -> None:
    page.click("#run-btn")
    _wait_for(page, "#status:has-text('Done.')", timeout=300_000)
    page.click("#reset-btn")
    _wait_for(page, "#step-view .sd-step:has-text('Before the first step')", timeout=30_000)
    for _ in range(steps):
        page.click("#step-btn")
        page.wait_for_timeout(300)
    _wait_for(page, "#step-view .sd-step:has-text('verified')", timeout=30_000)
    page.wait_for_timeout(800)  # the flip animation


@pytest.mark.parametrize("width,height", [(360, 740), (390, 844)])
def test_phone_run_first_and_nothing_wider_than_the_screen(browser, server, width, height):
    ARTIFACTS.mkdir(exist_ok=True)
    page = browser.new_page(viewport={"width": width, "height": height})
    page.goto(server + "/", wait_until="load", timeout=120_000)
    page.wait_for_selector("#run-btn", timeout=60_000)
    page.wait_for_selector("#settings > button.label-wrap:not(.open)", timeout=30_000)  # settings start closed
    for sel in ("#run-btn", "#step-btn", "#back-btn", "#play-btn"):  # in view, without scrolling
        box = page.locator(sel).bounding_box()
        assert box and box["y"] >= 0 and box["y"] + box["height"] <= height, (sel, box)
        assert box["x"] >= 0 and box["x"] + box["width"] <= width, (sel, box)
        assert box["height"] >= 44, (sel, box)  # a thumb's target
    prompt, settings = page.locator("#prompt").bounding_box(), page.locator("#settings").bounding_box()
    assert prompt["y"] < settings["y"]  # prompt first, settings below
    _run_and_show_a_verified_step(page)
    assert page.locator("#step-view .steptable tr").count() >= 2  # the drafts, one card each
    # plotly's toolbar (always shown on a touch screen) would sit over a chart's title
    toolbars = page.locator(".js-plotly-plot .modebar-container")
    shown = toolbars.evaluate_all("els => els.map(el => getComputedStyle(el).display)")
    assert shown and set(shown) == {"none"}, shown
    assert page.evaluate(OVERFLOW_JS) == []
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.screenshot(path=str(ARTIFACTS / f"e2e_phone_{width}.png"), full_page=False)
    page.close()


def _serious(axe, page) -> list[str]:
    found = axe.run(page).response["violations"]
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes'][:3]]}"
        for v in found
        if v["impact"] in ("serious", "critical")
    ]


def test_axe_and_keyboard(browser, server):
    sync_axe = pytest.importorskip("axe_playwright_python.sync_playwright", reason="pip install axe-playwright-python")
    axe = sync_axe.Axe()
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    page.goto(server + "/", wait_until="load", timeout=120_000)
    page.wait_for_selector("#run-btn", timeout=60_000)
    _run_and_show_a_verified_step(page)

    # Keyboard: with the step view focused, → steps, ← goes back, space plays; the focus ring shows.
    view = page.locator("#step-view [aria-keyshortcuts]")
    page.keyboard.press("Shift")  # a keyboard user: :focus-visible applies
    view.focus()
    assert view.evaluate("el => getComputedStyle(el).outlineStyle") != "none"
    head = page.locator("#step-view .sd-step")
    before = head.inner_text()
    page.keyboard.press("ArrowRight")
    page.wait_for_function("t => document.querySelector('#step-view .sd-step').innerText !== t", arg=before)
    page.keyboard.press("ArrowLeft")
    page.wait_for_function("t => document.querySelector('#step-view .sd-step').innerText === t", arg=before)
    page.keyboard.press(" ")
    page.wait_for_selector("#play-btn:has-text('Pause')", timeout=10_000)
    page.keyboard.press(" ")
    page.wait_for_selector("#play-btn:has-text('Play')", timeout=10_000)

    problems = {}
    for theme in ("light", "dark"):
        if theme == "dark":
            page.evaluate("document.body.classList.add('dark')")
        for tab in ("Playground", "Classroom lab", "Benchmark"):
            page.get_by_role("tab", name=tab).first.click()
            page.wait_for_timeout(600)
            bad = _serious(axe, page)
            if bad:
                problems[f"{theme} / {tab}"] = bad
    assert not problems, problems
    page.close()


# ---------------------------------------------------------------------------- languages (visual.i18n)

# Text a Chinese page may still show: formula symbols, units, model and file names, and gradio's own
# numerals/units; the tokens' own text is taken out before the check (chips, code, “quoted” tokens).
SAME_IN_BOTH = {
    "min", "max", "norm", "argmax", "id", "MTP", "KV", "LM", "top", "bfloat16", "float32", "dtype", "ms",
    "Leviathan", "Sun", "Gemma", "SmolLM2", "Qwen2", "tiny", "random", "mtp", "lookup", "prompt", "model",
    "English", "Instruct", "GGUF", "pos", "CPU", "GPU", "gram", "distinct", "softmax", "UTC",
}  # fmt: skip

_VISIBLE_WORDS_JS = """
() => {
  const panel = document.querySelector('#step-view').closest('[role=tabpanel]') || document.body;
  const skip = '.chip__text, code, .tok, .prompt, textarea, input, .kv__tok, .bar-label, #drafter, .modebar, .prov__text, style, script, defs';
  const walker = document.createTreeWalker(panel, NodeFilter.SHOW_TEXT);
  const out = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (!el || el.closest(skip) || !el.checkVisibility({visibilityProperty: true, opacityProperty: true})) continue;
    out.push(n.textContent);
  }
  return out.join(' ').replace(/\\u201c[^\\u201d]*\\u201d/g, ' ');
}
"""


def _english_words(text: str) -> list[str]:
    import re

    return sorted({w for w in re.findall(r"[A-Za-z][A-Za-z0-9_]+", text) if w not in SAME_IN_BOTH})


def _run_in_language(page, done: str) -> None:
    page.click("#run-btn")
    _wait_for(page, f"#status:has-text('{done}')", timeout=300_000)
    _pause(page)
    page.click("#reset-btn")
    page.click("#step-btn")
    page.click("#step-btn")
    page.wait_for_timeout(1200)


_TAB_TITLES_JS = "() => [...document.querySelectorAll('button[role=tab]')].map((b) => b.innerText.trim())"


def _tab_titles_are_in(page, lang: str) -> None:
    """Every tab title, the lab's sub-tabs included once they are drawn, in ``lang`` (gradio itself
    re-renders only each tab set's selected title when ``?lang=`` differs from the browser's)."""
    import re

    other = re.compile(r"[A-Za-z]{3}" if lang == "zh" else r"[\u4e00-\u9fff]")
    top = page.evaluate(_TAB_TITLES_JS)
    page.locator("button[role=tab]").nth(1).click()  # the lab: its sub-tabs appear
    page.wait_for_timeout(800)
    titles = page.evaluate(_TAB_TITLES_JS)
    page.locator("button[role=tab]").first.click()
    assert len(top) >= 3 and len(titles) > len(top), titles
    assert not [t for t in titles if other.search(t)], titles


@pytest.mark.parametrize(("lang", "run", "done"), [("zh", "运行 ▸", "完成。"), ("en", "Run ▸", "Done.")])
def test_lang_in_the_url_picks_the_playgrounds_language(browser, server, lang, run, done):
    """``?lang=zh`` on an English browser: the Playground is Chinese, with no English UI string
    left once a run is on screen; ``?lang=en`` on a Chinese browser: the English page."""
    ARTIFACTS.mkdir(exist_ok=True)
    ctx = browser.new_context(locale="en-US" if lang == "zh" else "zh-CN", viewport={"width": 1400, "height": 1000})
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{server}/?lang={lang}", wait_until="load", timeout=120_000)
    page.wait_for_selector(f"#run-btn:has-text('{run}')", timeout=60_000)
    legend = "已接受" if lang == "zh" else "accepted"
    page.wait_for_selector(f"#legend:has-text('{legend}')", timeout=60_000)  # the load re-rendered the HTML
    assert page.evaluate("document.documentElement.lang").startswith(lang)
    assert page.locator(f"#lang-switch input[value={lang}]").is_checked()
    _run_in_language(page, done)
    _tab_titles_are_in(page, lang)
    words = _english_words(page.evaluate(_VISIBLE_WORDS_JS))
    if lang == "zh":
        assert not words, f"English left on the Chinese Playground: {words}"
        assert "第 1 /" in page.locator("#step-view .sd-step").inner_text()
    else:
        assert {"Step", "Prompt", "Temperature", "Verification", "statistics"} <= set(words)
        assert page.locator("#step-view .sd-step").inner_text().startswith("Step 1 of")
    page.screenshot(path=str(ARTIFACTS / f"i18n_{lang}_light.png"), full_page=True)
    page.evaluate("document.body.classList.add('dark')")
    page.wait_for_timeout(300)
    page.screenshot(path=str(ARTIFACTS / f"i18n_{lang}_dark.png"), full_page=True)
    assert not errors, errors
    ctx.close()


def test_the_browsers_language_picks_it_and_the_switch_changes_it(browser, server):
    ctx = browser.new_context(locale="zh-CN", viewport={"width": 1400, "height": 900})
    page = ctx.new_page()
    page.goto(server + "/", wait_until="load", timeout=120_000)
    page.wait_for_selector("#run-btn:has-text('运行')", timeout=60_000)
    page.wait_for_selector("#legend:has-text('已接受')", timeout=60_000)
    page.locator("#lang-switch label:has-text('English')").click()
    page.wait_for_url("**lang=en**", timeout=30_000)
    page.wait_for_selector("#run-btn:has-text('Run')", timeout=60_000)
    page.wait_for_selector("#legend:has-text('accepted')", timeout=60_000)
    ctx.close()
