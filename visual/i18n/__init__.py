"""The app's two languages: one message catalogue (``en``, ``zh``), the visitor's language, lookups.

* ``t(key, **values)``: a message in the language of the request being served (server-side
  HTML: the step view, the stats card, narration, status lines, errors).  Numbers and token
  text are passed in as values and never translated.
* ``L(key)``: the same message for a component prop (label, info, button, Markdown,
  tab title), translated by gradio's ``gr.I18n`` in the browser (``I18N``, passed to
  ``launch``), so the page's static text follows the browser's language, or ``?lang=``
  (``visual.i18n.switch``).
* ``lang_of(request)``: ``en`` or ``zh`` for a gradio request: the page's ``?lang=`` (read from
  the Referer, the page URL), else the browser's ``Accept-Language``, else English.
* ``localized(fn)``: ``fn`` as a gradio handler that renders in the visitor's language
  (it takes the ``gr.Request`` gradio passes and sets the language for ``t`` while ``fn`` runs).
* ``retitle_tabs(demo)``: every tab title, nested ones included, in the language ``?lang=`` asks for.

The language of the request is kept in a ``contextvars.ContextVar`` (context-local: each
handler call and each step of a generator handler sees its own visitor's language; nothing
per-user lives at module level).  This package does not render anything and does not know
the engine: ``playground`` stays free of UI text (its errors and notices carry a code that
``visual.i18n.errors`` renders).
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import json
import re
import string
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import gradio as gr

from visual.i18n import config_zh
from visual.i18n.en import MESSAGES as EN
from visual.i18n.zh import MESSAGES as ZH

LANGS = ("en", "zh")
DEFAULT = "en"
CATALOGUE: dict[str, dict[str, str]] = {"en": EN, "zh": ZH}
LANG_NAMES = {"en": "English", "zh": "\u4e2d\u6587"}  # each in its own language: never translated

_LANG: contextvars.ContextVar[str] = contextvars.ContextVar("sd_lang", default=DEFAULT)

I18N = gr.I18n(en=dict(EN), zh=dict(ZH))


def current() -> str:
    """The language of the request being served (``en`` outside any request)."""
    return _LANG.get()


@contextlib.contextmanager
def use_lang(lang: str | None) -> Iterator[str]:
    """Render in ``lang`` inside the block (an unknown language is English)."""
    token = _LANG.set(normalize(lang) or DEFAULT)
    try:
        yield _LANG.get()
    finally:
        _LANG.reset(token)


def normalize(lang: Any) -> str | None:
    """``zh``, ``zh-CN``, ``zh_Hans`` → ``zh``; ``en-GB`` → ``en``; anything else → None."""
    if not isinstance(lang, str):
        return None
    base = re.split(r"[-_]", lang.strip().lower(), maxsplit=1)[0]
    return base if base in LANGS else None


def t(key: str, **values: Any) -> str:
    """The message ``key`` in the current language, ``values`` filled in (``str.format``)."""
    table = CATALOGUE.get(current(), EN)
    text = table.get(key)
    if text is None:
        text = EN[key]  # a missing key is a bug the catalogue test catches; never show a raw key
    return text.format(**values) if values else text


def L(key: str) -> gr.i18n.I18nData:  # noqa: N802  (reads like a label)
    """A translatable component prop (label, info, value of a Button or Markdown); ``cfg.*``
    keys are the config's own text (``config_keys``)."""
    if key not in EN and not key.startswith("cfg."):
        raise KeyError(f"no catalogue key {key!r}")
    return I18N(key)


# --------------------------------------------------------------------------- the config's own text


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-")


def preset_key(name: str, unavailable: bool = False) -> str:
    """The ``L`` key of a preset's label (``gradio_i18n`` defines it for every configured preset)."""
    return f"cfg.preset.{_slug(name)}" + (".unavailable" if unavailable else "")


def example_key(label: str) -> str:
    return f"cfg.example.{_slug(label)}"


def preset_text(name: str, english_label: str, english_description: str) -> tuple[str, str]:
    """A preset's (label, description) in the current language (the config's English as the fallback)."""
    if current() == "zh" and name in config_zh.PRESETS:
        return config_zh.PRESETS[name]
    return english_label, english_description


def example_text(label: str) -> str:
    """A classroom example's label in the current language (the config's English as the fallback)."""
    return config_zh.EXAMPLES.get(label, label) if current() == "zh" else label


