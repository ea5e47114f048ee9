"""summary.json: the run's figures in one JSON-ready dict.

Keys: workload, conns, workers, requests, errors, throughput_rps,
latency_ms{avg,p50,p90,p99,p999,max}, e2e_ms{avg,p50,p99,max},
queue_wait_ms{p50,p99,max}, attribution{band:{n, latency_ms, e2e_ms,
<part>_ms, <part>_share}}, headline, sched{runq_p50_us, runq_p99_us,
voluntary, involuntary, migrations}, threads, lost_events{stream:n},
closure_ratio, checks (attribute.check_summary: requests decomposed, closing, left out
of the bands and why, whether each band adds up, the slowest requests that failed a
check), plus source, tail_excess, spearman_runnable, warnings,
peer (null unless another process was traced with --also-pid: {pids, comms,
names, runnable_ms{band}, runnable_all_ms{band}, runnable_of_blocked{band}},
analyze/explain/peer.py), blocked_reasons{band: {lock_wait_ms, io_wait_ms, sleep_ms, other_ms}}
and critical_path{band: {waker_*_ms, irq_ms, unknown_ms, reason, what, who, sentence,
antagonists}} (analyze/explain/critpath.py; null without wait reasons / wakers), wait_objects (the
longest waits of the whole run, critpath.df_wait_objects rows), antagonists{band: {runnable_ms
(mean per request), by_class{class: share}, top[{pid, comm, cgroup, container, class, threads,
ms, share}], containers[{container, processes, ms, share}]}} (who held the CPU while the band's
requests were runnable, analyze/explain/antagonists.py; container: the label of the container the
process runs in, explain/containers.py; null without the cpu event), cpu_occupancy{runnable_ms, by_class, records, waits_truncated,
irq_recorded (the irq event: interrupts are a class of their own)}
(the same over every traced runnable interval), cpu_quotas (null, or per CPU quota over the
traced processes [{path, cgroup_version, quota_us, period_us, kernel_throttled_ms,
kernel_throttles (cpu.stat over the run), records_throttled_ms (the run-queue records' over the
same window), requests_throttled_ms}]:
cpu_quotas below), tailtrace_cost (what tracing cost the
machine, from meta.json cost: tailtrace_cost below; null without BPF statistics), cut (null,
or for a run whose recorder never finished {from_ns, to_ns, kept_s}: load.cut_span), and
note (runs without requests only).

summary.json as written is report_summary(f): summary_dict with e2e_ms and queue_wait_ms
completed to avg/p50/p90/p99/p999/max, attribution the string NEEDS_PROBES for a run with
requests but no scheduler stream, and label (run_label); then with_outputs(summary, outputs,
trace) adds outputs (the files written) and trace (what trace.json holds).
Percentiles are numpy's default (linear interpolation) over all requests.
NaN becomes null.

errors counts HTTP statuses outside 200..399 for requests.bin; with requests
built from spans (source "spans") the status is the function's raw return
value, so errors counts the calls that did not return (a C++ exception or a
longjmp left them) and span_ends{return, exception, longjmp, tailcall} says how
every call ended (null for other sources). Without requests
(source "none": tailtrace without --span) requests is 0, the latency fields
and errors are null, attribution is the string NEEDS_REQUESTS and the
headline describes the scheduler figures instead.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from ..load.frames import jit_stack_count
from ..load.load import SPAN_ENDS
from ..explain.antagonists import class_shares, df_runnable_occupants, has_occupancy
from ..explain.attribute import check_summary, dominant_blocked, spearman_runnable
from ..explain.decompose import PARTS, valid_requests
from ..explain.findings import Findings
from ..explain.handoff import df_ran_on
from ..explain.order import unique_of
from ..explain.sched import sched_figures
from ..explain.span_candidates import df_span_candidates, interpreter
from ..explain.stack_quality import stack_notes
from .fmt import num_or_none
from .words import check_words, headline, no_requests_headline, root_cause_sentence

MS = 1e6
UPROBE_WARN_SHARE = 0.05     # as tailtrace's TT_UPROBE_WARN_SHARE (of one CPU)
UPROBE_WARN_PER_S = 5000.0   # runs from before meta.json uprobe_cost: by the hit rate
SPAN_ERRORS_NOTE = ("span return values are not HTTP statuses: errors counts only the calls "
                    "that did not return (left by a C++ exception or a longjmp); each request's "
                    "raw return value is kept as 'ret'")
NEEDS_REQUESTS = ("needs requests or --span: without requests.bin (httpload --out) or spans.bin "
                  "(tailtrace --span BIN:SYMBOL) there are no requests to split into on-CPU, "
                  "runnable, lock wait and blocked time")
ALL_PCTS = {"avg": "avg", "p50": 50, "p90": 90, "p99": 99, "p999": 99.9, "max": "max"}
SCHED_STREAMS = ("runq", "switches")
NEEDS_PROBES = ("needs probes: run the workload under tailtrace (runq and sched streams) "
                "to split latency into on-CPU, runnable, lock wait and blocked time")
NO_REQUESTS_NOTE = ("Without --span there are no requests to decompose: this report shows what "
                    "the scheduler did to the traced threads (run-queue latency, switches, "
                    "migrations, mutexes, off-CPU time). To split request latency into on-CPU, "
                    "runnable, lock wait and blocked time, name the function that serves one "
                    "request: ./run.sh --pid PID --span BIN:SYMBOL{examples}; for a server, "
                    "--span tcp takes each request on the port it listens on (./run.sh --pid "
                    "does so by itself).")
NO_REQUESTS_CANDIDATES = (" (of this program's own functions its threads blocked under: {spans})")
NO_REQUESTS_INTERPRETED = ("Without --span there are no requests to decompose: this report shows "
                           "what the scheduler did to the traced threads. They run {lang} code, "
                           "whose functions a uprobe cannot take (the interpreter's own functions "
                           "serve every call alike). For a server, --span tcp times each request "
                           "on the port it listens on, from its first byte in to its answer's "
                           "last byte out (./run.sh --pid does so by itself); or mark each "
                           "request with one USDT probe at its end, NAME__span(id, t_start_ns, "
                           "status), and give --span usdt:BIN:PROVIDER:NAME "
                           "(docs/third-party.md).")
NO_REQUESTS_JIT_NOTE = ("Without --span there are no requests to decompose: this report shows what "
                        "the scheduler did to the traced threads. Their code runs JIT-compiled "
                        "({n:,} stacks hold frames named from the runtime's perf map), and a "
                        "uprobe cannot take a JIT function. Let the kernel see the requests on "
                        "the server's TCP port: --span tcp (each port it listens on) times each "
                        "one from its first byte in to its answer's last byte out. Or name a "
                        "native function that runs once per request (for Node, its HTTP parser's "
                        "callback: --span BIN:'node::(anonymous namespace)::Parser::"
                        "on_headers_complete', the handler's synchronous part), or mark each "
                        "request in the service with one USDT probe at its end, NAME__span(id, "
                        "t_start_ns, status), and give --span usdt:BIN:PROVIDER:NAME "
                        "(docs/third-party.md).")
TCP_SPANS_NOTE = ("requests on {ports} are as the kernel saw them on the server's sockets: from "
                  "a request's first byte in to its answer's last byte out, on the thread that "
                  "sent the answer. That leaves out the network and the client; where one "
                  "thread serves many connections (an event loop), its time on CPU before the "
                  "answer includes the requests served ahead of this one; and an answer the "
                  "kernel held after the thread sent it (Nagle's algorithm waiting for a "
                  "delayed ACK, a full send window) counts as whatever the thread did meanwhile")


def _num(x):
    """Plain Python number (None for NaN/inf) so json.dumps writes valid JSON."""
    if x is None:
        return None
    if isinstance(x, (np.integer, int)) and not isinstance(x, bool):
        return int(x)
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    x = float(x)
    return x if math.isfinite(x) else None


def _clean(o):
    if isinstance(o, dict):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    if isinstance(o, str) or o is None:
        return o
    return _num(o)


def _pcts(ns: pd.Series, keys: dict) -> dict:
    x = ns.to_numpy(dtype=np.float64)
    x = x[np.isfinite(x)]
    out = {}
    for k, q in keys.items():
        if not len(x):
            out[k] = None
        elif q == "avg":
            out[k] = x.mean() / MS
        elif q == "max":
            out[k] = x.max() / MS
        else:
            out[k] = np.percentile(x, q) / MS
    return out


def _failed(status: pd.Series) -> np.ndarray:
    s = status.to_numpy()
    return (s < 200) | (s >= 400)


def n_threads(run) -> int:
    """Threads seen by the probes (tasks, switches, runq, locks)."""
    return len(unique_of(*(df["tid"].to_numpy() for df in
                           (run.tasks, run.switches, run.runq, run.locks))))


def uprobe_warnings(meta: dict) -> list:
    """tailtrace's observer-effect warning, from meta.json uprobe_cost (what each uprobe
    stream's hits cost the target, by the class of their sites and the cost measured on the
    machine) and uprobe_hits_per_s; runs from before uprobe_cost: by the hit rate."""
    tgt = meta.get("target")
    pid = _num(tgt.get("pid")) if isinstance(tgt, dict) else None
    target = "target" if pid and pid > 0 else "traced processes"
    measured = bool((meta.get("uprobe_costs_ns") or {}).get("measured"))
    costs = meta.get("uprobe_cost")
    out = []
    for stream, rate in (meta.get("uprobe_hits_per_s") or {}).items():
        r = _num(rate) if isinstance(rate, (int, float)) else None
        c = costs.get(stream) if isinstance(costs, dict) else None
        what, instead = (("lock-heavy code", "--events runq,switch,offcpu,cpu") if stream == "locks"
                         else ("the spanned calls", "the program's own timing untraced"))
        if isinstance(c, dict):
            share, ns = _num(c.get("share_of_cpu")), _num(c.get("ns"))
            hits = _num((meta.get("uprobe_hits") or {}).get(stream))
            if r is None or share is None or share <= UPROBE_WARN_SHARE or not hits:
                continue
            out.append(f"{stream}: {r:,.0f} uprobe hits/s on the {target} at ~{ns / hits / 1e3:.1f} "
                       f"us each ({'measured here' if measured else 'a VM' + chr(39) + 's figure'})"
                       f" took ~{share * 100:.0f}% of a CPU, so {what} ran slower while traced "
                       f"— compare with {instead}")
        elif r is not None and r > UPROBE_WARN_PER_S:
            out.append(f"{stream}: {r:,.0f} uprobe hits/s on the {target}; uprobes cost ~10-30 "
                       f"us each on a VM, so {what} ran slower while traced — compare with "
                       f"{instead}")
    return out


def cpu_occupancy(run) -> dict | None:
    """Who held the CPUs over all traced runnable time: {runnable_ms, by_class, records,
    waits_truncated, irq_recorded}; None without the cpu event."""
    if not has_occupancy(run):
        return None
    rows = df_runnable_occupants(run)
    return {"runnable_ms": float(rows["ns"].sum()) / 1e6, "by_class": class_shares(rows),
            "records": int(len(run.occupancy)),
            "waits_truncated": (run.meta or {}).get("cpu_waits_truncated"),
            "irq_recorded": "irqs" in (run.meta or {})}


def goroutine_note(req: pd.DataFrame) -> str | None:
    """What the thread-level split means for requests that are Go goroutine spans."""
    if "goroutine" not in req or not (req["goroutine"] != 0).any():
        return None
    g = req[req["goroutine"] != 0]
    return (f"{len(g)} requests are spans of Go goroutines: their on-CPU, runnable and blocked "
            "parts are those of the thread each one started on, which runs other goroutines "
            "while this one waits (on-CPU may include theirs, a wait parked in Go's scheduler "
            f"shows as the thread's); {int(g['goroutine'].nunique())} goroutines served them")


def tcp_span_ids(meta: dict) -> set[int]:
    """The span ids that are requests on a TCP port (--span tcp[:PORT]), not calls."""
    return {i for i, site in enumerate(meta.get("span_sites") or [])
            if isinstance(site, dict) and site.get("exit") == "tcp"}


def span_notes(run) -> list[str]:
    """What requests built from spans mean: calls' return values are not HTTP statuses;
    TCP spans are the kernel's view of the socket; Go goroutines share threads."""
    tcp = tcp_span_ids(run.meta or {})
    sites = (run.meta or {}).get("span_sites") or []
    ids = set(np.unique(run.requests["conn"]).tolist()) if len(run.requests) else set()
    out = []
    if ids - tcp or not ids:
        out.append(SPAN_ERRORS_NOTE)
    if ids & tcp:
        out.append(TCP_SPANS_NOTE.format(ports=", ".join(sites[i]["name"] for i in sorted(ids & tcp))))
    if (note := goroutine_note(run.requests)):
        out.append(note)
    return out


