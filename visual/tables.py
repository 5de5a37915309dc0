"""The per-token table (pandas) and the downloadable exports (trace JSON, table CSV).

One row per token the run looked at: every drafted token (accepted, rejected or
never judged) and every token the target added (resampled, bonus, or its own
autoregressive token).  ``token`` is the raw text; ``shown`` is the same with
whitespace made visible.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from playground.decoding.records import GenerationResult, StepRecord
from visual.fmt import token_plain
from visual.i18n import CATALOGUE, t

COLUMNS = [
    "run",
    "step",
    "position",
    "kind",
    "token_id",
    "token",
    "shown",
    "q_draft",
    "p_target",
    "p_over_q",
    "accept_prob",
    "u",
    "verdict",
    "committed",
    "draft_ms",
    "verify_ms",
]


def token_rows(steps: Sequence[StepRecord], run: str = "speculative") -> list[dict]:
    rows: list[dict] = []
    for s in steps:
        for d in s.drafted:
            ratio = d.ratio if d.ratio is not None else (d.target_prob / d.draft_prob if d.draft_prob > 0 else None)
            rows.append(
                dict(
                    run=run,
                    step=s.index + 1,
                    position=d.position,
                    kind="draft",
                    token_id=d.token_id,
                    token=d.text,
                    shown=token_plain(d.text),
                    q_draft=d.draft_prob,
                    p_target=d.target_prob,
                    p_over_q=ratio,
                    accept_prob=d.accept_prob,
                    u=d.u,
                    verdict="accepted" if d.accepted else ("rejected" if d.judged else "not judged"),
                    committed=bool(d.accepted),
                    draft_ms=s.draft_ms,
                    verify_ms=s.verify_ms,
                )
            )
        c = s.correction
        if c is not None:
            rows.append(
                dict(
                    run=run,
                    step=s.index + 1,
                    position=c.position,
                    kind=c.kind,
                    token_id=c.token_id,
                    token=c.text,
                    shown=token_plain(c.text),
                    q_draft=None,
                    p_target=c.target_prob,
                    p_over_q=None,
                    accept_prob=None,
                    u=None,
                    verdict={"resample": "resampled", "bonus": "bonus"}.get(c.kind, "target"),
                    committed=True,
                    draft_ms=s.draft_ms,
                    verify_ms=s.verify_ms,
                )
            )
    return rows


def token_table(steps: Sequence[StepRecord], ar_steps: Sequence[StepRecord] = ()) -> pd.DataFrame:
    rows = token_rows(steps, "speculative") + token_rows(ar_steps, "autoregressive")
    df = pd.DataFrame(rows, columns=COLUMNS)
    for col in ("q_draft", "p_target", "p_over_q", "accept_prob", "u"):
        df[col] = df[col].astype("float64")
    return df


def display_table(df: pd.DataFrame) -> pd.DataFrame:
    """The table as shown in the app: visible whitespace, rounded numbers."""
    out = df.drop(columns=["token"]).rename(columns={"shown": "token"})
    for col in ("q_draft", "p_target", "p_over_q", "accept_prob", "u"):
        out[col] = out[col].round(4)
    for col in ("draft_ms", "verify_ms"):
        out[col] = out[col].round(1)
    # shown in the visitor's language (visual.i18n); the CSV and JSON exports keep these English names
    for col in ("run", "kind", "verdict"):
        out[col] = out[col].map(lambda v: t(f"val.{v}") if f"val.{v}" in CATALOGUE["en"] else v)
    return out.rename(columns={c: t(f"col.{c}") for c in out.columns if f"col.{c}" in CATALOGUE["en"]})


def trace_payload(
    result: GenerationResult | None, ar_result: GenerationResult | None = None, calibration: dict | None = None
) -> dict:
    """The exported JSON: the speculative trace, plus the race's autoregressive trace if any."""
    data = result.to_dict() if result is not None else {}
    if ar_result is not None:
        data["autoregressive"] = ar_result.to_dict()
    if calibration is not None:
        data["calibration"] = calibration
    return data


# --------------------------------------------------------------------------- exports

