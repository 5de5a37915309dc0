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
import tempfile
from pathlib import Path
from typing import Sequence

import pandas as pd

from playground.records import GenerationResult, StepRecord
from visual.fmt import token_plain

COLUMNS = [
    "run", "step", "position", "kind", "token_id", "token", "shown", "q_draft", "p_target",
    "p_over_q", "accept_prob", "u", "verdict", "committed", "draft_ms", "verify_ms",
]


def token_rows(steps: Sequence[StepRecord], run: str = "speculative") -> list[dict]:
    rows: list[dict] = []
    for s in steps:
        for d in s.drafted:
            ratio = d.ratio if d.ratio is not None else (d.target_prob / d.draft_prob if d.draft_prob > 0 else None)
            rows.append(dict(
                run=run, step=s.index + 1, position=d.position, kind="draft", token_id=d.token_id, token=d.text,
                shown=token_plain(d.text), q_draft=d.draft_prob, p_target=d.target_prob, p_over_q=ratio,
                accept_prob=d.accept_prob, u=d.u,
                verdict="accepted" if d.accepted else ("rejected" if d.judged else "not judged"),
                committed=bool(d.accepted), draft_ms=s.draft_ms, verify_ms=s.verify_ms,
            ))
        c = s.correction
        if c is not None:
            rows.append(dict(
                run=run, step=s.index + 1, position=c.position, kind=c.kind, token_id=c.token_id, token=c.text,
                shown=token_plain(c.text), q_draft=None, p_target=c.target_prob, p_over_q=None,
                accept_prob=None, u=None, verdict={"resample": "resampled", "bonus": "bonus"}.get(c.kind, "target"),
                committed=True, draft_ms=s.draft_ms, verify_ms=s.verify_ms,
            ))
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
    return out


def trace_payload(result: GenerationResult | None, ar_result: GenerationResult | None = None,
                  calibration: dict | None = None) -> dict:
    """The exported JSON: the speculative trace, plus the race's autoregressive trace if any."""
    data = result.to_dict() if result is not None else {}
    if ar_result is not None:
        data["autoregressive"] = ar_result.to_dict()
    if calibration is not None:
        data["calibration"] = calibration
    return data


def write_exports(df: pd.DataFrame, payload: dict, directory: str | os.PathLike | None = None) -> tuple[str, str]:
    """Write ``trace.json`` and ``tokens.csv`` into a fresh directory; return their paths."""
    d = Path(directory) if directory is not None else Path(tempfile.mkdtemp(prefix="specplay-"))
    d.mkdir(parents=True, exist_ok=True)
    json_path = d / "speculative_trace.json"
    csv_path = d / "speculative_tokens.csv"
    json_path.write_text(json.dumps(clean_json(payload), ensure_ascii=False, indent=1, allow_nan=False),
                         encoding="utf-8")
    df.to_csv(csv_path, index=False)
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
