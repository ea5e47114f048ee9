"""Command line: `python3 -m analyze report RUN_DIR` / `compare RUN_DIR...` / `captures DIR`
/ `export otlp RUN_DIR` (tailtrace-analyze).

Exit status: 0 done, 2 bad input, 1 a file could not be read or written (disk full,
read-only directory) or an OTLP endpoint refused the spans; either way one line
`analyze: <message>` on stderr.
"""
from __future__ import annotations

import argparse
import errno
import sys

from .load.errors import AnalysisError, ExportError

EXIT_BAD_INPUT = 2
EXIT_WRITE_FAILED = 1


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python3 -m analyze",
        description="tailtrace analysis: split each request's latency into queue wait, on-CPU, "
                    "runnable, lock wait and blocked time, and tie scheduler delay to the P99.")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    r = sub.add_parser("report", help="analyse one run directory and write its report",
                       description="Writes report.html, summary.json, threads.csv, locks.csv, "
                                   "trace.perfetto-trace and trace.json (Perfetto), "
                                   "profiles/*.pb.gz (pprof) and the report's PNGs into RUN_DIR; "
                                   "prints the headline and a short table.")
    r.add_argument("run_dir", metavar="RUN_DIR")
    r.add_argument("--no-plots", action="store_true", help="skip the PNG figures (faster)")
    r.add_argument("--timings", action="store_true",
                   help="print each phase's wall time and peak memory to stderr")
    c = sub.add_parser("compare", help="compare runs side by side",
                       description="Prints one row per run (throughput, avg, P99, max, ≥P99 "
                                   "runnable share) and writes compare.html + percentiles.png.")
    c.add_argument("run_dirs", metavar="RUN_DIR", nargs="+")
    c.add_argument("--out", metavar="DIR", default=".",
                   help="where to write compare.html and percentiles.png (default: .)")
    c.add_argument("--no-plots", action="store_true", help="skip percentiles.png")
    k = sub.add_parser("captures", help="report every capture of a flight-recorder run",
                       description="Runs `report` in each DIR/captures/NNNN and writes "
                                   "DIR/captures.html: the captures by time, their latency, "
                                   "the threshold that fired, and each one's headline.")
    k.add_argument("run_dir", metavar="DIR")
    k.add_argument("--no-plots", action="store_true", help="skip the PNG figures (faster)")
    k.add_argument("--otlp", metavar="URL",
                   help="also send each capture's triggering requests as OTLP spans to URL "
                        "(e.g. http://127.0.0.1:4318/v1/traces)")
    k.add_argument("--follow", action="store_true",
                   help="with --otlp: send each capture's triggering requests as soon as the "
                        "recorder lists it, until the recorder (--recorder-pid) exits; no "
                        "reports (run `captures DIR` for them); counts in DIR/otlp.json")
    k.add_argument("--recorder-pid", metavar="PID", type=int,
                   help="with --follow: the recorder to follow (default: until SIGINT/SIGTERM)")
    x = sub.add_parser("export", help="send a run's requests to a tracing backend",
                       description="otlp: one span per request, its latency split into parts "
                                   "as attributes (tailtrace.<part>_ns), a child span per wait "
                                   "on its critical path, a link to the request that woke it; "
                                   "OTLP/HTTP protobuf to --endpoint or OTLP/JSON lines to "
                                   "--file. Ids come from the run and the request: exporting "
                                   "again sends the same spans (docs/export.md).")
    x.add_argument("format", choices=["otlp"])
    x.add_argument("run_dir", metavar="RUN_DIR")
    dest = x.add_mutually_exclusive_group()
    dest.add_argument("--endpoint", metavar="URL",
                      help="OTLP/HTTP traces endpoint (default http://127.0.0.1:4318/v1/traces)")
    dest.add_argument("--file", metavar="OUT", help="write OTLP/JSON lines to OUT instead")
    x.add_argument("--service", metavar="NAME",
                   help="service.name of the spans (default: the traced process's name)")
    return p


def format_summary(s: dict) -> str:
    """Headline and a short table (what `report` prints)."""
    from .render.fmt import fmt_errors, fmt_int, fmt_run_ms, req_unit_for

    if not s.get("requests"):
        return _format_sched_only(s)
    lat, e2e, q = s.get("latency_ms") or {}, s.get("e2e_ms") or {}, s.get("queue_wait_ms") or {}
    cols = ["avg", "p50", "p90", "p99", "p999", "max"]
    unit, scale = req_unit_for(s)   # µs when the tail is under a millisecond, as report.html
    lines = [s.get("headline") or "", "",
             f"{unit:<12}" + "".join(f"{c:>9}" for c in ["avg", "P50", "P90", "P99", "P99.9",
                                                          "max"])]
    for name, d in (("service", lat), ("end to end", e2e), ("queue wait", q)):
        lines.append(f"{name:<12}" + "".join(
            f"{fmt_run_ms(None if d.get(c) is None else d.get(c) * scale):>9}" for c in cols))
    lines.append(f"\n{fmt_int(s.get('requests'))} requests, {fmt_errors(s.get('errors'))} errors, "
                 f"{fmt_int(s.get('throughput_rps'))} requests/s"
                 + (f", {s['closure_ratio']:.1%} close" if s.get("closure_ratio") is not None
                    else ""))
    return "\n".join(lines + _wait_lines(s))


