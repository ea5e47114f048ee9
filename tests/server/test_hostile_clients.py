"""orders-server under hostile clients, on loopback: slowloris, oversized
heads and bodies, pipelining, malformed framing, connection floods, many
thousands of connections held open, and the timeouts and connection cap
that bound them.

Oracles: exact statuses for every bad input (the tables in
hostile_client.py), followed by the server's close; replies in order; the
server's own shutdown tally (connections, refused, timed out); its open fds
back to the baseline afterwards (nothing leaked); VmRSS under a budget
derived from the per-connection costs; and a legitimate keep-alive client
whose P99 under attack stays within an order of magnitude of its baseline
(P99_RATIO_BOUND; the measured ratios, 1.0-1.5 on a quiet machine, are
printed for docs/reliability.md).

P99 on a shared, noisy 2-CPU VM: each P99 test runs ROUNDS attack windows,
each between two baseline windows (LEGIT_SAMPLES paced requests per window,
after the server has closed the previous round's connections), and asserts
that the median over rounds of attack P99 / mean of the two neighbouring
baseline P99s is at most P99_RATIO_BOUND, so drift of the shared machine
cancels out. When the first ROUNDS leave the median above it, ROUNDS more are measured
and the bound holds for the median over all of them (more data when the
first sample is undecided; the mixed stream at 100/s, on a day whose
baseline P99 was ~17 us: 2 of 6 first samples read 2.0 and 2.4, the others
1.1-1.4; it runs at 50/s now).
The attackers run in a separate process (hostile_client.py) under
SCHED_IDLE: an attacker on other machines does not take our CPUs, and a
Python process flooding on one of two CPUs would measure the scheduler,
not the server. Its rate is checked (an attack that fell behind fails the
test). Attacks are torn down with resets (no TIME_WAIT storms expiring in
later windows). The slowloris sockets are held by this process; they are
idle and cost it nothing. The flood rate under the asserted bound is
moderate (150 connects/s) because on this kernel (PREEMPT_NONE) every
loopback connect does ~20-50 us of non-preemptible TCP work for both ends
on our two CPUs; test_connection_flood_flat_out measures the flat-out
flood and reports its P99 without a bound (docs/reliability.md).

Under scripts/sanitize.sh (TT_SANITIZE set) the P99 bound and the RSS
budget are not asserted; every other check is. Every socket has a timeout
and every wait a deadline.
"""
import gc
import json
import os
import resource
import select
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hostile_client import (MALFORMED, ORDER, OVERSIZED, PIPELINE_N, Reader, error_exchange,
                            pipeline_batch, request, reset_close)
from test_orders_server import Server, binary

HOSTILE = Path(__file__).resolve().parent / "hostile_client.py"
IO_TIMEOUT_S = 5
ROUNDS = 7
LEGIT_SAMPLES = 2000
LEGIT_PERIOD_US = 200  # a window is ~0.4 s
SETTLE_S = 0.2         # before each window, after connections opened or closed
SLOWLORIS = 1000
SLOWLORIS_HEAD = b"GET /orders/1 HTTP/1.1\r\nHost: x\r\n"  # no blank line: never complete
HEALTH = request("GET", "/health")
# RSS budget above the idle server, from the per-connection costs (conn.h):
# a connection that has sent part of a request holds its struct (~0.2 KiB)
# and a 2 KiB input buffer, an idle one only the struct, and each worker
# keeps at most 128 closed conns (with up to 2 + 16 KiB of buffers) for
# reuse. 1,000 slowloris + 2,000 held + the spares of 2 workers: ~8 MiB.
# 16 MiB leaves room for malloc's rounding; the old eager 16 + 16 KiB
# buffers touched ~8 KiB per connection: 24 MiB for the same load.
RSS_BUDGET_MIB = 16
# Under scripts/sanitize.sh (ASan's shadow memory and quarantine, TSan's
# slowdown) the P99 bound and the RSS budget mean nothing; everything else
# is still checked.
SANITIZED = os.environ.get("TT_SANITIZE", "")
# Legit P99 under attack / baseline, median over rounds. The baseline P99 is
# ~17-100 us here, so a neighbour's burst moves the ratio: a CI run on a busy
# machine read 2.99 (base 16 us, attack 51 us). What the bound catches is a
# server that stalls its keep-alive clients behind hostile ones (a blocking
# read, an accept storm on the event loop): milliseconds, 100x and more.
P99_RATIO_BOUND = 10


