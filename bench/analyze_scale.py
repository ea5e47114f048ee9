#!/usr/bin/env python3
"""Scale benchmark of the analysis: the core (load + decompose + attribute; reported
apart, lock chains, scheduler views, the critical path and the wait objects), and the
full report (everything `python3 -m analyze report` writes, figures included).

Targets on this 2-core machine: the core, 10M scheduler intervals + 1M requests, in ≤ 60 s
and ≤ 6 GiB; the full report in ≤ 30 s and ≤ 3 GB (2,861 MiB); a span-heavy run (--spans
400000) reported in ≤ 5 s. "10M scheduler intervals" is 10M off-CPU intervals
(switches.bin) *and* one runnable interval for each (runq.bin): 20M scheduler records, as a
real trace of 10M context switches has. The exit status is 1 when a target is missed, at
the full sizes (--scale 1, --spans 400000 or more); a smaller run is judged on closure alone.

Synthetic data is written in a temporary run directory with the schema's dtypes
(schema.json from build/common/tt-schema) by a child process; the core runs in a fresh
child (its wall time per phase, its peak RSS from getrusage), then the full report in
another, tuned as the command line tunes it, with each phase's time and peak
(analyze/load/phases.py, the table `report --timings` prints).

  python3 bench/analyze_scale.py                   # full size (on a quiet machine)
  python3 bench/analyze_scale.py --scale 0.1       # 1M intervals, 100k requests
  python3 bench/analyze_scale.py --spans 400000 --threads 64   # span-heavy (MariaDB shape)
  python3 bench/analyze_scale.py --keep DIR        # keep the run directory
"""
from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

T0 = 10_000_000_000_000  # 10 000 s after boot
REPORT_RSS_MIB = 3e9 / 2**20   # the full report's target: 3 GB


def _header(schema: dict, kind: str) -> bytes:
    rec = schema["records"][kind]
    return (schema["magic"].encode().ljust(8, b"\0") + int(rec["type"]).to_bytes(4, "little")
            + int(rec["size"]).to_bytes(4, "little"))


def _open_streams(run_dir: Path, kinds) -> tuple[dict, dict]:
    """The record files of a synthetic run (headers written) and their dtypes."""
    from analyze.load.schema import load_schema, record_dtype
    schema = load_schema()
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "schema.json").write_text(json.dumps(schema))
    files = {k: open(run_dir / schema["records"][k]["file"], "wb") for k in kinds}
    for k, f in files.items():
        f.write(_header(schema, k))
    return files, {k: record_dtype(schema, k) for k in kinds}


def _write_task(files: dict, dt: dict, pid: int, tid: int, comm: str) -> None:
    tk = np.zeros(1, dt["task"])
    tk["pid"], tk["tid"], tk["comm"] = pid, tid, comm.encode()
    files["task"].write(tk.tobytes())


def _close_streams(run_dir: Path, files: dict, counts: dict, t_end_ns: int) -> dict:
    """Close the files and write meta.json (the run's span and counts); the counts."""
    for f in files.values():
        f.close()
    meta = {"mono_start_ns": T0 - 1, "mono_end_ns": t_end_ns + 1, "lost_events": {},
            "events": counts, "ncpus": 2}
    (run_dir / "meta.json").write_text(json.dumps(meta))
    return counts


