"""spans probe (--span BIN:SYMBOL) against tests/probes/span_target.c, which
times its own calls; libcurl.so.4:curl_easy_perform on the curl CLI; httpload's
transfers; and the errors for unknown symbols and libraries. Real BPF: run as
root."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from analyze.schema import load_schema, read_records

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("TT_BUILD", ROOT / "build"))
TAILTRACE = Path(os.environ.get("TAILTRACE", BUILD / "probes" / "tailtrace"))
TARGET = BUILD / "tests" / "probes" / "span_target"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="loads BPF programs: needs root")


def tailtrace(out: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    assert TAILTRACE.exists(), f"{TAILTRACE} missing: build first (cmake --build build)"
    return subprocess.run([str(TAILTRACE), "--out", str(out), *args], capture_output=True,
                          text=True, timeout=timeout)


def spans(out: Path) -> np.ndarray:
    return read_records(out / "spans.bin", load_schema(out), "span")


def test_500_calls_give_500_spans_matching_own_timing(tmp_path):
    p = tailtrace(tmp_path, "--events", "spans", "--span", f"{TARGET}:tt_span_work",
                  "--", str(TARGET), "work", "500", "500")
    assert p.returncode == 0, p.stderr
    m = re.search(r"calls=(\d+) inner_sum_ns=(\d+) outer_sum_ns=(\d+)", p.stdout)
    assert m, p.stdout
    s = spans(tmp_path)
    assert len(s) == int(m[1]) == 500
    assert (s["span_id"] == 0).all() and (s["depth"] == 0).all()
    assert sorted(s["ret"].tolist()) == [2 * i + 1 for i in range(500)]
    dur = (s["t_end_ns"] - s["t_start_ns"]).astype(np.int64)
    assert (dur >= 500_000).all()  # each call sleeps 500 us
    inner = int(m[2])
    assert abs(int(dur.sum()) - inner) <= 0.05 * inner
    # one uprobe and one uretprobe hit per call, counted for the observer-cost warning
    assert json.loads((tmp_path / "meta.json").read_text())["uprobe_hits"] == {"spans": 1000}


def test_recursion_nests_with_depth(tmp_path):
    p = tailtrace(tmp_path, "--events", "spans", "--span", f"{TARGET}:tt_span_recurse",
                  "--", str(TARGET), "recurse", "3")
    assert p.returncode == 0, p.stderr
    s = np.sort(spans(tmp_path), order="depth")
    assert s["depth"].tolist() == [0, 1, 2, 3]
    assert s["ret"].tolist() == [3, 2, 1, 0]  # depth d returns 3 - d
    # each call encloses the deeper ones
    assert (np.diff(s["t_start_ns"].astype(np.int64)) > 0).all()
    assert (np.diff(s["t_end_ns"].astype(np.int64)) < 0).all()


def test_calls_left_by_longjmp_do_not_deepen_later_spans(tmp_path):
    """A call whose return is never seen (longjmp out of it, or in flight while the
    probes attach) must not leave later spans of that thread one level too deep."""
    p = tailtrace(tmp_path, "-v", "--events", "spans",
                  "--span", f"{TARGET}:tt_span_escape", "--span", f"{TARGET}:tt_span_work",
                  "--", str(TARGET), "jump", "50")
    assert p.returncode == 0, p.stderr
    s = spans(tmp_path)
    assert (s["span_id"] == 1).all()           # escaped calls leave no record
    assert len(s) == 50
    assert (s["depth"] == 0).all()
    assert sorted(s["ret"].tolist()) == [2 * i + 1 for i in range(50)]
    assert "50 entries whose return was never seen" in p.stderr
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["unmatched_events"]["spans"] == 50


def test_deeper_than_16_is_counted_not_recorded(tmp_path):
    p = tailtrace(tmp_path, "-v", "--events", "spans", "--span", f"{TARGET}:tt_span_recurse",
                  "--", str(TARGET), "recurse", "20")
    assert p.returncode == 0, p.stderr
    s = np.sort(spans(tmp_path), order="depth")
    assert s["depth"].tolist() == list(range(16))  # the 16 outermost of 21 calls
    assert s["ret"].tolist() == list(range(20, 4, -1))
    assert "5 calls nested deeper than 16" in p.stderr


def test_every_call_is_written_or_counted_lost(tmp_path):
    p = tailtrace(tmp_path, "--events", "spans", "--ringbuf-mb", "0", "--span",
                  f"{TARGET}:tt_span_work", "--", str(TARGET), "work", "3000", "0")
    assert p.returncode == 0, p.stderr
    meta = json.loads((tmp_path / "meta.json").read_text())
    written, lost = meta["events"]["spans"], meta["lost_events"]["spans"]
    assert written == len(spans(tmp_path))
    assert written + lost == 3000


def test_two_spans_get_their_option_index(tmp_path):
    p = tailtrace(tmp_path, "--events", "spans", "--span", f"{TARGET}:tt_span_recurse",
                  "--span", f"{TARGET}:tt_span_work", "--", str(TARGET), "work", "3", "100")
    assert p.returncode == 0, p.stderr
    s = spans(tmp_path)
    assert s["span_id"].tolist() == [1, 1, 1]


@pytest.mark.skipif(not shutil.which("curl"), reason="curl CLI not installed")
def test_libcurl_by_library_name_before_it_is_mapped(tmp_path):
    """libcurl.so.4 is not mapped by the held child when probes attach."""
    src = tmp_path / "f.txt"
    src.write_text("x")
    out = tmp_path / "run"
    p = tailtrace(out, "--events", "spans", "--span", "libcurl.so.4:curl_easy_perform", "--",
                  "curl", "-s", "-o", "/dev/null", f"file://{src}", f"file://{src}",
                  f"file://{tmp_path}/missing")
    s = spans(out)
    assert s["ret"].tolist() == [0, 0, 37]  # CURLE_OK x2, CURLE_FILE_COULDNT_READ_FILE


def test_httpload_requests_become_spans(tmp_path):
    """A span on httpload's own transfer function (httpload:http_perform, the
    job curl_easy_perform does in other libcurl clients) brackets every request
    httpload records: each request [t_start, t_end] on its thread holds exactly
    one span, returning CURLE_OK."""
    server = BUILD / "workloads" / "server" / "orders-server"
    httpload = BUILD / "workloads" / "httpload" / "httpload"
    assert server.exists() and httpload.exists(), "build the workloads first"
    srv = subprocess.Popen([str(server), "--port", "0", "--workers", "2"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        m = re.search(r"listening on 127\.0\.0\.1:(\d+)", srv.stdout.readline())
        assert m, "orders-server did not start"
        p = tailtrace(tmp_path, "--events", "spans", "--span", f"{httpload}:http_perform",
                      "--", str(httpload), "--model", "pool", "--conns", "4", "--workers", "4",
                      "--requests", "200", "--url", f"http://127.0.0.1:{m[1]}/orders",
                      "--out", str(tmp_path))
        assert p.returncode == 0, p.stderr
    finally:
        srv.kill()
        srv.wait()
    s = spans(tmp_path)
    req = read_records(tmp_path / "requests.bin", load_schema(tmp_path), "request")
    assert len(req) == len(s) == 200
    assert (s["ret"] == 0).all()  # CURLE_OK
    inside = [int(((s["tid"] == r["tid"]) & (s["t_start_ns"] >= r["t_start_ns"])
                   & (s["t_end_ns"] <= r["t_end_ns"])).sum()) for r in req]
    assert inside == [1] * 200


def expect_error(p: subprocess.CompletedProcess, *needles: str) -> str:
    assert p.returncode != 0
    err = p.stderr.strip()
    assert all(n in err for n in needles), err
    return err


def test_unknown_symbol_lists_close_matches(tmp_path):
    p = tailtrace(tmp_path, "--events", "spans", "--span", f"{TARGET}:tt_span_wrok",
                  "--", str(TARGET), "work", "1", "1")
    expect_error(p, f"symbol tt_span_wrok not found in {TARGET.resolve()}",
                 "(did you mean: tt_span_work")
    assert "calls=" not in p.stdout  # the target never ran


def test_unknown_library_is_named(tmp_path):
    p = tailtrace(tmp_path, "--events", "spans", "--span", "libnotthere.so.3:foo",
                  "--", str(TARGET), "work", "1", "1")
    expect_error(p, "'libnotthere.so.3' not found")


def test_library_not_mapped_by_running_pid(tmp_path):
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        time.sleep(0.2)
        p = tailtrace(tmp_path, "--events", "spans", "--pid", str(sleeper.pid),
                      "--span", "libcurl.so.4:curl_easy_perform")
        expect_error(p, "is not mapped by pid", str(sleeper.pid))
    finally:
        sleeper.kill()
        sleeper.wait()