@pytest.fixture
def spawn():
    """Start orders-servers (Server(*args)); whatever still runs at the end
    is stopped, also when the test failed."""
    started = []

    def start(*args):
        started.append(Server(*args))
        return started[-1]

    yield start
    for srv in started:
        if srv.proc.poll() is None:
            srv.stop()


@pytest.fixture(scope="module", autouse=True)
def nofile():
    """Raise this process's open-file limit (slowloris and held sockets)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard == resource.RLIM_INFINITY else min(hard, 65536)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, want), hard))
    yield max(soft, want)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def rss_kib(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def mib(kib):
    return f"{kib / 1024:.1f}"


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def wait_fds(srv, ok, what, timeout_s=10):
    """Poll the server's fd count until ok(count); fail after timeout_s, or at once when
    the server has exited."""
    deadline = time.monotonic() + timeout_s
    while True:
        if (rc := srv.proc.poll()) is not None:
            how = f"killed by signal {-rc}" if rc < 0 else f"exit {rc}"
            pytest.fail(f"the server exited ({how}) while {what}")
        n = open_fds(srv.proc.pid)
        if ok(n):
            return n
        if time.monotonic() > deadline:
            pytest.fail(f"server fds: {n}, still not {what} after {timeout_s} s")
        time.sleep(0.01)


class Legit:
    """A legitimate keep-alive client: GET /health, one at a time."""

    def __init__(self, srv):
        self.sock = srv.connect()
        self.sock.settimeout(IO_TIMEOUT_S)
        self.sock.sendall(HEALTH)
        self.reply = b""
        while not self.reply.endswith(b'{"status":"ok"}'):
            chunk = self.sock.recv(4096)
            assert chunk, "closed by the server"
            self.reply += chunk
        assert self.reply.startswith(b"HTTP/1.1 200 OK\r\n"), self.reply
        self.wrong = 0  # replies that differ from this first one

    def p99_us(self, n=LEGIT_SAMPLES, period_us=LEGIT_PERIOD_US):
        """P99 latency (µs) of n requests, one every period_us (a client, not a
        benchmark: it leaves CPU to the others); every reply must be the
        exact bytes of the first."""
        lat = []
        gc.disable()  # a collector pause is this client's, not the server's
        try:
            self._measure(n, period_us, lat)
        finally:
            gc.enable()
        lat.sort()
        return lat[int(0.99 * len(lat))] / 1000

    def _measure(self, n, period_us, lat):
        sock, reply, size = self.sock, self.reply, len(self.reply)
        t_next = time.monotonic_ns()
        for _ in range(n):
            t_next += period_us * 1000
            t0 = time.monotonic_ns()
            sock.sendall(HEALTH)
            got = b""
            while len(got) < size:
                chunk = sock.recv(size - len(got))
                if not chunk:
                    raise EOFError("legit connection closed by the server")
                got += chunk
            t1 = time.monotonic_ns()
            lat.append(t1 - t0)
            self.wrong += got != reply
            if t_next > t1:
                time.sleep((t_next - t1) / 1e9)

    def close(self):
        self.sock.close()


def open_slowloris(port, n):
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT_S)
        s.sendall(SLOWLORIS_HEAD)
        socks.append(s)
    return socks


def untouched(socks):
    """How many of socks have nothing to read and were not closed."""
    poller = select.poll()
    for s in socks:
        poller.register(s, select.POLLIN)
    return len(socks) - len(poller.poll(0))


def background():
    """SCHED_IDLE: run only on CPU time nobody else wants (see the module doc). Not under a
    sanitizer: there the server's ASan/TSan build and a busy machine's other load can keep
    both CPUs busy, and a SCHED_IDLE attacker did not even start in 20 s; no P99 is
    asserted there, so its CPU use does not matter."""
    if not SANITIZED:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))


class Attack:
    """hostile_client.py in its own process (SCHED_IDLE) + slowloris sockets here."""

    def __init__(self, srv, mode, rate, hold=0, slowloris=0, count=0):
        self.slow = open_slowloris(srv.port, slowloris)
        args = [sys.executable, str(HOSTILE), "--port", str(srv.port), "--mode", mode,
                "--rate", str(rate), "--hold", str(hold), "--count", str(count), "--seconds", "30"]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True,
                                     preexec_fn=background)
        started = select.poll()  # not select(): the slowloris sockets push fds past 1024
        started.register(self.proc.stdout, select.POLLIN)
        line = self.proc.stdout.readline().split() if started.poll(20_000) else []
        if len(line) != 4:
            self.proc.kill()
            pytest.fail(f"hostile_client did not start: {line}")
        self.held, self.closed_by_server = int(line[1]), int(line[3])

    def stop(self):
        """Stop it; its summary (dict). The slowloris sockets stay open."""
        self.proc.send_signal(signal.SIGTERM)
        return self.wait()

    def wait(self, timeout_s=30):
        try:
            out, _ = self.proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            pytest.fail("hostile_client did not stop")
        assert self.proc.returncode == 0
        return json.loads(out.strip().splitlines()[-1])

    def close_slowloris(self):
        for s in self.slow:
            reset_close(s)


def attack_rounds(srv, legit, mode, rate, hold=0, slowloris=0):
    """ROUNDS x (baseline window, attack window) and a last baseline window:
    P99s (each attack window is bracketed by two baselines), RSS, attack
    summaries."""
    pid = srv.proc.pid
    fd0 = open_fds(pid)
    res = {"base": [], "attack": [], "rss_before_kib": rss_kib(pid), "rss_during_kib": 0,
           "summaries": [], "slowloris_untouched": 0}
    for _ in range(ROUNDS):
        wait_fds(srv, lambda n: n <= fd0, f"back to {fd0}")
        time.sleep(SETTLE_S)
        res["base"].append(legit.p99_us())
        attack = Attack(srv, mode, rate, hold=hold, slowloris=slowloris)
        try:
            wait_fds(srv, lambda n: n >= fd0 + slowloris + attack.held,
                     f"holding {slowloris + attack.held} more")
            time.sleep(SETTLE_S)  # the accept burst is over: measure the steady attack
            res["attack"].append(legit.p99_us())
            res["rss_during_kib"] = max(res["rss_during_kib"], rss_kib(pid))
            res["slowloris_untouched"] += untouched(attack.slow)
        finally:
            res["summaries"].append(attack.stop())
            attack.close_slowloris()
        done = res["summaries"][-1]
        assert done["conns"] >= 0.5 * rate * done["seconds"], f"the attack fell behind: {done}"
    wait_fds(srv, lambda n: n <= fd0, f"back to {fd0}")
    time.sleep(SETTLE_S)
    res["base"].append(legit.p99_us())
    res["rss_after_kib"] = rss_kib(pid)
    res["ratios"] = window_ratios(res["base"], res["attack"])
    return res


def window_ratios(b, a):
    """Each attack window's P99 over the mean of the baselines just before and
    just after it: drift of the shared machine cancels out."""
    return [a[i] / ((b[i] + b[i + 1]) / 2) for i in range(len(a))]


def attack_until_decided(srv, legit, mode, rate, **kw):
    """attack_rounds; ROUNDS more when their median ratio is above the bound
    (module doc). The result carries every round's ratio and the larger RSS."""
    res = attack_rounds(srv, legit, mode, rate, **kw)
    if statistics.median(res["ratios"]) <= P99_RATIO_BOUND or SANITIZED:
        return res
    more = attack_rounds(srv, legit, mode, rate, **kw)
    for key in ("base", "attack", "summaries", "ratios"):
        res[key] = res[key] + more[key]
    res["rss_during_kib"] = max(res["rss_during_kib"], more["rss_during_kib"])
    res["rss_after_kib"] = more["rss_after_kib"]
    res["slowloris_untouched"] += more["slowloris_untouched"]
    return res


