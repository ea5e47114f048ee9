"""One run, every output: load → decompose → bands → summary → files.

`build_report(run_dir, plots=True) -> dict` writes into the run directory:
summary.json (first, so it survives a later failure, then completed),
threads.csv, locks.csv, trace.json, the report's PNGs and report.html, and
returns the summary. A run without probes still gets all of them: the
client-side figures, and "needs probes" where the scheduler is required.
A run without requests (tailtrace on a third-party process without --span)
gets the scheduler-only report: summary.json (requests 0, latency null,
attribution "needs requests or --span"), threads.csv, locks.csv, trace.json
with thread-state tracks only, the scheduler figures and report.html with a
line at the top saying how to get requests. Only a run with no probe stream
and no request is an error.
"""
from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from . import plot
from .attribute import df_bands
from .antagonists import df_occupancy, traced_pids
from .critpath import CP_COLS, df_critical_path, df_wait_objects
from .decompose import df_decompose, drop_reason_sets
from .findings import Findings
from .errors import AnalysisError
from .html import ReportInputs, write_report
from .heap import heap_trim
from .load import PROBE_STREAMS, cache_flush, load_run, per_run_release, thread_names
from .lockchain import df_lock_chains
from .peer import df_peer_runnable
from .perfetto import df_thread_states, write_trace
from .sched import LOCK_COLS, THREAD_COLS, df_cpu_placement, df_locks, df_runq_hist, df_threads
from .summary import (cut_note, goroutine_note, has_sched, report_summary, run_info,
                      uprobe_warnings, with_outputs)

PLOTS = {"percentiles": "percentiles.png", "decomposition": "decomposition.png",
         "timeline": "timeline.png", "runq_hist": "runq-hist.png",
         "cpu_placement": "cpu-placement.png", "critical_path": "critical-path.png"}


