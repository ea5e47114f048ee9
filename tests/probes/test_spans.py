"""spans probe (--span BIN:SYMBOL) against tests/probes/span_target.c, which
times its own calls; libcurl.so.4:curl_easy_perform on the curl CLI; httpload's
transfers; and the errors for unknown symbols and libraries. Real BPF: run as
root."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from orders_proc import Server
from analyze.load.schema import load_schema, read_records

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


# How a span ends: uretprobe (the kernel replaces the return address while the call runs) or
# uprobes on the function's return instructions (nothing on the stack is touched).
EXITS = ["uretprobe", "ret"]


@pytest.mark.parametrize("exit_mode", EXITS)
def test_500_calls_give_500_spans_matching_own_timing(tmp_path, exit_mode):
    p = tailtrace(tmp_path, "--events", "spans", "--span-exit", exit_mode,
                  "--span", f"{TARGET}:tt_span_work", "--", str(TARGET), "work", "500", "500")
    assert p.returncode == 0, p.stderr
    m = re.search(r"calls=(\d+) inner_sum_ns=(\d+) outer_sum_ns=(\d+)", p.stdout)
    assert m, p.stdout
    s = spans(tmp_path)
    assert len(s) == int(m[1]) == 500
    assert (s["span_id"] == 0).all() and (s["depth"] == 0).all() and (s["end"] == 0).all()
    assert (s["goroutine"] == 0).all() and (s["end_tid"] == s["tid"]).all()
    assert sorted(s["ret"].tolist()) == [2 * i + 1 for i in range(500)]
    dur = (s["t_end_ns"] - s["t_start_ns"]).astype(np.int64)
    assert (dur >= 500_000).all()  # each call sleeps 500 us
    # the span lies between the function's own clock reads and its caller's around the call:
    # inner <= span <= outer for each call, so for their sums (1 us a call for the clocks)
    inner, outer = int(m[2]), int(m[3])
    assert inner - 500_000 <= int(dur.sum()) <= outer + 500_000, (dur.sum(), inner, outer)
    meta = json.loads((tmp_path / "meta.json").read_text())
    # one entry and one exit hit per call, counted for the observer-cost warning
    assert meta["uprobe_hits"] == {"spans": 1000}
    assert f"{TARGET}:tt_span_work" in meta["command"]  # the option, whole, as given
    site = meta["span_sites"][0]
    assert site["symbol"] == "tt_span_work" and site["exit"] == exit_mode and not site["go"]
    assert len(site["exits"]) == (1 if exit_mode == "ret" else 0)


@pytest.mark.parametrize("exit_mode", EXITS)
def test_recursion_nests_with_depth(tmp_path, exit_mode):
    p = tailtrace(tmp_path, "--events", "spans", "--span-exit", exit_mode,
                  "--span", f"{TARGET}:tt_span_recurse", "--", str(TARGET), "recurse", "3")
    assert p.returncode == 0, p.stderr
    s = np.sort(spans(tmp_path), order="depth")
    assert s["depth"].tolist() == [0, 1, 2, 3]
    assert s["ret"].tolist() == [3, 2, 1, 0]  # depth d returns 3 - d
    # each call encloses the deeper ones
    assert (np.diff(s["t_start_ns"].astype(np.int64)) > 0).all()
    assert (np.diff(s["t_end_ns"].astype(np.int64)) < 0).all()


@pytest.mark.parametrize("exit_mode", EXITS)
def test_calls_left_by_longjmp_end_there_marked(tmp_path, exit_mode):
    """A call a longjmp leaves ends at the longjmp (end = longjmp), and does not leave later
    spans of that thread one level too deep."""
    p = tailtrace(tmp_path, "-v", "--events", "spans", "--span-exit", exit_mode,
                  "--span", f"{TARGET}:tt_span_escape", "--span", f"{TARGET}:tt_span_work",
                  "--", str(TARGET), "jump", "50")
    assert p.returncode == 0, p.stderr
    assert "escaped=50 returned=50" in p.stdout
    s = spans(tmp_path)
    esc, work = s[s["span_id"] == 0], s[s["span_id"] == 1]
    assert len(esc) == 50 and (esc["end"] == 2).all()      # TT_SPAN_LONGJMP
    assert len(work) == 50 and (work["end"] == 0).all()
    assert (s["depth"] == 0).all()
    assert (esc["t_end_ns"] > esc["t_start_ns"]).all()
    assert sorted(work["ret"].tolist()) == [2 * i + 1 for i in range(50)]
    assert "0 entries whose return was never seen" in p.stderr
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["unmatched_events"]["spans"] == 0


SPAN_THROW = BUILD / "tests" / "probes" / "span_throw"


@pytest.mark.parametrize("exit_mode", ["auto", "ret"])
def test_cxx_exception_through_a_span_ends_it_and_the_program_lives(tmp_path, exit_mode):
    """span_throw: every 10th call of tt_throw_work throws out of it (caught in main), every
    10th call of tt_catch_inside throws and catches inside itself. A uretprobe would make the
    first throw terminate the program; auto chooses return-instruction probes for it."""
    p = tailtrace(tmp_path, "--events", "spans", "--span-exit", exit_mode,
                  "--span", f"{SPAN_THROW}:tt_throw_work",
                  "--span", f"{SPAN_THROW}:tt_catch_inside", "--", str(SPAN_THROW), "100")
    assert p.returncode == 0, p.stderr
    assert "calls=100 thrown=10 caught_inside=10" in p.stdout
    s = spans(tmp_path)
    work, inside = s[s["span_id"] == 0], s[s["span_id"] == 1]
    assert len(work) == 100 and int((work["end"] == 1).sum()) == 10   # TT_SPAN_EXCEPTION
    thrown = work[work["end"] == 1]
    assert (thrown["t_end_ns"] > thrown["t_start_ns"]).all()
    assert sorted((work[work["end"] == 0]["ret"] - 2).tolist()) == sorted(
        2 * i for i in range(100) if i % 10 != 9)                       # (2i + 1) + 1
    assert len(inside) == 100 and (inside["end"] == 0).all()
    assert int((inside["ret"] == -1).sum()) == 10
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert [x["exit"] for x in meta["span_sites"]] == ["ret", "ret"]
    if exit_mode == "auto":
        assert "libstdc++" in meta["span_sites"][0]["why"]


@pytest.mark.parametrize("exit_mode", EXITS)
def test_a_spanned_function_that_forks(tmp_path, exit_mode):
    """Parent and child both return through tt_span_fork: the parent's 50 calls are spans
    returning the child's pid, and every child exits normally."""
    p = tailtrace(tmp_path, "--events", "spans", "--span-exit", exit_mode,
                  "--span", f"{TARGET}:tt_span_fork", "--", str(TARGET), "fork", "50")
    assert p.returncode == 0, p.stderr
    assert "forks=50 failed_children=0" in p.stdout
    s = spans(tmp_path)
    assert len(s) == 50 and (s["ret"] > 0).all() and (s["end"] == 0).all()
    assert len(set(s["pid"].tolist())) == 1
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["unmatched_events"]["spans"] == 0