def config_messages(cfg: Any) -> dict[str, dict[str, str]]:
    """Catalogue entries for the config's presets and Playground examples, per language."""
    out: dict[str, dict[str, str]] = {lang: {} for lang in LANGS}
    for p in cfg.presets:
        zh_label = config_zh.PRESETS.get(p.name, (p.label, ""))[0]
        for lang, label in (("en", p.label), ("zh", zh_label)):
            out[lang][preset_key(p.name)] = label
            with use_lang(lang):
                out[lang][preset_key(p.name, True)] = f"{label} \u2014 {t('preset.unavailable')}"
    for e in cfg.examples:
        label = e.get("label", e["prompt"][:30])
        out["en"][example_key(label)] = label
        out["zh"][example_key(label)] = config_zh.EXAMPLES.get(label, label)
    return out


def gradio_i18n(cfg: Any = None) -> gr.I18n:
    """``gr.I18n`` with the whole catalogue and ``cfg``'s own text (for ``launch(i18n=...)``)."""
    extra = config_messages(cfg) if cfg is not None else {lang: {} for lang in LANGS}
    return gr.I18n(**{lang: {**CATALOGUE[lang], **extra[lang]} for lang in LANGS})


def text_of(value: Any, lang: str = DEFAULT) -> Any:
    """What a prop shows in ``lang``: an ``L`` key's message, anything else unchanged (for tests and checks)."""
    if isinstance(value, gr.i18n.I18nData):
        return CATALOGUE.get(lang, EN).get(value.key, EN.get(value.key, value.key))
    return value


def plural(n: int) -> str:
    """English plural ending for ``{s}`` placeholders (Chinese messages leave it out)."""
    return "" if n == 1 else "s"


def placeholders(text: str) -> set[str]:
    """The ``{names}`` a message fills in."""
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


# --------------------------------------------------------------------------- the visitor's language


def accept_language(header: str | None) -> str | None:
    """The first of our languages in an ``Accept-Language`` header, by its q weights."""
    if not header:
        return None
    ranked = []
    for i, part in enumerate(str(header).split(",")[:20]):
        tag, _, q = part.strip().partition(";q=")
        try:
            weight = float(q) if q else 1.0
        except ValueError:
            weight = 0.0
        lang = normalize(tag)
        if lang is not None and weight > 0:
            ranked.append((-weight, i, lang))
    return min(ranked)[2] if ranked else None


def lang_from_query(params: Any) -> str | None:
    """``lang`` of a query mapping (``?lang=zh``), normalised; None when absent or unknown."""
    try:
        raw = params.get("lang") if params is not None else None
    except Exception:
        return None
    if isinstance(raw, list):
        raw = raw[0] if raw else None
    return normalize(raw)


def lang_of(request: Any) -> str:
    """The visitor's language for a gradio request: ``?lang=`` of the page, else the browser's."""
    if request is None:
        return DEFAULT
    try:
        headers = request.headers
    except Exception:
        return DEFAULT
    found = None
    try:
        found = lang_from_query(getattr(request, "query_params", None))
    except Exception:
        found = None
    if found is None:
        try:
            ref = headers.get("referer")
            found = lang_from_query(parse_qs(urlsplit(ref).query)) if ref else None
        except Exception:
            found = None
    if found is None:
        try:
            found = accept_language(headers.get("accept-language"))
        except Exception:
            found = None
    return found or DEFAULT


