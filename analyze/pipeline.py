"""The pipeline: load → explain → render, and the files each command writes.

The stages (analyze/load, analyze/explain, analyze/render) import one way; this module
drives them, for one run (`report`), several runs side by side (`compare`) and a flight
recorder's captures (`captures`).

`build_report(run_dir, plots=True) -> dict` writes into the run directory:
summary.json (first, so it survives a later failure, then completed),
threads.csv, locks.csv, trace.json, trace.perfetto-trace, profiles/*.pb.gz, the
report's PNGs and report.html, and returns the summary. A run without probes still
gets all of them: the client-side figures, and "needs probes" where the scheduler is
required.
A run without requests (tailtrace on a third-party process without --span)
gets the scheduler-only report: summary.json (requests 0, latency null,
attribution "needs requests or --span"), threads.csv, locks.csv, trace.json
with thread-state tracks only, the scheduler figures and report.html with a
line at the top saying how to get requests. Only a run with no probe stream
and no request is an error.

`write_compare(run_dirs, out_dir, plots=True) -> (table, files)` analyses each run
(`df_compare`) and writes compare.html, percentiles.png, workers.png and sweep.md
(render/compare.py, render/sweep.py). `build_captures(dir, plots=True)` reports every capture
that load/captures.py lists in a flight-recorder run and writes DIR/captures.html
(render/captures.py).
"""
from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from .load.captures import df_captures
from .load.errors import AnalysisError
from .load.heap import heap_trim
from .load.phases import NoPhases, Phases
from .load.load import PROBE_STREAMS, load_run, per_run_release, thread_names
from .explain.antagonists import df_occupancy, traced_pids
from .explain.attribute import df_bands
from .explain.critpath import CP_COLS, df_critical_path, df_wait_objects
from .explain.decompose import df_decompose
from .explain.states import drop_reason_sets
from .explain.findings import Findings
from .explain.lockchain import df_lock_chains
from .explain.peer import df_peer_runnable
from .explain.sched import (LOCK_COLS, THREAD_COLS, df_cpu_placement, df_locks, df_runq_hist,
                            df_threads)
from .render import otlp, pftrace, plot, pprof
from .render.captures import cause_of, render_index, who_of
from .render.compare import compare_table, render_compare
from .render.html import ReportInputs, write_report
from .render.perfetto import df_thread_states, write_trace
from .render.summary import (cut_note, has_sched, report_summary, run_info, span_notes,
                             uprobe_warnings, with_outputs)
from .render.sweep import df_knee, df_seed_table, seed_table_markdown

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


def analyse(run, lock_chains: bool = False, phases: Phases | None = None) -> dict:
    """The computed frames of one loaded run (no files written); with lock_chains also
    df_lock_chains' ("chains", None without locks). The interval sets are let go of once
    nothing more needs them: the lock chains measure whole thread states (every set), so
    they come first; the wait objects' hops and the critical path's need five sets, and
    nothing needs any after them (0.7 GB at 10M switches). The wait objects come before
    the critical path: their transient arrays (one per wait) then do not stack on its
    segments. The waits go once the summary is made. phases: where the time goes."""
    ph = phases or NoPhases()
    with ph.phase("decompose"):
        decomp = df_decompose(run)
        peer = df_peer_runnable(run, decomp)
        decomp[list(peer.columns)] = peer
    with ph.phase("lock chains"):
        chains = (_frame(df_lock_chains, run, decomp) if lock_chains and run.has("locks")
                  else None)
    drop_reason_sets(run)
    heap_trim()
    if decomp.empty and not any(run.has(s) for s in PROBE_STREAMS):
        raise AnalysisError(f"{run.path}: no requests recorded (requests.bin and spans.bin are "
                            "empty) and no scheduler stream: check that the workload ran and "
                            "reached the server")
    with ph.phase("wait objects"):
        objs = (jsonable(df_wait_objects(run).to_dict("records"))
                if run.has("switches") and run.has("runq") else None)
    heap_trim()
    with ph.phase("critical path"):
        cp, segs = df_critical_path(run, decomp)
        decomp[CP_COLS] = cp
    per_run_release(run, "_state_sets")
    with ph.phase("summary"):
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


