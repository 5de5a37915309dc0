"""``python -m tools check-space``: what Hugging Face will see when this repository is a Space.

    python -m tools check-space              # header + files (seconds, offline)
    python -m tools check-space --resolve    # + pip resolves requirements from binary wheels only
    python -m tools check-space --start      # + the app starts and answers with the hub unreachable

Checks, each a function that returns findings:

* **header** — README.md's YAML front matter, which Spaces reads: ``sdk: gradio`` with
  ``sdk_version`` equal to requirements.txt's gradio pin (Spaces installs gradio from the
  header), ``app_file`` exists, ``python_version`` is a quoted string (an unquoted 3.10 is the
  float 3.1), ``short_description`` ≤ 60 characters, ``models`` equals ``hub_allowlist`` in
  spaces_config.yaml and covers every hub preset's repositories.
* **files** — every file ``git ls-files`` lists: a file over 10 MB that ``.gitattributes`` does
  not route through LFS is refused by a git push (error).  A binary file (a NUL byte in its
  first 8,000 bytes, git's own test) is also refused by a *git* push unless it goes through
  Xet/LFS, whatever its size; ``hf upload`` stores binaries in Xet by itself, so this is a
  warning that names the files and both ways to push them.
* **resolve** (``--resolve``) — ``pip install --dry-run --only-binary=:all: -r requirements.txt``
  (needs the package index): nothing compiles.
* **start** (``--start``) — starts ``app.py`` with ``HF_HUB_OFFLINE=1`` on a free port, waits
  until it answers HTTP (the offline default must come up with no hub) and reads the page's
  config: every hub preset must be listed as unavailable.

This module pushes nothing, never needs a token, and never imports gradio.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tools.paths import ROOT

MAX_PLAIN_BYTES = 10 * 1024 * 1024  # Hugging Face refuses larger non-LFS files on a git push
MAX_SHORT_DESCRIPTION = 60


@dataclass(frozen=True)
class Finding:
    level: str  # "error" | "warning" | "ok"
    check: str
    message: str


def front_matter(readme_text: str) -> dict[str, Any]:
    """The YAML block between the first two ``---`` lines of README.md ({} when absent)."""
    m = re.match(r"---\n(.*?)\n---\n", readme_text, re.S)
    return yaml.safe_load(m.group(1)) or {} if m else {}


def gradio_pin(requirements_text: str) -> str | None:
    for line in requirements_text.splitlines():
        m = re.match(r"\s*gradio(\[[^\]]*\])?\s*==\s*([\w.]+)", line)
        if m:
            return m.group(2)
    return None


def check_header(readme_text: str, requirements_text: str, config: dict[str, Any], root: Path = ROOT) -> list[Finding]:
    """README's front matter against requirements.txt and spaces_config.yaml (parsed YAML)."""
    head = front_matter(readme_text)
    if not head:
        return [Finding("error", "header", "README.md has no YAML front matter (--- … ---): Spaces needs it")]
    out: list[Finding] = []

    def need(ok: bool, message: str) -> None:
        if not ok:
            out.append(Finding("error", "header", message))

    need(head.get("sdk") == "gradio", f"sdk is {head.get('sdk')!r}, not 'gradio'")
    pin = gradio_pin(requirements_text)
    need(
        pin is None or str(head.get("sdk_version")) == pin,
        f"sdk_version {head.get('sdk_version')!r} differs from requirements.txt's gradio=={pin} "
        "(Spaces installs gradio from the header)",
    )
    app_file = head.get("app_file")
    need(isinstance(app_file, str) and (root / app_file).is_file(), f"app_file {app_file!r} is not a file here")
    need(
        isinstance(head.get("python_version"), str),
        f"python_version {head.get('python_version')!r} must be a quoted string (3.10 unquoted is 3.1)",
    )
    short = head.get("short_description") or ""
    need(
        len(short) <= MAX_SHORT_DESCRIPTION,
        f"short_description has {len(short)} characters; Spaces allows {MAX_SHORT_DESCRIPTION}",
    )
    models = set(head.get("models") or ())
    allow = set(config.get("hub_allowlist") or ())
    need(models == allow, f"models {sorted(models)} differ from hub_allowlist {sorted(allow)}")
    hub = {
        r
        for p in config.get("presets", ())
        if p.get("source") == "hub"
        for r in (p.get("target"), p.get("drafter_model"))
        if r
    }
    need(hub <= models, f"hub presets use repositories missing from models: {sorted(hub - models)}")
    if not out:
        out.append(
            Finding("ok", "header", f"front matter agrees with requirements.txt (gradio {pin}) and the hub allowlist")
        )
    return out


def tracked_files(root: Path = ROOT) -> list[str]:
    res = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True)
    return [p for p in res.stdout.decode().split("\0") if p]


def lfs_paths(paths: list[str], root: Path = ROOT) -> set[str]:
    """The paths whose ``filter`` attribute is ``lfs`` (what .gitattributes routes through LFS/Xet)."""
    if not paths:
        return set()
    res = subprocess.run(
        ["git", "check-attr", "-z", "--stdin", "filter"],
        cwd=root,
        capture_output=True,
        input="\0".join(paths).encode() + b"\0",
        check=True,
    )
    fields = res.stdout.decode().split("\0")
    return {fields[i] for i in range(0, len(fields) - 2, 3) if fields[i + 2] == "lfs"}


def is_binary(path: Path) -> bool:
    """git's heuristic: a NUL byte in the first 8,000 bytes."""
    with open(path, "rb") as f:
        return b"\0" in f.read(8000)