def report(name, res):
    """One line for docs/reliability.md (pytest -s shows it)."""
    conns = sum(s["conns"] for s in res["summaries"])
    print(f"\n{name}: legit P99 base {statistics.median(res['base']):.0f} us "
          f"attack {statistics.median(res['attack']):.0f} us, median ratio "
          f"{statistics.median(res['ratios']):.2f} over {len(res['ratios'])} rounds "
          f"(rounds base {[round(x) for x in res['base']]} attack "
          f"{[round(x) for x in res['attack']]}); RSS {mib(res['rss_before_kib'])} -> "
          f"{mib(res['rss_during_kib'])} -> {mib(res['rss_after_kib'])} MiB; "
          f"{conns} hostile connections")


def assert_rss_budget(before_kib, during_kib):
    grown_mib = (during_kib - before_kib) / 1024
    assert grown_mib < RSS_BUDGET_MIB or SANITIZED, f"RSS grew {grown_mib:.1f} MiB under attack"


def assert_survived(srv, legit, res):
    """The P99 bound, the RSS budget, nothing lost, and the server still serves."""
    ratio = statistics.median(res["ratios"])
    assert ratio <= P99_RATIO_BOUND or SANITIZED, (
        f"legit P99 under attack / baseline: median {ratio:.2f} > {P99_RATIO_BOUND} (per round: "
        f"base {[round(x) for x in res['base']]}, attack {[round(x) for x in res['attack']]})")
    assert_rss_budget(res["rss_before_kib"], res["rss_during_kib"])
    assert legit.wrong == 0
    for s in res["summaries"]:
        assert (s["errors"], s["unexpected"]) == (0, []), s
        assert s["ok"] == s["conns"], s
    with srv.connect() as s:  # a normal request afterwards, on a new connection
        s.sendall(request("POST", "/orders", ORDER))
        status, _, body = Reader(s).response()
        assert status == 200 and body.startswith(b'{"order_id":'), body