def span_ends(req: pd.DataFrame) -> dict | None:
    """How the spanned calls ended: {return, exception, longjmp, tailcall: n}."""
    if "end" not in req:
        return None
    counts = req["end"].astype(str).value_counts()
    return {e: int(counts.get(e, 0)) for e in SPAN_ENDS}


def cut_note(cut: dict) -> str:
    """What a report says of a cut run (load.cut_span)."""
    return (f"this run was cut: the recorder never finished (killed, e.g. by the OOM killer: "
            f"meta.json finished=false). Its records cover {cut['kept_s']:.2f} s from the "
            "start; the last ~250 ms before the end were lost with its buffers, and the "
            "names, stacks and counts written at the end are missing")


def kernel_warnings(meta: dict) -> list:
    """One line per kernel fallback of the recording (meta.json kernel_fallbacks) that cost
    the run something: what, the kernel feature it lacked and since when (or, since null,
    that it is a build option), what was lost."""
    out = []
    for f in meta.get("kernel_fallbacks") or []:
        if isinstance(f, dict) and f.get("loses"):
            since = f"Linux {f['since']}+" if f.get("since") else "a kernel build option"
            out.append(f"{f.get('what')}: this kernel lacks {f.get('needs')} ({since}): "
                       f"{f.get('loses')}")
    return out


