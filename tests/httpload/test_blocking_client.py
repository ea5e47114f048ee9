"""bench/blocking_client (the libcurl-free blocking client bench/cpu_per_request.sh runs
as "block") against a real orders-server, with the server's own counts as the oracle:
T threads open exactly T connections, every reply it counts is one the server served,
error statuses are counted as errors, and a dead port or a bad option fails at once
with one line.
"""
import os
import re
import signal
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("TT_BUILD", ROOT / "build"))
CLIENT = BUILD / "bench" / "blocking_client"
SERVER = BUILD / "workloads" / "server" / "orders-server"


def _need(exe):
    assert exe.exists(), f"{exe} not built: run cmake --build {BUILD}"
    return str(exe)


def _server():
    proc = subprocess.Popen([_need(SERVER), "--port", "0", "--workers", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert "listening on 127.0.0.1:" in line, f"orders-server did not start: {line!r}"
    return proc, int(line.split("127.0.0.1:")[1].split()[0])


def _stop(proc):
    """SIGTERM; the server's (connections, requests, errors)."""
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=10)
    m = re.search(r"(\d+) connections, (\d+) requests \((\d+) errors\)", err)
    assert m, err
    return tuple(int(x) for x in m.groups())


def _client(*args, timeout=30):
    r = subprocess.run([_need(CLIENT), *map(str, args)], capture_output=True, text=True,
                       timeout=timeout)
    m = re.fullmatch(r"requests (\d+) errors (\d+) elapsed_s ([0-9.]+)\n", r.stdout)
    return r, (int(m[1]), int(m[2]), float(m[3])) if m else None


def test_counts_match_the_server():
    proc, port = _server()
    try:
        r, got = _client("--port", port, "--threads", 4, "--duration", 1, "--pin")
    finally:
        served = _stop(proc)
    assert r.returncode == 0, r.stderr
    requests, errors, elapsed_s = got
    assert requests > 100 and errors == 0
    assert served == (4, requests, 0)  # one keep-alive connection per thread
    assert 1.0 <= elapsed_s < 3.0


def test_error_statuses_are_counted():
    proc, port = _server()
    try:
        r, got = _client("--port", port, "--threads", 2, "--duration", 1, "--path", "/nope")
    finally:
        served = _stop(proc)
    assert r.returncode == 1
    requests, errors, _ = got
    assert requests > 0 and errors == requests
    assert served == (2, requests, requests)


def test_dead_port_fails_at_once():
    proc, port = _server()
    _stop(proc)  # a port nobody listens on now
    t0 = time.monotonic()
    r, got = _client("--port", port, "--threads", 3, "--duration", 30)
    assert time.monotonic() - t0 < 5  # not the whole --duration
    assert r.returncode == 1 and got[:2] == (0, 0)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "3 of 3 connections" in lines[0], r.stderr
    assert f"listening on port {port}" in lines[0]


def test_bad_options():
    for args, word in ((["--port", 1, "--threads", 0], "--threads"),
                       (["--threads", 2], "--port is required"),
                       (["--port", 1, "--path", "no-slash"], "--path"),
                       (["--port", 1, "--duration", "x"], "--duration")):
        r, _ = _client(*args)
        assert r.returncode == 2, args
        assert len(r.stderr.strip().splitlines()) == 1 and word in r.stderr, r.stderr