def stop_tally(srv):
    """Stop the server: (connections, refused, timed out) from its last line."""
    rc, err, _ = srv.stop()
    assert rc == 0, err
    last = err.strip().splitlines()[-1]
    words = last.replace(",", "").split()
    assert "refused" in words and "timed" in words, last
    return (int(words[words.index("connections") - 1]), int(words[words.index("refused") - 1]),
            int(words[words.index("timed") - 1]))


@pytest.mark.serial
def test_slowloris_and_flood_keep_legit_p99_and_rss(spawn):
    """1,000 half-sent heads + 2,000 idle connections + a paced flood of
    150 connects/s (FIN, request-then-close, RST): the legit client's P99
    stays within P99_RATIO_BOUND, RSS within budget, no slowloris socket is answered or
    closed early (the request timeout is 10 s), no flood connection fails."""
    srv = spawn("--workers", "2")
    legit = Legit(srv)
    try:
        res = attack_until_decided(srv, legit, "churn", rate=150, hold=2000, slowloris=SLOWLORIS)
        report("slowloris+flood", res)
        assert_survived(srv, legit, res)
        assert res["slowloris_untouched"] == len(res["attack"]) * SLOWLORIS
    finally:
        legit.close()
    _, refused, timed_out = stop_tally(srv)
    assert (refused, timed_out) == (0, 0)


@pytest.mark.serial
def test_malformed_oversized_and_pipelined_stream_keeps_legit_p99(spawn):
    """A stream of hostile connections, 50/s: a MALFORMED input, an OVERSIZED
    one, PIPELINE_N pipelined requests in turn, each checked for its exact
    replies by hostile_client.py, while the legit client measures. (At 100/s
    the median ratio read 0.9-2.4 on a day whose baseline P99 was ~17 us, and
    failed a CI run; at 50/s 0.84-1.42. docs/reliability.md.)"""
    srv = spawn("--workers", "2")
    legit = Legit(srv)
    try:
        res = attack_until_decided(srv, legit, "mixed", rate=50)
        report("malformed+oversized+pipelined", res)
        assert_survived(srv, legit, res)
    finally:
        legit.close()
    assert stop_tally(srv)[1:] == (0, 0)


@pytest.fixture(scope="module")
def server():
    srv = Server("--workers", "2")
    yield srv
    if srv.proc.poll() is None:
        srv.stop()


@pytest.mark.parametrize("name, raw, status", MALFORMED, ids=[c[0] for c in MALFORMED])
def test_malformed(server, name, raw, status):
    assert error_exchange(server.port, name, raw, status) is None
    with server.connect() as s:  # and the server serves the next client
        s.sendall(HEALTH)
        assert Reader(s).response()[0] == 200