def generate(run_dir: Path, n_intervals: int, n_requests: int, n_threads: int, seed: int) -> dict:
    """Write requests/switches/runq/locks/tasks .bin files; returns the counts written."""
    rng = np.random.default_rng(seed)
    files, dt = _open_streams(run_dir, ("request", "switch", "runq", "lock", "task"))
    per_iv, per_rq = n_intervals // n_threads, n_requests // n_threads
    counts = dict.fromkeys(files, 0)
    t_end_all = T0
    for i in range(n_threads):
        tid = 1000 + i
        # Thread timeline: on-CPU gap (mean 20 µs), then off-CPU (mean 80 µs) whose last
        # part is runnable: 25 % preempted (runnable all along), else woken part-way.
        on = rng.exponential(20_000, per_iv).astype(np.int64) + 1
        offd = rng.exponential(80_000, per_iv).astype(np.int64) + 1
        t_off = T0 + np.cumsum(on + offd) - offd
        t_on = t_off + offd
        pre = rng.random(per_iv) < 0.25
        t_rn = np.where(pre, t_off, t_off + (offd * rng.random(per_iv)).astype(np.int64))
        sw = np.zeros(per_iv, dt["switch"])
        sw["t_off_ns"], sw["t_on_ns"], sw["pid"], sw["tid"] = t_off, t_on, 999, tid
        sw["cpu_off"] = sw["cpu_on"] = i % 2
        sw["kstack_id"] = sw["ustack_id"] = -1
        sw["voluntary"] = ~pre
        sw["prev_state"] = np.where(pre, 0, 1)
        # wait reasons: poll / read / futex; preemptions have none
        sw["syscall"] = np.where(pre, -1, rng.choice([7, 0, 202], per_iv, p=[0.6, 0.2, 0.2]))
        sw["wait_addr"] = np.where(sw["syscall"] == 202, 0x5000 + 64 * (i % 4), 5)
        files["switch"].write(sw.tobytes())
        rq = np.zeros(per_iv, dt["runq"])
        rq["t_runnable_ns"], rq["t_run_ns"], rq["pid"], rq["tid"] = t_rn, t_on, 999, tid
        rq["cpu"], rq["kind"] = i % 2, pre.astype(np.uint8)
        # woken by the next thread (a task), so every wait has a traced waker to follow
        rq["waker_tid"] = np.where(pre, 0, 1000 + (i + 1) % n_threads)
        rq["waker_pid"] = np.where(pre, 0, 999)
        rq["waker_ctx"] = np.where(pre, 0, 1)
        files["runq"].write(rq.tobytes())
        # Requests back to back over the thread's timeline, random lengths.
        span = int(t_on[-1] - T0)
        cuts = np.sort(rng.integers(0, span, per_rq - 1)) + T0
        starts = np.concatenate([[T0], cuts])
        ends = np.concatenate([cuts, [T0 + span]])
        rr = np.zeros(per_rq, dt["request"])
        rr["id"] = np.arange(per_rq) + i * per_rq
        rr["t_start_ns"], rr["t_end_ns"] = starts, ends
        rr["t_enqueue_ns"] = starts - rng.integers(0, 50_000, per_rq)
        rr["conn"], rr["tid"], rr["pid"], rr["status"], rr["bytes"] = i, tid, 999, 200, 64
        files["request"].write(rr.tobytes())
        # One lock wait per request, at its start (2 µs .. 30 µs).
        lw = np.zeros(per_rq, dt["lock"])
        lw["mutex"], lw["pid"], lw["tid"] = 0x5000 + 64 * (i % 4), 999, tid
        lw["t_request_ns"] = starts
        lw["t_acquired_ns"] = starts + rng.integers(2_000, 30_000, per_rq)
        lw["t_released_ns"] = lw["t_acquired_ns"] + 1_000
        lw["ustack_id"], lw["flags"] = -1, 2
        files["lock"].write(lw.tobytes())
        _write_task(files, dt, 999, tid, f"pool-w{i}")
        counts["switch"] += per_iv
        counts["runq"] += per_iv
        counts["request"] += per_rq
        counts["lock"] += per_rq
        counts["task"] += 1
        t_end_all = max(t_end_all, int(t_on[-1]))
    return _close_streams(run_dir, files, counts, t_end_all)


