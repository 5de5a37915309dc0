"""Share links: the URL query parameters that prefill the app, validated, and the links that carry them.

A link says ``?preset=…&prompt=…&gamma=…&temperature=…&seed=…`` (any run setting that
``RunSettings`` offers links, ``LINK_SETTINGS``, under its public name: ``verification=block``,
``draft_stop=0.3``, ...) or ``?classroom=<slug or number>`` (a classroom preset, which explicit
parameters override).  The lab tabs read the values they have controls for (``PREFILL_KEYS``).  ``validate_query``
keeps the valid values in a ``Prefill`` and says why it ignored the others, never raising;
its messages quote at most a short excerpt of what the link said (a link's text is someone
else's).  ``prefill_from_query`` reads the parameters off a gradio request,
``prefill_updates`` turns a ``Prefill`` into component updates, and ``share_query`` /
``share_url`` build a link for the current settings.

This module does not build tabs (``visual.lab_tab``, ``app.py`` wire the load events) or
render the link note (``visual.lab.prefill_note_html``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import gradio as gr

from playground.config import AppConfig, load_config
from playground.settings import DEFAULTS, LINK, PUBLIC, SPECS, check_public, offered, public_name
from playground.validate import MAX_SEED, SettingsError, clean_prompt, excerpt, parse_number, parse_whole_number
from visual.classroom import classroom_presets, slugify
from visual.i18n import DEFAULT as DEFAULT_LANG
from visual.i18n import lang_from_query, lang_of

PREFILL_KEYS = ("preset", "prompt", "gamma", "temperature", "seed")  # the lab tabs' controls a link sets
LINK_SETTINGS = tuple(public_name(n) for n in offered(LINK))  # the run settings a link carries (RunSettings' schema)
QUERY_KEYS = ("prompt", *LINK_SETTINGS, "classroom", "lang")  # lang: visual.i18n


@dataclass(frozen=True)
class Prefill:
    """Validated values from a shared link (the prompt and run settings, by their link names),
    the classroom preset it applied, and what was ignored, and why."""

    fields: Mapping[str, Any] = field(default_factory=dict)
    classroom: str | None = None  # slug of the classroom preset applied, if any
    errors: tuple[str, ...] = ()

    def values(self) -> dict[str, Any]:
        return dict(self.fields)

    def get(self, key: str) -> Any:
        return self.fields.get(key)

    def without(self, key: str, reason: str) -> Prefill:
        """This prefill less ``key``, with ``reason`` among the errors."""
        kept = {k: v for k, v in self.fields.items() if k != key}
        return replace(self, fields=kept, errors=(*self.errors, reason))


def _parse_setting(name: str, raw: Any, lim) -> Any:
    """A run setting from a link's text: parsed as its type, then RunSettings' own check."""
    kind = SPECS[PUBLIC[name]].kind
    if kind is int:
        value = parse_whole_number(name, raw, 0, MAX_SEED)
    elif kind is float:
        value = parse_number(name, raw, -1e6, 1e6)
    elif name == "verification":
        value = str(raw).strip().lower()
        value = "lossless" if value == "token" else value  # "token" is another name for lossless
    else:
        value = str(raw).strip()
    try:
        clean = check_public({name: value}, lim)
    except SettingsError as exc:
        raise exc.errors[name] from None
    return clean[PUBLIC[name]]


def validate_query(params: Mapping[str, Any] | None, cfg: AppConfig | None = None) -> Prefill:
    """Validate URL query parameters; bad values are dropped with a reason, never raised.

    ``classroom=<slug or 1-based number>`` applies a classroom preset first; explicit
    parameters override it.
    """
    cfg = cfg or load_config()
    lim = cfg.limits
    params = dict(params or {})
    errors: list[str] = []
    vals: dict[str, Any] = {}
    cls_slug = None
    unknown = sorted(k for k in params if k not in QUERY_KEYS and not str(k).startswith("__"))
    if unknown:
        errors.append(
            "ignored unknown parameter(s): "
            + ", ".join(repr(excerpt(u)) for u in unknown[:5])
            + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
        )
    if params.get("classroom") not in (None, ""):
        raw = str(params["classroom"]).strip()[:80]
        try:
            presets = classroom_presets(cfg)
        except ValueError as exc:
            presets = []
            errors.append(f"classroom presets are misconfigured: {exc}")
        found = None
        if raw.isascii() and raw.isdigit() and 1 <= int(raw) <= len(presets):  # not "²", a digit int() refuses
            found = presets[int(raw) - 1]
        else:
            found = next((c for c in presets if c.slug == slugify(raw)), None)
        if found is None:
            errors.append(f"classroom: no preset called {excerpt(raw)!r}")
        else:
            cls_slug = found.slug
            vals.update(
                preset=found.preset,
                prompt=found.prompt,
                gamma=found.gamma,
                temperature=found.temperature,
                seed=found.seed,
            )
    checks: dict[str, Callable[[Any], Any]] = {
        "preset": lambda r: _check_preset(r, cfg),
        "prompt": lambda r: clean_prompt(r, lim.max_prompt_chars),
    }
    checks |= {name: (lambda r, n=name: _parse_setting(n, r, lim)) for name in LINK_SETTINGS if name not in checks}
    for key, check in checks.items():
        raw = params.get(key)
        if raw is None or (isinstance(raw, str) and raw == ""):
            continue
        if isinstance(raw, str) and len(raw) > lim.max_prompt_chars + 100:
            errors.append(f"{key}: value too long")
            continue
        try:
            vals[key] = check(raw)
        except ValueError as exc:
            errors.append(str(exc))
    return Prefill(vals, classroom=cls_slug, errors=tuple(errors))


def _check_preset(raw: Any, cfg: AppConfig) -> str:
    name = str(raw).strip()
    names = [p.name for p in cfg.presets]
    if name not in names:
        raise ValueError(f"unknown preset {excerpt(name)!r}; choose one of: {', '.join(names)}")
    return name


def share_query(values: Mapping[str, Any]) -> str:
    """The query string a teacher can append to the app's URL: the prompt and the run settings a
    link carries (``LINK_SETTINGS``), leaving out blanks and settings at their defaults (the lab
    tabs' own values, ``PREFILL_KEYS``, always stay)."""
    q = {}
    for key in dict.fromkeys(("preset", "prompt", *LINK_SETTINGS)):
        v = values.get(key)
        default = DEFAULTS.get(PUBLIC.get(key, key))
        if v is None or v == "" or (key not in PREFILL_KEYS and v == default):
            continue
        q[key] = v
    return ("?" + urlencode(q)) if q else ""


def share_url(request: gr.Request | None, query: str) -> str:
    """The page's own address (from the Referer header) with ``query``; just the query if unknown.

    The link carries the visitor's language (``lang=``) when the page was opened with one or the
    visitor reads Chinese, so a class gets the page in the language the teacher sees."""
    try:
        ref = request.headers.get("referer") if request is not None else None
    except Exception:
        ref = None
    lang = lang_of(request) if request is not None else None
    asked = lang_from_query(parse_qs(urlsplit(ref).query)) if ref else None
    if lang and (asked or lang != DEFAULT_LANG):
        query = ("?" + query.lstrip("?") + "&" if query.lstrip("?") else "?") + urlencode({"lang": lang})
    if ref:
        parts = urlsplit(ref)
        if parts.scheme in ("http", "https") and parts.netloc:
            return urlunsplit((parts.scheme, parts.netloc, parts.path or "/", query.lstrip("?"), ""))
    return query


def prefill_from_query(request: gr.Request = None, cfg: AppConfig | None = None) -> Prefill:
    """Validated prefill values from the page URL's query parameters.

    Returns a ``Prefill``: ``.values()`` (only the valid ones, as a dict; ``.get(key)`` one of
    them or None), ``.classroom`` (slug of an applied ``?classroom=`` preset) and ``.errors``
    (why something was ignored).  Never raises.
    """
    params: dict[str, str] = {}
    try:
        if request is not None and getattr(request, "query_params", None) is not None:
            params = {str(k): str(v) for k, v in dict(request.query_params).items()}
    except Exception:  # a malformed request must never break page load
        params = {}
    return validate_query(params, cfg)


def prefill_updates(prefill: Prefill, keys: Sequence[str] = PREFILL_KEYS) -> list[Any]:
    """One ``gr.update(value=...)`` per key (``gr.skip()`` where the link gave nothing valid)."""
    vals = prefill.values()
    return [gr.update(value=vals[k]) if k in vals else gr.skip() for k in keys]