@pytest.mark.parametrize("exit_mode", EXITS)
def test_deeper_than_16_is_counted_not_recorded(tmp_path, exit_mode):
    p = tailtrace(tmp_path, "-v", "--events", "spans", "--span-exit", exit_mode,
                  "--span", f"{TARGET}:tt_span_recurse",
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
    assert p.returncode == 37, p.stderr  # curl's status for the last transfer, passed through
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
    srv = Server("--workers", "2")
    try:
        p = tailtrace(tmp_path, "--events", "spans", "--span", f"{httpload}:http_perform",
                      "--", str(httpload), "--model", "pool", "--conns", "4", "--workers", "4",
                      "--requests", "200", "--url", srv.url, "--out", str(tmp_path))
        assert p.returncode == 0, p.stderr
    finally:
        srv.stop()
    s = spans(tmp_path)
    req = read_records(tmp_path / "requests.bin", load_schema(tmp_path), "request")
    assert len(req) == len(s) == 200
    assert (s["ret"] == 0).all()  # CURLE_OK
    inside = [int(((s["tid"] == r["tid"]) & (s["t_start_ns"] >= r["t_start_ns"])
                   & (s["t_end_ns"] <= r["t_end_ns"])).sum()) for r in req]
    assert inside == [1] * 200


GOHTTP = BUILD / "tests" / "probes" / "gohttp"
needs_go = pytest.mark.skipif(not GOHTTP.exists(), reason="gohttp not built (no Go toolchain)")


class GoServer:
    """tests/probes/gohttp on a free port; stop() returns its own count of served requests."""

    def __init__(self):
        self.proc = subprocess.Popen([str(GOHTTP), "127.0.0.1:0"], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        m = re.search(r"listening (127\.0\.0\.1:\d+)", self.proc.stdout.readline())
        assert m, "gohttp did not start"
        self.url = f"http://{m[1]}/"

    def stop(self) -> tuple[int, int, str]:
        self.proc.terminate()
        out, _ = self.proc.communicate(timeout=10)
        m = re.search(r"served (\d+)", out)
        return self.proc.returncode, (int(m[1]) if m else -1), out


def tailtrace_bg(out: Path, *args: str) -> tuple[subprocess.Popen, str]:
    """tailtrace in the background, once it says the probes are attached; and what it said."""
    p = subprocess.Popen([str(TAILTRACE), "--out", str(out), *args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    lines = []
    for line in p.stderr:
        lines.append(line)
        if "attached to" in line:
            break
    assert p.poll() is None, "".join(lines) + p.stderr.read()
    return p, "".join(lines)


@needs_go
@pytest.mark.skipif(not shutil.which("wrk"), reason="wrk not installed")
def test_go_server_survives_wrk_with_a_span_on_its_handler(tmp_path):
    """A uretprobe on main.handler kills this server within a few requests (Go copies the
    stack of a handler that recurses, and finds the kernel's trampoline as a caller: 'unknown
    caller pc'). The default spans it by goroutine, with uprobes on its returns: 10 s of wrk
    at full speed, the server lives, and every request it counted is one span."""
    srv = GoServer()
    try:
        tt, head = tailtrace_bg(tmp_path, "--pid", str(srv.proc.pid), "--events", "spans",
                                "--span", f"{GOHTTP}:main.handler", "--duration", "13")
        wrk = subprocess.run(["wrk", "-t2", "-c20", "-d10s", srv.url], capture_output=True,
                             text=True, timeout=60)
        _, err = tt.communicate(timeout=60)
        err = head + err
        assert tt.returncode == 0, err
    finally:
        rc, served, out = srv.stop()
    assert rc == 0 and served > 1000, out                  # it lived, and served under load
    assert "Go: keyed by goroutine" in err
    s = spans(tmp_path)
    assert abs(len(s) - served) <= 0.01 * served, (len(s), served, wrk.stdout)
    assert (s["end"] == 0).all() and (s["goroutine"] != 0).all() and (s["depth"] == 0).all()
    assert len(set(s["goroutine"].tolist())) >= 20          # wrk's 20 connections
    site = json.loads((tmp_path / "meta.json").read_text())["span_sites"][0]
    assert site["go"] and site["exit"] == "ret"
    # past Go's stack check (cmp: single-stepped) to the push after it (emulated)
    assert site["first_class"] == "single-stepped" and site["entry"]["class"] == "emulated"


@needs_go
def test_uretprobe_is_refused_for_go(tmp_path):
    srv = GoServer()
    try:
        tt, head = tailtrace_bg(tmp_path, "--pid", str(srv.proc.pid), "--events", "spans",
                                "--span-exit", "uretprobe", "--span",
                                f"{GOHTTP}:main.handler")
        for _ in range(30):
            subprocess.run(["curl", "-s", "-o", "/dev/null", srv.url], timeout=10)
        tt.send_signal(signal.SIGINT)  # after the 30 calls, however long they took
        _, err = tt.communicate(timeout=30)
        err = head + err
    finally:
        rc, served, out = srv.stop()
    assert rc == 0 and served == 30, out
    assert "--span-exit uretprobe refused for main.handler" in err
    assert len(spans(tmp_path)) == 30


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


@pytest.mark.serial   # 20,000 threads: a sixth of this machine's pids (pid_max 32,768)
def test_more_open_spans_than_the_table_holds_are_each_written_or_counted(tmp_path):
    """20,000 threads inside one traced call at once, then all return: the table of open
    spans holds 16,384 threads (this machine's CPUs); every call is a span written or one
    counted refused in meta.json (its return then finds no entry: counted unmatched), never
    evicted unsaid (the kernel's LRU evicted live entries); the threads' state goes as they
    exit, so a second wave of threads is recorded as the first was."""
    n = 20000
    p = tailtrace(tmp_path, "--events", "spans", "--span", f"{TARGET}:tt_span_hold", "--",
                  str(TARGET), "many", str(n), "1000", timeout=180)
    assert p.returncode == 0, p.stderr
    assert f"held={n}" in p.stdout and "held=1000" in p.stdout
    m = json.loads((tmp_path / "meta.json").read_text())
    written, refused = len(spans(tmp_path)), m["spans_state_full"]
    assert m["spans_state_entries"] == 16384
    assert written + refused == n + 1000, (written, refused, p.stderr)
    assert 16384 - 64 <= written - 1000 <= 16384 and refused > 0, (written, refused)
    assert f"{refused} spans not recorded" in p.stderr
    assert m["lost_events"]["spans"] == 0 and m["unmatched_events"]["spans"] == refused
    # the one object of every map's refusals names the table that refused them
    assert m["map_full"]["open_spans"] == {"refused": refused, "entries": 16384}, m["map_full"]
    assert f"open_spans refused {refused:,} updates (it holds 16,384 entries)" in p.stderr