# What a full map's refused updates cost the run (meta.json map_full; probes/core/map_full.h).
MAP_FULL_LOSES = {
    "tasks": "threads first seen after it filled have no name or ids in tasks.bin",
    "off_ids": "those threads' switches were not recorded",
    "start_ids": "those threads' run-queue waits were not recorded",
    "tracked": "those threads were not traced",
    "occ_names": "some CPUs' holders are unnamed in 'who held the CPU'",
    "occ_blame": "some run-queue waits are not split by antagonist",
    "stacks": "those off-CPU waits have no stack",
    "runq_hist": "those run-queue waits are not in the histograms",
    "offcpu_hist": "those off-CPU waits are not in the histograms",
    "open_spans": "those calls are not spans",
    "open_marks": "those USDT requests are not spans",
    "tcp_open": "those TCP requests are not spans",
    "pending": "those lock calls were not recorded",
    "held": "those mutex holds were not recorded",
    "tryfailed": "those failed trylocks were not told apart",
    "condwait": "those condition waits were not tied to their mutex",
}


def map_full_warnings(meta: dict) -> list:
    """One line per BPF map that refused updates for want of room (meta.json map_full):
    how many, its size, and what the run lacks for it."""
    out = []
    full = meta.get("map_full")
    for name, v in (full.items() if isinstance(full, dict) else ()):
        refused = v.get("refused") if isinstance(v, dict) else None
        if isinstance(refused, int) and refused > 0:
            entries = v.get("entries")
            size = f" (it holds {entries:,})" if isinstance(entries, int) else ""
            out.append(f"BPF map {name} was full{size}: {refused:,} updates refused; "
                       f"{MAP_FULL_LOSES.get(name, 'what they would have held is not in the run')}")
    return out