def generate_spans(run_dir: Path, n_spans: int, n_threads: int, seed: int) -> dict:
    """A span-heavy run, as a server traced with --span gives (Redis: 589k calls of 1 µs on
    one thread in 5 s; MariaDB: 80k statements over dozens of threads): spans.bin instead of
    requests.bin. Each thread serves spans of ~10 µs back to back; between two spans it waits
    for the next client request in poll 20% of the time (off CPU ~100 µs, woken by the next
    thread), else goes on within ~2 µs; 5% of the spans block inside on a futex (~30 µs).
    Every off-CPU interval has its switch record and its wakeup, so the parts add up."""
    rng = np.random.default_rng(seed)
    kinds = ("span", "switch", "runq", "task")
    files, dt = _open_streams(run_dir, kinds)
    per = n_spans // n_threads
    counts = dict.fromkeys(kinds, 0)
    t_end_all = T0
    for i in range(n_threads):
        tid = 2000 + i
        dur = rng.exponential(10_000, per).astype(np.int64) + 500
        idle = rng.random(per) < 0.2                    # waits for the next request
        gap = np.where(idle, rng.exponential(100_000, per), rng.exponential(2_000, per))
        gap = gap.astype(np.int64) + 100
        inner = rng.random(per) < 0.05                  # blocks inside the span
        block = np.where(inner, rng.exponential(30_000, per).astype(np.int64) + 1_000, 0)
        start = T0 + np.cumsum(gap + dur + block) - dur - block
        end = start + dur + block
        sp = np.zeros(per, dt["span"])
        sp["t_start_ns"], sp["t_end_ns"], sp["pid"], sp["tid"] = start, end, 1999, tid
        sp["end_tid"], sp["ret"] = tid, 1
        files["span"].write(sp.tobytes())
        # off-CPU: before each idle span (poll, in the gap) and inside each blocking one
        # (futex, from a third of its run)
        t_off = np.concatenate([start[idle] - gap[idle] + 50, start[inner] + dur[inner] // 3])
        t_on = np.concatenate([start[idle] - 20, start[inner] + dur[inner] // 3 + block[inner]])
        nr = np.concatenate([np.full(idle.sum(), 7), np.full(inner.sum(), 202)])
        order = np.argsort(t_off)
        t_off, t_on, nr = t_off[order], t_on[order], nr[order]
        n = len(t_off)
        sw = np.zeros(n, dt["switch"])
        sw["t_off_ns"], sw["t_on_ns"], sw["pid"], sw["tid"] = t_off, t_on, 1999, tid
        sw["cpu_off"] = sw["cpu_on"] = i % 2
        sw["kstack_id"] = sw["ustack_id"] = -1
        sw["voluntary"], sw["prev_state"], sw["syscall"] = 1, 1, nr
        sw["wait_addr"] = np.where(nr == 202, 0x7000 + 64 * (i % 8), 5)
        files["switch"].write(sw.tobytes())
        rq = np.zeros(n, dt["runq"])
        rq["t_runnable_ns"] = t_on - (t_on - t_off) // 10   # a tenth of the wait runnable
        rq["t_run_ns"], rq["pid"], rq["tid"], rq["cpu"] = t_on, 1999, tid, i % 2
        waker = (2000 + (i + 1) % n_threads, 1999) if n_threads > 1 else (1500, 1500)
        rq["waker_tid"], rq["waker_pid"], rq["waker_ctx"] = *waker, 1
        files["runq"].write(rq.tobytes())
        _write_task(files, dt, 1999, tid, f"conn-{i}")
        counts["span"] += per
        counts["switch"] += n
        counts["runq"] += n
        counts["task"] += 1
        t_end_all = max(t_end_all, int(end[-1]))
    return _close_streams(run_dir, files, counts, t_end_all)


def analyse(run_dir: Path) -> dict:
    """Load + decompose + attribute; wall seconds per phase and peak RSS."""
    from analyze.explain.attribute import df_bands, spearman_runnable, tail_excess
    from analyze.render.words import headline
    from analyze.explain.findings import Findings
    from analyze.explain.decompose import df_decompose
    from analyze.load.load import load_run
    t = [time.perf_counter()]
    run = load_run(run_dir)
    t.append(time.perf_counter())
    d = df_decompose(run)
    t.append(time.perf_counter())
    b = df_bands(d)
    te = tail_excess(d)
    rho = spearman_runnable(d)
    h = headline(Findings(run, d, b))
    t.append(time.perf_counter())
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    # Not part of the target, reported apart: the other views report.py builds.
    from analyze.explain.lockchain import df_lock_chains
    from analyze.explain.sched import df_locks, df_runq_hist, df_threads
    chains = df_lock_chains(run, d)
    t.append(time.perf_counter())
    df_threads(run), df_locks(run), df_runq_hist(run)
    t.append(time.perf_counter())
    from analyze.explain.critpath import df_critical_path, df_wait_objects
    cp, segs = df_critical_path(run, d)
    t.append(time.perf_counter())
    objs = df_wait_objects(run)
    t.append(time.perf_counter())
    return {"rows": {s: len(getattr(run, s)) for s in ("requests", "switches", "runq", "locks")},
            "load_s": t[1] - t[0], "decompose_s": t[2] - t[1], "attribute_s": t[3] - t[2],
            "total_s": t[3] - t[0], "closure_ratio": float(d["closes"].mean()),
            "peak_rss_mib": rss, "lockchain_s": t[4] - t[3], "lock_chains": len(chains),
            "sched_views_s": t[5] - t[4], "critpath_s": t[6] - t[5],
            "critpath_segments": len(segs), "wait_objects_s": t[7] - t[6],
            "wait_objects": len(objs),
            "peak_rss_all_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "excess_ms": te["excess_ms"], "spearman_runnable": rho, "headline": h}


def report(run_dir: Path) -> dict:
    """The full report as `python3 -m analyze report` writes it (its memory tuning too): wall
    s, each phase's time and peak (analyze/load/phases.py) and the peak of them all."""
    from analyze.load.heap import heap_tune
    from analyze.load.phases import Phases
    from analyze.pipeline import build_report
    heap_tune()
    phases = Phases()
    t = time.perf_counter()
    summary = build_report(run_dir, phases=phases)
    return {"report_s": time.perf_counter() - t,
            "peak_rss_mib": max(p.peak_mib or 0 for p in phases.rows),
            "phases": phases.table(),
            "trace_events": summary.get("trace", {}).get("events"),
            "trace_mb": (run_dir / "trace.json").stat().st_size / 1e6,
            "perfetto_mb": (run_dir / "trace.perfetto-trace").stat().st_size / 1e6
            if (run_dir / "trace.perfetto-trace").exists() else 0.0}


def _child(args: list[str]) -> dict:
    out = subprocess.run([sys.executable, __file__] + args, check=True, capture_output=True,
                         text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=float, default=1.0,
                    help="fraction of full size (10M intervals, 1M requests); default 1")
    ap.add_argument("--spans", type=int, metavar="N",
                    help="a span-heavy run instead: N spans over --threads threads "
                         "(e.g. --spans 400000 --threads 64, a MariaDB shape; --threads 1, Redis)")
    ap.add_argument("--threads", type=int, default=100, help="threads (default 100)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", metavar="DIR", help="write the run here and keep it")
    ap.add_argument("--_gen", help=argparse.SUPPRESS)
    ap.add_argument("--no-report", action="store_true", help="skip the full report")
    ap.add_argument("--_analyse", help=argparse.SUPPRESS)
    ap.add_argument("--_report", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    n_iv, n_rq = int(10_000_000 * a.scale), int(1_000_000 * a.scale)
    if a._gen:
        counts = (generate_spans(Path(a._gen), a.spans, a.threads, a.seed) if a.spans else
                  generate(Path(a._gen), n_iv, n_rq, a.threads, a.seed))
        print(json.dumps(counts))
        return 0
    if a._analyse:
        print(json.dumps(analyse(Path(a._analyse))))
        return 0
    if a._report:
        print(json.dumps(report(Path(a._report))))
        return 0
    run_dir = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="tt-scale-"))
    try:
        t = time.perf_counter()
        gen = ["--_gen", str(run_dir), "--scale", str(a.scale), "--threads", str(a.threads),
               "--seed", str(a.seed)] + (["--spans", str(a.spans)] if a.spans else [])
        counts = _child(gen)
        what = (f"{counts['span']} spans" if a.spans else
                f"{counts['request']} requests, {counts['lock']} locks")
        print(f"generated in {time.perf_counter() - t:.1f} s: {counts['switch']} switches, "
              f"{counts['runq']} runq, {what}, {a.threads} threads -> {run_dir}")
        r = _child(["--_analyse", str(run_dir)])
        print(f"{'core':26s} load {r['load_s']:6.2f} s  decompose {r['decompose_s']:6.2f} s  "
              f"attribute {r['attribute_s']:5.2f} s  total {r['total_s']:6.2f} s  "
              f"peak RSS {r['peak_rss_mib']:7.0f} MiB  closure {r['closure_ratio']:.4f}")
        print(f"{'':26s} (outside the target: lock chains {r['lockchain_s']:.2f} s for "
              f"{r['lock_chains']} waits, threads/locks/runq views {r['sched_views_s']:.2f} s, "
              f"critical path {r['critpath_s']:.2f} s for {r['critpath_segments']} "
              f"segments, {r['wait_objects']} wait objects {r['wait_objects_s']:.2f} s, "
              f"peak RSS with them {r['peak_rss_all_mib']:.0f} MiB)")
        ok = r["closure_ratio"] == 1.0
        print("headline:", r["headline"])
        # the time and memory targets are for the sizes they name: smaller runs (the tests'
        # smoke runs, on a busy machine) print them but are judged on closure alone
        full_size = a.spans >= 400_000 if a.spans else a.scale == 1
        at = "" if full_size else "(not judged below the full size)"
        if a.spans:
            print("every span closes:", "MET" if ok else "NOT MET")
        else:
            met = r["total_s"] <= 60 and r["peak_rss_mib"] <= 6 * 1024
            print("target (full size): ≤ 60 s and ≤ 6144 MiB, every request closes:",
                  "MET" if ok and met else "NOT MET", at)
            ok &= met or not full_size
        if not a.no_report:
            r = _child(["--_report", str(run_dir)])
            limit_s = 5 if a.spans else 30
            met = r["report_s"] <= limit_s and r["peak_rss_mib"] <= REPORT_RSS_MIB
            print(r["phases"])
            print(f"{'full report':26s} total {r['report_s']:6.2f} s  peak RSS "
                  f"{r['peak_rss_mib']:7.0f} MiB  trace.json {r['trace_events']} events, "
                  f"{r['trace_mb']:.1f} MB; trace.perfetto-trace {r['perfetto_mb']:.1f} MB")
            print(f"target: ≤ {limit_s} s and ≤ {REPORT_RSS_MIB:.0f} MiB (3 GB):",
                  "MET" if met else "NOT MET", at)
            ok &= met or not full_size
        return 0 if ok else 1
    finally:
        if not a.keep:
            shutil.rmtree(run_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
