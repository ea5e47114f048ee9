"""Third-party targets: Debian's nginx (--pid of its worker under wrk, --span on
ngx_http_process_request), Debian's Redis (--pid under redis-benchmark, --span on call) and a
pycurl client (-- CMD with --span libcurl.so.4:curl_easy_perform). None was built by us.

Oracles: nginx's single worker process is the only process serving wrk, so run-queue records of
that pid must exist while wrk keeps it busy, every span must be on that worker, and the target
must still be alive afterwards (run.sh attaches, it does not own the target). The pycurl script calls curl_easy_perform exactly
--requests times, so there are exactly that many outer spans, each returning CURLE_OK (0).
"""
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from .conftest import (E2E_TIMEOUT_S, REPO, assert_nothing_left, load_json, needs_root, pid_alive,
                       read_records, run_sh, start_until_attached)

pytestmark = needs_root
PYCURL_SCRIPT = REPO / "bench" / "third_party" / "pycurl_load.py"


@pytest.mark.serial
def test_nginx_worker_by_pid_under_wrk(nginx, tmp_path):
    out = tmp_path / "nginx"
    worker = nginx.workers[0]
    wrk = subprocess.Popen(["wrk", "-t1", "-c16", "-d60s", nginx.url], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        run_sh("--pid", worker, "--duration", 3, "--span", "/usr/sbin/nginx:ngx_http_process_request",
               "--out", out, check=True)
    finally:
        wrk.terminate()
        wrk.wait(10)
    assert pid_alive(worker) and pid_alive(nginx.master), "run.sh must leave the target running"
    meta = load_json(out / "meta.json")
    assert meta["target"]["pid"] == worker
    runq = read_records(out, "runq.bin", "runq")
    mine = runq[runq["pid"] == worker]
    assert len(mine) > 0, "no run-queue record of the nginx worker under wrk load"
    assert (mine["t_run_ns"] >= mine["t_runnable_ns"]).all()
    assert len(read_records(out, "switches.bin", "switch")) > 0
    # Each HTTP request wrk sent is one ngx_http_process_request call in that worker: the requests.
    spans = read_records(out, "spans.bin", "span")
    outer = spans[spans["depth"] == 0]
    assert len(outer) > 100 and (outer["tid"] == worker).all()
    assert (outer["t_end_ns"] > outer["t_start_ns"]).all()
    assert load_json(out / "summary.json")["requests"] == len(outer)
    sched = load_json(out / "summary.json")["sched"]
    assert sched["runq_p50_us"] >= 0 and sched["runq_p99_us"] >= sched["runq_p50_us"]
    threads = pd.read_csv(out / "threads.csv")
    row = threads[threads["tid"] == worker]
    assert len(row) == 1 and row["comm"].iloc[0] == "nginx"
    assert row["oncpu_ns"].iloc[0] > 0
    assert (out / "report.html").is_file()
    assert "nginx" in (out / "oncpu.folded").read_text()
    assert (out / "flame-oncpu.svg").is_file()
    assert_nothing_left(out)


@pytest.fixture
def redis(tmp_path):
    """redis-server on a free loopback port, no persistence; stopped after the test."""
    import shutil
    import socket
    if not shutil.which("redis-server"):
        pytest.fail("redis-server missing: bash scripts/install-deps.sh")
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        port = sk.getsockname()[1]
    p = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                          "--appendonly", "no", "--dir", str(tmp_path)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        if subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True,
                          text=True).stdout.strip() == "PONG":
            break
        import time
        time.sleep(0.05)
    yield p, port
    p.terminate()
    p.wait(10)