def jsonable(o):
    """summary → plain JSON: numpy scalars to Python, NaN/inf to null, keys to str."""
    if isinstance(o, dict):
        return {str(k): jsonable(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [jsonable(v) for v in o]
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (float, np.floating)):
        f = float(o)
        return None if math.isnan(f) or math.isinf(f) else f
    if isinstance(o, (np.bool_,)):
        return bool(o)
    if isinstance(o, pd.DataFrame):
        return jsonable(o.to_dict(orient="index"))
    return o


def write_json(path: Path, obj) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(jsonable(obj), indent=2, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def write_csv(path: Path, df: pd.DataFrame) -> None:
    tmp = path.with_name(path.name + ".tmp")
    df.to_csv(tmp, index=False)
    os.replace(tmp, path)


def analyse(run, lock_chains: bool = False) -> dict:
    """The computed frames of one loaded run (no files written); with lock_chains also
    df_lock_chains' ("chains", None without locks). The interval sets are let go of once
    nothing more needs them: the lock chains measure whole thread states (every set), so
    they come first; the wait objects' hops and the critical path's need five sets, and
    nothing needs any after them (0.7 GB at 10M switches). The wait objects come before
    the critical path: their transient arrays (one per wait) then do not stack on its
    segments. The waits go once the summary is made."""
    decomp = df_decompose(run)
    peer = df_peer_runnable(run, decomp)
    decomp[list(peer.columns)] = peer
    chains = (_frame(df_lock_chains, run, decomp) if lock_chains and run.has("locks")
              else None)
    drop_reason_sets(run)
    heap_trim()
    if decomp.empty and not any(run.has(s) for s in PROBE_STREAMS):
        raise AnalysisError(f"{run.path}: no requests recorded (requests.bin and spans.bin are "
                            "empty) and no scheduler stream: check that the workload ran and "
                            "reached the server")
    objs = (jsonable(df_wait_objects(run).to_dict("records"))
            if run.has("switches") and run.has("runq") else None)
    heap_trim()
    cp, segs = df_critical_path(run, decomp)
    decomp[CP_COLS] = cp
    per_run_release(run, "_state_sets")
    bands = df_bands(decomp) if len(decomp) else pd.DataFrame()
    f = Findings(run, decomp, bands, segs, objs)
    summary = report_summary(f)
    per_run_release(run, "_waits", "_followable")     # the critical path's (0.5 GB at 10M)
    if decomp.empty or not has_sched(run):
        bands = None
    return {"run": run, "decomp": decomp, "bands": bands, "summary": summary, "segments": segs,
            "findings": f, "chains": chains}


def _frame(fn, run, *args) -> pd.DataFrame:
    """A sched/lock table, or an empty one when its stream is absent."""
    try:
        return fn(run, *args)
    except AnalysisError:
        return pd.DataFrame()


def _plots(out: Path, a: dict, tables: dict, notes: list) -> dict:
    run, decomp = a["run"], a["decomp"]
    names = thread_names(run)
    t0 = run.meta.get("mono_start_ns") or None
    jobs = {}
    if len(decomp):   # client-side figures: only with requests
        jobs["percentiles"] = lambda p: plot.plot_percentiles(decomp, p)
        jobs["timeline"] = lambda p: plot.plot_timeline(decomp, p, t0_ns=t0)
    if a["bands"] is not None:
        jobs["decomposition"] = lambda p: plot.plot_decomposition(a["bands"], p)
    segs = a.get("segments")
    if segs is not None and len(segs) and segs["blame"].astype(bool).any():
        jobs["critical_path"] = lambda p: plot.plot_critical_path(
            decomp, segs, lambda win: df_thread_states(run, observed=decomp, windows=win), p,
            names=names,
            occ=df_occupancy(run) if run.has("occupancy") else None, traced=traced_pids(run))
    if run.has("runq"):
        jobs["runq_hist"] = lambda p: plot.plot_runq_hist(tables["runq_hist"], p)
    if run.has("switches") and not tables["placement"].empty:
        jobs["cpu_placement"] = lambda p: plot.plot_cpu_placement(tables["placement"], p,
                                                                  names=names)
    images = {}
    for name, fn in jobs.items():
        path = out / PLOTS[name]
        try:
            images[name] = fn(path)
        except Exception as e:  # one broken figure must not cost the whole report
            msg = f"figure {PLOTS[name]} could not be drawn: {type(e).__name__}: {e}"
            print(f"analyze: warning: {msg}", file=sys.stderr)
            notes.append(msg)
    return images


def _links(out: Path) -> list[str]:
    fixed = ["flame-oncpu.svg", "flame-offcpu.svg"]
    diffs = sorted(p.name for p in out.glob("diff-*.svg"))
    rest = ["trace.json", "summary.json", "threads.csv", "locks.csv"]
    return [n for n in fixed + diffs + rest if (out / n).exists()]


def build_report(run_dir, plots: bool = True, cache: bool | str = "background") -> dict:
    """Analyse run_dir and write every output into it; returns the summary dict. cache:
    as load_run's (by default a stale cache is written beside the analysis)."""
    out = Path(run_dir)
    try:   # the cache is written beside the analysis; waited for whatever happens
        return _build_report(out, load_run(out, cache=cache), plots)
    finally:
        cache_flush()


def _build_report(out: Path, run, plots: bool) -> dict:
    a = analyse(run, lock_chains=True)
    decomp = a["decomp"]
    write_json(out / "summary.json", with_outputs(a["summary"], []))  # before anything can fail

    sched = has_sched(run)
    tables = {"threads": _frame(df_threads, run) if sched else pd.DataFrame(columns=THREAD_COLS),
              "locks": _frame(df_locks, run) if run.has("locks")
              else pd.DataFrame(columns=LOCK_COLS),
              "chains": a["chains"] if a["chains"] is not None else pd.DataFrame(),
              "runq_hist": _frame(df_runq_hist, run) if run.has("runq") else pd.DataFrame(),
              "placement": _frame(df_cpu_placement, run) if run.has("switches")
              else pd.DataFrame()}
    write_csv(out / "threads.csv", tables["threads"])
    write_csv(out / "locks.csv", tables["locks"])
    heap_trim()
    info = write_trace(a["findings"], out / "trace.json")
    heap_trim()
    notes = list(getattr(run, "warnings", []) or []) + uprobe_warnings(run.meta or {})
    if run.cut is not None:
        note = cut_note(run.cut)
        notes.insert(0, note[0].upper() + note[1:] + ".")
    if run.source == "spans":
        notes.append("Span return values are not HTTP statuses: errors counts the calls that "
                     "did not return (a C++ exception or a longjmp left them); each request's "
                     "raw return value is in trace.json as 'ret'.")
        if (note := goroutine_note(run.requests)):
            notes.append(note[0].upper() + note[1:] + ".")
    if not has_sched(run):
        notes.append("No scheduler streams (runq.bin, switches.bin) in this run: the "
                     "client-side figures are shown; attribution, threads and CPU placement "
                     "need probes (run under tailtrace)." if len(decomp) else
                     "No scheduler streams (runq.bin, switches.bin) in this run: threads, "
                     "run-queue latency and CPU placement need tailtrace --events runq,switch.")
    images = _plots(out, a, tables, notes) if plots else {}
    heap_trim()
    summary = with_outputs(a["summary"], ["summary.json", "threads.csv", "locks.csv", "trace.json",
                                          *[PLOTS[k] for k in images], "report.html"], info)
    write_json(out / "summary.json", summary)
    inp = ReportInputs(
        summary=jsonable(summary), meta=run.meta, workload=run.workload, run_dir=str(out),
        run_info=run_info(out),
        bands=a["bands"], tail_excess=jsonable(a["findings"].tail_excess) if a["bands"] is not None
        else None, threads=tables["threads"], locks=tables["locks"], chains=tables["chains"],
        images=images, links=_links(out), trace_note=info.note,
        streams={s: run.has(s) for s in ("requests", "runq", "switches", "locks", "spans",
                                         "tasks")},
        notes=notes)
    write_report(out / "report.html", inp)
    return summary