def tailtrace_cost(meta: dict, requests: int = 0) -> dict | None:
    """What tracing cost the machine (meta.json cost, written by tailtrace): share_of_machine
    ((BPF + loader CPU) / (traced time x CPUs)), bpf_ms (scaled to the traced time when the
    statistics were sampled), bpf_us_per_event and bpf_us_per_request (measured, within the
    statistics' windows; per request: scaled, null without requests), loader_cpu_ms, sampled
    (the share of the time the statistics were on, null when always on), and programs: the
    3 programs that took the most BPF time [{name, section, runs, ns_per_run, share}] (runs:
    while the statistics were on; share: of all programs' time). None when the run has no
    BPF statistics (--bpf-stats off, a kernel without them, a recording from before
    cost.programs)."""
    cost = meta.get("cost") or {}
    parts, progs = cost.get("bpf"), cost.get("programs")
    if not isinstance(parts, dict) or not isinstance(progs, list):
        return None
    runs = sum(int(v.get("run_cnt") or 0) for v in parts.values())
    measured = num_or_none(cost.get("bpf_measured_ns")) or 0
    total = num_or_none(cost.get("bpf_total_ns")) or 0
    wall, sampled = num_or_none(cost.get("traced_wall_ns")), num_or_none(cost.get("bpf_sampled_ns"))
    ran = sorted((q for q in progs if q.get("run_cnt")), key=lambda q: -q["run_time_ns"])
    return {
        "share_of_machine": num_or_none(cost.get("cpu_share_of_machine")),
        "bpf_ms": total / 1e6,
        "bpf_us_per_event": measured / runs / 1e3 if runs else None,
        "bpf_us_per_request": total / requests / 1e3 if requests else None,
        "loader_cpu_ms": (num_or_none(cost.get("loader_cpu_ns")) or 0) / 1e6,
        "sampled": sampled / wall if sampled and wall and sampled < wall else None,
        "programs": [{"name": q["name"], "section": q.get("section"), "runs": int(q["run_cnt"]),
                      "ns_per_run": q["run_time_ns"] / q["run_cnt"],
                      "share": q["run_time_ns"] / measured if measured else None}
                     for q in ran[:3]],
    }