@pytest.mark.parametrize("name, raw, status", OVERSIZED, ids=[c[0] for c in OVERSIZED])
def test_oversized(server, name, raw, status):
    assert error_exchange(server.port, name, raw, status) is None
    with server.connect() as s:
        s.sendall(HEALTH)
        assert Reader(s).response()[0] == 200


def test_oversized_at_the_limits_is_served(server):
    """The limits themselves are allowed: an 8 KiB head, a 64 KiB body."""
    pad = 8192 - len(request("GET", "/health", headers={"X-Pad": ""}))
    body = b'{"x":"' + b"a" * (65536 - 8) + b'"}'
    with server.connect() as s:
        r = Reader(s)
        s.sendall(request("GET", "/health", headers={"X-Pad": "a" * pad}))
        assert r.response()[0] == 200
        s.sendall(request("POST", "/orders", body))
        assert r.response()[0] == 200


def test_pipelined_50_in_one_send(server):
    raw, want = pipeline_batch(PIPELINE_N)
    with server.connect() as s:
        s.sendall(raw)
        r = Reader(s)
        got = [r.response() for _ in want]
        assert [g[0] for g in got] == want
        ids = [int(json.loads(g[2])["order_id"]) for g in got if b"order_id" in g[2]]
        assert len(ids) == PIPELINE_N // 5 and ids == list(range(ids[0], ids[0] + len(ids)))
        s.sendall(HEALTH)  # still a keep-alive connection
        assert r.response()[0] == 200


def test_connection_flood_flat_out(spawn):
    """6,000 connections opened and closed as fast as one process can (FIN,
    request-then-close, RST in turn): none fails, the server's fds return to
    the baseline, RSS stays within budget, the legit client keeps working."""
    srv = spawn("--workers", "2")
    legit = Legit(srv)
    pid = srv.proc.pid
    fd0, rss0 = open_fds(pid), rss_kib(pid)
    try:
        base = legit.p99_us()
        attack = Attack(srv, "churn", rate=0, count=6000)
        during, rss_during = [], 0
        while attack.proc.poll() is None and len(during) < 50:
            during.append(legit.p99_us(200))
            rss_during = max(rss_during, rss_kib(pid))
        summary = attack.wait()
        summary.pop("seconds")
        assert summary == {"held": 0, "conns": 6000, "ok": 6000, "errors": 0, "unexpected": []}
        wait_fds(srv, lambda n: n <= fd0, f"back to {fd0}")
        assert_rss_budget(rss0, rss_during)
        assert legit.wrong == 0
        legit.sock.sendall(request("POST", "/orders", ORDER))
        assert Reader(legit.sock).response()[0] == 200
        print(f"\nflood flat out: legit P99 base {base:.0f} us, during (200-request windows) "
              f"median {statistics.median(during):.0f} us max {max(during):.0f} us; RSS "
              f"{mib(rss0)} -> {mib(rss_during)} -> {mib(rss_kib(pid))} MiB")
    finally:
        legit.close()
    conns, refused, timed_out = stop_tally(srv)
    assert (conns, refused, timed_out) == (6001, 0, 0)


def connect_many(port, n):
    """n idle connections: (open sockets, how many were reset while connecting)."""
    socks, reset = [], 0
    for _ in range(n):
        try:
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT_S))
        except ConnectionResetError:  # over --max-conns, reset before connect() returned
            reset += 1
    return socks, reset


def closed_by_server(socks, expect, timeout_s=3.0):
    """Fds of socks the server reset or closed (sending nothing), waiting up to
    timeout_s for `expect` of them."""
    poller = select.poll()
    for s in socks:
        poller.register(s, select.POLLIN)
    by_fd = {s.fileno(): s for s in socks}
    closed, deadline = set(), time.monotonic() + timeout_s
    while len(closed) < expect and time.monotonic() < deadline:
        for fd, _ in poller.poll(100):
            poller.unregister(fd)
            try:
                data = by_fd[fd].recv(1)
            except ConnectionResetError:
                data = b""
            assert data == b"", "a refused connection got bytes"
            closed.add(fd)
    return closed