EXPORT_DIR_NAME = "specplay-exports"
EXPORT_KEEP = 64  # export folders kept (newest first); older ones are deleted when a new one is made
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value):
    """A cell a spreadsheet will show as text: a string starting like a formula gets a leading '.

    Excel, LibreOffice and Google Sheets run a cell such as ``=HYPERLINK("http://…")`` as a
    formula when the CSV is opened (OWASP "CSV injection"); a token's text is model output
    and can be exactly that.  Only strings change; numbers (−0.5 is a number) stay numbers."""
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value


def csv_safe(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``df`` with every text cell passed through ``csv_cell`` (for the CSV only)."""
    out = df.copy()
    for col in out.columns:
        if out[col].dtype == object or pd.api.types.is_string_dtype(out[col]):
            out[col] = out[col].map(csv_cell)
    return out


def export_root(root: str | os.PathLike | None = None) -> Path:
    """The app's one folder for export files (created private), under the system temp folder.

    A folder someone else planted there as a symlink is not used: a fresh private temp
    folder is returned instead."""
    base = Path(root) if root is not None else Path(tempfile.gettempdir()) / EXPORT_DIR_NAME
    if base.is_symlink():
        return Path(tempfile.mkdtemp(prefix="specplay-exports-"))
    base.mkdir(mode=0o700, parents=True, exist_ok=True)
    return base


def new_export_dir(root: str | os.PathLike | None = None, keep: int = EXPORT_KEEP, prefix: str = "export-") -> Path:
    """A fresh folder for one export, inside ``export_root``; only the newest ``keep`` survive.

    Each export gets its own folder (two visitors exporting at once never overwrite each
    other's file), and making one deletes all but the ``keep`` newest, so the folder never
    grows without bound.  Gradio copies a returned file into its own cache before serving it,
    so deleting an old export never breaks a download already offered."""
    if keep < 1:
        raise ValueError(f"keep must be >= 1, got {keep}")
    base = export_root(root)
    d = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
    prune_exports(base, keep, protect=d)
    return d


def prune_exports(base: Path, keep: int, protect: Path | None = None) -> list[Path]:
    """Delete all but the ``keep`` newest export folders in ``base``; return what was deleted."""
    dirs = []
    for p in base.iterdir():
        try:
            if p.is_dir() and not p.is_symlink():
                dirs.append((p.stat().st_mtime_ns, p.name, p))
        except OSError:  # removed meanwhile by another worker
            continue
    dirs.sort(reverse=True)
    doomed = [p for _, _, p in dirs[keep:] if protect is None or p != protect]
    for p in doomed:
        shutil.rmtree(p, ignore_errors=True)
    return doomed


def write_exports(
    df: pd.DataFrame,
    payload: dict,
    directory: str | os.PathLike | None = None,
    *,
    root: str | os.PathLike | None = None,
    keep: int = EXPORT_KEEP,
) -> tuple[str, str]:
    """Write ``speculative_trace.json`` and ``speculative_tokens.csv``; return their paths.

    Into ``directory`` if given, else into a fresh folder from ``new_export_dir(root, keep)``.
    The CSV's text cells are neutralised against formula injection (``csv_safe``); the JSON
    keeps the exact texts (it is data for programs, and the import reads it back)."""
    d = Path(directory) if directory is not None else new_export_dir(root, keep)
    d.mkdir(parents=True, exist_ok=True)
    json_path = d / "speculative_trace.json"
    csv_path = d / "speculative_tokens.csv"
    json_path.write_text(
        json.dumps(clean_json(payload), ensure_ascii=False, indent=1, allow_nan=False), encoding="utf-8"
    )
    # CRLF rows (RFC 4180): with "\n" rows a bare "\r" inside a token's text is written unquoted and
    # readers split the row there; with "\r\n" the writer quotes any cell holding "\r" or "\n".
    csv_safe(df).to_csv(csv_path, index=False, lineterminator="\r\n")
    return str(json_path), str(csv_path)


def clean_json(obj):
    """A copy with tuples as lists and non-finite floats (NaN, inf) as None: strict JSON."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): clean_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean_json(v) for v in obj]
    return obj
