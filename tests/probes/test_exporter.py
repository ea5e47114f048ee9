"""tailtrace --listen: the --aggregate histograms served to Prometheus.

Ground truth by construction (tests/probes/busy.c): 3 SCHED_RR threads pinned to
one CPU take turns in 100 ms slices, so each preemption is followed by ~200 ms
runnable (the two others' slices), and the kernel's own RUSAGE_THREAD counts say
how many involuntary switches there were. Then the process sleeps, so the counts
stop moving and the last scrape must equal what the run directory records.
The Prometheus test scrapes with Debian's `prometheus` itself, every second.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from analyze.explain.waits import reason_codes
from tt_run import HELPERS, TAILTRACE, free_port, helper, needs_root, read_line

pytestmark = needs_root
THREADS, SPIN_S = 3, 2.5
LINE = re.compile(r'^([a-z_]+)(?:\{(.*)\})? (\S+)$')


def parse(text: str) -> list[tuple[str, dict, float]]:
    """(name, labels, value) of every sample of a Prometheus text exposition."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = LINE.match(line)
        assert m, f"unparsable line: {line!r}"
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        out.append((m.group(1), labels, float(m.group(3))))
    return out


def pick(samples, name: str, **want) -> list[tuple[dict, float]]:
    return [(l, v) for n, l, v in samples if n == name and all(l.get(k) == x for k, x in want.items())]