def test_redis_under_redis_benchmark_with_a_span_on_call(redis, tmp_path):
    """Every command Redis executes goes through call(): the commands redis-benchmark sent
    while traced are the span records, all in the server's one main thread, and Redis
    lives on (its file has no exception machinery: the span ends by uretprobe)."""
    server, port = redis
    out = tmp_path / "redis"
    bench = subprocess.Popen(["redis-benchmark", "-p", str(port), "-c", "8", "-t", "set,get",
                              "-n", "10000000", "-q"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        run_sh("--pid", server.pid, "--duration", 3, "--span",
               "redis-server:call", "--out", out, check=True)
    finally:
        bench.terminate()
        bench.wait(10)
    assert pid_alive(server.pid), "run.sh must leave the target running"
    spans = read_records(out, "spans.bin", "span")
    outer = spans[spans["depth"] == 0]
    assert len(outer) > 1000 and (outer["tid"] == server.pid).all()
    assert (outer["end"] == 0).all()                    # every call returned
    meta = load_json(out / "meta.json")
    assert meta["span_sites"][0]["exit"] == "uretprobe"
    s = load_json(out / "summary.json")
    assert s["requests"] == len(outer) and s["errors"] == 0
    assert (out / "report.html").is_file()
    assert_nothing_left(out)


def pycurl_links_system_libcurl():
    code = ("import os, sys, pycurl; sys.exit(not any(os.path.basename(l.split()[-1])"
            ".startswith('libcurl.so.4') for l in open('/proc/self/maps') if '/' in l))")
    return subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0


def test_pycurl_span_turns_calls_into_requests(nginx, tmp_path):
    if not pycurl_links_system_libcurl():
        pytest.fail("pycurl missing or not linked to the system libcurl.so.4: bash scripts/install-deps.sh")
    out, n, threads = tmp_path / "pycurl", 3000, 4
    run_sh("--span", "libcurl.so.4:curl_easy_perform", "--out", out, "--",
           sys.executable, PYCURL_SCRIPT, "--url", nginx.url, "--requests", n, "--threads", threads,
           check=True)
    spans = read_records(out, "spans.bin", "span")
    outer = spans[spans["depth"] == 0]
    assert len(outer) == n
    assert (outer["ret"] == 0).all()
    assert len(np.unique(outer["tid"])) == threads
    assert (outer["t_end_ns"] > outer["t_start_ns"]).all()
    s = load_json(out / "summary.json")
    assert s["requests"] == n
    assert s["latency_ms"]["p99"] > 0
    assert (out / "report.html").is_file()
    assert_nothing_left(out)


# A small target of our own: 2 ms on CPU, then 3 ms asleep (one voluntary switch), forever.
BUSY_SLEEPY = ("import time\n"
               "while True:\n"
               "    t = time.monotonic() + 0.002\n"
               "    while time.monotonic() < t:\n"
               "        pass\n"
               "    time.sleep(0.003)\n")


def test_pid_without_span_gets_a_scheduler_only_report(tmp_path):
    """No --span, so no requests: run.sh still writes the report (scheduler views) and exits 0."""
    out = tmp_path / "sleepy"
    target = subprocess.Popen([sys.executable, "-c", BUSY_SLEEPY])
    try:
        p = run_sh("--pid", target.pid, "--duration", 2, "--out", out)
        alive = pid_alive(target.pid)
    finally:
        target.kill()
        target.wait(10)
    assert p.returncode == 0, p.stderr[-5000:]
    assert alive, "run.sh must leave the target running"
    for name in ("report.html", "summary.json", "threads.csv", "locks.csv", "trace.json"):
        assert (out / name).is_file(), name
    s = load_json(out / "summary.json")
    assert s["requests"] == 0 and s["source"] == "none" and s["errors"] is None
    assert s["attribution"].startswith("needs requests or --span")
    assert s["latency_ms"]["p99"] is None
    # ~400 sleeps in 2 s (one per 5 ms loop); far fewer only if the machine starved it
    assert s["sched"]["voluntary"] >= 100 and s["threads"] >= 1
    threads = pd.read_csv(out / "threads.csv")
    row = threads[threads["tid"] == target.pid]
    assert len(row) == 1 and row["voluntary"].iloc[0] >= 100 and row["oncpu_ns"].iloc[0] > 0
    assert "No requests in this run (no --span): scheduler view of" in p.stdout
    assert "scheduler-only report" in p.stderr
    assert "Without --span there are no requests to decompose" in (out / "report.html").read_text()
    assert_nothing_left(out)


@pytest.mark.parametrize("span", [None, "none"])
def test_pid_of_a_tcp_server_without_span_gets_its_requests_from_the_kernel(tmp_path, span):
    """No --span on a process listening on TCP: run.sh takes each request on its port (--span
    tcp): 40 requests, each 20 ms, are 40 requests of the report; --span none keeps the
    scheduler-only report."""
    sys.path.insert(0, str(REPO / "tests" / "probes"))
    from test_tcp_spans import PAUSE_MS, TcpServer, client

    srv = TcpServer(delay_ms=20)
    out = tmp_path / "tcp"
    got = []
    try:
        proc, err, pump = start_until_attached(
            "--pid", srv.proc.pid, "--duration", 10, "--no-perf", "--no-flamegraph", "--out", out,
            *(["--span", span] if span else []))
        client(srv, 40, got)
        proc.wait(timeout=E2E_TIMEOUT_S)
        pump.join(60)
    finally:
        srv.stop()
    assert proc.returncode == 0, "".join(err)[-5000:]
    s = load_json(out / "summary.json")
    if span == "none":
        assert s["source"] == "none" and s["requests"] == 0
        return
    assert f"listens on TCP port(s) {srv.port}: each request there is one" in "".join(err)
    assert len(got) == 40 and s["source"] == "spans" and s["requests"] == 40
    assert s["latency_ms"]["p50"] >= 20 + PAUSE_MS
    assert_nothing_left(out)