def _warnings(run, decomp) -> list:
    w = list(getattr(run, "warnings", []))
    w += kernel_warnings(run.meta or {})
    w += map_full_warnings(run.meta or {})
    w += uprobe_warnings(run.meta or {})
    w += stack_notes(run)
    if run.source == "spans":
        w += span_notes(run)
    write_error = run.meta.get("write_error")
    fix = (f"the run directory could not take them: {write_error}; free space or choose "
           "another --out" if write_error else "use a bigger --ringbuf-mb")
    for s, n in run.lost_events.items():
        if n:
            w.append(f"{s}: {n} events lost: parts built from {s} may be short and "
                     f"requests may not close ({fix})")
    if run.meta.get("incomplete"):
        w.append("the capture was stopped early (meta.json incomplete=true"
                 + (f": {write_error})" if write_error else ")"))
    if run.cut is not None:
        w.append(cut_note(run.cut))
    bad = int((~valid_requests(run.requests)).sum())
    if bad:
        w.append(f"{bad} request records have no valid start/end times (0 < t_enqueue ≤ t_start "
                 "≤ t_end fails): left out of every figure except 'requests' and 'errors'")
    gaps = getattr(run, "gaps", None)
    if gaps is not None and len(gaps):
        w.append(f"the kernel never reported {len(gaps)} context-switch edge(s) of traced "
                 "threads (meta.json unmatched_events; docs/probes/sched.md, "
                 "'Unmatched intervals'): requests overlapping one are counted as not traced, "
                 "not as time on CPU")
    if "check" in decomp and len(decomp) and (words := check_words(check_summary(decomp))):
        w.append(words)
    return w


def no_requests_note(source: str, jit_stacks: int = 0, run=None) -> str:
    """The line at the top of a report without requests: why, and how to get them (for a
    runtime whose code is JIT-compiled, jit_stacks of its stacks show, the ways that work; an
    interpreted program's, the ways that work for it; else functions of the program's own
    that --span could take, from its off-CPU stacks)."""
    if source == "none" and jit_stacks:
        return NO_REQUESTS_JIT_NOTE.format(n=jit_stacks)
    if source == "none":
        lang = interpreter(run) if run is not None else ""
        if lang:
            return NO_REQUESTS_INTERPRETED.format(lang=lang)
        c = df_span_candidates(run) if run is not None else None
        spans = ", ".join(f"--span {m}:{fn}" for fn, m in
                          zip(c["function"], c["module"])) if c is not None and len(c) else ""
        return NO_REQUESTS_NOTE.format(
            examples=NO_REQUESTS_CANDIDATES.format(spans=spans) if spans else "")
    why = ("no call of the --span function completed while tracing (check that SYMBOL is the "
           "function that serves one request and that it was called)" if source == "spans" else
           "requests.bin holds no complete request (check that the workload ran and reached "
           "the server)")
    return (f"No requests to decompose: {why}. The scheduler sections below still show what "
            "the traced threads did.")


