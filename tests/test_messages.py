"""The engine's errors and notices carry a code (``playground.errors``): each code has one English
template in the engine and an entry in both catalogues with the same placeholders; every check
raises its code with the params its message shows; the page renders the code in the visitor's
language (``visual.i18n.errors``), never by parsing the English."""

from __future__ import annotations

import copy
import math
import pickle
import string

import pytest

from playground import api, validate
from playground.config import load_config
from playground.errors import ENGLISH, Invalid, Message, ModelUnavailable, message_of
from playground.settings import check as check_settings
from visual.i18n import CATALOGUE, placeholders, use_lang
from visual.i18n.errors import engine_message

B = validate.ENGINE


def _names(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


# ---------------------------------------------------------------------------- one template, two catalogues


@pytest.mark.parametrize("code", sorted(ENGLISH))
def test_every_code_has_an_english_template_and_both_catalogue_entries(code):
    key = f"eng.{code}"
    assert CATALOGUE["en"][key] == ENGLISH[code]  # the page's English is the engine's
    assert CATALOGUE["zh"][key].strip() and CATALOGUE["zh"][key] != ENGLISH[code]
    assert placeholders(CATALOGUE["zh"][key]) == placeholders(CATALOGUE["en"][key]) == _names(ENGLISH[code])


# ---------------------------------------------------------------------------- each check: its code and params


def _raised(fn):
    with pytest.raises(Invalid) as err:
        fn()
    return err.value.code, err.value.params


_FAKE_TOKENIZER = lambda text: {"input_ids": list(range(len(text)))}


def _only_error(fn, values):
    """The one error of the ``SettingsError`` that ``fn(values)`` raises."""
    try:
        fn(values)
    except validate.SettingsError as exc:
        (err,) = exc.errors.values()
        raise err from None


CASES = {
    "not a setting": (lambda: _only_error(check_settings, {"colour": 1}), ("not_a_setting", {"name": "colour"})),
    "preset not a name": (
        lambda: _only_error(check_settings, {"preset": 3}),
        ("name", {"name": "preset", "value": "int"}),
    ),
    "temperature nan": (lambda: validate.temperature(math.nan, 2.0), ("temperature_finite", {"value": "nan"})),
    "temperature text": (lambda: validate.temperature("hot", 2.0), ("temperature_finite", {"value": "'hot'"})),
    "temperature 1e-40": (
        lambda: validate.temperature(1e-40, 2.0),
        ("temperature_range", {"lo": 0.01, "hi": 2.0, "value": "1e-40"}),
    ),
    "top_p inf": (lambda: validate.top_p(math.inf), ("top_p_finite", {"value": "inf"})),
    "top_p 0": (lambda: validate.top_p(0.0), ("top_p_range", {"value": 0.0})),
    "seed -1": (lambda: validate.seed(-1), ("seed_negative", {"value": -1})),
    "seed 2**64": (
        lambda: validate.seed(2**64),
        ("between", {"name": "seed", "lo": -(2**63), "hi": 2**63 - 1, "value": 2**64}),
    ),
    "mode": (
        lambda: validate.one_of("mode", "fast", validate.MODES),
        ("one_of", {"name": "mode", "choices": "speculative, autoregressive", "value": "'fast'"}),
    ),
    "dtype list": (
        lambda: validate.one_of("dtype", [1], validate.DTYPES),
        ("one_of", {"name": "dtype", "choices": "float32, bfloat16", "value": "list"}),
    ),
    "verification": (
        lambda: validate.verification("x" * 100),
        ("verification", {"choices": "lossless, block", "value": repr("x" * 23 + "…")}),
    ),
    "block tree": (lambda: validate.tree_rule("block", 4), ("block_tree", {})),
    "draft_stop 1.5": (lambda: validate.draft_stop(1.5), ("draft_stop", {"value": "1.5"})),
    "draft_stop text": (lambda: validate.draft_stop("x"), ("draft_stop", {"value": "'x'"})),
    "flag": (lambda: validate.flag("trace", 1), ("bool", {"name": "trace", "value": "int"})),
    "prompt bytes": (lambda: validate.prompt(b"hi", 10), ("prompt_text", {})),
    "prompt blank": (lambda: validate.prompt(" \n", 10), ("prompt_empty", {})),
    "prompt long": (lambda: validate.prompt("x" * 11, 10), ("prompt_long", {"n": 11, "limit": 10})),
    "min_p nan": (lambda: validate.number("min_p", math.nan, 0.0, 1.0), ("number", {"name": "min_p", "value": "nan"})),
    "min_p 2": (
        lambda: validate.number("min_p", 2, 0.0, 1.0),
        ("between", {"name": "min_p", "lo": 0.0, "hi": 1.0, "value": 2}),
    ),
    "gamma text": (
        lambda: validate.whole_number("gamma", "four", 1, 16),
        ("whole", {"name": "gamma", "value": "'four'"}),
    ),
    "gamma 17": (
        lambda: validate.whole_number("gamma", 17, 1, B.max_gamma),
        ("between", {"name": "gamma", "lo": 1, "hi": 16, "value": 17}),
    ),
    "link gamma true": (lambda: validate.parse_whole_number("gamma", True, 1, 16), ("whole_plain", {"name": "gamma"})),
    "link gamma 4.5": (
        lambda: validate.parse_whole_number("gamma", "4.5", 1, 16),
        ("whole", {"name": "gamma", "value": "'4.5'"}),
    ),
    "link seed long": (
        lambda: validate.parse_whole_number("seed", "9" * 40, 0, 10),
        ("whole", {"name": "seed", "value": repr("9" * 23 + "…")}),
    ),
    "link temperature true": (
        lambda: validate.parse_number("temperature", True, 0.0, 2.0),
        ("number_plain", {"name": "temperature"}),
    ),
    "link temperature nan": (
        lambda: validate.parse_number("temperature", "nan", 0.0, 2.0),
        ("number_like", {"name": "temperature", "value": "'nan'"}),
    ),
    "link temperature 9": (
        lambda: validate.parse_number("temperature", "9", 0.0, 2.0),
        ("between", {"name": "temperature", "lo": 0.0, "hi": 2.0, "value": 9.0}),
    ),
    "link prompt control only": (lambda: validate.clean_prompt("\x00\x01", 10), ("prompt_empty", {})),
    "unknown preset": (
        lambda: api.resolve("nope", None),
        ("unknown_preset", {"preset": "'nope'", "choices": ", ".join(p.name for p in load_config().presets)}),
    ),
    "no such drafter": (
        lambda: api.resolve("tiny-random", "telepathy"),
        (
            "no_drafter",
            {
                "preset": "'tiny-random'",
                "drafter": "'telepathy'",
                "choices": ", ".join(load_config().preset("tiny-random").drafters),
            },
        ),
    ),
    "prompt too many tokens": (
        lambda: api.encode_prompt("hello", _FAKE_TOKENIZER, 100, 3),
        ("prompt_long_tokens", {"n": 5, "limit": 3}),
    ),
}


@pytest.mark.parametrize("fn, expected", CASES.values(), ids=list(CASES))
def test_each_check_raises_its_code_and_params(fn, expected):
    assert _raised(fn) == expected


def test_the_english_is_the_template_filled_with_the_params():
    for fn, (code, params) in CASES.values():
        with pytest.raises(Invalid) as err:
            fn()
        assert str(err.value) == ENGLISH[code].format(**params)
    with pytest.raises(ValueError, match=r"^gamma must be between 1 and 16, got 17$"):
        validate.whole_number("gamma", 17, 1, 16)


def test_every_error_code_is_raised_by_a_case_above():
    raised = {code for _, (code, _) in CASES.values()}
    notices = {c for c in ENGLISH if c.startswith(("progress.", "replay."))}
    # tree_rule needs a chains-only lab rule; preset_unavailable: the form's test below
    assert set(ENGLISH) - notices - raised == {"tree_rule", "preset_unavailable"}


# ---------------------------------------------------------------------------- the types


def test_a_message_is_its_english_and_keeps_its_code():
    m = Message("between", name="gamma", lo=1, hi=16, value=17)
    assert m == "gamma must be between 1 and 16, got 17" and isinstance(m, str)
    assert (m.code, m.params) == ("between", {"name": "gamma", "lo": 1, "hi": 16, "value": 17})
    with pytest.raises(AttributeError):
        m.code = "other"
    for again in (pickle.loads(pickle.dumps(m)), copy.deepcopy(m)):
        assert again == m and type(again) is Message and (again.code, again.params) == (m.code, m.params)


def test_an_invalid_keeps_its_code_through_str_pickle_and_settings_errors():
    exc = Invalid("prompt_long", n=11, limit=10)
    assert isinstance(exc, ValueError) and message_of(str(exc)) is not None and str(exc).code == "prompt_long"
    again = pickle.loads(pickle.dumps(exc))
    assert type(again) is Invalid and (again.code, again.params) == (exc.code, exc.params)
    assert str(copy.deepcopy(exc)) == str(exc)
    err = validate.SettingsError({"prompt": exc, "gamma": Invalid("whole_plain", name="gamma")})
    assert str(err) == "the prompt is too long: 11 characters (limit 10); gamma must be a whole number"
    unavailable = ModelUnavailable(Message("preset_unavailable", preset="'x'", reason="no GPU"))
    assert str(unavailable) == "preset 'x' is unavailable here: no GPU" and message_of(str(unavailable)).code


# ---------------------------------------------------------------------------- the page, in the visitor's language


def test_engine_message_renders_by_code_and_falls_back_to_the_text():
    exc = Invalid("between", name="gamma", lo=1, hi=16, value=17)
    assert engine_message(exc) == str(exc)
    with use_lang("zh"):
        assert engine_message(exc) == "gamma 必须在 1 到 16 之间，收到的是 17"
        assert engine_message(str(exc)) == engine_message(exc)  # str() keeps the code
        assert engine_message(Message("progress.done")) == "完成"
        assert engine_message(ValueError("gamma must be between 1 and 16, got 17")) == str(exc)  # no code: as is
        assert engine_message(RuntimeError("boom")) == "boom"
        both = validate.SettingsError({"gamma": exc, "seed": Invalid("seed_negative", value=-1)})
        assert engine_message(both) == "gamma 必须在 1 到 16 之间，收到的是 17; 随机种子必须 >= 0，收到的是 -1"


def test_the_form_speaks_chinese_to_a_chinese_visitor():
    from visual.playground_run import check_params
    from visual.presets import PresetChoice

    cfg = load_config()
    tiny, other = cfg.preset("tiny-random"), next(p for p in cfg.presets if p.name != "tiny-random")
    choices = [PresetChoice(tiny, True, ""), PresetChoice(other, False, "no GPU")]
    form = {"prompt": "  ", "preset": "tiny-random", "gamma": 0, "temperature": math.nan, "verification": "typical"}
    en = check_params(cfg, choices, form)
    assert en["prompt"] == "The prompt is empty: type at least one word."
    assert en["temperature"] == "temperature must be a finite number, got nan."
    with use_lang("zh"):
        zh = check_params(cfg, choices, form)
        unavailable = check_params(cfg, choices, {"prompt": "hi", "preset": other.name})
    assert zh == {
        "prompt": "提示词为空：请至少输入一个词。",
        "gamma": "gamma 必须在 1 到 16 之间，收到的是 0。",
        "temperature": "温度必须是有限数值，收到的是 nan。",
        "verification": "验证方式必须是 lossless, block 之一，收到的是 'typical'。",
    }
    assert unavailable == {"preset": f"预设 {other.name!r} 在此不可用：no GPU。"}


def test_a_shared_links_ignored_values_are_explained_in_chinese():
    from visual.lab import prefill_note
    from visual.share import validate_query

    pf = validate_query({"gamma": "99", "temperature": "nan"})
    with use_lang("zh"):
        note = prefill_note(pf)
    assert "gamma 必须在 1 到" in note and "temperature 必须是类似 0.7 的数值" in note
    assert "must be" not in note
