"""The record schema: numpy dtypes built from schema.json (written by tt-schema).

The C header include/tailtrace/records.h is the one source of the layout;
`tt-schema` prints it as JSON and every writer copies it into the run
directory as schema.json. Nothing here restates a field by hand.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np

_NP_TYPES = {"u8": "<u1", "u16": "<u2", "u32": "<u4", "u64": "<u8",
             "s32": "<i4", "s64": "<i8", "char": "S1"}


class SchemaError(RuntimeError):
    """schema.json is missing or does not describe the files."""


def find_tt_schema() -> str | None:
    """Path of the tt-schema binary: $TT_SCHEMA, the build tree ($TT_BUILD or build/), or PATH."""
    env = os.environ.get("TT_SCHEMA")
    if env:
        return env
    root = Path(__file__).resolve().parents[2]   # analyze/load/schema.py -> the repo
    cand = Path(os.environ.get("TT_BUILD", root / "build")) / "common" / "tt-schema"
    if cand.exists():
        return str(cand)
    return shutil.which("tt-schema")


def load_schema(run_dir: str | os.PathLike | None = None) -> dict:
    """The schema of run_dir (its schema.json), else the one tt-schema prints.
    SchemaError (naming schema.json) if it is not JSON or does not describe records."""
    if run_dir is not None:
        p = Path(run_dir) / "schema.json"
        if p.exists():
            try:
                return check_schema(json.loads(p.read_text()))
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                why = f"not valid JSON ({e})"
            except SchemaError as e:
                why = str(e)
            raise SchemaError(f"{p}: {why}; copy a good one from `tt-schema` of the build that "
                              "recorded the run")
    exe = find_tt_schema()
    if not exe:
        raise SchemaError("no schema.json in the run directory and no tt-schema binary: "
                          "build the project (cmake --build build)")
    return json.loads(subprocess.run([exe], check=True, capture_output=True, text=True).stdout)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def check_schema(schema) -> dict:
    """schema, if it describes record layouts numpy can read; SchemaError saying what is wrong."""
    if not isinstance(schema, dict):
        raise SchemaError("not a JSON object")
    if not isinstance(schema.get("magic"), str) or schema.get("header_size") != 16:
        raise SchemaError("no magic string or a header size other than 16")
    recs = schema.get("records")
    if not isinstance(recs, dict) or not recs:
        raise SchemaError("no record kinds")
    for kind, rec in recs.items():
        if not isinstance(rec, dict) or not _is_int(rec.get("type")) or \
                not _is_int(rec.get("size")) or rec["size"] <= 0 or \
                not isinstance(rec.get("fields"), list):
            raise SchemaError(f"record kind {kind!r} has no type, size or field list")
        for f in rec["fields"]:
            if not isinstance(f, dict) or not isinstance(f.get("name"), str) or \
                    f.get("type") not in _NP_TYPES or not _is_int(f.get("offset")) or \
                    not _is_int(f.get("count")) or f["offset"] < 0 or f["count"] < 1:
                raise SchemaError(f"record kind {kind!r} has a malformed field {f!r}")
            width = int(np.dtype(_NP_TYPES[f["type"]]).itemsize) * f["count"]
            if f["offset"] + width > rec["size"]:
                raise SchemaError(f"record kind {kind!r}: field {f['name']!r} ends past "
                                  f"the {rec['size']}-byte record")
    return schema


def record_dtype(schema: dict, kind: str) -> np.dtype:
    """numpy structured dtype of one record kind ('request', 'runq', ...)."""
    try:
        rec = schema["records"][kind]
    except KeyError:
        raise SchemaError(f"schema has no record kind {kind!r}") from None
    names, formats, offsets = [], [], []
    for f in rec["fields"]:
        base = _NP_TYPES[f["type"]]
        if f["type"] == "char":
            fmt = f"S{f['count']}"
        elif f["count"] > 1:
            fmt = (base, (f["count"],))
        else:
            fmt = base
        names.append(f["name"])
        formats.append(fmt)
        offsets.append(f["offset"])
    return np.dtype({"names": names, "formats": formats, "offsets": offsets,
                     "itemsize": rec["size"]})


def read_records(path: str | os.PathLike, schema: dict, kind: str) -> np.ndarray:
    """Read one .bin record file into a structured array, checking its header."""
    rec = schema["records"][kind]
    dtype = record_dtype(schema, kind)
    hsize = schema["header_size"]
    raw = Path(path).read_bytes()
    if len(raw) < hsize:
        raise SchemaError(f"{path}: truncated header ({len(raw)} bytes)")
    magic = raw[:8].rstrip(b"\0").decode("ascii", "replace")
    rtype = int.from_bytes(raw[8:12], "little")
    rsize = int.from_bytes(raw[12:16], "little")
    if magic != schema["magic"] or rtype != rec["type"] or rsize != rec["size"]:
        raise SchemaError(f"{path}: not a {kind} record file (magic {magic!r}, type {rtype}, "
                          f"size {rsize}; expected {schema['magic']!r}, {rec['type']}, {rec['size']})")
    body = len(raw) - hsize
    if body % rsize:
        raise SchemaError(f"{path}: corrupt, {body} bytes is not a whole number of "
                          f"{rsize}-byte records")
    return np.frombuffer(raw, dtype=dtype, offset=hsize, count=body // rsize)
