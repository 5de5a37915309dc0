"""Screenshots of the running app for README.md and the docs, taken the same way every time.

    python scripts/screenshots.py                          # starts the app, writes docs/assets/screenshots/
    python scripts/screenshots.py --url http://127.0.0.1:7860    # uses an app that is already running
    python scripts/screenshots.py --only hero,phone,zh     # some of the scenes (--list names them)
    python scripts/screenshots.py --preset tiny-random     # quick: gibberish text, every path within seconds

Each scene opens the page with a share link (``?preset=…&prompt=…``, ``?lang=zh``,
``?__theme=dark``), clicks what a visitor would click, and saves a WebP image.  The
Playground scenes run once, go back to the start and step through the replay until a
verified step shows accepted and rejected drafts, so the picture shows a decision being
made.  The scenes cover light and dark, a desktop window and a 390-px phone, English and
Chinese, and the Classroom lab's sub-tabs the Teach pages use.

Needs the ``playwright`` pip package (requirements-dev.txt) driving Debian's Chromium at
``/usr/bin/chromium`` (``apt-get install chromium``; never ``playwright install``), Pillow
(installed with gradio) for WebP, and a CJK font for the Chinese scenes
(``apt-get install fonts-wqy-microhei``).  The default preset loads the packaged Gemma 3
270M; the first start on a machine converts its GGUF once (about a minute).
"""

from __future__ import annotations

import argparse
import io
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from visual.i18n import CATALOGUE  # noqa: E402  (the labels the page shows, in both languages)

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
OUT = ROOT / "docs" / "assets" / "screenshots"
DESKTOP = {"width": 1280, "height": 860}
PHONE = {"width": 390, "height": 844}
PROMPT = "Explain in a few sentences why the sky is blue."
WEBP_QUALITY = 72


@dataclass(frozen=True)
class Shot:
    """One picture: where it goes and how the page is opened."""

    name: str
    lang: str = "en"
    dark: bool = False
    phone: bool = False


def text(lang: str, key: str) -> str:
    """A catalogue string without its Markdown emphasis and without what follows its first placeholder."""
    return CATALOGUE[lang][key].split("{")[0].replace("**", "").strip()


def page_url(base: str, shot: Shot, **params) -> str:
    query = {"lang": shot.lang, **({"__theme": "dark"} if shot.dark else {}), **params}
    return f"{base}/?{urlencode(query)}"


def save(page, shot: Shot, out: Path, locator=None, clip_height: int | None = None) -> Path:
    """The viewport (or one element) as WebP, at most ``clip_height`` CSS pixels tall."""
    from PIL import Image

    if locator is not None:
        png = locator.screenshot()
    elif clip_height:
        vp = page.viewport_size
        png = page.screenshot(clip={"x": 0, "y": 0, "width": vp["width"], "height": clip_height})
    else:
        png = page.screenshot()
    img = Image.open(io.BytesIO(png)).convert("RGB")
    if img.width > 1280:  # phone shots are taken at twice the pixels, then halved in width at most
        img = img.resize((1280, round(img.height * 1280 / img.width)), Image.LANCZOS)
    path = out / f"{shot.name}.webp"
    img.save(path, "WEBP", quality=WEBP_QUALITY, method=6)
    print(f"{path}  {img.width}x{img.height}  {path.stat().st_size / 1024:.0f} KB", flush=True)
    return path


# --------------------------------------------------------------------------- the Playground


def open_playground(page, base: str, shot: Shot, preset: str | None, **params) -> None:
    link = {**({"preset": preset} if preset else {}), **params}
    page.goto(page_url(base, shot, **link), wait_until="load", timeout=180_000)
    page.wait_for_selector("#run-btn", timeout=120_000)
    page.wait_for_timeout(1500)  # the load event fills the form from the link