def peer_summary(f: Findings) -> dict | None:
    """{pids, comms, names, runnable_ms{band}, runnable_all_ms{band},
    runnable_of_blocked{band}} of the traced peer processes (analyze/explain/peer.py), or None when
    no peer was traced or nothing was measured."""
    decomp, bands = f.decomp, f.bands
    if ("peer_runnable_ns" not in decomp or not decomp["peer_runnable_ns"].notna().any()
            or "peer_runnable_ms" not in bands):
        return None
    peers = f.peers
    return {"pids": [int(p) for p in peers["pid"]], "comms": list(peers["comm"]),
            "names": list(peers["name"]),
            "runnable_ms": {b: bands.at[b, "peer_runnable_ms"] for b in bands.index},
            "runnable_all_ms": {b: bands.at[b, "peer_runnable_all_ms"] for b in bands.index},
            "runnable_of_blocked": {b: bands.at[b, "peer_runnable_of_blocked"]
                                    for b in bands.index}}


def blocked_reasons(bands: pd.DataFrame) -> dict | None:
    """{band: {lock_wait_ms, io_wait_ms, sleep_ms, other_ms}} (means per request), or None
    when the run has no wait reasons."""
    if bands.empty or "io_wait_ms" not in bands or not bands["io_wait_ms"].notna().any():
        return None
    return {b: {"lock_wait_ms": r["lock_wait_ms"], "io_wait_ms": r["io_wait_ms"],
                "sleep_ms": r["sleep_ms"], "other_ms": r["blocked_ms"]}
            for b, r in bands.iterrows()}


def critical_path(f: Findings) -> dict | None:
    """{band: {waker_oncpu_ms, waker_runnable_ms, waker_runnable_hop1_ms, waker_blocked_ms,
    irq_ms, unknown_ms (means per request of the band's blocked time), reason (the band's
    largest blocked part), what, who, sentence (its root cause)}}, or None without wakers."""
    bands = f.bands
    if f.segs is None or f.segs.empty or "cp_irq_ms" not in bands:
        return None
    out = {}
    for b, r in bands.iterrows():
        d = {k: r[f"cp_{c}_ms"] for k, c in
             (("waker_oncpu_ms", "oncpu"), ("waker_runnable_ms", "runnable"),
              ("waker_runnable_hop1_ms", "runnable_hop1"), ("waker_blocked_ms", "blocked"),
              ("irq_ms", "irq"), ("unknown_ms", "unknown"))}
        part = dominant_blocked(bands, b)
        rc = f.root_cause(b, part)
        d.update({"reason": part, "what": rc["what"] if rc else None,
                  "who": rc["who"] if rc else None,
                  "sentence": root_cause_sentence(f.run, rc, part) if rc else None,
                  "antagonists": rc.get("antagonists") if rc else None})
        out[b] = d
    return out


RAN_ON_MIN = 0.01   # a band whose time ran this much on other threads lists them


def handoff_summary(f: Findings) -> dict | None:
    """Requests whose time ran partly on other threads of their process (handoff.py):
    {requests, handed_ms (their time charged to those threads), unknown_requests and
    unknown_ms (handoffs not followed: the thread handed to lost an edge), ran_on {band:
    [{own, thread, threads, share}]} (the largest three, for the bands with at least RAN_ON_MIN of
    their time on other threads)}; None when no request had one."""
    d = f.decomp
    if "handoff_ns" not in d:
        return None
    hand, unknown = d["handoff_ns"].to_numpy(), d["handoff_unknown_ns"].to_numpy()
    if not (hand > 0).any() and not (unknown > 0).any():
        return None
    ran_on = {}
    for b, m in f.masks.items():
        if hand[np.asarray(m, bool)].sum() < RAN_ON_MIN * d["latency_ns"].to_numpy()[m].sum():
            continue          # the band's time ran on its own threads
        r = df_ran_on(f.run, d, m).head(3)
        ran_on[b] = [{"own": bool(t.own), "thread": t.thread, "threads": int(t.threads),
                      "share": float(t.share)} for t in r.itertuples()]
    return {"requests": int((hand > 0).sum()), "handed_ms": float(hand.sum()) / 1e6,
            "unknown_requests": int((unknown > 0).sum()), "unknown_ms": float(unknown.sum()) / 1e6,
            "ran_on": ran_on}