def _profiles(run, out: Path, threads) -> list[str]:
    """profiles/*.pb.gz (render/pprof.py); [] with a warning when protobuf is missing."""
    try:
        return pprof.write_profiles(run, out, threads)
    except ImportError as e:
        print(f"analyze: warning: no pprof profiles ({e}): run scripts/install-deps.sh",
              file=sys.stderr)
        return []


def _perfetto_trace(findings, out: Path) -> list[str]:
    """trace.perfetto-trace (render/pftrace.py); [] with a warning when perfetto is missing."""
    try:
        pftrace.write_perfetto_trace(findings, out / pftrace.TRACE_FILE)
    except ImportError as e:
        print(f"analyze: warning: no {pftrace.TRACE_FILE} ({e}): run scripts/install-deps.sh",
              file=sys.stderr)
        return []
    return [pftrace.TRACE_FILE]


def _links(out: Path) -> list[str]:
    fixed = ["flame-oncpu.svg", "flame-offcpu.svg"]
    diffs = sorted(p.name for p in out.glob("diff-*.svg"))
    rest = [pftrace.TRACE_FILE, "trace.json",
            *[f"{pprof.PROFILES_DIR}/{n}" for n in pprof.PROFILES],
            "summary.json", "threads.csv", "locks.csv"]
    return [n for n in fixed + diffs + rest if (out / n).exists()]


def build_report(run_dir, plots: bool = True, phases: Phases | None = None) -> dict:
    """Analyse run_dir and write every output into it; returns the summary dict. phases: a
    Phases to fill with each phase's time and peak memory."""
    out = Path(run_dir)
    ph = phases or NoPhases()
    with ph.phase("load"):
        run = load_run(out)
    return _build_report(out, run, plots, ph)


def _build_report(out: Path, run, plots: bool, ph: Phases) -> dict:
    a = analyse(run, lock_chains=True, phases=ph)
    decomp = a["decomp"]
    write_json(out / "summary.json", with_outputs(a["summary"], []))  # before anything can fail

    sched = has_sched(run)
    with ph.phase("tables"):
        tables = _tables(run, a, sched)
        write_csv(out / "threads.csv", tables["threads"])
        write_csv(out / "locks.csv", tables["locks"])
    with ph.phase("pprof profiles"):
        profiles = _profiles(run, out, tables["threads"] if sched else None)
    heap_trim()
    with ph.phase("trace.json"):
        info = write_trace(a["findings"], out / "trace.json")
    heap_trim()
    with ph.phase("perfetto trace"):
        native = _perfetto_trace(a["findings"], out)
    heap_trim()
    notes = _notes(run, decomp)
    with ph.phase("figures"):
        images = _plots(out, a, tables, notes) if plots else {}
    heap_trim()
    summary = with_outputs(a["summary"], ["summary.json", "threads.csv", "locks.csv", "trace.json",
                                          *native, *profiles, *[PLOTS[k] for k in images],
                                          "report.html"], info)
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
    with ph.phase("report.html"):
        write_report(out / "report.html", inp)
    return summary


def _tables(run, a: dict, sched: bool) -> dict:
    """The report's tables: threads, locks, lock chains, run-queue histogram, placement."""
    return {"threads": _frame(df_threads, run) if sched else pd.DataFrame(columns=THREAD_COLS),
            "locks": _frame(df_locks, run) if run.has("locks") else pd.DataFrame(columns=LOCK_COLS),
            "chains": a["chains"] if a["chains"] is not None else pd.DataFrame(),
            "runq_hist": _frame(df_runq_hist, run) if run.has("runq") else pd.DataFrame(),
            "placement": _frame(df_cpu_placement, run) if run.has("switches")
            else pd.DataFrame()}


