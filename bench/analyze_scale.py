#!/usr/bin/env python3
"""Scale benchmark of the analysis: the core (load + decompose + attribute; reported
apart, lock chains, scheduler views, the critical path and the wait objects), and the
full report (everything `python3 -m analyze report` writes, figures included), cold.

Target: 10M scheduler intervals + 1M requests in ≤ 60 s and ≤ 6 GiB peak RSS
on a 2-core machine. By default "10M scheduler intervals" is taken as
10M off-CPU intervals (switches.bin) *and* one runnable interval for each
(runq.bin): 20M scheduler records, as a real trace of 10M context switches has.

Synthetic data is written in a temporary run directory with the schema's
dtypes (schema.json from build/common/tt-schema), by a child process; the
analysis then runs in a fresh child process twice (cold: .bin -> DataFrames +
parquet cache written; warm: parquet cache read), each reporting its own wall
time per phase and its peak RSS (resource.getrusage ru_maxrss); then the cache
is removed and the full report is built cold in a fresh child (build_report).
Targets: the core ≤ 60 s and ≤ 6 GiB; the full report ≤ 30 s and ≤ 3 GB (2,861 MiB).

  python3 bench/analyze_scale.py                   # full size (on a quiet machine)
  python3 bench/analyze_scale.py --scale 0.1       # 1M intervals, 100k requests
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


def generate(run_dir: Path, n_intervals: int, n_requests: int, n_threads: int, seed: int) -> dict:
    """Write requests/switches/runq/locks/tasks .bin files; returns the counts written."""
    from analyze.load.schema import load_schema, record_dtype
    schema = load_schema()
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "schema.json").write_text(json.dumps(schema))
    rng = np.random.default_rng(seed)
    files = {k: open(run_dir / schema["records"][k]["file"], "wb")
             for k in ("request", "switch", "runq", "lock", "task")}
    for k, f in files.items():
        f.write(_header(schema, k))
    dt = {k: record_dtype(schema, k) for k in files}
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
        tk = np.zeros(1, dt["task"])
        tk["pid"], tk["tid"], tk["comm"] = 999, tid, f"pool-w{i}".encode()
        files["task"].write(tk.tobytes())
        counts["switch"] += per_iv
        counts["runq"] += per_iv
        counts["request"] += per_rq
        counts["lock"] += per_rq
        counts["task"] += 1
        t_end_all = max(t_end_all, int(t_on[-1]))
    for f in files.values():
        f.close()
    meta = {"mono_start_ns": T0 - 1, "mono_end_ns": t_end_all + 1, "lost_events": {},
            "events": counts, "ncpus": 2}
    (run_dir / "meta.json").write_text(json.dumps(meta))
    return counts


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
    """The full report, as `python3 -m analyze report` writes it: wall s and peak RSS."""
    from analyze.pipeline import build_report
    t = time.perf_counter()
    summary = build_report(run_dir)
    return {"report_s": time.perf_counter() - t,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "trace_events": summary.get("trace", {}).get("events"),
            "trace_mb": (run_dir / "trace.json").stat().st_size / 1e6}


def _child(args: list[str]) -> dict:
    out = subprocess.run([sys.executable, __file__] + args, check=True, capture_output=True,
                         text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=float, default=1.0,
                    help="fraction of full size (10M intervals, 1M requests); default 1")
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
        print(json.dumps(generate(Path(a._gen), n_iv, n_rq, a.threads, a.seed)))
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
        counts = _child(["--_gen", str(run_dir), "--scale", str(a.scale),
                         "--threads", str(a.threads), "--seed", str(a.seed)])
        print(f"generated in {time.perf_counter() - t:.1f} s: {counts['switch']} switches, "
              f"{counts['runq']} runq, {counts['request']} requests, {counts['lock']} locks, "
              f"{a.threads} threads -> {run_dir}")
        ok = True
        for label in ("cold (bin + cache write)", "warm (parquet cache)"):
            r = _child(["--_analyse", str(run_dir)])
            print(f"{label:26s} load {r['load_s']:6.2f} s  decompose {r['decompose_s']:6.2f} s  "
                  f"attribute {r['attribute_s']:5.2f} s  total {r['total_s']:6.2f} s  "
                  f"peak RSS {r['peak_rss_mib']:7.0f} MiB  closure {r['closure_ratio']:.4f}")
            print(f"{'':26s} (outside the target: lock chains {r['lockchain_s']:.2f} s for "
                  f"{r['lock_chains']} waits, threads/locks/runq views {r['sched_views_s']:.2f} s, "
                  f"critical path {r['critpath_s']:.2f} s for {r['critpath_segments']} "
                  f"segments, {r['wait_objects']} wait objects {r['wait_objects_s']:.2f} s, "
                  f"peak RSS with them {r['peak_rss_all_mib']:.0f} MiB)")
            ok &= r["total_s"] <= 60 and r["peak_rss_mib"] <= 6 * 1024 and r["closure_ratio"] == 1.0
        print("headline:", r["headline"])
        at = "" if a.scale == 1 else f"(at scale {a.scale})"
        print("target (full size): ≤ 60 s and ≤ 6144 MiB, every request closes:",
              "MET" if ok else "NOT MET", at)
        if not a.no_report:
            shutil.rmtree(run_dir / ".cache", ignore_errors=True)
            r = _child(["--_report", str(run_dir)])
            met = r["report_s"] <= 30 and r["peak_rss_mib"] <= REPORT_RSS_MIB
            print(f"{'full report (cold)':26s} total {r['report_s']:6.2f} s  peak RSS "
                  f"{r['peak_rss_mib']:7.0f} MiB  trace.json {r['trace_events']} events, "
                  f"{r['trace_mb']:.1f} MB")
            print(f"target (full size): ≤ 30 s and ≤ {REPORT_RSS_MIB:.0f} MiB (3 GB):",
                  "MET" if met else "NOT MET", at)
            ok &= met
        return 0 if ok else 1
    finally:
        if not a.keep:
            shutil.rmtree(run_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