def localized(fn: Callable) -> Callable:
    """``fn`` as a gradio handler rendering in the visitor's language.

    The wrapper takes gradio's ``gr.Request`` as an extra first parameter (gradio fills it in
    by its annotation; the event's inputs still go to ``fn``'s own parameters).  A generator
    ``fn`` runs each of its steps in that language."""
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    own = next((i for i, p in enumerate(params) if _is_request(p.annotation)), None)  # fn takes the request itself

    def split(args: tuple, kwargs: dict) -> tuple[Any, tuple]:
        """(the request, fn's own positional arguments)."""
        if own is None:
            return (args[0] if args else kwargs.pop("_sd_request", None)), args[1:]
        return (args[own] if len(args) > own else kwargs.get(params[own].name)), args

    if inspect.isgeneratorfunction(fn):

        def wrapper(*args, **kwargs):
            request, args = split(args, kwargs)
            lang = lang_of(request)
            gen = fn(*args, **kwargs)
            while True:
                with use_lang(lang):
                    try:
                        item = next(gen)
                    except StopIteration:
                        return
                yield item

    else:

        def wrapper(*args, **kwargs):
            request, args = split(args, kwargs)
            with use_lang(lang_of(request)):
                return fn(*args, **kwargs)

    plain = [p.replace(annotation=gr.Request if i == own else inspect.Parameter.empty) for i, p in enumerate(params)]
    if own is None:
        plain.insert(
            0, inspect.Parameter("_sd_request", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=gr.Request)
        )
    wrapper.__signature__ = sig.replace(parameters=plain, return_annotation=inspect.Signature.empty)
    wrapper.__annotations__ = {p.name: gr.Request for p in plain if p.annotation is gr.Request}
    wrapper.__name__ = getattr(fn, "__name__", "handler")
    wrapper.__qualname__ = getattr(fn, "__qualname__", wrapper.__name__)
    wrapper.__doc__ = fn.__doc__
    return wrapper


# Runs in the browser on page load, with ``?lang=`` only (else gradio starts in the browser's own
# language and every title is right): gradio's ``changeLocale`` re-renders only the selected
# tab's title of each tab set, so this sets every other title (and the overflow menu's copy) in
# place, now and whenever gradio draws a tab bar again.  It edits the text node gradio owns,
# so gradio's own later updates still land.  __TITLES__: one {language: title} per tab.
RETITLE_JS = """
() => {
  const asked = String(new URLSearchParams(window.location.search).get("lang") || "").toLowerCase().split(/[-_]/)[0];
  const titles = __TITLES__;
  if (!titles.some((t) => asked in t)) return [];
  const wanted = new Map();
  for (const t of titles) for (const v of Object.values(t)) if (v !== t[asked]) wanted.set(v, t[asked]);
  const fix = () => {
    const bars = [...document.querySelectorAll("[role=tablist]")].map((l) => l.parentElement);
    for (const bar of [...bars, ...document.querySelectorAll(".tab-container")]) {
      for (const button of bar.querySelectorAll("button")) {
        const walker = document.createTreeWalker(button, NodeFilter.SHOW_TEXT);
        for (let n = walker.nextNode(); n; n = walker.nextNode()) {
          const to = wanted.get(n.nodeValue.trim());
          if (to !== undefined) n.nodeValue = n.nodeValue.replace(n.nodeValue.trim(), to);
        }
      }
    }
  };
  fix();
  let queued = false;
  new MutationObserver(() => {
    if (!queued) { queued = true; requestAnimationFrame(() => { queued = false; fix(); }); }
  }).observe(document.body, { childList: true, subtree: true, characterData: true });
  return [];
}
"""


def retitle_tabs(demo: gr.Blocks) -> None:
    """Every tab title of ``demo``, nested tab sets included, in the language ``?lang=`` asks for
    (``RETITLE_JS``).  Call it once the Blocks are built.

    It is a browser-only event on purpose: a server event whose outputs are the tabs makes gradio's
    page walk every tab's whole contents again on each status message of any later event (a
    replay tick included), about a quarter of the page's work while a run plays."""
    keys = [
        b.label.key for b in demo.blocks.values() if isinstance(b, gr.Tab) and isinstance(b.label, gr.i18n.I18nData)
    ]
    if keys:
        titles = [{lang: CATALOGUE[lang].get(key, EN[key]) for lang in LANGS} for key in keys]
        js = RETITLE_JS.replace("__TITLES__", json.dumps(titles, ensure_ascii=False))
        demo.load(None, None, None, js=js, api_visibility="private")


def _is_request(annotation: Any) -> bool:
    """A parameter annotated ``gr.Request`` (also as a string, under ``from __future__ import annotations``)."""
    if annotation is gr.Request:
        return True
    return isinstance(annotation, str) and annotation.replace(" ", "") in (
        "gr.Request", "Request", "gr.Request|None", "Request|None", "Optional[gr.Request]"
    )  # fmt: skip


__all__ = [
    "CATALOGUE",
    "DEFAULT",
    "I18N",
    "L",
    "LANGS",
    "LANG_NAMES",
    "accept_language",
    "current",
    "lang_from_query",
    "lang_of",
    "localized",
    "normalize",
    "placeholders",
    "plural",
    "retitle_tabs",
    "text_of",
    "t",
    "use_lang",
]