def _notes(run, decomp: pd.DataFrame) -> list[str]:
    """The report's notes: the run's warnings, a cut run, the spans', no scheduler streams."""
    notes = list(getattr(run, "warnings", []) or []) + uprobe_warnings(run.meta or {})
    if run.cut is not None:
        note = cut_note(run.cut)
        notes.insert(0, note[0].upper() + note[1:] + ".")
    if run.source == "spans":
        notes += [n[0].upper() + n[1:] + "." for n in span_notes(run)]
    if not has_sched(run):
        notes.append("No scheduler streams (runq.bin, switches.bin) in this run: the "
                     "client-side figures are shown; attribution, threads and CPU placement "
                     "need probes (run under tailtrace)." if len(decomp) else
                     "No scheduler streams (runq.bin, switches.bin) in this run: threads, "
                     "run-queue latency and CPU placement need tailtrace --events runq,switch.")
    return notes


def df_compare(run_dirs) -> tuple[pd.DataFrame, dict]:
    """(table, {label: decomposition}) of the given run directories (compare.compare_table)."""
    if not run_dirs:
        raise AnalysisError("compare needs at least one run directory")
    return compare_table([analyse(load_run(d)) for d in run_dirs])


def write_compare(run_dirs, out_dir, plots: bool = True) -> tuple[pd.DataFrame, list[str]]:
    """Write compare.html (+ percentiles.png) into out_dir; returns (table, files)."""
    df, decomps = df_compare(run_dirs)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = []
    png = None
    if plots:
        png = plot.plot_percentiles(decomps, out / "percentiles.png", column="e2e_ns",
                                    title="End-to-end latency by percentile, all runs")
        files.append(png)
    knee, knee_png = df_knee(df), None
    if plots and not knee.empty:
        knee_png = plot.plot_workers(knee, out / "workers.png")
        files.append(knee_png)
    md = seed_table_markdown(df_seed_table(df))
    if md:
        (out / "sweep.md").write_text(md, encoding="utf-8")
        files.append(str(out / "sweep.md"))
    html_path = out / "compare.html"
    tmp = html_path.with_name("compare.html.tmp")
    tmp.write_text(render_compare(df, png, knee_png), encoding="utf-8")
    os.replace(tmp, html_path)
    files.append(str(html_path))
    return df, files


def build_captures(run_dir, plots: bool = True, report=None,
                   otlp: str | None = None) -> pd.DataFrame:
    """Report every capture that was written, then DIR/captures.html; returns df_captures
    with cause, headline and who filled in. report(capture_dir, plots) -> summary dict
    (build_report by default). otlp: then send each capture's triggering requests (latency
    at or above its threshold) as OTLP spans to that endpoint (column otlp_spans)."""
    report = report or build_report
    d = Path(run_dir)
    df = df_captures(d)
    causes, heads, whos = [], [], []
    for r in df.itertuples():
        s = {}
        if r.error is None and (d / r.dir / "meta.json").exists():
            try:
                s = report(d / r.dir, plots)
            except AnalysisError as e:
                s = {"headline": f"(not analysed: {e})"}
        causes.append(cause_of(s))
        heads.append(s.get("headline") or (f"(not written: {r.error})" if r.error else ""))
        whos.append(who_of(s))
    df["cause"], df["headline"], df["who"] = causes, heads, whos
    (d / "captures.html").write_text(render_index(d, df), encoding="utf-8")
    if otlp:   # after every file is written: a refused export changes nothing in DIR
        df["otlp_spans"] = [_export_capture(d / r.dir, r.threshold_ns, otlp)
                            if r.error is None and (d / r.dir / "meta.json").exists() else 0
                            for r in df.itertuples()]
    return df


def _export_capture(cdir: Path, threshold_ns, endpoint: str) -> int:
    """The spans sent of one capture's triggering requests (latency ≥ its threshold)."""
    return export_run(cdir, endpoint=endpoint, min_latency_ns=threshold_ns or 0)["spans"]