def cpu_quotas(run, decomp: pd.DataFrame) -> list | None:
    """The CPU quotas over the traced processes (meta.json cpu_quotas) with what the kernel
    counted throttled in each over the run (cpu.stat; None where a count is missing), beside
    the throttled parts of the run-queue records and of the requests: the check a reader can
    make of the throttled part (docs/containers.md). None without any quota."""
    quotas = (run.meta or {}).get("cpu_quotas") or []
    if not quotas:
        return None
    rq = run.runq
    requests_ms = (float(decomp["throttled_ns"].sum()) / 1e6
                   if len(decomp) and "throttled_ns" in decomp else None)
    out = []
    for q in quotas:
        t, n = q.get("throttled_ns") or [None, None], q.get("nr_throttled") or [None, None]
        out.append({"path": q["path"], "cgroup_version": q.get("cgroup_version"),
                    "quota_us": q["quota_us"], "period_us": q["period_us"],
                    "kernel_throttled_ms": (t[1] - t[0]) / 1e6 if None not in t else None,
                    "kernel_throttles": n[1] - n[0] if None not in n else None,
                    "records_throttled_ms": records_throttled_ns(rq, q) / 1e6,
                    "requests_throttled_ms": requests_ms})
    return out


def records_throttled_ns(rq: pd.DataFrame, quota: dict) -> int:
    """The run-queue records' throttled parts over the window the kernel's count of quota is
    of: records switched in between its two reads (read_ns; the kernel adds a throttle at its
    unthrottle, just before the wait's switch-in), else all of them."""
    if "throttled_ns" not in rq:
        return 0
    r = quota.get("read_ns") or [None, None]
    thr = rq["throttled_ns"].to_numpy(np.int64)
    if None in r:
        return int(thr.sum())
    t = rq["t_run_ns"].to_numpy(np.int64)
    return int(thr[(t > r[0]) & (t <= r[1])].sum())


def trace_context_summary(run) -> dict | None:
    """How many requests (tcp:PORT, or USDT ends passing one) carried a valid traceparent (their spans join the callers'
    traces), a malformed one (ignored), or none; with the kernel's count of requests whose
    first bytes no read() or recv() was seen to copy (meta.json trace_contexts). The same
    for their answers' traceresponse headers (the server's own span: the request's span goes
    under it) under "service", with the answers that were not HTTP (not_http: another
    protocol on the port); under "tracestate", of the requests with a valid traceparent,
    those whose tracestate was valid (ok: it goes with their spans) or malformed (dropped),
    with the kernel's count of those it kept (read). None when the run did not read them."""
    if "trace_context" not in run.requests:
        return None
    req = run.requests
    kernel = (run.meta or {}).get("trace_contexts") or {}
    out = {}
    for key, col, unread in ((None, "trace_context", "unread"),
                             ("service", "service_context", "answers_unread")):
        n = req[col].value_counts() if col in req else {}
        counts = {"ok": int(n.get("ok", 0)), "malformed": int(n.get("malformed", 0)),
                  "none": int(n.get("none", len(req) if col not in req else 0)),
                  "unread": int(kernel.get(unread, 0))}
        if key:
            counts["not_http"] = int(kernel.get("answers_not_http", 0))
            out[key] = counts
        else:
            out.update(counts)
    if "trace_state_context" in req:
        n = req["trace_state_context"].value_counts()
        out["tracestate"] = {"ok": int(n.get("ok", 0)), "malformed": int(n.get("malformed", 0)),
                             "read": int(kernel.get("tracestate", 0))}
    return out