def _wait_lines(s: dict, k: int = 2) -> list:
    """The k longest waits of the whole run (summary.json wait_objects), one line each."""
    from .render.words import wait_object_line
    objs = (s.get("wait_objects") or [])[:k]
    return ["", "Longest waits, all traced threads:"] + [f"  {wait_object_line(o)}"
                                                         for o in objs] if objs else []


def _format_sched_only(s: dict) -> str:
    """What `report` prints for a run without requests: the scheduler's figures."""
    from .render.fmt import fmt_int, fmt_us

    sch = s.get("sched") or {}
    return "\n".join([
        s.get("headline") or "", "", s.get("note") or "", "",
        f"threads: {fmt_int(s.get('threads'))}; run-queue latency P50 "
        f"{fmt_us(sch.get('runq_p50_us'))}, P99 {fmt_us(sch.get('runq_p99_us'))}; "
        f"switches: {fmt_int(sch.get('voluntary'))} voluntary, "
        f"{fmt_int(sch.get('involuntary'))} involuntary; "
        f"migrations: {fmt_int(sch.get('migrations'))}"] + _wait_lines(s))


def _report(args) -> int:
    from .load.phases import Phases
    from .pipeline import build_report

    phases = Phases() if args.timings else None
    try:
        s = build_report(args.run_dir, plots=not args.no_plots, phases=phases)
    finally:
        if phases is not None:
            print(phases.table(), file=sys.stderr)
    print(format_summary(s))
    for w in s.get("warnings") or []:
        print(f"warning: {w}")
    print(f"wrote {', '.join(s.get('outputs') or [])} in {args.run_dir}")
    return 0


def _compare(args) -> int:
    from .render.compare import format_table
    from .pipeline import write_compare
    from .render.sweep import df_knee, df_seed_table, knee_sentences, seed_table_markdown

    df, files = write_compare(args.run_dirs, args.out, plots=not args.no_plots)
    print(format_table(df))
    md = seed_table_markdown(df_seed_table(df))
    if md:
        print("\nThe seed's comparison (end to end, ms):\n" + md, end="")
    for line in knee_sentences(df_knee(df)):
        print(line)
    print(f"wrote {', '.join(files)}")
    return 0


def _captures(args) -> int:
    from .pipeline import build_captures
    if args.follow or args.recorder_pid:
        return _follow(args)

    df = build_captures(args.run_dir, plots=not args.no_plots, otlp=args.otlp)
    for r in df.sort_values("t_start_ns").itertuples():
        print(f"{r.dir}  +{r.t_s:,.1f} s  {r.worst_ns / 1e6:,.3f} ms: {r.headline}")
    print(f"{len(df)} captures; wrote captures.html in {args.run_dir}")
    if args.otlp:
        print(f"exported {int(df['otlp_spans'].sum()):,} spans of {len(df)} captures' "
              f"triggering requests to {args.otlp}")
    return 0


def _follow(args) -> int:
    """captures --follow: exit 1 when spans were dropped (counted in DIR/otlp.json)."""
    import signal
    import threading
    from .pipeline import follow_captures
    if not args.follow or not args.otlp:
        raise AnalysisError("--follow sends to an OTLP endpoint: give --follow --otlp URL "
                       "(--recorder-pid goes with --follow)")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    c = follow_captures(args.run_dir, args.otlp, args.recorder_pid, stop)
    line = (f"otlp: {c['sent_spans']:,} spans of {c['captures']} captures sent to {args.otlp}")
    if c["dropped_spans"]:
        line += f"; {c['dropped_spans']:,} dropped ({c['last_error']})"
    if c["captures_failed"]:
        line += f"; {c['captures_failed']} captures not analysed ({c['capture_error']})"
    print(line, file=sys.stderr)
    return 1 if c["dropped_spans"] or c["captures_failed"] else 0


def _export(args) -> int:
    from .pipeline import export_run
    from .render.otlp import DEFAULT_ENDPOINT

    n = export_run(args.run_dir, endpoint=args.endpoint, file=args.file, service=args.service)
    where = args.file or args.endpoint or DEFAULT_ENDPOINT
    joined = (f"; {n['in_callers_traces']:,} in their callers' traces (traceparent)"
              if n.get("in_callers_traces") else "")
    if n.get("under_service_spans"):
        joined += f", {n['under_service_spans']:,} under the services' own spans (traceresponse)"
    print(f"exported {n['requests']:,} requests as {n['spans']:,} spans ({n['waits']:,} waits, "
          f"{n['links']:,} links) in {n['batches']} batches to {where}{joined}")
    return 0


def main(argv=None) -> int:
    from .load.heap import heap_tune

    args = _parser().parse_args(argv)
    heap_tune()   # this process is ours: the library itself changes no process setting
    try:
        return {"report": _report, "compare": _compare, "captures": _captures,
                "export": _export}[args.cmd](args)
    except ExportError as e:
        print(f"analyze: {e}", file=sys.stderr)
        return EXIT_WRITE_FAILED
    except AnalysisError as e:
        print(f"analyze: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        return 0
    except OSError as e:  # mostly writing the outputs into a full or read-only directory
        where = f"{e.filename}: " if e.filename else ""
        fix = ("; free space or copy the run directory somewhere writable"
               if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS) else "")
        print(f"analyze: {where}{e.strerror or e}{fix}", file=sys.stderr)
        return EXIT_WRITE_FAILED


if __name__ == "__main__":
    sys.exit(main())