def run_and_pick_a_step(page, lang: str, max_frames: int = 60) -> None:
    """Run, then replay from the start to the first verified step with accepted and rejected drafts
    (else the first with a bonus token, else the last frame)."""
    page.click("#run-btn")
    page.wait_for_selector(f"#status:has-text('{text(lang, 'run.status.done')}')", timeout=600_000)
    page.click("#reset-btn")
    page.wait_for_timeout(600)
    fallback = None
    for i in range(max_frames):
        page.click("#step-btn")
        page.wait_for_timeout(450)
        accepted = page.locator("#step-view .chip--accepted").count()
        rejected = page.locator("#step-view .chip--rejected").count()
        bonus = page.locator("#step-view .chip--bonus").count()
        if accepted and rejected:
            break
        if bonus and fallback is None:
            fallback = i + 1
    else:
        if fallback is not None:  # no step had both: show the first fully accepted one
            page.click("#reset-btn")
            page.wait_for_timeout(600)
            for _ in range(fallback):
                page.click("#step-btn")
                page.wait_for_timeout(300)
    page.wait_for_timeout(900)  # let the flip animation finish


def scroll_to_buttons(page) -> None:
    page.evaluate("document.querySelector('#run-btn').scrollIntoView({block: 'start'})")
    page.evaluate("window.scrollBy(0, -90)")
    page.wait_for_timeout(300)


def playground_scene(preset: str | None, prompt: str, clip: int | None = None, **params) -> Callable:
    def scene(page, base: str, shot: Shot, out: Path) -> Path:
        open_playground(page, base, shot, preset, prompt=prompt, **params)
        run_and_pick_a_step(page, shot.lang)
        if shot.phone:
            page.evaluate("document.querySelector('#step-view').scrollIntoView({block: 'start'})")
            page.wait_for_timeout(300)
            return save(page, shot, out)
        scroll_to_buttons(page)
        return save(page, shot, out, clip_height=clip)

    return scene


def tree_scene(preset: str) -> Callable:
    def scene(page, base: str, shot: Shot, out: Path) -> Path:
        open_playground(page, base, shot, preset, prompt="Once upon a time", gamma="3", temperature="1")
        field = page.locator("#tree-nodes input[type=number]")
        field.fill("8")
        field.press("Enter")
        page.wait_for_timeout(500)
        run_and_pick_a_step(page, shot.lang)
        return save(page, shot, out, locator=page.locator("#step-view"))

    return scene


# --------------------------------------------------------------------------- the Classroom lab


def open_lab_tab(page, base: str, shot: Shot, tab_key: str, **params) -> None:
    page.goto(page_url(base, shot, **params), wait_until="load", timeout=180_000)
    page.wait_for_selector("#run-btn", timeout=120_000)
    page.get_by_role("tab", name=text(shot.lang, "tab.lab"), exact=True).click()
    page.get_by_role("tab", name=text(shot.lang, tab_key), exact=True).click()
    page.wait_for_timeout(1200)


def panel(page):
    """The lab sub-tab on screen."""
    return page.locator("[role=tabpanel]:visible [role=tabpanel]:visible").first


def distribution_scene(page, base: str, shot: Shot, out: Path) -> Path:
    """A wrong rule drifting: the residual replaced by a plain target sample, on tiny-random."""
    open_lab_tab(page, base, shot, "lab.d.tab")
    page.get_by_label(text(shot.lang, "lab.d.rule.target-sample"), exact=True).check()
    page.get_by_role("button", name=text(shot.lang, "lab.d.run"), exact=True).click()
    page.get_by_text(text(shot.lang, "lab.d.done")).first.wait_for(timeout=600_000)
    page.wait_for_timeout(1500)
    return save(page, shot, out, locator=panel(page))


def predict_scene(page, base: str, shot: Shot, out: Path) -> Path:
    """Predict, then reveal: a round started from a classroom link, one step guessed and revealed."""
    open_lab_tab(page, base, shot, "lab.p.tab", classroom="easy-text-high-acceptance")
    page.get_by_role("button", name=text(shot.lang, "lab.p.new"), exact=True).click()
    boxes = panel(page).locator("input[type=checkbox]")
    boxes.first.wait_for(timeout=600_000)
    for i in range(min(2, boxes.count())):
        boxes.nth(i).check()
    page.get_by_role("button", name=text(shot.lang, "lab.p.reveal"), exact=True).click()
    page.wait_for_timeout(2500)
    return save(page, shot, out, locator=panel(page))