def check_files(root: Path = ROOT, max_bytes: int = MAX_PLAIN_BYTES) -> list[Finding]:
    paths = [p for p in tracked_files(root) if (root / p).is_file()]
    lfs = lfs_paths(paths, root)
    plain = [p for p in paths if p not in lfs]
    sizes = {p: (root / p).stat().st_size for p in paths}
    out: list[Finding] = []
    for p in plain:
        if sizes[p] > max_bytes:
            out.append(
                Finding(
                    "error",
                    "files",
                    f"{p} is {sizes[p] / 1e6:.1f} MB and not LFS-tracked; "
                    f"Hugging Face refuses non-LFS files over {max_bytes / 1048576:.0f} MB",
                )
            )
    binaries = [p for p in plain if is_binary(root / p)]
    if binaries:
        out.append(
            Finding(
                "warning",
                "files",
                f"{len(binaries)} binary file(s) not LFS-tracked ({', '.join(binaries)}): a plain `git push` to a Space "
                "refuses binary files; push with `hf upload` (stores them in Xet), or `git lfs track` them in the "
                "Space's clone first",
            )
        )
    largest = max(paths, key=sizes.get) if paths else None
    if not any(f.level == "error" for f in out):
        out.append(
            Finding(
                "ok",
                "files",
                f"{len(paths)} tracked files, none over {max_bytes / 1048576:.0f} MB "
                f"outside LFS (largest: {largest}, {sizes[largest] / 1e6:.1f} MB)"
                if largest
                else "no tracked files",
            )
        )
    return out


def check_resolve(root: Path = ROOT, timeout_s: float = 600) -> list[Finding]:
    """pip resolves requirements.txt from binary wheels only (downloads metadata, installs nothing)."""
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--dry-run",
        "--ignore-installed",
        "--only-binary=:all:",
        "--quiet",
        "--report",
        "-",
        "-r",
        str(root / "requirements.txt"),
    ]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return [Finding("error", "resolve", f"pip did not resolve requirements.txt within {timeout_s:.0f} s")]
    if res.returncode != 0:
        tail = " ".join(res.stderr.strip().splitlines()[-3:])
        return [Finding("error", "resolve", f"pip cannot install requirements.txt from binary wheels only: {tail}")]

    try:
        n = len(json.loads(res.stdout).get("install", []))
    except ValueError:
        n = None
    return [
        Finding(
            "ok",
            "resolve",
            "requirements.txt resolves from binary wheels only" + (f" ({n} packages)" if n is not None else ""),
        )
    ]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def hub_labels_unavailable(page_config: dict, config: dict[str, Any]) -> list[str]:
    """Labels of hub presets that the page does NOT list as unavailable (should be [])."""

    blob = json.dumps(page_config, ensure_ascii=False)
    return [
        p["label"]
        for p in config.get("presets", ())
        if p.get("source") == "hub" and f"{p['label']} \u2014 unavailable" not in blob
    ]


def check_start(root: Path = ROOT, timeout_s: float = 180) -> list[Finding]:
    """Start app.py with the hub unreachable, wait until it serves its page, and check that
    the page lists every hub preset as unavailable."""

    config = yaml.safe_load((root / "spaces_config.yaml").read_text(encoding="utf-8"))
    port = free_port()
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "PORT": str(port),
        "GRADIO_SERVER_NAME": "127.0.0.1",
        "GRADIO_ANALYTICS_ENABLED": "False",
    }
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryFile("w+") as log:  # a file, not a pipe: a chatty app never blocks on it
        proc = subprocess.Popen([sys.executable, "app.py"], cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
        t0 = time.monotonic()
        try:
            while time.monotonic() - t0 < timeout_s:
                if proc.poll() is not None:
                    log.seek(0)
                    tail = " ".join(log.read().strip().splitlines()[-3:])
                    return [Finding("error", "start", f"app.py exited with code {proc.returncode}: {tail}")]
                try:
                    with urllib.request.urlopen(url + "/", timeout=5) as r:
                        up = r.status == 200
                except OSError:
                    up = False
                if not up:
                    time.sleep(1)
                    continue
                waited = time.monotonic() - t0
                with urllib.request.urlopen(url + "/config", timeout=30) as r:
                    missing = hub_labels_unavailable(json.loads(r.read()), config)
                if missing:
                    return [
                        Finding(
                            "error",
                            "start",
                            f"with the hub offline the page offers hub presets as available: {missing}",
                        )
                    ]
                return [
                    Finding(
                        "ok",
                        "start",
                        f"app.py answered on port {port} with the hub offline after "
                        f"{waited:.0f} s and lists every hub preset as unavailable",
                    )
                ]
            return [Finding("error", "start", f"app.py did not answer within {timeout_s:.0f} s")]
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


def run_checks(resolve: bool = False, start: bool = False, root: Path = ROOT) -> list[Finding]:
    config = yaml.safe_load((root / "spaces_config.yaml").read_text(encoding="utf-8"))
    req = root / "requirements.txt"
    findings = check_header(
        (root / "README.md").read_text(encoding="utf-8"),
        req.read_text(encoding="utf-8") if req.is_file() else "",
        config,
        root,
    )
    findings += check_files(root)
    if resolve:
        findings += check_resolve(root)
    if start:
        findings += check_start(root)
    return findings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools check-space",
        description="Check what Hugging Face Spaces will see in this repository.",
    )
    parser.add_argument("--resolve", action="store_true", help="also resolve requirements.txt from binary wheels only")
    parser.add_argument("--start", action="store_true", help="also start app.py with the hub offline")
    args = parser.parse_args(argv)
    findings = run_checks(resolve=args.resolve, start=args.start)
    for f in findings:
        print(f"{f.level:7s} {f.check:8s} {f.message}")
    return 1 if any(f.level == "error" for f in findings) else 0
