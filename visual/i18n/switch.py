"""The language switch in the page header, and the browser side of choosing the language.

On page load a small script picks the language: ``?lang=zh`` / ``?lang=en`` in the page URL,
else the browser's (``navigator.language``, as gradio's own translations do).  With ``?lang=``
it also switches gradio's translations (``gr.I18n`` props and gradio's own strings) to that
language through gradio's ``changeLocale``; the server reads the same ``?lang=`` from the
page URL (``visual.i18n.lang_of``), so both halves agree.  Choosing the other language in the
switch reloads the page with ``?lang=`` set (a run on screen is not kept).

This module does not translate anything itself and holds no per-user state.
"""

from __future__ import annotations

import json

import gradio as gr

from visual.i18n import LANG_NAMES, LANGS, L

# Runs in the browser on load: returns the language for the switch and applies ?lang= to gradio.
PICK_JS = """
async () => {
  const norm = (v) => { const b = String(v || "").toLowerCase().split(/[-_]/)[0]; return __LANGS__.includes(b) ? b : null; };
  const asked = norm(new URLSearchParams(window.location.search).get("lang"));
  const lang = asked || norm(navigator.language) || "en";
  if (asked) {
    try {
      const url = performance.getEntriesByType("resource").map((e) => e.name)
        .find((n) => /\\/assets\\/core-[^/]*\\.js$/.test(n));
      if (url) { const core = await import(url); await core.changeLocale(asked === "zh" ? "zh-CN" : asked); }
    } catch (e) { console.warn("language switch:", e); }
  }
  document.documentElement.setAttribute("lang", lang === "zh" ? "zh-CN" : lang);
  return lang;
}
""".replace("__LANGS__", json.dumps(list(LANGS)))

# Runs in the browser when the visitor picks a language: reload with ?lang= set.
SWITCH_JS = """
(lang) => {
  const url = new URL(window.location.href);
  url.searchParams.set("lang", lang);
  window.location.assign(url.toString());
  return lang;
}
"""


def language_switch() -> object:
    """The switch (English / 中文), placed where this is called; returns its ``wire(demo)``."""
    radio = gr.Radio(
        [(LANG_NAMES[code], code) for code in LANGS],
        value="en",
        label=L("app.lang"),
        elem_id="lang-switch",
        elem_classes=["sd-lang"],
        container=False,
        interactive=True,
    )

    def wire(demo: gr.Blocks) -> None:
        demo.load(None, None, [radio], js=PICK_JS, api_visibility="private")
        radio.input(None, [radio], None, js=SWITCH_JS, api_visibility="private")

    return wire
