"""The two small scripts the Playground runs in the browser, both from the step view's ``js_on_load``.

* Keyboard replay: the step view is focusable; with it (or a chip in it) focused, ← is Back,
  → is Step and space is Play/Pause (it clicks the buttons, so the server handlers are the
  same as for a pointer).  Keys typed into inputs are left alone.
* Phones: below ``PHONE_PX`` the settings accordion starts closed (the prompt, the examples
  and Run come first; ``style.css`` moves the settings below them).

Gradio 6 runs ``js_on_load`` once, when the component mounts, with ``element`` its root.
This module holds the script text only; it keeps no state and renders no user data.
"""

from __future__ import annotations

import json

from visual.i18n import CATALOGUE

PHONE_PX = 700
KEY_HINT = CATALOGUE["en"]["pg.key_hint"]  # the page's language picks en or zh (visual.i18n)

STEP_VIEW_JS = (
    (
        """
element.tabIndex = 0;
element.setAttribute("role", "region");
element.setAttribute("aria-label", (document.documentElement.lang || "").startsWith("zh") ? __HINT_ZH__ : __HINT__);
element.setAttribute("aria-keyshortcuts", "ArrowLeft ArrowRight Space");
const keys = {ArrowLeft: "back-btn", ArrowRight: "step-btn", " ": "play-btn"};
element.addEventListener("keydown", (ev) => {
  const id = keys[ev.key];
  if (!id || ev.altKey || ev.ctrlKey || ev.metaKey || ev.target.closest("input, textarea, select, button")) return;
  const btn = document.getElementById(id);
  if (!btn) return;
  ev.preventDefault();
  btn.click();
  element.focus({preventScroll: true});
});
if (window.matchMedia("(max-width: __PX__px)").matches) {
  // the accordion may mount after this runs, or ignore a click before it is wired: retry for ~2 s,
  // and stop once a click of ours has closed it (a visitor's later opening is left alone)
  let clicked = false;
  const close = (n) => {
    const head = document.querySelector("#settings > button.label-wrap");
    if (head && head.classList.contains("open")) { head.click(); clicked = true; }
    else if (head && clicked) return;
    if (n > 0) setTimeout(() => close(n - 1), 200);
  };
  close(10);
}
"""
    )
    .replace("__HINT_ZH__", json.dumps(CATALOGUE["zh"]["pg.key_hint"]))
    .replace("__HINT__", json.dumps(KEY_HINT))
    .replace("__PX__", str(PHONE_PX - 1))
)
