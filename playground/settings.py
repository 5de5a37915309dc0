"""``RunSettings``: one run's settings, declared once, typed, frozen and checked when made.

Each field is declared here once, with everything a way in needs to know about it (a ``Spec``
in the field's metadata): its check (with the bounds in force), whether None means "the
preset's own", which ways in offer it (the Playground form, ``/speculate``, the command line,
share links) and under which name, and one English line for ``--help`` and the endpoint's
documentation.  The form, ``/speculate``, the CLI, share links, the lab, the bench and trace
import all derive from ``SPECS`` (or are checked against it by a test), so adding a setting
means one field here, its sampling or decoding code, and its words in the catalogue.

Every way in builds a ``RunSettings`` through ``playground.api.run_settings`` (which resolves
the preset's defaults once and checks the app's narrower limits) and passes it whole: to
``api.stream_run``, then to ``decoding.engine.stream``, which reads the fields it needs.  One
that exists is valid.  This module does not resolve presets, load models or know where a
value came from.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from playground import validate
from playground.errors import Invalid
from playground.rules import APP_RULES, RULES
from playground.validate import Bounds, excerpt

FORM, ENDPOINT, CLI, LINK = "form", "endpoint", "cli", "link"  # the ways in that offer a setting
EVERYWHERE = frozenset({FORM, ENDPOINT, CLI, LINK})


@dataclass(frozen=True)
class Spec:
    """What one run setting needs besides its name, type and default."""

    check: Callable[[Any, Bounds], Any]  # the cleaned value, or raises ValueError
    doc: str  # one English line: the CLI's --help and the endpoint's documentation
    kind: type = str  # what a text value (a link, a command line) is parsed as
    preset: bool = False  # None means "the preset's own" (``api.run_settings`` fills it in)
    offered: frozenset[str] = EVERYWHERE  # FORM, ENDPOINT, CLI, LINK
    public: str | None = None  # its name on the ways in, when not the field's (rule: "verification")
    public_check: Callable[[Any], Any] | None = None  # a narrower check there (the app's rules only)


def _setting(default: Any, check: Callable[[Any, Bounds], Any], doc: str, **spec: Any) -> Any:
    return field(default=default, metadata={"spec": Spec(check, doc, **spec)})


def _optional(check: Callable[[Any, Bounds], Any]) -> Callable[[Any, Bounds], Any]:
    return lambda v, b: None if v is None else check(v, b)


def _name(field_name: str) -> Callable[[Any, Bounds], str]:
    """A preset or drafter name: resolved against the config by ``api.run_settings``."""

    def check(v: Any, b: Bounds) -> str:
        if not isinstance(v, str):
            raise Invalid("name", name=field_name, value=type(v).__name__)
        return v

    return check


@dataclass(frozen=True)
class RunSettings:
    """What decides one run's output.  ``preset``, ``drafter``, ``dtype`` and ``draft_stop`` are
    None only for runs on models given directly to the engine (tests, the lab's own runs).

    The order is the order of ``/speculate``'s parameters and the CLI's flags: a new setting
    goes after the last one a way in offers, so positional callers keep working."""

    mode: str = _setting("speculative", lambda v, b: validate.one_of("mode", v, validate.MODES),
                         "speculative (a drafter proposes, the target verifies) or autoregressive",
                         offered=frozenset({CLI}))  # fmt: skip
    preset: str | None = _setting(
        None, _optional(_name("preset")), "a preset of spaces_config.yaml (default: the app's)"
    )
    drafter: str | None = _setting(None, _optional(_name("drafter")), "a drafter of the preset (default: its own)",
                                   offered=frozenset({FORM, ENDPOINT, CLI}))  # fmt: skip
    gamma: int = _setting(4, lambda v, b: validate.whole_number("gamma", v, 1, b.max_gamma),
                          "drafts per step, a tree's depth (default: the preset's)", kind=int, preset=True)  # fmt: skip
    temperature: float = _setting(0.0, lambda v, b: validate.temperature(v, b.max_temperature),
                                  "0 = greedy", kind=float)  # fmt: skip
    top_k: int = _setting(0, lambda v, b: validate.whole_number("top_k", v, 0, b.max_top_k),
                          "keep the k most likely tokens (0 = off)", kind=int)  # fmt: skip
    top_p: float = _setting(1.0, lambda v, b: validate.top_p(v), "keep the smallest set with this mass (1 = off)",
                            kind=float)  # fmt: skip
    seed: int = _setting(0, lambda v, b: validate.seed(v), "the random seed of a sampled run", kind=int)
    max_new_tokens: int = _setting(64, lambda v, b: validate.whole_number("max_new_tokens", v, 1, b.max_new_tokens),
                                   "tokens to generate", kind=int)  # fmt: skip
    tree_nodes: int = _setting(1, lambda v, b: validate.whole_number("tree_nodes", v, 1, validate.MAX_TREE_NODES),
                               "draft-tree node budget, 1 = a chain (default: the preset's)", kind=int,
                               preset=True)  # fmt: skip
    rule: str = _setting("lossless", lambda v, b: validate.one_of("rule", v, tuple(RULES)),
                         "lossless (token verification) or block (block verification, chains only)",
                         public="verification", public_check=validate.verification)  # fmt: skip
    draft_stop: float | None = _setting(None, _optional(lambda v, b: validate.draft_stop(v)),
                                        "MTP chains stop below this path confidence, 0 = off (default: the preset's)",
                                        kind=float, preset=True)  # fmt: skip
    min_p: float = _setting(0.0, lambda v, b: validate.number("min_p", v, 0.0, 1.0),
                            "keep tokens with p >= min_p * p_max (0 = off)", kind=float)  # fmt: skip
    dtype: str | None = _setting(None, _optional(lambda v, b: validate.one_of("dtype", v, validate.DTYPES)),
                                 "float32 or bfloat16 (default: the preset's)", preset=True)  # fmt: skip
    draft_argmax: bool = _setting(False, lambda v, b: validate.flag("draft_argmax", v),
                                  "draft the argmax at any temperature (q a point mass)", kind=bool,
                                  offered=frozenset())  # fmt: skip
    trace: bool = _setting(True, lambda v, b: validate.flag("trace", v),
                           "False skips top-k lists and per-token texts (overhead measurement)", kind=bool,
                           offered=frozenset())  # fmt: skip
    top_n: int = _setting(5, lambda v, b: validate.whole_number("top_n", v, 1, validate.MAX_TOP_N),
                          "candidates recorded per distribution in the trace", kind=int, offered=frozenset())  # fmt: skip

    def __post_init__(self) -> None:
        clean = check({f.name: getattr(self, f.name) for f in fields(self)})
        for name, value in clean.items():  # e.g. a slider's 4.0 becomes the int 4
            object.__setattr__(self, name, value)

    @property
    def speculative(self) -> bool:
        return self.mode == "speculative"

    def autoregressive(self, **changes: Any) -> RunSettings:
        """The same run without a drafter: no rule, tree or stop threshold of its own, so a race's
        baseline is the same request (and trace-cache entry) whatever the speculative run verified."""
        kept = dict(mode="autoregressive", rule="lossless", tree_nodes=1, draft_stop=None, draft_argmax=False)
        return replace(self, **{**kept, **changes})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


SPECS: dict[str, Spec] = {f.name: f.metadata["spec"] for f in fields(RunSettings)}
DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(RunSettings)}


def public_name(name: str) -> str:
    """A field's name on the form, ``/speculate``, the CLI and share links."""
    return SPECS[name].public or name


def offered(way: str) -> tuple[str, ...]:
    """The fields a way in (FORM, ENDPOINT, CLI, LINK) offers, in declaration order."""
    return tuple(name for name, spec in SPECS.items() if way in spec.offered)


PUBLIC = {public_name(n): n for n in SPECS}  # public name -> field


def check(values: Mapping[str, Any], limits=None) -> dict[str, Any]:
    """The cleaned values of (some of) one run's settings, or a ``validate.SettingsError`` with
    every mistake keyed by field.  ``limits``: the app's (``config.Limits``); None: the engine's."""
    b = validate.bounds(limits)
    clean: dict[str, Any] = dict(values)
    errors: dict[str, Any] = {}
    for name, value in values.items():
        if name not in SPECS:
            errors[name] = Invalid("not_a_setting", name=name)
            continue
        try:
            clean[name] = SPECS[name].check(value, b)
        except ValueError as exc:
            errors[name] = exc
    if clean.get("mode") != "autoregressive" and not {"rule", "tree_nodes"} & errors.keys() and "tree_nodes" in clean:
        try:
            validate.tree_rule(clean.get("rule", "lossless"), clean["tree_nodes"])
        except ValueError as exc:
            errors["rule"] = exc
    if errors:
        raise validate.SettingsError(errors)
    return clean


def check_public(values: Mapping[str, Any], limits=None) -> dict[str, Any]:
    """Values by their public names (``verification`` for ``rule``) or their field names, as
    fields, checked; a public name's narrower check first (``verification``: the rules the app
    offers; ``rule``: every rule, the lab's wrong ones too).  Errors are keyed by the names given."""
    errors: dict[str, Any] = {}
    fields_: dict[str, Any] = {}
    for pub, value in values.items():
        name = PUBLIC.get(pub, pub if pub in SPECS else None)  # a field's own name takes the engine's check
        if name is None:
            errors[pub] = Invalid("not_a_setting", name=excerpt(pub))
            continue
        spec = SPECS[name]
        if pub != name and spec.public_check is not None and value is not None:
            try:
                value = spec.public_check(value)
            except ValueError as exc:
                errors[pub] = exc
                continue
        fields_[name] = value
    try:
        clean = check(fields_, limits)
    except validate.SettingsError as exc:
        given = {PUBLIC.get(pub, pub): pub for pub in values}  # field -> the name it was given under
        errors.update({given.get(k, k): m for k, m in exc.errors.items() if given.get(k, k) not in errors})
        clean = {}
    if errors:
        raise validate.SettingsError(errors)
    return clean


__all__ = ["RunSettings", "Spec", "SPECS", "DEFAULTS", "PUBLIC", "check", "check_public", "offered", "public_name"]
__all__ += ["FORM", "ENDPOINT", "CLI", "LINK", "APP_RULES"]