@contextmanager
def exporter(out: Path, *args: str):
    """tailtrace --listen 127.0.0.1:0 ARGS running; yields (its metrics URL, the process,
    the target's pid or None). Its stdout is the -- CMD's (unbuffered pipe)."""
    p = subprocess.Popen([str(TAILTRACE), "--out", str(out), "--listen", "127.0.0.1:0", *args],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
    try:
        pid, line = None, read_line(p.stderr, r"attached |serving metrics on http://", 30)
        if "attached to PID" in line:
            pid = int(re.search(r"PID (\d+)", line).group(1))
        if "serving" not in line:
            line = read_line(p.stderr, r"serving metrics on http://", 30)
        yield re.search(r"(http://\S+)", line).group(1), p, pid
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
        p.wait(timeout=30)
        p.stdout.close()
        p.stderr.close()


@contextmanager
def spinners(linger_s: float = 60):
    """tt-busy: THREADS SCHED_RR spinners on CPU 0 for SPIN_S, then asleep for linger_s.
    They start when go() is called (a tracer attached first sees all their switches)."""
    p = subprocess.Popen([helper("busy"), str(THREADS), str(SPIN_S), "0", str(linger_s), "gate"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    p.go = lambda: (p.stdin.write(b"go\n"), p.stdin.close())
    try:
        yield p
    finally:
        p.kill()
        p.wait()
        p.stdout.close()
        if not p.stdin.closed:
            p.stdin.close()


def nonvoluntary(tid: int) -> int:
    """The thread's involuntary context switches, as the kernel counts them."""
    status = Path(f"/proc/{tid}/task/{tid}/status").read_text()
    return int(re.search(r"^nonvoluntary_ctxt_switches:\s+(\d+)", status, re.M).group(1))


def spin_result(stdout) -> list[dict]:
    """The spinners' JSON lines from their stdout, once they are done (then they sleep)."""
    return [json.loads(read_line(stdout, r"^\{", 30)) for _ in range(THREADS)]


# what Prometheus 2.42 sends when it scrapes
PROMETHEUS_ACCEPT = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
                     "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
OPENMETRICS = "application/openmetrics-text; version=1.0.0"


def scrape(url: str, accept: str | None = None, want: str = "text/plain; version=0.0.4") -> str:
    req = urllib.request.Request(url, headers={"Accept": accept} if accept is not None else {})
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith(want), r.headers["Content-Type"]
        return r.read().decode()


def test_wait_reasons_are_the_analysis_classes():
    """The BPF side's syscall -> reason table (probes/sched/wait_reason.h) is
    analyze/explain/waits.py's."""
    dump = HELPERS / "wait_reason_dump"
    assert dump.exists(), f"{dump} missing: build first"
    rows = np.array([line.split() for line in subprocess.run(
        [str(dump)], capture_output=True, text=True, check=True).stdout.splitlines()], dtype=int)
    assert np.array_equal(rows[:, 1], reason_codes(rows[:, 0]))
    assert set(rows[:, 1]) == {0, 1, 2, 3}


@pytest.mark.serial
def test_exposition_counts_the_spinners(tmp_path):
    with spinners() as busy, exporter(tmp_path, "--pid", str(busy.pid)) as (url, _, _):
        busy.go()
        threads = spin_result(busy.stdout)
        time.sleep(0.3)  # the last switches of the spinners' exit
        text = scrape(url)
        main_nivcsw = nonvoluntary(busy.pid)
    if shutil.which("promtool"):
        check = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                               text=True)
        assert check.returncode == 0, check.stdout + check.stderr
    s = parse(text)
    pid = str(busy.pid)
    (labels, invol), = pick(s, "tailtrace_context_switches_total", pid=pid, kind="involuntary")
    assert labels["comm"] == "tt-busy"
    # every involuntary switch the kernel counted is a preemption with a run-queue wait: the
    # spinners' (read at the end of their windows: one more each as they exit, measured
    # +3 in 8 of 8 runs) and the main thread's (while it starts them). A switch-in that never
    # reached the tracepoint is unmatched; its wait is still counted when the kernel's own
    # accounting is read (--listen under tp_btf), else not.
    nivcsw = sum(t["nivcsw"] for t in threads)
    assert nivcsw >= 10, "the spinners were hardly preempted: nothing to check"
    unmatched = sum(v for _, v in pick(s, "tailtrace_unmatched_events_total"))
    assert nivcsw - unmatched <= invol <= nivcsw + 3 + main_nivcsw + unmatched, (
        invol, nivcsw, unmatched, main_nivcsw)
    # ... and a spinner waits out the two others' 100 ms RR slices: those waits, over 131 ms,
    # hold most of the wait time. (Not most of the waits: on a busy machine the kernel's fair
    # server lets ordinary tasks preempt the spinners for microseconds, dozens of times, and a
    # CI run's median wait read 65 us.) A shorter wait is at most its bucket's bound.
    buckets = dict((float(l["le"]), v) for l, v in pick(
        s, "tailtrace_runqueue_latency_seconds_bucket", pid=pid, kind="preempt"))
    (_, count), = pick(s, "tailtrace_runqueue_latency_seconds_count", pid=pid, kind="preempt")
    assert count == invol
    (_, total), = pick(s, "tailtrace_runqueue_latency_seconds_sum", pid=pid, kind="preempt")
    les = sorted(le for le in buckets if le <= 0.131072)
    short_max = sum(le * (buckets[le] - (buckets[p] if p else 0))  # each at most its bucket's le
                    for p, le in zip([None] + les[:-1], les))
    assert count - buckets[0.131072] >= 5, sorted(buckets.items())
    assert short_max <= 0.5 * total, (short_max, total, sorted(buckets.items()))
    # tailtrace's own series
    assert pick(s, "tailtrace_cpu_seconds_total", part="bpf")[0][1] > 0
    assert pick(s, "tailtrace_build_info")
    # every map that can fill, with its refusals (none here) and its size
    assert pick(s, "tailtrace_map_full_total", map="tasks")[0][1] == 0
    assert pick(s, "tailtrace_map_entries", map="tasks")[0][1] == 65536
    assert pick(s, "tailtrace_map_entries", map="runq_hist")[0][1] == 16384


@pytest.mark.serial
def test_openmetrics_is_negotiated_and_strictly_valid(tmp_path):
    """Prometheus asks for OpenMetrics first: the exporter answers in it when the Accept
    header ranks it above the text format, and prometheus_client's strict OpenMetrics
    parser (an implementation of the spec that is not ours) reads the very samples the
    text format has."""
    om_parser = pytest.importorskip("prometheus_client.openmetrics.parser",
                                    reason="pip install prometheus-client (install-deps does)")
    with spinners() as busy, exporter(tmp_path, "--pid", str(busy.pid)) as (url, _, _):
        busy.go()
        spin_result(busy.stdout)
        time.sleep(0.3)
        text = scrape(url)
        om = scrape(url, PROMETHEUS_ACCEPT, want=OPENMETRICS)
        for accept in ("", "text/plain", "*/*", "application/openmetrics-text;version=0.0.1",
                       "text/plain;q=0.9,application/openmetrics-text;q=0.5"):
            assert not scrape(url, accept).endswith("# EOF\n"), accept
        assert scrape(url, "application/openmetrics-text", want=OPENMETRICS).endswith("# EOF\n")
    assert om.endswith("\n# EOF\n")
    families = {f.name: f for f in om_parser.text_string_to_metric_families(om)}
    assert families["tailtrace_context_switches"].type == "counter"
    assert families["tailtrace_runqueue_latency_seconds"].type == "histogram"
    pid = str(busy.pid)
    om_samples = {(x.name, tuple(sorted(x.labels.items()))): x.value
                  for f in families.values() for x in f.samples if x.labels.get("pid") == pid}
    text_samples = {(n, tuple(sorted(l.items()))): v for n, l, v in parse(text) if l.get("pid") == pid}
    assert len(text_samples) > 50 and om_samples == text_samples


@pytest.mark.serial
def test_top_n_folds_the_rest_into_other(tmp_path):
    with spinners() as busy, exporter(tmp_path, "--all", "--top", "2") as (url, _, _):
        busy.go()
        spin_result(busy.stdout)
        s = parse(scrape(url))
    own = {l["pid"] for l, _ in pick(s, "tailtrace_context_switches_total") if l["comm"] != "other"}
    assert 1 <= len(own) <= 2, own
    other = pick(s, "tailtrace_context_switches_total", comm="other", kind="voluntary")
    assert other and other[0][1] > 0
    assert pick(s, "tailtrace_processes", state="folded")[0][1] > 0
    assert pick(s, "tailtrace_processes", state="labelled")[0][1] == len(own)


HOPS = 100


def hopper_migrations(url: str, linger_s: int) -> tuple[float, float]:
    """tt-hopper moves itself between two CPUs HOPS times (>= HOPS - 1 migrations by
    construction, tests/probes/hopper.c), then lingers linger_s seconds. Its migration count
    in a scrape made while it lingers (None without one) and in one made after it exited."""
    hop = subprocess.Popen([helper("hopper"), str(HOPS), str(linger_s)], stdout=subprocess.PIPE,
                           bufsize=0)
    try:
        read_line(hop.stdout, r"^\{", 30)
        live = parse(scrape(url)) if linger_s else None
        hop.wait(timeout=30)
        time.sleep(0.3)  # its last switch
        gone = parse(scrape(url))
    finally:
        hop.kill()
        hop.wait()
        hop.stdout.close()
    count = lambda s: sum(v for _, v in pick(s, "tailtrace_migrations_total", pid=str(hop.pid)))
    return (count(live) if live else None), count(gone)


@pytest.mark.serial
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_migrations_reach_the_exposition_live_and_after_exit(tmp_path):
    """Under tp_btf a thread counts in its own task storage; the counts must reach the
    maps both while it lives (each collection drains the threads) and when it exits
    (its storage goes with it: moved at its last switch)."""
    with exporter(tmp_path, "--comm", "tt-hopper") as (url, _, _):
        live, after = hopper_migrations(url, 2)
        _, exited_only = hopper_migrations(url, 0)  # never read while alive
    assert HOPS - 1 <= live <= 3 * HOPS, live
    assert live <= after <= 3 * HOPS, (live, after)
    assert HOPS - 1 <= exited_only <= 3 * HOPS, exited_only


def spawn_with_pid(pid: int, cmd: list[str], tries: int = 20) -> subprocess.Popen:
    """cmd started as process `pid` (free): the kernel's last-pid counter set just below it.
    Another fork on the machine may take it first: then try again."""
    for _ in range(tries):
        Path("/proc/sys/kernel/ns_last_pid").write_text(str(pid - 1))
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
        if p.pid == pid:
            return p
        p.kill()
        p.wait()
    pytest.skip(f"could not get pid {pid} back in {tries} tries (a busy machine forks too much)")


def series_of(url: str, pid: int, comm: str, timeout: float = 20) -> list:
    """Scrape until pid's voluntary-switch series carries comm; all samples of the last scrape."""
    end = time.monotonic() + timeout
    while True:
        s = parse(scrape(url))
        if pick(s, "tailtrace_context_switches_total", pid=str(pid), comm=comm,
                kind="voluntary"):
            return s
        assert time.monotonic() < end, (
            f"no series for pid {pid} comm {comm}: "
            f"{[l for l, _ in pick(s, 'tailtrace_context_switches_total', pid=str(pid))]}")
        time.sleep(0.5)


def test_reused_pid_gets_a_new_series(tmp_path):
    """A labelled process exits and a new one takes its pid before the next read: the
    maps (keyed by pid) carry on, but the series must restart under the new name, not
    count the new process as the old one."""
    if not Path("/proc/sys/kernel/ns_last_pid").exists():
        pytest.skip("no /proc/sys/kernel/ns_last_pid (CONFIG_CHECKPOINT_RESTORE off)")
    renamed = tmp_path / "tt-reuse-b"  # comm = the executable's name
    shutil.copy(helper("sleeper"), renamed)
    sleeps = ["200000", "1000"]  # 1 ms sleeps for up to 200 s: a steady stream of switches
    with exporter(tmp_path / "run", "--all", "--top", "500") as (url, _, _):
        a = subprocess.Popen([helper("sleeper"), *sleeps], stdout=subprocess.DEVNULL)
        try:
            series_of(url, a.pid, "tt-sleeper")
            time.sleep(0.5)  # start times tick at 10 ms: B must not start in A's tick
        finally:
            a.kill()
            a.wait()
        b = spawn_with_pid(a.pid, [str(renamed), *sleeps])  # before the exporter reads again
        try:
            time.sleep(1)
            s = series_of(url, b.pid, "tt-reuse-b")
        finally:
            b.kill()
            b.wait()
    assert not pick(s, "tailtrace_context_switches_total", pid=str(b.pid), comm="tt-sleeper")
    assert pick(s, "tailtrace_pid_reuses_total")[0][1] >= 1
    (_, vol), = pick(s, "tailtrace_context_switches_total", pid=str(b.pid), comm="tt-reuse-b",
                     kind="voluntary")
    assert vol >= 100  # ~1000 1-ms sleeps a second, counted under the new name


@contextmanager
def prometheus(tmp_path: Path, target: str):
    """Debian's prometheus on loopback, scraping target every second."""
    exe = shutil.which("prometheus")
    if not exe:
        pytest.skip("prometheus not installed (scripts/install-deps.sh installs it)")
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                   "scrape_configs:\n  - job_name: tailtrace\n    static_configs:\n"
                   f"      - targets: ['{target}']\n")
    port = free_port()
    p = subprocess.Popen([exe, f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                          f"--web.listen-address=127.0.0.1:{port}"],
                         stdout=subprocess.DEVNULL, stderr=open(tmp_path / "prometheus.log", "w"))
    api = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"{api}/-/ready", timeout=1)
                break
            except OSError:
                time.sleep(0.2)
        else:
            raise AssertionError((tmp_path / "prometheus.log").read_text()[-2000:])
        yield api
    finally:
        p.terminate()
        p.wait(timeout=30)