def summary_dict(f: Findings) -> dict:
    """The dict written as summary.json (see module doc for the keys), from the findings."""
    run, decomp, bands = f.run, f.decomp, f.bands
    wl = run.workload or {}
    req = run.requests
    ok = req[valid_requests(req)]
    dur_s = (ok["t_end_ns"].max() - ok["t_enqueue_ns"].min()) / 1e9 if len(ok) else 0.0
    attribution = {}
    for b, row in bands.iterrows():
        a = {"n": int(row["n"]), "n_unknown": int(row.get("n_unknown", 0)),
             "unknown_check": row.get("unknown_check"),
             "latency_ms": row["latency_ms"], "e2e_ms": row["e2e_ms"]}
        for p in PARTS + ["runnable"]:
            a[f"{p}_ms"], a[f"{p}_share"] = row[f"{p}_ms"], row[f"{p}_share"]
        attribution[b] = a
    # the requests the closure judges: those with a closure error (one column, not the frame)
    judged = decomp["closes"][decomp["closure_err"].notna()] if len(decomp) else decomp
    none = run.source == "none"
    sched, threads = sched_figures(run), n_threads(run)
    out = {
        "workload": wl.get("model") or wl.get("workload") or
        ("scheduler-only" if none else run.source),
        "conns": wl.get("conns", None if none else int(req["conn"].nunique())),
        "workers": wl.get("workers", None if none else int(req["tid"].nunique())),
        "requests": int(len(req)),
        "errors": (int(_failed(req["status"]).sum()) if run.source == "requests" else
                   int((req["end"].astype(str) != "return").sum()) if run.source == "spans"
                   else None),
        "span_ends": span_ends(req) if run.source == "spans" else None,
        "throughput_rps": len(ok) / dur_s if dur_s > 0 else None,
        "latency_ms": _pcts(decomp["latency_ns"], ALL_PCTS),
        "e2e_ms": _pcts(decomp["e2e_ns"], {"avg": "avg", "p50": 50, "p99": 99, "max": "max"}),
        "queue_wait_ms": _pcts(decomp["queue_wait_ns"], {"p50": 50, "p99": 99, "max": "max"}),
        "attribution": attribution if len(decomp) else NEEDS_REQUESTS,
        "headline": headline(f) if len(decomp)
        else no_requests_headline(run, sched, threads),
        "sched": sched,
        "threads": threads,
        "lost_events": dict(run.lost_events),
        "lost_events_total": int(sum(run.lost_events.values())),
        "closure_ratio": float(judged.mean()) if len(judged) else None,
        "checks": check_summary(decomp, bands) if len(decomp) else None,
        "source": run.source,
        "tail_excess": f.tail_excess,
        "spearman_runnable": spearman_runnable(decomp),
        "warnings": _warnings(run, decomp),
        "cut": run.cut,
        "peer": peer_summary(f) if len(decomp) else None,
        "blocked_reasons": blocked_reasons(bands) if len(decomp) else None,
        "critical_path": critical_path(f) if len(decomp) else None,
        "wait_objects": f.wait_objects,
        "antagonists": f.antagonists,
        "handoffs": handoff_summary(f) if len(decomp) else None,
        "trace_context": trace_context_summary(run),
        "cpu_occupancy": cpu_occupancy(run),
        "cpu_quotas": cpu_quotas(run, decomp),
        "tailtrace_cost": tailtrace_cost(run.meta or {}, int(len(ok))),
    }
    if not len(decomp):
        out["note"] = no_requests_note(run.source, jit_stack_count(run.stacks), run)
    return _clean(out)


def run_info(run_dir) -> dict:
    """run.json (written by run.sh: its command line, label, start time), or {}."""
    try:
        d = json.loads((Path(run_dir) / "run.json").read_text())
    except (OSError, ValueError):
        return {}
    return d if isinstance(d, dict) else {}


def run_label(run) -> str:
    """Short name of a run: meta label, else run.sh's label (run.json), else the directory."""
    return str(run.meta.get("label") or run_info(run.path).get("label")
               or Path(run.path).resolve().name)


def has_sched(run) -> bool:
    return any(run.has(s) for s in SCHED_STREAMS)


def _completed(d: dict, ns: pd.Series) -> dict:
    """d completed to ALL_PCTS (the report's table shows all six for every row): the keys d
    has are kept, in their order, the missing ones follow; d as it is without a value."""
    full = _pcts(ns, ALL_PCTS)
    if full["max"] is None:
        return d
    return {**d, **{k: float(v) for k, v in full.items() if k not in d}}


def report_summary(f: Findings) -> dict:
    """The summary of a report (summary.json but for outputs and trace, see the module doc):
    summary_dict(f), e2e_ms and queue_wait_ms completed, NEEDS_PROBES, label."""
    out = summary_dict(f)
    for key, col in (("e2e_ms", "e2e_ns"), ("queue_wait_ms", "queue_wait_ns")):
        out[key] = _completed(out[key], f.decomp[col])
    if len(f.decomp) and not has_sched(f.run):
        out["attribution"] = NEEDS_PROBES
    out["label"] = run_label(f.run)
    return out


def with_outputs(summary: dict, outputs, trace=None) -> dict:
    """summary.json as written: a copy of `summary` (report_summary) with outputs (the files
    written) and, once trace.json is written, trace (what it holds: perfetto.TraceInfo)."""
    out = dict(summary, outputs=list(outputs))
    if trace is not None:
        out["trace"] = {"events": trace.events, "requests": trace.requests,
                        "state_slices": trace.state_slices, "truncated": trace.truncated,
                        "note": trace.note}
    return out
