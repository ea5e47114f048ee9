"""httpload against a real orders-server: exact request/status counts in every model,
records read back by the C reader and analyze/load/schema.py alike, --json consistent with
requests.bin, errors against a dead port, open loop against a server with a known stall,
partial results on SIGTERM, usage errors.

Oracles are known by construction (N requests -> ids 0..N-1 once each; a server that
sleeps 20 ms per request with one worker serves at most 50 req/s; ...). Every run is
small: the whole file takes a few seconds.
"""
import json
import os
import resource
import signal
import socket
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from analyze.load.schema import load_schema, read_records
from orders_proc import BUILD, Server, need as _need  # orders-server as a child

HTTPLOAD = BUILD / "workloads" / "httpload" / "httpload"
REQDUMP = BUILD / "tests" / "httpload" / "hl_reqdump"
MODELS = ["naive", "pool", "async"]
JSON_KEYS = {"model", "conns", "workers", "requests", "errors", "throughput_rps",
             "latency_ms", "e2e_ms", "queue_wait_ms"}


@pytest.fixture(scope="module")
def server():
    s = Server("--workers", "2")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def stall_server():
    s = Server("--workers", "1", "--sleep-us", "20000")
    yield s
    s.stop()


def httpload(*args, timeout=60):
    return subprocess.run([_need(HTTPLOAD), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def load_run(out):
    schema = load_schema(out)
    recs = read_records(out / "requests.bin", schema, "request")
    return recs, json.loads((out / "workload.json").read_text())


def nearest_rank_ms(values_ns, p):
    v = np.sort(np.asarray(values_ns, dtype=np.uint64))
    rank = int(np.ceil(p / 100.0 * len(v)))
    return float(v[max(rank, 1) - 1]) / 1e6


def dead_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again: connections are refused


# ---- closed loop, every model ----------------------------------------------------------

@pytest.mark.parametrize("model", MODELS)
def test_closed_loop_exact_counts(model, tmp_path):
    out = tmp_path / "run"
    server = Server("--workers", "2")  # our own, to count its connections
    try:
        r = httpload("--model", model, "--conns", 10, "--workers", 4, "--requests", 300,
                     "--url", server.url, "--out", out, "--json")
    finally:
        served = server.stop()
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    recs, wl = load_run(out)

    assert len(recs) == 300
    assert sorted(recs["id"].tolist()) == list(range(300))
    assert (recs["status"] == 200).all()
    assert (recs["bytes"] > 0).all()
    assert (recs["t_enqueue_ns"] <= recs["t_start_ns"]).all()
    assert (recs["t_start_ns"] <= recs["t_end_ns"]).all()
    assert (recs["pid"] == wl["pid"]).all()
    assert set(recs["conn"].tolist()) == set(range(10))
    assert wl["t_start_mono_ns"] <= recs["t_enqueue_ns"].min()
    assert recs["t_end_ns"].max() <= wl["t_end_mono_ns"]
    tids = set(recs["tid"].tolist())
    if model == "naive":
        assert len(tids) == 10
    elif model == "pool":
        assert 1 <= len(tids) <= 4
    else:  # one event loop per usable CPU; connection c on loop c % loops
        loops = min(10, len(os.sched_getaffinity(0)))
        assert len(tids) == loops and summary["workers"] == loops
        by_conn = {c: set(recs[recs["conn"] == c]["tid"].tolist()) for c in range(10)}
        assert all(len(t) == 1 for t in by_conn.values())
        assert len({next(iter(by_conn[c])) for c in range(0, 10, loops)}) == 1
    # closed loop: a connection has one request in flight at a time, and (pool) its next
    # request is enqueued only once the previous one completed
    for c in range(10):
        mine = np.sort(recs[recs["conn"] == c], order="t_start_ns")
        assert (mine["t_start_ns"][1:] >= mine["t_end_ns"][:-1]).all()
        assert (mine["t_enqueue_ns"][1:] >= mine["t_end_ns"][:-1]).all()
    assert summary["requests"] == 300 and summary["errors"] == 0
    assert summary["model"] == model and summary["conns"] == 10
    # keep-alive: one TCP connection per easy handle that ran, reused for all its requests
    conns_opened = {"naive": 10, "pool": len(tids), "async": 10}[model]
    assert f" {conns_opened} connections, 300 requests" in served, served
    assert summary["workers"] == {"naive": 10, "pool": 4,
                                  "async": min(10, len(os.sched_getaffinity(0)))}[model]


def test_json_consistent_with_records(server, tmp_path):
    out = tmp_path / "run"
    r = httpload("--model", "pool", "--conns", 8, "--workers", 3, "--requests", 400,
                 "--url", server.url, "--out", out, "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    recs, wl = load_run(out)
    assert set(s) == JSON_KEYS
    assert set(s["latency_ms"]) == {"avg", "p50", "p90", "p99", "p999", "max"}
    assert set(s["e2e_ms"]) == {"avg", "p50", "p99", "max"}
    assert set(s["queue_wait_ms"]) == {"p50", "p99", "max"}
    svc = recs["t_end_ns"] - recs["t_start_ns"]
    e2e = recs["t_end_ns"] - recs["t_enqueue_ns"]
    qw = recs["t_start_ns"] - recs["t_enqueue_ns"]
    for key, vals in [("latency_ms", svc), ("e2e_ms", e2e)]:
        assert s[key]["avg"] == pytest.approx(vals.mean() / 1e6, abs=1e-5)
        assert s[key]["max"] == pytest.approx(vals.max() / 1e6, abs=1e-5)
        for p in (50, 99):
            assert s[key][f"p{p}"] == pytest.approx(nearest_rank_ms(vals, p), abs=1e-5)
    assert s["latency_ms"]["p999"] == pytest.approx(nearest_rank_ms(svc, 99.9), abs=1e-5)
    assert s["queue_wait_ms"]["max"] == pytest.approx(qw.max() / 1e6, abs=1e-5)
    span_s = (wl["t_end_mono_ns"] - wl["t_start_mono_ns"]) / 1e9
    assert s["throughput_rps"] == pytest.approx(400 / span_s, rel=1e-3)
    # workload.json = the same object plus the parameters
    for k in JSON_KEYS:
        assert wl[k] == s[k]
    assert wl["url"] == server.url and wl["rate"] is None
    assert wl["numa"] is False and wl["numa_active"] is False
    assert wl["requests_planned"] == 400 and wl["duration_s"] is None
    assert wl["wall_start"].endswith("Z") and "T" in wl["wall_start"]


def test_c_reader_and_numpy_agree(server, tmp_path):
    out = tmp_path / "run"
    r = httpload("--model", "async", "--conns", 5, "--requests", 120, "--url", server.url,
                 "--out", out)
    assert r.returncode == 0, r.stderr
    recs, _ = load_run(out)
    dump = subprocess.run([_need(REQDUMP), str(out)], capture_output=True, text=True, check=True)
    lines = dump.stdout.strip().splitlines()
    cols = lines[0].split(",")
    rows = [list(map(int, l.split(","))) for l in lines[1:]]
    assert len(rows) == len(recs) == 120
    for i, row in enumerate(rows):
        for col, val in zip(cols, row):
            assert int(recs[col][i]) == val, (i, col)


# ---- errors ----------------------------------------------------------------------------

@pytest.mark.parametrize("model", MODELS)
def test_dead_port_all_fail(model, tmp_path):
    out = tmp_path / "run"
    r = httpload("--model", model, "--conns", 3, "--workers", 2, "--requests", 30,
                 "--url", f"http://127.0.0.1:{dead_port()}/orders", "--out", out, "--json",
                 "--timeout-ms", 2000)
    assert r.returncode == 1
    assert "every request failed" in r.stderr
    s = json.loads(r.stdout)
    assert s["requests"] == 30 and s["errors"] == 30
    recs, _ = load_run(out)  # failed runs still write everything
    assert len(recs) == 30
    assert (recs["status"] == -7).all()  # -CURLE_COULDNT_CONNECT


def test_http_errors_counted(server, tmp_path):
    # 404 from a wrong path: recorded with its status, counted, run goes on
    url = server.url.replace("/orders", "/no-such-path")
    r = httpload("--model", "naive", "--conns", 2, "--requests", 20, "--url", url, "--json")
    assert r.returncode == 1
    s = json.loads(r.stdout)
    assert s["requests"] == 20 and s["errors"] == 20


@pytest.mark.parametrize("args,needle", [
    ([], "--model"),
    (["--model", "pool"], "--conns"),
    (["--model", "fast", "--conns", "1"], "naive, pool, async"),
    (["--model", "pool", "--conns", "0"], "--conns"),
    (["--model", "pool", "--conns", "1", "--requests", "5", "--duration", "1"], "exclude"),
    (["--model", "pool", "--conns", "1", "--rate", "-3"], "--rate"),
    (["--model", "pool", "--conns", "1", "--cpus", "1-0"], "--cpus"),
    (["--model", "pool", "--conns", "1", "--cpus", "1000"], "CPU 1000"),
    (["--model", "pool", "--conns", "1", "--numa", "maybe"], "--numa"),
    (["--model", "pool", "--conns", "1", "--frobnicate"], "--frobnicate"),
    (["--model", "pool", "--conns", "1", "--out", "/proc/no/such"], "--out"),
])
def test_usage_errors(args, needle):
    r = httpload(*args)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], r.stderr


def test_help_lists_every_option():
    r = httpload("--help")
    assert r.returncode == 0
    for opt in ["--model", "--conns", "--workers", "--requests", "--duration", "--rate",
                "--url", "--cpus", "--numa", "--out", "--json", "--progress", "--timeout-ms"]:
        assert opt in r.stdout
    assert "default 20" in r.stdout and "default 5000" in r.stdout


# ---- open loop against a known stall -------------------------------------------------

@pytest.mark.parametrize("model", MODELS)
def test_open_loop_counts_the_stall(stall_server, model, tmp_path):
    # The server has one worker that sleeps 20 ms per request: at most 50 req/s. We ask for
    # 100 req/s, 40 requests (due over 0.39 s). Serving them takes >= 40 x 20 ms = 0.8 s, so
    # the last one, due at 0.39 s, ends >= 0.8 s: its e2e is >= 410 ms, every e2e >= 20 ms.
    out = tmp_path / "run"
    r = httpload("--model", model, "--conns", 4, "--workers", 4, "--requests", 40,
                 "--rate", 100, "--url", stall_server.url, "--out", out, "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    recs, wl = load_run(out)
    assert len(recs) == 40 and (recs["status"] == 200).all()
    assert set(s) == JSON_KEYS | {"schedule_lag_ms"}
    # t_enqueue is the due time: t0 + i / rate, exactly
    recs = np.sort(recs, order="id")
    due = wl["t_start_mono_ns"] + np.arange(40, dtype=np.uint64) * 10_000_000
    assert (recs["t_enqueue_ns"] == due).all()
    e2e_ms = (recs["t_end_ns"] - recs["t_enqueue_ns"]) / 1e6
    assert e2e_ms.min() >= 20.0
    assert s["e2e_ms"]["p99"] >= 20.0
    assert s["e2e_ms"]["max"] >= 400.0
    # 4 connections, each request >= 20 ms: request i cannot start before request i-4 ended,
    # so the client fell behind by hundreds of ms and says so
    assert s["schedule_lag_ms"] >= 200.0
    assert s["schedule_lag_ms"] == pytest.approx(s["queue_wait_ms"]["max"])
    assert wl["rate"] == 100


def test_open_loop_keeps_schedule_when_server_is_fast(server, tmp_path):
    # 200 req/s for 0.5 s against an idle server: 100 requests, due every 5 ms
    out = tmp_path / "run"
    r = httpload("--model", "async", "--conns", 4, "--duration", 0.5, "--rate", 200,
                 "--url", server.url, "--out", out, "--json")
    assert r.returncode == 0, r.stderr
    recs, wl = load_run(out)
    assert len(recs) == 100
    assert wl["duration_s"] == 0.5 and wl["requests_planned"] is None


@pytest.mark.parametrize("model", MODELS)
def test_request_timeout_fires(model, tmp_path):
    """A server that answers after 3 s, --timeout-ms 100: every request ends at ~100 ms with
    curl's timeout (status -28), on libcurl's timer as the loops drive it. The upper bound is
    loose (15x): real-time spinners of a test beside this one can hold a CPU for a second."""
    srv = Server("--workers", "1", "--sleep-us", "3000000")
    try:
        t0 = time.monotonic()
        r = httpload("--model", model, "--conns", 2, "--requests", 4, "--workers", 2,
                     "--timeout-ms", 100, "--url", srv.url, "--out", tmp_path / "run", "--json")
        elapsed = time.monotonic() - t0
    finally:
        srv.stop()
    recs, _ = load_run(tmp_path / "run")
    assert len(recs) == 4 and (recs["status"] == -28).all(), recs["status"]
    lat_ms = (recs["t_end_ns"] - recs["t_start_ns"]) / 1e6
    assert ((lat_ms >= 95) & (lat_ms < 1500)).all(), lat_ms
    assert elapsed < 10, elapsed
    assert r.returncode == 1 and "every request failed (Timeout was reached)" in r.stderr


def test_async_kept_alive_sockets_the_server_closes(tmp_path):
    """async keeps a kept-alive socket registered between transfers; when the server closes
    it while idle, the hang-up must park it (not report it again and again: a busy loop)
    and curl must reconnect. The server closes connections idle for 20 ms (it looks every
    250 ms); requests on a loop's connection come 400 ms apart."""
    srv = Server("--workers", "1", "--idle-timeout-ms", "20")
    try:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        r = httpload("--model", "async", "--conns", 4, "--duration", 2, "--rate", 5,
                     "--url", srv.url, "--out", tmp_path / "run", "--json")
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    finally:
        last = srv.stop()
    assert r.returncode == 0, r.stderr
    recs, _ = load_run(tmp_path / "run")
    assert len(recs) == 10 and (recs["status"] == 200).all(), recs["status"]
    closed_idle = int(last.split(" timed out")[0].split()[-1])
    conns = int(last.split(" connections")[0].split()[-1])
    assert closed_idle >= 2 and conns >= 2 + closed_idle, last  # reconnected after each
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if not os.environ.get("TT_SANITIZE"):  # ThreadSanitizer alone costs ~1.2 s of CPU here
        assert cpu_s < 0.3, cpu_s  # idle most of the two seconds, not polling a dead socket


# ---- threads, affinity, SIGTERM: partial results flushed ------------------------------

def _thread_names(pid):
    names = {}
    for t in Path(f"/proc/{pid}/task").iterdir():
        try:
            names[t.name] = (t / "comm").read_text().strip()
        except OSError:
            pass
    return names


def _connected_to(pid, url):
    """True once process pid has an established TCP connection to url's port."""
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            link = os.readlink(fd)
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        f = line.split()
        if f[3] == "01" and int(f[2].split(":")[1], 16) == port and f[9] in inodes:
            return True
    return False


def _cpus_allowed(pid, tid):
    for line in Path(f"/proc/{pid}/task/{tid}/status").read_text().splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    return None


@pytest.mark.parametrize("model", MODELS)
def test_sigterm_flushes_partial_results(server, model, tmp_path):
    out = tmp_path / "run"
    extra = ["--cpus", "0"] if model == "pool" else []
    args = ["--model", model, "--conns", 3, "--workers", 3, "--duration", 30,
            "--url", server.url, "--out", out, "--json", *extra]
    p = subprocess.Popen([_need(HTTPLOAD), *map(str, args)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        names = {}
        deadline = time.monotonic() + 5
        want = {"naive": {"naive-c0", "naive-c1", "naive-c2"},
                "pool": {"pool-w0", "pool-w1", "pool-w2"},
                # one event loop per usable CPU, at most one per connection
                "async": {f"async-loop{k}" for k in range(min(3, len(os.sched_getaffinity(0))))}
                }[model]
        while time.monotonic() < deadline and not want <= set(names.values()):
            time.sleep(0.1)
            names = _thread_names(p.pid)
        assert want <= set(names.values()), names
        if model == "pool":  # --cpus 0: every worker pinned to CPU 0
            for tid, name in names.items():
                if name.startswith("pool-w"):
                    assert _cpus_allowed(p.pid, tid) == "0"
        # Requests flow once a connection to the server is up (a sanitizer build takes
        # seconds to get there: it touches the record buffers through shadow memory).
        while time.monotonic() < deadline + 20 and not _connected_to(p.pid, server.url):
            time.sleep(0.05)
        time.sleep(0.3)
        t_sig = time.monotonic()
        p.send_signal(signal.SIGTERM)
        stdout, stderr = p.communicate(timeout=10)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert time.monotonic() - t_sig < 5
    assert p.returncode == 0, stderr
    s = json.loads(stdout)
    recs, wl = load_run(out)
    assert s["requests"] == len(recs) > 0
    assert wl["stopped_early"] is True
    assert sorted(recs["id"].tolist()) == list(range(len(recs)))  # no hole: claimed = recorded
    assert (recs["status"] == 200).all()


def test_progress_plain_lines_when_not_a_tty(server):
    # not a terminal: a plain line every ~2 s (one at 2 s here) and one at the end
    r = httpload("--model", "pool", "--conns", 2, "--duration", 3, "--rate", 100,
                 "--url", server.url, "--progress")
    assert r.returncode == 0, r.stderr
    lines = [l for l in r.stderr.splitlines() if "done," in l]
    assert len(lines) >= 2 and "\r" not in r.stderr, r.stderr
    assert all(l.split()[0].isdigit() and l.endswith("/ 3.0 s") for l in lines)
    first_elapsed = float(lines[0].split(",")[1].split("/")[0])
    assert 1.9 <= first_elapsed < 3.0
    assert int(lines[-1].split()[0]) == 300  # final count: 3 s at 100/s