def test_thousands_held_open_and_the_cap(spawn, nofile):
    """1,000 slowloris + 5,000 idle connections against the default
    --max-conns 4096: exactly 4,096 are served (the legit one included), the
    rest are reset at once (not left hanging in the backlog), RSS stays
    within budget, and capacity comes back as soon as connections close."""
    if nofile < 7000:
        pytest.skip(f"needs an open-file limit of 7000, this process may have {nofile}")
    srv = spawn("--workers", "2")
    pid = srv.proc.pid
    legit = Legit(srv)
    fd0, rss0 = open_fds(pid), rss_kib(pid)
    slow, held, probe = [], [], []
    try:
        slow = open_slowloris(srv.port, SLOWLORIS)
        held, reset = connect_many(srv.port, 5000)
        want = SLOWLORIS + 5000 + 1 - 4096
        refused = closed_by_server(slow + held, want - reset)
        assert reset + len(refused) == want
        assert not closed_by_server(slow + held, 1, timeout_s=0.2) - refused
        wait_fds(srv, lambda n: n == fd0 + 4095, f"holding {4095} more")
        rss_during = rss_kib(pid)
        assert_rss_budget(rss0, rss_during)
        p99_full = legit.p99_us()
        assert legit.wrong == 0
        assert untouched([s for s in slow if s.fileno() not in refused]) == \
            len([s for s in slow if s.fileno() not in refused])
        # At the cap a new connection is reset at once ...
        probe, probe_reset = connect_many(srv.port, 1)
        assert probe_reset or closed_by_server(probe, 1) == {probe[0].fileno()}
        # ... and served again once one closes.
        next(s for s in held if s.fileno() not in refused).close()
        wait_fds(srv, lambda n: n == fd0 + 4094, "one closed")
        with srv.connect() as s:
            s.sendall(HEALTH)
            assert Reader(s).response()[0] == 200
    finally:
        for s in slow + held + probe:
            reset_close(s)
    wait_fds(srv, lambda n: n <= fd0, f"back to {fd0}")
    print(f"\nheld: {SLOWLORIS} slowloris + 5000 idle, {want} refused; legit P99 at the "
          f"cap {p99_full:.0f} us; RSS {mib(rss0)} -> {mib(rss_during)} -> "
          f"{mib(rss_kib(pid))} MiB")
    legit.close()
    conns, n_refused, timed_out = stop_tally(srv)
    assert (n_refused, timed_out) == (want + 1, 0)


def test_max_conns_flag_and_timeout_flags_in_help():
    exe = binary()
    for args, word in [(["--max-conns", "0"], "--max-conns"), (["--max-conns", "x"], "--max-conns"),
                       (["--max-conns", "99999999"], "--max-conns"),
                       (["--request-timeout-ms", "-1"], "--request-timeout-ms"),
                       (["--idle-timeout-ms", "1e3"], "--idle-timeout-ms"),
                       (["--idle-timeout-ms"], "--idle-timeout-ms"),
                       (["--spin-us", "1001"], "--spin-us"), (["--spin-us", "-5"], "--spin-us")]:
        p = subprocess.run([exe, *args], capture_output=True, text=True, timeout=IO_TIMEOUT_S)
        assert p.returncode == 2, args
        assert p.stderr.count("\n") == 1 and word in p.stderr, p.stderr
    # More than the open-file limit leaves room for: refused, naming the fix.
    p = subprocess.run([exe, "--max-conns", "1000"], capture_output=True, text=True,
                       timeout=IO_TIMEOUT_S,
                       preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256)))
    assert p.returncode == 2 and "ulimit -n" in p.stderr, p.stderr
    p = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=IO_TIMEOUT_S)
    for opt, default in [("--max-conns", "4096"), ("--request-timeout-ms", "10000"),
                         ("--idle-timeout-ms", "60000")]:
        line = next(ln for ln in p.stdout.splitlines() if opt + " " in ln)
        assert f"default {default}" in line, line