def _export_rows(run_dir, min_latency_ns=None):
    """A run's analysis for export: (run, decomposition, critical-path segments, the rows to
    export: None for all, else those with a latency ≥ min_latency_ns)."""
    run = load_run(Path(run_dir))
    a = analyse(run)
    dec = a["decomp"]
    rows = None
    if min_latency_ns is not None:
        rows = dec.index[dec["latency_ns"].to_numpy(np.float64) >= float(min_latency_ns)]
    elif not len(dec):
        raise AnalysisError(f"{run_dir}: no requests to export (add --span BIN:SYMBOL to make "
                            "a function's calls the requests)")
    return run, dec, a["segments"], rows


def export_run(run_dir, endpoint: str | None = None, file=None, service: str | None = None,
               min_latency_ns=None) -> dict:
    """Send a run's requests (those with a latency ≥ min_latency_ns when given) as OTLP spans
    (render/otlp.py) to endpoint, or write them as OTLP/JSON lines to file; nothing in
    run_dir changes. The counts sent."""
    run, dec, segs, rows = _export_rows(run_dir, min_latency_ns)
    return otlp.export_otlp(run, dec, segs, endpoint=endpoint,
                            file=Path(file) if file else None, service=service, rows=rows)


FOLLOW_POLL_S = 0.25
FOLLOW_CLOSE_S = 15.0     # what is queued when the recorder ends: sent for this long at most


def _recording(d: Path, pid: int | None) -> bool:
    """Is the recorder still recording: its process alive (pid: None, not known) and its
    meta.json not yet marked finished (it waits for its follower after that)?"""
    if pid:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
    try:
        return not json.loads((d / "meta.json").read_text()).get("finished")
    except (OSError, ValueError):
        return True


def follow_captures(run_dir, endpoint: str, recorder_pid: int | None = None,
                    stop=None, queue=None) -> dict:
    """Send each capture's triggering requests (latency ≥ its threshold), explained, as OTLP
    spans as soon as the recorder lists the capture in captures.jsonl, through a queue that
    never blocks (render/otlp_queue.py); until the recorder (recorder_pid) has exited or
    marked its meta.json finished, or stop (a threading.Event) is set, and every capture
    listed by then is queued. The counts,
    also in DIR/otlp.json, rewritten after each capture and at the end."""
    from .load.captures import new_captures
    from .render.otlp_queue import SpanQueue
    d = Path(run_dir)
    q = queue or SpanQueue(endpoint)
    c = {"endpoint": endpoint, "captures": 0, "captures_failed": 0, "capture_error": ""}
    offset = 0
    while True:
        alive = _recording(d, recorder_pid) and not (stop and stop.is_set())
        rows, offset = new_captures(d / "captures.jsonl", offset)
        for r in rows:
            if r.get("error") is not None or not (d / r["dir"] / "meta.json").exists():
                continue
            try:
                run, dec, segs, keep = _export_rows(d / r["dir"], r.get("threshold_ns") or 0)
                msgs, _ = otlp.request_batches(run, dec, segs, rows=keep)
            except AnalysisError as e:
                c["captures_failed"] += 1
                c["capture_error"] = f"{r['dir']}: {e}"
                continue
            for m in msgs:
                q.put(m, sum(len(ss.spans) for rs in m.resource_spans for ss in rs.scope_spans))
            c["captures"] += 1
            _write_follow_counts(d, dict(c, **q.counts(), finished=False))
        if not alive and not rows:
            break
        if not rows:
            (stop.wait if stop else time.sleep)(FOLLOW_POLL_S)
    c.update(q.close(FOLLOW_CLOSE_S), finished=True)
    _write_follow_counts(d, c)
    return c


def _write_follow_counts(d: Path, c: dict) -> None:
    tmp = d / "otlp.json.tmp"
    tmp.write_text(json.dumps(c, indent=2) + "\n")
    tmp.replace(d / "otlp.json")
