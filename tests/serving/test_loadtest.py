"""`python -m tools loadtest` against the app (tiny-random): no errors, every answer
equals the sequential answer for its seed, and the report has its numbers."""

from __future__ import annotations

import json

import pytest

from tools import loadtest


def test_loadtest_mixed_seeds_no_cross_talk(server, capsys):
    code = loadtest.main(
        [
            "--url",
            server,
            "--clients",
            "6",
            "--requests",
            "2",
            "--distinct",
            "4",
            "--temperature",
            "1.0",
            "--preset",
            "tiny-random",
            "--max-new-tokens",
            "10",
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    s = out["summary"]
    assert code == 0, out["errors"]
    assert s["requests"] == 12 and s["ok"] == 12 and s["errors"] == 0 and s["mismatches"] == 0
    assert s["p50_s"] > 0 and s["p95_s"] >= s["p50_s"] and s["throughput_req_s"] > 0
    assert s["rss_before_mb"] and s["rss_after_mb"]  # the in-process server, found by its port


def test_loadtest_classroom_case_shares_one_run(server, capsys):
    code = loadtest.main(
        [
            "--url",
            server,
            "--clients",
            "8",
            "--prompt",
            "Once upon a time",
            "--preset",
            "tiny-random",
            "--max-new-tokens",
            "10",
            "--seed",
            "77",
        ]
    )
    text = capsys.readouterr().out
    assert code == 0, text
    assert "| p50 | p95 |" in text
    row = text.splitlines()[3].split("|")
    assert row[4].strip() == "0" and row[5].strip() == "0" and row[6].strip() == "0"  # errors, mismatches, rounding
    assert int(row[7]) >= 7  # everyone but the first followed or replayed its run


def test_a_mismatch_is_reported_and_fails(server, capsys, monkeypatch):
    """Mutant: a wrong reference must show up as mismatches and exit 1."""
    monkeypatch.setattr(loadtest, "_local_tokens", lambda kw, draft_caps: [0])
    code = loadtest.main(
        ["--url", server, "--clients", "2", "--preset", "tiny-random", "--max-new-tokens", "5", "--json"]
    )
    s = json.loads(capsys.readouterr().out)["summary"]
    assert code == 1 and s["mismatches"] == 2


def test_own_prompts_share_passes_and_match_alone(server, capsys):
    """A class typing its own prompts (T = 1): the server shares target passes between them
    and shortens drafts under load; each answer equals the request run alone with the
    draft lengths it had."""
    code = loadtest.main(
        ["--url", server, "--clients", "5", "--own-prompts", "--distinct", "5", "--temperature", "1.0",
         "--preset", "tiny-random", "--max-new-tokens", "12", "--json"]
    )  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    s = out["summary"]
    assert code == 0, out["errors"]
    assert s["ok"] == 5 and s["mismatches"] == 0
    assert s["mean_shared_rows"] > 1  # passes really carried several runs


@pytest.mark.parametrize(("flags", "dtype"), [([], None), (["--dtype", "float32"], "float32")])
def test_the_requests_carry_a_dtype_only_when_asked(flags, dtype):
    """Without --dtype the preset's applies; with it every request asks for it."""
    args = loadtest.build_parser().parse_args(["--url", "http://127.0.0.1:9", "--clients", "2", *flags])
    requests = [kw for client in loadtest._requests(args) for kw in client]
    assert [kw.get("dtype") for kw in requests] == [dtype, dtype]


def test_only_shared_bfloat16_answers_may_round_differently():
    """A differing answer is a mismatch unless it is bfloat16 and its passes were shared."""
    shared = [{"shared_rows": 1}, {"shared_rows": 5}]
    assert loadtest._rounds_differently({"steps": shared, "config": {"dtype": "bfloat16"}})
    assert not loadtest._rounds_differently({"steps": shared, "config": {"dtype": "float32"}})
    assert not loadtest._rounds_differently({"steps": [{"shared_rows": 1}], "config": {"dtype": "bfloat16"}})


@pytest.mark.parametrize("url, verify", [("http://127.0.0.1:9", False), ("https://example.org", True)])
def test_clients_verify_certificates_only_over_https(monkeypatch, capsys, url, verify):
    """Over plain HTTP there is nothing to verify: the load test's clients must not load a CA
    bundle per call (it cost ~0.2 CPU-s a request, on the cores of a server on the same
    machine); over HTTPS they verify as usual."""
    import gradio_client

    made = []

    class FakeClient:
        def __init__(self, src, **kwargs):
            made.append(kwargs)

        def predict(self, **kwargs):
            return {"token_ids": [1], "steps": []}

    monkeypatch.setattr(gradio_client, "Client", FakeClient)
    monkeypatch.setattr(loadtest, "_local_tokens", lambda kw, draft_caps: [1])
    monkeypatch.setattr(loadtest, "server_rss_mb", lambda url, pid=None: None)
    code = loadtest.main(["--url", url, "--clients", "3", "--max-new-tokens", "2", "--json"])
    assert code == 0, capsys.readouterr().out
    assert len(made) == 3 and all(kw.get("ssl_verify") is verify for kw in made)