def query(api: str, promql: str) -> list[dict]:
    url = f"{api}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url, timeout=10) as r:
        body = json.load(r)
    assert body["status"] == "success", body
    return body["data"]["result"]


def scalar(api: str, promql: str) -> float:
    res = query(api, promql)
    assert len(res) == 1, (promql, res)
    return float(res[0]["value"][1])


def quantile_from_buckets(q: float, les: list[float], cum: list[float]) -> float:
    """Prometheus' histogram_quantile: linear inside the bucket holding rank q * count."""
    rank, lo = q * cum[-1], 0.0
    for i, (le, c) in enumerate(zip(les, cum)):
        if c >= rank:
            below = cum[i - 1] if i else 0.0
            return lo + (le - lo) * (rank - below) / (c - below)
        lo = le
    return les[-1]


@pytest.mark.serial
def test_prometheus_agrees_with_the_run_directory(tmp_path):
    with spinners() as busy, exporter(tmp_path / "run", "--pid", str(busy.pid)) as (url, tt, _):
        target = urllib.parse.urlparse(url).netloc
        with prometheus(tmp_path, target) as api:
            busy.go()
            spin_result(busy.stdout)
            # a scrape 1.5 s after the counts stopped moving (Prometheus starts scraping
            # only once its discovery has run, a few seconds after it is ready)
            settled = time.time() + 1.5
            for _ in range(120):
                res = query(api, 'timestamp(up{job="tailtrace"})')
                if res and float(res[0]["value"][1]) >= settled:
                    break
                time.sleep(0.25)
            else:
                raise AssertionError("Prometheus did not scrape tailtrace within 30 s")
            assert scalar(api, 'up{job="tailtrace"}') == 1
            sel = f'pid="{busy.pid}"'
            p50, p99 = (scalar(api, f"histogram_quantile({q}, sum by (le) "
                                    f"(tailtrace_runqueue_latency_seconds_bucket{{{sel}{kind}}}))")
                        for q, kind in ((0.5, ',kind="preempt"'), (0.99, "")))
            vol = scalar(api, f'tailtrace_context_switches_total{{{sel},kind="voluntary"}}')
            runq = scalar(api, f"sum(tailtrace_runqueue_latency_seconds_count{{{sel}}})")
            scrapes = scalar(api, 'count_over_time(up{job="tailtrace"}[1m])')
        tt.send_signal(signal.SIGINT)
        assert tt.wait(timeout=30) == 0, tt.stderr.read().decode()
    agg = json.loads((tmp_path / "run" / "aggregate.json").read_text())["metrics"]
    # --listen keeps one histogram per process: its entry has tid = pid
    mine = {m: [t for t in agg[m]["threads"] if t["tid"] == busy.pid] for m in ("runq", "offcpu")}
    assert len(mine["runq"]) == 1 and len(mine["offcpu"]) == 1
    assert runq == mine["runq"][0]["count"] and vol == mine["offcpu"][0]["count"]
    # the run directory's p99, computed as Prometheus does on the same buckets (le = 2^k us)
    b = {x["hi"] + 1: x["count"] for x in mine["runq"][0]["buckets"]}
    les = [2.0 ** k * 1e-6 for k in range(1, 26)]
    cum = list(np.cumsum([b.get(int(round(le * 1e6)), 0) for le in les]))
    truth = quantile_from_buckets(0.99, les, cum)
    assert 0.5 <= p99 / truth <= 2, (p99, truth)  # within one (log2) bucket
    # the 200 ms RR waits: with ~40 waits in all, the p99 is the longest one, in (131, 262] ms,
    # which host steal or the fair server's 50 ms for CPU 0's other tasks can push one bucket
    # up. (Their median is not asserted: on a quiet machine ~2/3 of the preemptions are RR
    # waits, but beside a busy neighbour the fair server adds dozens of microsecond ones.)
    assert p50 <= 0.262 * 1.01, p50
    assert 0.131 <= p99 <= 0.524 * 1.01, p99