def test_request_and_idle_timeouts(spawn):
    """--request-timeout-ms 400 --idle-timeout-ms 800: partial requests
    (slowloris, a head trickled byte by byte, a body trickled) get 408 and a
    close; connections that never send and idle keep-alive ones are closed
    silently; a busy keep-alive client is never cut off; fds and the
    server's tally account for every one."""
    request_ms, idle_ms, slack_s = 400, 800, 2.0
    srv = spawn("--workers", "2", "--request-timeout-ms", str(request_ms),
                 "--idle-timeout-ms", str(idle_ms))
    pid = srv.proc.pid
    fd0, rss0 = open_fds(pid), rss_kib(pid)
    t0 = time.monotonic()
    slow = open_slowloris(srv.port, 300)
    silent, reset = connect_many(srv.port, 100)
    assert reset == 0
    trickle_head = srv.connect()   # a valid head, one byte per 50 ms: needs 1.7 s
    trickle_body = srv.connect()   # a whole head, then a body byte per 50 ms
    trickle_body.sendall(request("POST", "/orders", headers={"Content-Length": "100"}))
    idle = srv.connect()           # one request answered, then idle
    t_idle = time.monotonic()      # the server marks it idle after this
    idle.sendall(HEALTH)
    assert Reader(idle).response()[0] == 200
    busy = Legit(srv)              # a request every 50 ms throughout
    head = HEALTH
    expect_408 = slow + [trickle_head, trickle_body]
    expect_silent = silent + [idle]
    closed_at, got = {}, {}
    poller = select.poll()
    for s in expect_408 + expect_silent:
        poller.register(s, select.POLLIN)
    by_fd = {s.fileno(): s for s in expect_408 + expect_silent}
    rss_during = rss_kib(pid)
    deadline, sent, t_next = t0 + (idle_ms / 1000) + 2 * slack_s, 0, t0
    while len(closed_at) < len(by_fd) and time.monotonic() < deadline:
        if time.monotonic() >= t_next:
            t_next += 0.05
            if trickle_head.fileno() not in closed_at and sent < len(head):
                trickle_head.sendall(head[sent:sent + 1])
                sent += 1
            if trickle_body.fileno() not in closed_at:
                trickle_body.sendall(b"x")
            busy.p99_us(1)
        for fd, _ in poller.poll(10):
            s = by_fd[fd]
            try:
                data = s.recv(65536)
            except ConnectionResetError:
                data = b""
            got[fd] = got.get(fd, b"") + data
            if not data:
                closed_at[fd] = time.monotonic()
                poller.unregister(fd)
    assert len(closed_at) == len(by_fd), f"{len(by_fd) - len(closed_at)} never closed"
    for s in expect_408:
        assert got[s.fileno()].startswith(b"HTTP/1.1 408 Request Timeout\r\n"), got[s.fileno()][:40]
        assert b"Connection: close" in got[s.fileno()]
        assert request_ms / 1000 <= closed_at[s.fileno()] - t0 <= request_ms / 1000 + slack_s
    assert sent < len(head)  # cut off before the head was complete: a total deadline
    for s in silent:
        assert got[s.fileno()] == b""
        assert request_ms / 1000 <= closed_at[s.fileno()] - t0 <= request_ms / 1000 + slack_s
    assert got[idle.fileno()] == b""
    assert idle_ms / 1000 <= closed_at[idle.fileno()] - t_idle <= idle_ms / 1000 + slack_s
    assert busy.wrong == 0  # served every 50 ms throughout, never cut off
    busy.p99_us(10)
    t_408 = [closed_at[s.fileno()] - t0 for s in expect_408]
    t_silent = [closed_at[s.fileno()] - t0 for s in silent]
    t_idle_closed = closed_at[idle.fileno()] - t_idle
    for s in expect_408 + expect_silent:
        s.close()
    busy.close()
    wait_fds(srv, lambda n: n <= fd0, f"back to {fd0}")
    print(f"\ntimeouts: 408 + close {min(t_408):.2f}-{max(t_408):.2f} s after the start, "
          f"silent close {min(t_silent):.2f}-{max(t_silent):.2f} s, idle close {t_idle_closed:.2f} s "
          f"after its request; trickled head cut at {sent} of {len(head)} bytes; RSS "
          f"{mib(rss0)} -> {mib(rss_during)} -> {mib(rss_kib(pid))} MiB")
    conns, refused, timed_out = stop_tally(srv)
    assert (refused, timed_out) == (0, len(expect_408) + len(expect_silent))
