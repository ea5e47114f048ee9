"""PostgreSQL under the flight recorder: each capture explains every request as the whole
recording of the same records does, and its bands add up.

A real pre-fork service (Debian's PostgreSQL 15, one process per client, row locks that
one backend releases for another): pgbench drives it, tailtrace records it with
`--flight-recorder`, spans on PortalRun, and `--debug flight-tee`, which also writes every
record the recorder kept to OUT, the whole recording the captures are compared with
(the same records: the comparison is exact, not two recorders' clocks apart). Then
`python3 -m analyze captures OUT` as a user runs it. Every capture must
  - give each request it holds the parts the whole recording gives it (within 1%);
  - explain every request it holds that the whole recording explains (none left out for
    lack of records);
  - have bands whose parts add up to their latency (within 1%), no share above 100%,
    and a headline that never says more than 100%.
"""
from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from tt_run import needs_root, tailtrace
from analyze.pipeline import build_captures
from analyze.explain.decompose import PARTS, df_decompose
from analyze.load.load import load_run

PGBINS = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
PGBIN = Path(PGBINS[-1]).parent if PGBINS else None
KEY = ["tid", "t_start_ns", "t_end_ns"]

pytestmark = [needs_root, pytest.mark.skipif(
    PGBIN is None or shutil.which("runuser") is None,
    reason="PostgreSQL server not installed (scripts/install-deps.sh installs Debian's "
           "postgresql)")]


def _as_postgres(*cmd, **kw):
    return subprocess.run(["runuser", "-u", "postgres", "--", *map(str, cmd)],
                          capture_output=True, text=True, **kw)


@pytest.fixture
def pg():
    """A private cluster on a Unix socket in a fresh directory: (socket dir, port)."""
    top = Path(tempfile.mkdtemp(prefix="tt-pg-", dir="/tmp"))
    os.chmod(top, 0o755)
    shutil.chown(top, "postgres")
    data, port = top / "data", 5400 + os.getpid() % 500
    r = _as_postgres(PGBIN / "initdb", "-D", data, "-A", "trust", timeout=120)
    assert r.returncode == 0, r.stderr
    r = _as_postgres(PGBIN / "pg_ctl", "-D", data, "-l", top / "log", "-w", "-o",
                     f"-c listen_addresses='' -c unix_socket_directories={top} -p {port} "
                     "-c synchronous_commit=off -c max_connections=40", "start", timeout=120)
    assert r.returncode == 0, r.stderr + (top / "log").read_text()
    try:
        r = _as_postgres(PGBIN / "pgbench", "-h", top, "-p", port, "-i", "-s", "1",
                         "postgres", timeout=300)
        assert r.returncode == 0, r.stderr
        yield top, port
    finally:
        _as_postgres(PGBIN / "pg_ctl", "-D", data, "-m", "immediate", "stop", timeout=120)
        shutil.rmtree(top, ignore_errors=True)


def test_captures_of_postgres_add_up_and_match_the_whole_recording(pg, tmp_path):
    sock, port = pg
    load = subprocess.Popen(["runuser", "-u", "postgres", "--", str(PGBIN / "pgbench"),
                             "-h", str(sock), "-p", str(port), "-c", "8", "-j", "2", "-T", "16",
                             "postgres"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        time.sleep(1.0)    # its backends are forked: --comm finds them
        out = tmp_path / "rec"
        r = tailtrace(out, "--flight-recorder", "8", "--trigger", "p99", "--trigger-warmup",
                      "300", "--max-captures-per-min", "12", "--comm", "postgres", "--span",
                      f"{PGBIN / 'postgres'}:PortalRun", "--duration", "12", "--debug",
                      "flight-tee", timeout=120)
        assert r.returncode == 0, r.stderr
    finally:
        load.wait(timeout=60)
    whole = df_decompose(load_run(out))
    assert len(whole) > 5000, f"pgbench made only {len(whole)} PortalRun calls"
    caps = build_captures(out, plots=False)
    written = caps[caps["error"].isna()]
    assert len(written) >= 1, r.stderr

    for d in written["dir"]:
        cap = df_decompose(load_run(out / d))
        assert len(cap) > 100, d
        j = cap.merge(whole, on=KEY, how="left", suffixes=("", "_whole"), indicator=True)
        assert (j["_merge"] == "both").all(), f"{d}: a request the whole recording lacks"
        chk, chk_whole = j["check"].astype(str), j["check_whole"].astype(str)
        left = j[(chk != "ok") & (chk != chk_whole)]
        assert left.empty, (f"{d}: {len(left)} requests the whole recording explains are not "
                            f"explained: {left['check'].astype(str).value_counts().to_dict()}")
        ok = j[(j["check"].astype(str) == "ok") & (j["check_whole"].astype(str) == "ok")]
        for p in PARTS:
            c = f"{p}_ns"
            rel = (ok[c] - ok[f"{c}_whole"]).abs() / ok["latency_ns"]
            assert rel.max() <= 0.01, f"{d}: {c} differs from the whole recording by {rel.max():.2%}"

        s = json.loads((out / d / "summary.json").read_text())
        assert all(s["checks"]["bands_add_up"].values()), (d, s["checks"])
        for band, a in s["attribution"].items():
            parts = sum(a[f"{p}_ms"] for p in PARTS if a[f"{p}_ms"] is not None)
            assert abs(parts - a["e2e_ms"]) <= 0.01 * a["e2e_ms"], (d, band, parts, a["e2e_ms"])
            assert all((a[f"{p}_share"] or 0) <= 1.0 + 1e-9 for p in PARTS + ["runnable"])
        assert not [x for x in re.findall(r"(\d+)%", s["headline"]) if int(x) > 100], s["headline"]