def test_listen_errors_are_one_line(tmp_path):
    p = subprocess.run([str(TAILTRACE), "--top", "5", "--all"], capture_output=True, text=True)
    assert p.returncode == 2 and "--top goes with --listen" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    p = subprocess.run([str(TAILTRACE), "--out", str(tmp_path), "--listen", "nowhere", "--all"],
                       capture_output=True, text=True)
    assert p.returncode == 1 and "expected HOST:PORT" in p.stderr, p.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        p = subprocess.run([str(TAILTRACE), "--out", str(tmp_path), "--listen",
                            f"127.0.0.1:{port}", "--all"], capture_output=True, text=True)
    assert p.returncode == 1 and "choose another port" in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_deploy_examples_are_valid():
    """deploy/prometheus: the scrape config and the recording rules docs/fleet.md gives."""
    if not shutil.which("promtool"):
        pytest.skip("promtool not installed (package prometheus; scripts/install-deps.sh)")
    deploy = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
    for args in (["check", "rules", str(deploy / "tailtrace.rules.yml")],
                 ["check", "config", str(deploy / "prometheus.yml")]):
        p = subprocess.run(["promtool", *args], capture_output=True, text=True)
        assert p.returncode == 0, p.stdout + p.stderr


@contextmanager
def untraced_hog(n: int, cpu: int):
    """tt-hog: n SCHED_OTHER spinners pinned to cpu, not traced; yields its pid."""
    p = subprocess.Popen([helper("hog"), str(n), "30", str(cpu), "gate"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        m = re.match(r"ready (\d+)", p.stdout.readline())
        assert m, "tt-hog did not start"
        p.stdin.write("go\n")
        p.stdin.flush()
        yield int(m[1])
    finally:
        p.kill()
        p.wait()


def antagonist_scrape(tmp_path: Path, *args: str) -> tuple[int, int, list]:
    """Two traced spinners and an untraced hog's three on one CPU, scraped after 2 s of
    their 3: (the victim's pid, the hog's pid, the samples)."""
    cpu = max(os.sched_getaffinity(0))
    with untraced_hog(3, cpu) as hog, exporter(
            tmp_path, "--events", "runq,switch,offcpu,cpu", *args, "--", helper("hog"), "2", "3",
            str(cpu)) as (url, _, victim):
        time.sleep(2)
        s = parse(scrape(url))
    return victim, hog, s


def wait_sums(s, victim: int) -> tuple[list, float]:
    """The victim's antagonist rows and its run-queue latency histogram's sum (both kinds)."""
    rows = pick(s, "tailtrace_runqueue_wait_by_antagonist_seconds_total", pid=str(victim))
    runq = sum(v for _, v in pick(s, "tailtrace_runqueue_latency_seconds_sum", pid=str(victim)))
    return rows, runq


@pytest.mark.serial
def test_runqueue_wait_is_served_by_antagonist(tmp_path):
    """With the cpu event, --listen splits each wait in the kernel: Σ over antagonists is the
    run-queue latency histogram's own sum (the same waits, read in one collection), the
    untraced hog is named with its pid and class other and holds most of it (3 of the 4
    other threads on that CPU), and the sibling spinner holds its share."""
    victim, hog, s = antagonist_scrape(tmp_path)
    rows, runq = wait_sums(s, victim)
    total = sum(v for _, v in rows)
    assert runq > 1.0, runq  # two spinners of five on one CPU for ~2 s: ~3 s waited
    assert total == pytest.approx(runq, rel=0.05), (total, runq)
    (labels, hog_s), = [(l, v) for l, v in rows if l["antagonist_pid"] == str(hog)]
    assert labels["class"] == "other" and labels["antagonist"] == "tt-hog", labels
    assert hog_s >= 0.5 * total, rows
    sib = sum(v for l, v in rows if l["class"] == "sibling")
    assert sib >= 0.05 * total, rows
    assert pick(s, "tailtrace_lost_events_total", stream="cpu")[0][1] == 0


def test_antagonists_beyond_top_fold_into_other(tmp_path):
    victim, hog, s = antagonist_scrape(tmp_path, "--top", "1")
    rows, runq = wait_sums(s, victim)
    named = [l for l, _ in rows if l["antagonist"] != "other"]
    assert len(named) <= 1, rows
    assert any(l["antagonist"] == "other" for l, _ in rows), rows  # the hog or the sibling
    assert sum(v for _, v in rows) == pytest.approx(runq, rel=0.05)
