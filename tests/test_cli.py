"""The command line: bad arguments exit 2, failed runs exit 1, never a traceback."""

from __future__ import annotations

import pytest

from playground import cli


def run_cli(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_generate_tiny_autoregressive_prints_text_and_summary(capsys):
    code, out, err = run_cli(
        capsys,
        "generate",
        "--preset",
        "tiny-random",
        "--prompt",
        "abc",
        "--mode",
        "autoregressive",
        "--max-new-tokens",
        "5",
    )
    assert code == 0, err
    assert "5 tokens in" in out and "autoregressive" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["generate", "--preset", "tiny-random", "--prompt", "   "], "prompt is empty"),
        (["generate", "--preset", "nope", "--prompt", "hi"], "unknown preset 'nope'"),
        (["generate", "--preset", "tiny-random", "--prompt", "hi", "--gamma", "99"], "gamma must be between"),
        (["generate", "--preset", "tiny-random", "--prompt", "hi", "--temperature", "1e-40"], "temperature"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, argv, message):
    code, _, err = run_cli(capsys, *argv)
    assert code == 2
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_a_failed_run_is_one_line_and_exit_1(capsys, monkeypatch):
    import playground.api

    def broken(*_a, **_k):
        yield from ()
        raise RuntimeError("crop was called,\nbut the layer does not track past states")

    monkeypatch.setattr(playground.api, "stream_run", broken)
    code, _, err = run_cli(capsys, "generate", "--preset", "tiny-random", "--prompt", "hi")
    assert code == 1
    assert err == "error: the run failed: RuntimeError: crop was called, but the layer does not track past states\n"


def test_debug_env_reraises(capsys, monkeypatch):
    import playground.api

    def broken(*_a, **_k):
        raise RuntimeError("boom")

    monkeypatch.setattr(playground.api, "stream_run", broken)
    monkeypatch.setenv("SPECPLAY_DEBUG", "1")
    with pytest.raises(RuntimeError, match="boom"):
        cli.main(["generate", "--preset", "tiny-random", "--prompt", "hi"])
