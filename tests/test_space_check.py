"""check-space: the header, the tracked files and the CLI, with mutants for each rule."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from tools import cli, space_check

ROOT = Path(__file__).resolve().parent.parent

CONFIG = {
    "hub_allowlist": ["org/target", "org/drafter"],
    "presets": [{"name": "p", "source": "hub", "target": "org/target", "drafter_model": "org/drafter"}],
}
REQUIREMENTS = "torch==2.13.0\ngradio==6.31.0\n"


def readme(**changes) -> str:
    head = {
        "title": "T",
        "sdk": "gradio",
        "sdk_version": "6.31.0",
        "app_file": "app.py",
        "python_version": "3.11",
        "short_description": "short",
        "models": ["org/target", "org/drafter"],
    }
    head.update(changes)
    return "---\n" + yaml.safe_dump(head, sort_keys=False) + "---\n\n# T\n"


def errors(findings) -> list[str]:
    return [f.message for f in findings if f.level == "error"]


def test_a_consistent_header_passes():
    assert errors(space_check.check_header(readme(), REQUIREMENTS, CONFIG, ROOT)) == []


@pytest.mark.parametrize(
    "changes, needle",
    [
        ({"sdk": "streamlit"}, "sdk is"),
        ({"sdk_version": "6.30.0"}, "sdk_version"),
        ({"app_file": "missing.py"}, "app_file"),
        ({"python_version": 3.1}, "python_version"),  # what an unquoted 3.10 becomes
        ({"short_description": "x" * 61}, "61 characters"),
        ({"models": ["org/target"]}, "hub_allowlist"),
    ],
)
def test_each_header_mistake_is_an_error(changes, needle):
    found = errors(space_check.check_header(readme(**changes), REQUIREMENTS, CONFIG, ROOT))
    assert len(found) >= 1 and any(needle in m for m in found), found


def test_a_hub_preset_outside_models_is_an_error():
    config = {**CONFIG, "presets": CONFIG["presets"] + [{"name": "q", "source": "hub", "target": "org/other"}]}
    assert any("org/other" in m for m in errors(space_check.check_header(readme(), REQUIREMENTS, config, ROOT)))


def test_no_front_matter_is_an_error():
    assert errors(space_check.check_header("# just a title\n", REQUIREMENTS, CONFIG, ROOT))


def _git_repo(tmp_path: Path) -> Path:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    return tmp_path


def _add(repo: Path, name: str, data: bytes) -> None:
    (repo / name).write_bytes(data)
    subprocess.run(["git", "add", name], cwd=repo, check=True)


def test_a_large_plain_file_fails_and_lfs_routing_fixes_it(tmp_path):
    repo = _git_repo(tmp_path)
    _add(repo, "small.txt", b"hello\n")
    _add(repo, "big.txt", b"a" * 2048)
    found = errors(space_check.check_files(repo, max_bytes=1024))
    assert len(found) == 1 and "big.txt" in found[0]
    # the mutant the check must catch only when .gitattributes does NOT route it through LFS
    _add(repo, ".gitattributes", b"*.txt filter=lfs diff=lfs merge=lfs -text\n")
    assert errors(space_check.check_files(repo, max_bytes=1024)) == []


def test_binary_files_outside_lfs_are_named_in_a_warning(tmp_path):
    repo = _git_repo(tmp_path)
    _add(repo, "weights.bin", b"\x00\x01" * 10)
    _add(repo, "notes.md", b"# notes\n")
    warnings = [f.message for f in space_check.check_files(repo) if f.level == "warning"]
    assert len(warnings) == 1 and "weights.bin" in warnings[0] and "notes.md" not in warnings[0]
    assert "hf upload" in warnings[0]


def test_every_tracked_file_of_this_repository_fits_a_space():
    """Walks `git ls-files`: any file over 10 MB that .gitattributes does not send to LFS fails."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    assert errors(space_check.check_files(ROOT)) == []
    sizes = {p: (ROOT / p).stat().st_size for p in space_check.tracked_files(ROOT) if (ROOT / p).is_file()}
    lfs = space_check.lfs_paths(list(sizes), ROOT)
    assert all(size <= space_check.MAX_PLAIN_BYTES for p, size in sizes.items() if p not in lfs)


def test_the_cli_prints_one_line_per_finding_and_exits_by_errors(capsys, monkeypatch):
    monkeypatch.setattr(space_check, "run_checks", lambda **kw: [space_check.Finding("ok", "header", "fine")])
    assert cli.main(["check-space"]) == 0
    assert capsys.readouterr().out.strip() == "ok      header   fine"
    monkeypatch.setattr(space_check, "run_checks", lambda **kw: [space_check.Finding("error", "files", "too big")])
    assert cli.main(["check-space"]) == 1


def test_hub_presets_must_be_listed_as_unavailable():
    config = {
        "presets": [
            {"name": "h", "label": "Big (hub)", "source": "hub"},
            {"name": "o", "label": "Offline", "source": "packaged"},
        ]
    }
    page = {"components": [{"props": {"choices": [["Big (hub) \u2014 unavailable", "h"], ["Offline", "o"]]}}]}
    assert space_check.hub_labels_unavailable(page, config) == []
    offered = {"components": [{"props": {"choices": [["Big (hub)", "h"], ["Offline", "o"]]}}]}
    assert space_check.hub_labels_unavailable(offered, config) == ["Big (hub)"]