def theory_scene(page, base: str, shot: Shot, out: Path) -> Path:
    """The theory bench at its starting sliders: S = E / (γc + v) against γ."""
    open_lab_tab(page, base, shot, "lab.t.tab")
    page.wait_for_timeout(1500)
    return save(page, shot, out, locator=panel(page))


def serving_scene(page, base: str, shot: Shot, out: Path) -> Path:
    """Serving a class: the committed batch sweep (playground/data/batch_sweep.json)."""
    open_lab_tab(page, base, shot, "lab.sv.tab")
    page.wait_for_timeout(2500)
    return save(page, shot, out, locator=panel(page))


# --------------------------------------------------------------------------- scenes


def scenes(preset: str | None) -> dict[str, tuple[Shot, Callable]]:
    hero = playground_scene(preset, PROMPT, clip=760)
    return {
        "hero": (Shot("playground-step"), hero),
        "dark": (Shot("playground-step-dark", dark=True), hero),
        "zh": (Shot("playground-step-zh", lang="zh"), hero),
        "phone": (Shot("playground-phone", phone=True), playground_scene(preset, PROMPT)),
        "phone-dark-zh": (
            Shot("playground-phone-dark-zh", lang="zh", dark=True, phone=True),
            playground_scene(preset, PROMPT),
        ),
        "tree": (Shot("tree-step"), tree_scene("tiny-random")),
        "distribution": (Shot("lab-distribution"), distribution_scene),
        "distribution-zh": (Shot("lab-distribution-zh", lang="zh"), distribution_scene),
        "predict": (Shot("lab-predict"), predict_scene),
        "predict-zh": (Shot("lab-predict-zh", lang="zh"), predict_scene),
        "theory": (Shot("lab-theory"), theory_scene),
        "serving": (Shot("lab-serving"), serving_scene),
    }


# --------------------------------------------------------------------------- the app


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_app() -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "PORT": str(port), "GRADIO_SERVER_NAME": "127.0.0.1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            with urllib.request.urlopen(url + "/", timeout=5) as r:
                if r.status == 200:
                    return proc, url
        except OSError:
            time.sleep(1)
        if proc.poll() is not None:
            raise SystemExit(f"the app exited with code {proc.returncode}")
    proc.terminate()
    raise SystemExit("the app did not answer within 10 minutes")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", help="a running app (default: start one on a free port)")
    p.add_argument("--out", default=str(OUT), help="where the images go")
    p.add_argument("--only", help="comma-separated scene names (default: all)")
    p.add_argument("--list", action="store_true", help="list the scenes and exit")
    p.add_argument("--preset", default=None, help="the Playground scenes' preset (default: the app's default)")
    args = p.parse_args(argv)
    table = scenes(args.preset)
    if args.list:
        for name, (shot, _) in table.items():
            print(f"{name:16} {shot.name}.webp")
        return 0
    chosen = args.only.split(",") if args.only else list(table)
    unknown = [n for n in chosen if n not in table]
    if unknown:
        p.error(f"unknown scenes: {', '.join(unknown)} (--list names them)")
    if not Path(CHROMIUM).exists():
        p.error(f"Chromium not found at {CHROMIUM}: apt-get install chromium (or set CHROMIUM_PATH)")
    from playwright.sync_api import sync_playwright

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    proc, base = (None, args.url.rstrip("/")) if args.url else start_app()
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            for name in chosen:
                shot, scene = table[name]
                size = PHONE if shot.phone else DESKTOP
                page = browser.new_page(viewport=size, device_scale_factor=2 if shot.phone else 1)
                try:
                    scene(page, base, shot, out)
                finally:
                    page.close()
            browser.close()
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
