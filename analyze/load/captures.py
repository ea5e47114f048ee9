"""The flight recorder's captures list (tailtrace --flight-recorder, docs/flight-recorder.md).

A recorder run directory holds meta.json ("flight": settings and counters), captures.jsonl
(one line a capture: dir, t_start_ns, latency_ns, worst_ns, threshold_ns, spans, bytes, error)
and captures/NNNN/, each an ordinary run directory of one window (load_run reads it).

df_captures(dir) -> DataFrame, one row per captures.jsonl line, columns:
  dir, t_start_ns, latency_ns, worst_ns, threshold_ns, spans, bytes, error (None: written),
  t_s (seconds since the recorder started).
new_captures(path, offset) -> (the rows of the lines written past byte offset, the offset
  after the last whole line): for a reader that follows a recorder while it writes.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from .errors import AnalysisError

CAPTURE_COLS = ["dir", "t_start_ns", "latency_ns", "worst_ns", "threshold_ns", "spans", "bytes",
                "error"]


def _read_jsonl(path: Path, text: str | None = None) -> list[dict]:
    rows = []
    for n, line in enumerate((path.read_text() if text is None else text).splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise AnalysisError(f"{path}:{n}: not JSON ({e.msg}): a capture list tailtrace "
                                "--flight-recorder writes") from None
    return rows


def df_captures(run_dir) -> pd.DataFrame:
    """captures.jsonl of a recorder run as a DataFrame (columns in the module doc)."""
    d = Path(run_dir)
    path = d / "captures.jsonl"
    if not (d / "meta.json").exists():
        raise AnalysisError(f"{d}: no meta.json: not a tailtrace run directory")
    meta = json.loads((d / "meta.json").read_text())
    if "flight" not in meta:
        raise AnalysisError(f"{d}: not a flight-recorder run (meta.json has no 'flight'): "
                            "record one with tailtrace --flight-recorder SECONDS --span ...")
    df = pd.DataFrame(_read_jsonl(path) if path.exists() else [], columns=CAPTURE_COLS)
    t0 = int(meta.get("mono_start_ns") or 0)
    df["t_s"] = (df["t_start_ns"].astype("float64") - t0) / 1e9 if len(df) else []
    return df


def new_captures(path: Path, offset: int) -> tuple[list[dict], int]:
    """The captures listed in path past byte offset, and the offset after them; a last line
    not yet ended by its newline is left for the next call."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:
        return [], offset
    whole = data[:data.rfind(b"\n") + 1]
    return _read_jsonl(path, whole.decode()), offset + len(whole)
