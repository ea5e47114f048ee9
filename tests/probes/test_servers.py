"""Every request of the servers people run, decomposed where its time went: a pre-fork server
traced by its parent's pid, and an event loop that hands each request to a thread pool.

Oracle, by construction (known_cost.h): each request costs CPU_US of a thread's CPU time
(CLOCK_THREAD_CPUTIME_ID: time preempted does not count) and then SLEEP_US asleep, in a forked
worker (prefork_server.c) or in a pool thread while the socket's thread waits in epoll_wait
(handoff_server.c). The client sends them one at a time on each connection (--span tcp: first
byte in to last byte out). So each request's on-CPU part is CPU_US plus the little it takes to
read and answer, and its sleep part SLEEP_US plus the timer's slack: within 20 %. Real BPF:
run as root."""
from __future__ import annotations

import json
import socket
import subprocess
import threading

import numpy as np
import pytest

from test_spans import tailtrace_bg
from tt_run import helper, needs_root

# serial: each request's on-CPU part is checked within 20 % of its 2 ms spin, which the
# parallel phase's other tests stretch (CI: the 95th percentile at 4 ms, 79-87 % within 20 %)
pytestmark = [needs_root, pytest.mark.serial]
CPU_US, SLEEP_US, CONNS, REQUESTS = 2000, 3000, 2, 40
US = 1000


class Server:
    def __init__(self, name: str, workers: int):
        self.proc = subprocess.Popen([helper(name), str(workers), str(CPU_US), str(SLEEP_US)],
                                     stdout=subprocess.PIPE, text=True)
        self.info = json.loads(self.proc.stdout.readline())

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)


def drive(port: int, n: int, errors: list) -> None:
    """n requests on one connection, one at a time."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sk:
            for _ in range(n):
                sk.sendall(b"x\n")
                got = b""
                while not got.endswith(b"\n"):
                    chunk = sk.recv(64)
                    assert chunk, "the server closed the connection"
                    got += chunk
                assert got == b"ok\n", got
    except Exception as e:  # noqa: BLE001 - reported by the test
        errors.append(repr(e))


def traced_run(tmp_path, server: Server):
    """tailtrace on the server's pid (spans on its port) while the clients run; the run's
    decomposition."""
    from analyze.explain.decompose import df_decompose
    from analyze.load.load import load_run
    port = server.info["port"]
    tt, head = tailtrace_bg(tmp_path, "--pid", str(server.info["pid"]), "--span",
                            f"tcp:{port}", "--duration", "60")
    errors: list = []
    clients = [threading.Thread(target=drive, args=(port, REQUESTS, errors))
               for _ in range(CONNS)]
    for c in clients:
        c.start()
    for c in clients:
        c.join(timeout=120)
    tt.send_signal(2)
    _, err = tt.communicate(timeout=60)
    assert tt.returncode == 0 and not errors, head + err + str(errors)
    run = load_run(tmp_path)
    return run, df_decompose(run), head + err


def assert_known_costs(d, traced_tids: set, why: str):
    assert len(d) == CONNS * REQUESTS, why
    ok = d["check"].astype(str) == "ok"
    assert ok.mean() >= 0.95, (d["check"].value_counts().to_dict(), why)
    assert d.loc[ok, "closes"].mean() >= 0.99, why
    got = d[ok]
    cpu = got["oncpu_ns"].to_numpy() / US
    sleep = got["sleep_ns"].to_numpy() / US
    assert np.median(np.abs(cpu / CPU_US - 1)) <= 0.2, (np.percentile(cpu, [5, 50, 95]), why)
    assert np.median(np.abs(sleep / SLEEP_US - 1)) <= 0.2, (np.percentile(sleep, [5, 50, 95]),
                                                           why)
    # Each request's own: at least its CPU (less 20%), and not its sleep too. The on-CPU part
    # is time on a CPU by the scheduler's switches, the oracle the thread's CPU clock, which
    # leaves out what a busy host stole from this VM and interrupt time: a CI run saw 11% of
    # requests 20-70% above 2 ms (p95 3.46 ms) while the median held.
    assert (cpu >= 0.8 * CPU_US).mean() >= 0.9, (np.percentile(cpu, [5, 50, 95]), why)
    assert (cpu < CPU_US + 0.8 * SLEEP_US).mean() >= 0.9, (np.percentile(cpu, [5, 50, 95]), why)


def test_a_prefork_servers_requests_are_traced_by_the_parents_pid(tmp_path):
    """The parent only listens; its two forked workers accept and serve. Traced by the
    parent's pid, every request is found in a worker, with its known parts."""
    srv = Server("prefork_server", 2)
    try:
        run, d, why = traced_run(tmp_path, srv)
    finally:
        srv.stop()
    workers = set(d["pid"].astype(int))
    assert srv.info["pid"] not in workers and len(workers) >= 1, (workers, why)
    assert "and its descendants" in why
    assert_known_costs(d, workers, why)


def test_a_thread_pools_requests_show_the_workers_time(tmp_path):
    """The loop thread owns every socket and answers every request, so every span is on
    it; the work (2 ms of CPU, then 3 ms asleep) runs on a pool thread while the loop waits
    in epoll_wait. Followed along the handoff (explain/handoff.py), each request's on-CPU and
    sleep parts are the worker's, and at least the work's time is charged to a worker (not
    the whole latency: with both workers busy a request waits in the queue, and the loop
    waits for a CPU of its own). A worker that lost an edge while it had the work makes the
    request "gap", not "ok"."""
    srv = Server("handoff_server", 2)
    try:
        run, d, why = traced_run(tmp_path, srv)
    finally:
        srv.stop()
    loop = srv.info["loop_tid"]
    assert set(d["tid"].astype(int)) == {loop}, (set(d["tid"]), why)
    assert_known_costs(d, {srv.info["pid"]}, why)
    ok = d[d["check"].astype(str) == "ok"]
    work_ns = (CPU_US + SLEEP_US) * US
    assert (ok["handoff_ns"] >= 0.8 * work_ns).mean() >= 0.9, (ok["handoff_ns"].describe(), why)
    assert (ok["handoff_unknown_ns"] == 0).all(), why
    assert not set(ok["handoff_tid"].astype(int)) & {0, loop}, why
