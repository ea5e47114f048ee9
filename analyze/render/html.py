"""report.html: one self-contained page (inline CSS, base64 images, no fetches).

`render_report(ReportInputs) -> str` lays out what a performance engineer
reads, headline first. Every piece of text is escaped; every section says
what it needs when its stream is missing (a run without probes still gets
the client-side figures).
"""
from __future__ import annotations

import base64
import html
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import pandas as pd

from ..explain.attribute import adds_up
from .fmt import (U, cost_words, fmt_errors, fmt_hex, fmt_int, fmt_ms, fmt_ns_ms, fmt_run_ms,
                  fmt_share, fmt_stack, fmt_text, fmt_us, fmt_value, num_or_none, request_unit)
from .plot import PART_COLORS, PART_LABELS, PARTS
from .words import check_words

esc = html.escape
PART_SHORT = {"queue_wait": "queue wait", "oncpu": "on CPU", "runq_wakeup": "runnable (wakeup)",
              "runq_preempt": "runnable (preempt)", "throttled": "throttled",
              "lock_wait": "lock wait",
              "io_wait": "I/O wait", "sleep": "sleep", "blocked": "blocked, other"}


@dataclass
class ReportInputs:
    """Everything the page shows; None / empty means "not available"."""
    summary: dict
    meta: dict = field(default_factory=dict)
    workload: dict = field(default_factory=dict)
    run_dir: str = ""
    run_info: dict = field(default_factory=dict)  # run.json written by run.sh
    bands: pd.DataFrame | None = None
    tail_excess: dict | None = None
    threads: pd.DataFrame | None = None
    locks: pd.DataFrame | None = None
    chains: pd.DataFrame | None = None
    images: dict = field(default_factory=dict)    # name -> PNG path
    links: list = field(default_factory=list)     # file names in the run dir
    trace_note: str = ""
    streams: dict = field(default_factory=dict)   # stream -> present?
    notes: list = field(default_factory=list)     # extra warnings
    top_threads: int = 20
    top_chains: int = 20


_TEXT_TD = ' class="t"'


def _cell(v) -> str:
    """Escaped cell content; a list (stack frames) becomes one frame per line."""
    if isinstance(v, list):
        return '<span class="stack">' + "<br>".join(esc(x) for x in v) + "</span>"
    return esc(v)


def _table(df: pd.DataFrame, cols: Iterable[tuple[str, str, Callable[[Any], str]]],
           cls: str = "") -> str:
    """HTML table of the listed (column, header, formatter) that df has."""
    cols = [(c, h, f) for c, h, f in cols if c in df.columns or c == "__index__"]
    head = "".join(f"<th>{esc(h)}</th>" for _, h, f in cols)
    rows = []
    for idx, r in df.iterrows():
        cells = "".join(
            f"<td{_TEXT_TD if f in (fmt_text, fmt_hex, fmt_stack) else ''}>"
            f"{_cell(f(idx if c == '__index__' else r[c]))}</td>" for c, _, f in cols)
        rows.append(f"<tr>{cells}</tr>")
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _kv(rows: list[tuple[str, Any]]) -> str:
    body = "".join(f"<tr><th>{esc(k)}</th><td>{esc(fmt_text(v))}</td></tr>" for k, v in rows
                   if v not in (None, "", {}, []))
    return f'<table class="kv"><tbody>{body}</tbody></table>'


def img_tag(path, alt: str) -> str:
    """<img> with the PNG embedded as a data: URI (never a file reference)."""
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{esc(alt)}">'


def _section(sid: str, title: str, body: str) -> str:
    return f'<section id="{esc(sid)}"><h2>{esc(title)}</h2>{body}</section>'


def _p(text: str, cls: str = "") -> str:
    c = f' class="{cls}"' if cls else ""
    return f"<p{c}>{esc(text)}</p>"


def _needs(what: str) -> str:
    return _p(what, "needs")


# ---- sections -----------------------------------------------------------------------------

def _warnings(inp: ReportInputs) -> list[str]:
    s, meta = inp.summary, inp.meta
    out = []
    lost = {k: v for k, v in (s.get("lost_events") or meta.get("lost_events") or {}).items()
            if num_or_none(v)}
    if lost:
        out.append("Events were lost (" + ", ".join(f"{k}: {int(v):,}" for k, v in lost.items())
                   + "): the decomposition of affected requests does not close; rerun with a "
                     "bigger ring buffer (tailtrace --rb-mb) or fewer streams (--events).")
    cr = num_or_none(s.get("closure_ratio"))
    if cr is not None and cr < 0.99:
        out.append(f"Only {cr:.1%} of requests close (parts sum to latency within 1%); "
                   "below 99% the attribution is approximate.")
    if meta.get("incomplete"):
        out.append("The run is marked incomplete (it was interrupted): figures cover what "
                   "was recorded.")
    return out + list(inp.notes)


def _label(inp: ReportInputs) -> str:
    return str(inp.summary.get("label") or inp.meta.get("label") or
               (inp.run_info or {}).get("label") or
               os.path.basename(os.path.normpath(inp.run_dir)) or "run")


def has_requests(inp: ReportInputs) -> bool:
    return bool(num_or_none(inp.summary.get("requests")))


def _tiles(inp: ReportInputs) -> list[tuple[str, str]]:
    s = inp.summary
    if not has_requests(inp):   # scheduler-only run: the scheduler's figures
        sch = s.get("sched") or {}
        return [("requests", fmt_int(s.get("requests"))), ("threads", fmt_int(s.get("threads"))),
                ("run-queue P99", fmt_us(sch.get("runq_p99_us"))),
                ("switches (vol / invol)", f"{fmt_int(sch.get('voluntary'))} / "
                                           f"{fmt_int(sch.get('involuntary'))}"),
                ("migrations", fmt_int(sch.get("migrations")))]
    return [("requests", fmt_int(s.get("requests"))),
            ("throughput", f"{fmt_int(s.get('throughput_rps'))} req/s"),
            ("P99 service", f"{fmt_ms((s.get('latency_ms') or {}).get('p99'))} {U()}"),
            ("P99 end to end", f"{fmt_ms((s.get('e2e_ms') or {}).get('p99'))} {U()}"),
            ("errors", fmt_errors(s.get("errors")))]


def _header(inp: ReportInputs) -> str:
    s = inp.summary
    label = _label(inp)
    note = f'<div class="note">{esc(s["note"])}</div>' if s.get("note") else ""
    warn = "".join(f'<div class="warn">⚠ {esc(w)}</div>' for w in _warnings(inp))
    tiles = "".join(f'<div class="tile"><div class="v">{esc(v)}</div><div class="k">{esc(k)}'
                    f"</div></div>" for k, v in _tiles(inp))
    return (f"<header><h1>tailtrace report · {esc(str(label))}</h1>{note}"
            f'<div class="headline">{esc(str(s.get("headline") or "no headline"))}</div>'
            f'{warn}<div class="tiles">{tiles}</div></header>')


def _what_was_run(inp: ReportInputs) -> str:
    m, w = inp.meta, inp.workload
    params = fmt_value({k: v for k, v in w.items()
                        if not isinstance(v, (dict, list)) and v is not False
                        and not k.endswith(("_ns", "_ms_summary")) and k not in
                        ("requests", "errors", "throughput_rps", "wall_start", "pid",
                         "command")})
    hooks = m.get("hooks") or {}
    dur = None
    if num_or_none(m.get("mono_end_ns")) and num_or_none(m.get("mono_start_ns")):
        dur = f"{(m['mono_end_ns'] - m['mono_start_ns']) / 1e9:.2f} s"
    ri = inp.run_info or {}
    rec = fmt_value(m.get("command") or w.get("command"))
    rows = [("command", fmt_value(ri["command"]) if ri.get("command") else rec),
            ("recorded by", rec if ri.get("command") else None),
            ("started (UTC)", ri.get("started_utc") or m.get("wall_start")),
            ("target", fmt_value(m.get("target"))),
            ("workload", params or None),
            ("kernel", m.get("kernel")),
            ("CPUs", m.get("ncpus")),
            ("NUMA nodes", m.get("numa_nodes")),
            ("probes and hooks", ", ".join(f"{k}: {v}" for k, v in hooks.items()) or
             "none (client-side figures only)"),
            ("events recorded", ", ".join(f"{k}: {int(v):,}" for k, v in
                                          (m.get("events") or {}).items()) or None),
            ("events lost", ", ".join(f"{k}: {int(v):,}" for k, v in
                                      (m.get("lost_events") or {}).items()) or None),
            ("uprobe hits", ", ".join(
                f"{k}: {int(v):,} ({fmt_int((m.get('uprobe_hits_per_s') or {}).get(k))}/s)"
                for k, v in (m.get("uprobe_hits") or {}).items() if num_or_none(v) is not None) or None),
            ("traced for", dur),
            ("tailtrace's own cost", cost_words(inp.summary.get("tailtrace_cost"))),
            ("requests from", inp.summary.get("source")),
            ("run directory", inp.run_dir)]
    return _section("run", "What was run", _kv(rows))


def _summary_table(inp: ReportInputs) -> str:
    s = inp.summary
    cols = ["avg", "p50", "p90", "p99", "p999", "max"]
    heads = ["avg", "P50", "P90", "P99", "P99.9", "max"]
    rows = [("service time (t_end − t_start)", s.get("latency_ms") or {}),
            ("end to end (t_end − t_enqueue)", s.get("e2e_ms") or {}),
            ("queue wait (no worker yet)", s.get("queue_wait_ms") or {})]
    body = "".join("<tr><th>" + esc(name) + "</th>" +
                   "".join(f"<td>{esc(fmt_ms(d.get(c)))}</td>" for c in cols) + "</tr>"
                   for name, d in rows)
    head = f"<tr><th>{U()}</th>" + "".join(f"<th>{h}</th>" for h in heads) + "</tr>"
    top = _kv([("workload", s.get("workload")), ("connections", s.get("conns")),
               ("workers", s.get("workers")), ("requests", fmt_int(s.get("requests"))),
               ("errors", fmt_errors(s.get("errors"))),
               ("throughput", f"{fmt_int(s.get('throughput_rps'))} requests/s")])
    if not has_requests(inp):
        return _section("summary", "Summary", top + _needs(
            "No requests: no latency to summarise (see the line at the top for how to get them)."))
    return _section("summary", "Summary",
                    top + f'<table class="num"><thead>{head}</thead><tbody>{body}</tbody></table>')


def _legend() -> str:
    items = "".join(f'<span class="sw" style="background:{PART_COLORS[p]}"></span>'
                    f"{esc(PART_LABELS[p])}&emsp;" for p in PARTS)
    return f'<p class="legend">{items}</p>'


def _attribution(inp: ReportInputs) -> str:
    b = inp.bands
    if not has_requests(inp):
        return _section("attribution", "Where the time went (per latency band)",
                        _needs("Attribution needs requests: run the workload with httpload "
                               "--out, or give tailtrace/run.sh --span BIN:SYMBOL so that each "
                               "call of that function is a request."))
    if b is None or b.empty:
        return _section("attribution", "Where the time went (per latency band)",
                        _needs("Attribution needs probes: run under tailtrace with the runq and "
                               "sched streams (default --events) to split latency into on-CPU, "
                               "runnable, lock wait and blocked time."))
    head = (f"<tr><th>band</th><th>requests</th><th>range {U()}</th><th>mean e2e {U()}</th>"
            f"<th>mean service {U()}</th>" +
            "".join(f'<th><span class="sw" style="background:{PART_COLORS[p]}"></span>'
                    f"{esc(PART_SHORT[p])}</th>" for p in PARTS) + "</tr>")
    peer = "peer_runnable_ms" in b and b["peer_runnable_ms"].notna().any()
    if peer:
        head = head[:-5] + f"<th>peer runnable {U()} · of blocked</th></tr>"
    rows = []
    for band, r in b.iterrows():
        rng = (f"{fmt_ms(r['lo_ms'])}–{fmt_ms(r['hi_ms'])}" if "lo_ms" in b and "hi_ms" in b
               else "–")
        cells = [str(band), fmt_int(r.get("n")), rng, fmt_ms(r.get("e2e_ms")),
                 fmt_ms(r.get("latency_ms"))]
        fits = adds_up(r)        # a band whose parts do not add up shows no share
        cells += [f"{fmt_ms(r.get(f'{p}_ms'))} · "
                  f"{fmt_share(r.get(f'{p}_share')) if fits else 'no share'}" for p in PARTS]
        if peer:
            cells.append(f"{fmt_ms(r.get('peer_runnable_ms'))} · "
                         f"{fmt_share(r.get('peer_runnable_of_blocked'))}")
        rows.append("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>")
    table = (f'<table class="num bands"><thead>{head}</thead><tbody>{"".join(rows)}'
             "</tbody></table>")
    body = (_p("Requests are grouped by service-time percentile. Each part cell is the band's "
               f"mean per request in {U()} · its share of the band's mean end-to-end time.")
            + table + _checks_note(inp.summary.get("checks"), b)
            + _ran_on_note(inp.summary.get("handoffs"))
            + (_peer_note(inp.summary.get("peer")) if peer else ""))
    if "decomposition" in inp.images:
        body += img_tag(inp.images["decomposition"], "stacked decomposition per latency band")
    body += _tail_excess(inp.tail_excess)
    return _section("attribution", "Where the time went (per latency band)", body)


def _ran_on_note(handoffs: dict | None) -> str:
    """Which threads each band's time ran on, when some ran on other threads of the process
    than the requests' own (summary.json handoffs; docs/analysis.md "A request across
    threads"), or ''."""
    if not handoffs or not handoffs.get("ran_on"):
        return ""
    lines = []
    for band, rows in handoffs["ran_on"].items():
        parts = [f"{'their own thread' if r['own'] else 'other threads'}: {r['thread']} "
                 f"({fmt_int(r['threads'])}) {fmt_share(r['share'])}" for r in rows]
        lines.append(f"{band}: {'; '.join(parts)}")
    n, unknown = handoffs.get("requests", 0), handoffs.get("unknown_requests", 0)
    lost = f"; {fmt_int(unknown)} handoffs not followed (the thread handed to lost an edge)" \
        if unknown else ""
    return _p(f"Ran on: {fmt_int(n)} requests handed part of their time to other threads of "
              f"their process, followed along the handoff{lost}. " + " · ".join(lines))


CP_CELLS = (("waker_oncpu_ms", "waker on CPU"), ("waker_runnable_ms", "waker runnable"),
            ("waker_runnable_hop1_ms", "of it 1st hop"), ("waker_blocked_ms", "waker blocked"),
            ("irq_ms", "interrupt"), ("unknown_ms", "unknown waker"))


def _why_blocked(inp: ReportInputs) -> str:
    """Blocked time by wait reason and the critical path per band (summary.json
    blocked_reasons, critical_path): what was waited for and who ended the wait."""
    reasons, cp = inp.summary.get("blocked_reasons"), inp.summary.get("critical_path")
    title = "Why it was blocked (wait reasons and who ended the wait)"
    if not isinstance(reasons, dict) or not isinstance(cp, dict):
        return _section("why", title, _needs(
            "Wait reasons and wakers need tailtrace's switch and runq streams on a kernel with "
            "bpf_task_pt_regs (meta.json evidence.wait_reason): this run has none."))
    u = U()
    head = (f"<tr><th>band</th><th>lock wait {u}</th><th>I/O wait {u}</th><th>sleep {u}</th>"
            f"<th>other {u}</th>" + "".join(f"<th>{esc(h)} {u}</th>" for _, h in CP_CELLS)
            + "<th>largest wait · who ended it</th></tr>")
    rows = []
    for band, r in reasons.items():
        c = cp.get(band) or {}
        cells = [esc(band)] + [esc(fmt_ms(r.get(k))) for k in
                               ("lock_wait_ms", "io_wait_ms", "sleep_ms", "other_ms")]
        cells += [esc(fmt_ms(c.get(k))) for k, _ in CP_CELLS]
        what = " · ".join(x for x in (c.get("what"), c.get("who")) if x)
        rows.append("<tr>" + "".join(f"<td>{x}</td>" for x in cells)
                    + f"<td{_TEXT_TD}>{esc(what or '–')}</td></tr>")
    table = (f'<table class="num bands"><thead>{head}</thead><tbody>{"".join(rows)}'
             "</tbody></table>")
    tail = (cp.get("≥P99") or {}).get("sentence")
    body = (_p("Blocked time is split by the syscall each blocking switch-out was in (futex: "
               "lock wait; read, recv, poll, epoll...: I/O wait; nanosleep: sleep). For each "
               "wait, the thread that ended it (taken at sched_waking, in its own context) is "
               "measured over the wait: on CPU, runnable (waiting for a CPU), or itself "
               "blocked, followed up to 3 hops; interrupts end waits without blaming the task "
               f"they interrupted. Means per request, {U()}.") + table
            + (_p(f"≥P99: {tail}.") if tail else ""))
    if "critical_path" in inp.images:
        body += img_tag(inp.images["critical_path"], "critical path of the slowest requests")
    return _section("why", title, body + _wait_objects(inp))


CLASS_HEADS = [("sibling", "same process"), ("peer", "peer"), ("other", "other processes"),
               ("kernel", "kernel threads"), ("irq", "interrupts"), ("idle", "idle"),
               ("unknown", "unknown")]


def _top_words(top: list) -> str:
    """'tt-hog (pid 4242, /batch) 97% · kworker/0:1 (pid 11) 1%'."""
    out = []
    for t in top[:3]:
        if t["class"] in ("idle", "unknown", "rest", "irq"):
            out.append(f"{t['comm']} {fmt_share(t['share'])}")
            continue
        where = t.get("container") or (t["cgroup"] if t.get("cgroup") and t["cgroup"] != "/"
                                       else "")
        where = f", {where}" if where else ""
        thr = f", {t['threads']} threads" if t.get("threads", 1) > 1 else ""
        out.append(f"{t['comm']} (pid {t['pid']}{thr}{where}) {fmt_share(t['share'])}")
    return " · ".join(out)


def _who_had_cpu(inp: ReportInputs) -> str:
    """Who held the CPU while the requests (and the threads they waited for) were runnable:
    summary.json antagonists, critical_path[band].antagonists, cpu_occupancy."""
    ant, occ = inp.summary.get("antagonists"), inp.summary.get("cpu_occupancy")
    title = "Who had the CPU (while they waited for one)"
    if not isinstance(occ, dict):
        return _section("cpu", title, _needs(
            "Who held the CPUs needs tailtrace's cpu event (on by default with runq; "
            "--events runq,...,cpu): this run has none."))
    heads = [(c, h) for c, h in CLASS_HEADS if c != "irq" or occ.get("irq_recorded")]
    head = (f"<tr><th>band</th><th>runnable {U()}</th>" + "".join(
        f"<th>{esc(h)}</th>" for _, h in heads) + "<th>held most by</th></tr>")
    rows = []
    for band, a in (ant or {}).items():
        cells = [esc(band), esc(fmt_ms(a.get("runnable_ms")))]
        cells += [esc(fmt_share(a["by_class"].get(c))) for c, _ in heads]
        rows.append("<tr>" + "".join(f"<td>{x}</td>" for x in cells)
                    + f"<td{_TEXT_TD}>{esc(_top_words(a.get('top') or []) or '–')}</td></tr>")
    body = _p("For every wait for a CPU, what ran on the CPU the thread finally ran on, from "
              "the wait's start to its end (every task: untraced processes, kernel threads, the "
              f"idle task). Shares of the band's runnable time; runnable {U()}: mean per request. "
              "Same process: oversubscription; other processes: a neighbour; idle: the CPU "
              "was free, the wait was the wakeup's own latency. "
              + ("Interrupts: hard IRQs, the local timer and softirqs not run by a task's own "
                 "syscall (the irq event)." if occ.get("irq_recorded") else
                 "Interrupts count as the task they interrupted (tailtrace --events "
                 "...,cpu,irq records them)."))
    if rows:
        body += (f'<table class="num bands"><thead>{head}</thead><tbody>{"".join(rows)}'
                 "</tbody></table>")
    for band, a in (ant or {}).items():
        if a.get("containers"):
            body += _p(f"{band}, by container: " + " · ".join(
                f"{c['container']} ({c['processes']} process{'es' if c['processes'] > 1 else ''})"
                f" {fmt_share(c['share'])}" for c in a["containers"][:4]) + ".")
    cp = ((inp.summary.get("critical_path") or {}).get("≥P99") or {}).get("antagonists")
    if cp:
        body += _p(f"≥P99, the threads their waits depended on (critical path), while runnable "
                   f"({fmt_ms(cp.get('runnable_ms'))} {U()} in all): "
                   + ", ".join(f"{h} {fmt_share(cp['by_class'].get(c))}" for c, h in CLASS_HEADS
                               if cp["by_class"].get(c)) + "; held most by "
                   + _top_words(cp.get("top") or []) + ".")
    trunc = occ.get("waits_truncated")
    body += _p(f"All traced threads, whole run: {fmt_run_ms(occ.get('runnable_ms'))} ms runnable; "
               + ", ".join(f"{h} {fmt_share(occ['by_class'].get(c))}" for c, h in CLASS_HEADS
                           if occ["by_class"].get(c))
               + f". {fmt_int(occ.get('records'))} CPU records"
               + (f"; {fmt_int(trunc)} waits longer than the per-CPU memory of switches "
                  "(their start is unknown)" if trunc else "") + ".", "small")
    return _section("cpu", title, body)


def _wait_objects(inp: ReportInputs) -> str:
    """The longest waits of the whole run (summary.json wait_objects), all traced threads."""
    objs = inp.summary.get("wait_objects")
    if not objs:
        return ""
    df = pd.DataFrame(objs)
    return ("<h3>What the traced threads waited on (whole run, all threads)</h3>"
            + _p("Inside and outside requests: a futex by address, other waits by syscall. "
                 "Shares: of the wait time, how long the threads that ended the waits were "
                 "runnable, blocked or on CPU (2 hops).")
            + _table(df, [("what", "wait", fmt_text), ("reason", "reason", fmt_text),
                          ("threads", "threads", fmt_text),
                          *([("processes", "processes", fmt_int)] if "processes" in df else []),
                          ("waits", "waits", fmt_int),
                          ("total_ms", "total ms", fmt_run_ms), ("mean_us", "mean", fmt_us),
                          ("ended_by", "ended by", fmt_text),
                          ("waker_runnable_share", "runnable", fmt_share),
                          ("waker_blocked_share", "blocked", fmt_share),
                          ("waker_oncpu_share", "on CPU", fmt_share),
                          ("irq_share", "interrupt", fmt_share),
                          ("unknown_share", "not traced", fmt_share)], cls="num"))


def _checks_note(checks: dict | None, bands: pd.DataFrame) -> str:
    """Under the band table: the bands whose parts do not add up (no share shown for them),
    and the requests that failed the decomposition check, why, and the slowest of them
    (summary.json checks); '' when every request closes."""
    if not checks:
        return ""
    out = ""
    for band, r in bands.iterrows():
        if not adds_up(r):
            out += (f'<p class="warn">{esc(str(band))}: its parts add up to '
                    f"{r['parts_share'] * 100:.1f}% of its mean end-to-end time, not 100%: no "
                    f"share is shown. {fmt_int(r.get('not_closing'))} of its "
                    f"{fmt_int(r.get('n'))} requests do not close.</p>")
    words = check_words(checks)
    if not words:
        return out
    failed = pd.DataFrame(checks.get("failed") or [])
    tbl = _table(failed, [("id", "request", fmt_int), ("tid", "thread", fmt_int),
                          ("latency_ms", f"latency {U()}", fmt_ms),
                          ("parts_ms", f"parts {U()}", fmt_ms), ("why", "why", fmt_text)],
                 cls="num") if len(failed) else ""
    return out + _p(f"Checks: {words} The slowest of them:") + tbl


def _peer_note(peer: dict | None) -> str:
    """The paragraph under the band table when another process was traced (--also-pid)."""
    if not isinstance(peer, dict):
        return ""
    names = ", ".join(peer.get("names") or []) or "another process"
    tail = (peer.get("runnable_ms") or {}).get("≥P99")
    of = (peer.get("runnable_of_blocked") or {}).get("≥P99")
    every = (peer.get("runnable_all_ms") or {}).get("≥P99")
    fig = (f" In the ≥P99 band: {fmt_ms(tail)} {U()} per request, equal to {fmt_share(of)} of "
           "its mean blocked time" + (f"; all of a peer's threads waiting at once (it could "
                                      f"make no progress): {fmt_ms(every)} {U()}"
                                      if every is not None else "") + "."
           if tail is not None else "")
    return _p(f"Peer runnable: {names} was traced too (tailtrace --also-pid). The last column "
              "is the time during a request when at least one of its threads was waiting for "
              "a CPU (mean per request · share of the band's mean blocked time, capped at "
              "100%). It is not a part of the request's time — the parts still sum to the "
              "latency — but it explains blocked time: a client blocked on a server that "
              "could not get a CPU." + fig)


def _tail_excess(te: dict | None) -> str:
    """attribute.tail_excess(): {"excess_ms", "tail_ms", "median_ms", "parts": {p: {ms, share}}}."""
    if not te or not te.get("parts"):
        return ""
    labels = dict(PART_LABELS, runnable="runnable in total (wakeup + preemption)")
    rows = []
    for p, d in te["parts"].items():
        if p == "runnable" or not isinstance(d, dict):
            continue
        rows.append(f"<tr><th>{esc(labels.get(p, p))}</th><td>{esc(fmt_ms(d.get('ms')))}</td>"
                    f"<td>{esc(fmt_share(d.get('share')))}</td></tr>")
    r = te["parts"].get("runnable")
    if isinstance(r, dict):
        rows.append(f"<tr class=\"total\"><th>{esc(labels['runnable'])}</th>"
                    f"<td>{esc(fmt_ms(r.get('ms')))}</td><td>{esc(fmt_share(r.get('share')))}</td></tr>")
    u = U()
    intro = (f"The ≥P99 band's mean end-to-end time ({fmt_ms(te.get('tail_ms'))} {u}) minus the "
             f"≤P50 band's ({fmt_ms(te.get('median_ms'))} {u}) is {fmt_ms(te.get('excess_ms'))} {u}: "
             "what the slow requests had more of, by part.")
    tbl = (f'<table class="num narrow"><thead><tr><th>part</th><th>excess {u}</th><th>share of '
           f'excess</th></tr></thead><tbody>{"".join(rows)}</tbody></table>')
    return "<h3>Tail excess over the median</h3>" + _p(intro) + tbl


def _figures(inp: ReportInputs) -> str:
    out = ""
    if "percentiles" in inp.images:
        out += _section("percentiles", "Latency by percentile",
                        _p("HdrHistogram style: the x axis stretches the tail (1/(1−p)), so "
                           "the P99 and P99.9 are as readable as the median.")
                        + img_tag(inp.images["percentiles"], "latency percentile curve"))
    if "timeline" in inp.images:
        out += _section("timeline", "Latency over time",
                        _p("Each dot is a request at the time it started; red dots are the part "
                           "of it spent runnable (waiting for a CPU). Bursts that line up are "
                           "scheduler delay.")
                        + img_tag(inp.images["timeline"], "request latency over time"))
    return out


def _scheduler(inp: ReportInputs) -> str:
    has = inp.streams
    body = ""
    if "runq_hist" in inp.images and has.get("runq", True):
        body += "<h3>Run-queue latency</h3>" + img_tag(inp.images["runq_hist"],
                                                       "run-queue latency histogram")
    else:
        body += _needs("Run-queue latency needs the runq stream (tailtrace --events runq).")
    sch = inp.summary.get("sched") or {}
    if sch:
        body += _kv([("run-queue latency P50", fmt_us(sch.get("runq_p50_us"))),
                     ("run-queue latency P99", fmt_us(sch.get("runq_p99_us"))),
                     ("voluntary switches", fmt_int(sch.get("voluntary"))),
                     ("involuntary switches (preemptions)", fmt_int(sch.get("involuntary"))),
                     ("migrations", fmt_int(sch.get("migrations")))])
    t = inp.threads
    if t is not None and not t.empty:
        sort = "runq_ns" if "runq_ns" in t else t.columns[0]
        top = t.sort_values(sort, ascending=False).head(inp.top_threads)
        body += (f"<h3>Threads (top {len(top)} of {len(t)} by time runnable)</h3>" + _table(top, [
            ("tid", "tid", fmt_text), ("comm", "comm", fmt_text), ("role", "role", fmt_text),
            ("runq_ns", "runnable ms", fmt_ns_ms), ("oncpu_ns", "on-CPU ms", fmt_ns_ms),
            ("offcpu_ns", "off-CPU ms", fmt_ns_ms), ("voluntary", "voluntary", fmt_int),
            ("involuntary", "involuntary", fmt_int), ("migrations", "migrations", fmt_int),
            ("cpus", "CPUs", fmt_text)], "num") + _p("All threads: threads.csv.", "small"))
    elif has.get("switches") is False:
        body += _needs("The threads table needs the sched stream (tailtrace --events sched).")
    if "cpu_placement" not in inp.images and has.get("switches") is False:
        body += _needs("CPU placement needs the sched stream (tailtrace --events switch).")
    if "cpu_placement" in inp.images:
        body += ("<h3>CPU placement</h3>" +
                 _p("Share of each thread's on-CPU time spent on each CPU: a pinned pool "
                    "shows one dark cell per row.") +
                 img_tag(inp.images["cpu_placement"], "CPU placement heat map"))
    return _section("scheduler", "Scheduler", body)


def _locks(inp: ReportInputs) -> str:
    lk, ch = inp.locks, inp.chains
    if (lk is None or lk.empty) and (ch is None or ch.empty):
        msg = ("No mutex acquisitions recorded." if inp.streams.get("locks") else
               "Lock analysis needs the locks stream (tailtrace --events locks; pthread "
               "mutex uprobes on the target's libc).")
        return _section("locks", "Locks", _needs(msg))
    body = ""
    if lk is not None and not lk.empty:
        if "symbol" in lk and (lk["symbol"].astype(str) ==
                               lk["mutex"].map(fmt_hex)).all():
            lk = lk.drop(columns="symbol")        # unresolved: the address says it all
        body += "<h3>Mutexes</h3>" + _table(lk.head(20), [
            ("mutex", "mutex", fmt_hex), ("symbol", "symbol", fmt_text),
            ("acquisitions", "acquisitions", fmt_int), ("contended", "contended", fmt_int),
            ("hold_p50_ns", "hold P50 ms", fmt_ns_ms), ("hold_p99_ns", "hold P99 ms", fmt_ns_ms),
            ("wait_p50_ns", "wait P50 ms", fmt_ns_ms), ("wait_p99_ns", "wait P99 ms", fmt_ns_ms),
            ("top_stack", "top stack (leaf first)", fmt_stack)], "num") + _p("All mutexes: locks.csv.", "small")
    if ch is None or ch.empty:
        body += _p("No mutex wait happened inside a request (lock chains are built for waits "
                   "inside request windows only).", "small")
    else:
        verdicts = ch["verdict"].value_counts() if "verdict" in ch else pd.Series(dtype=int)
        vtxt = "; ".join(f"{v}: {n}" for v, n in verdicts.items())
        sort = "wait_ns" if "wait_ns" in ch else ch.columns[0]
        top = ch.sort_values(sort, ascending=False).head(inp.top_chains)
        body += (f"<h3>Lock chains (top {len(top)} of {len(ch)} waits inside requests)</h3>" +
                 _p("For each wait: who held the mutex and what the holder was doing meanwhile "
                    "(a preempted holder makes every waiter pay its run-queue delay). " + vtxt) +
                 _table(top, [
                     ("request_id", "request", fmt_text),
                     ("waiter_tid", "waiter", fmt_text), ("mutex", "mutex", fmt_hex),
                     ("wait_ns", "wait ms", fmt_ns_ms), ("holder_tid", "holder", fmt_text),
                     ("holder_running_ns", "holder running ms", fmt_ns_ms),
                     ("holder_runnable_ns", "holder runnable ms", fmt_ns_ms),
                     ("holder_blocked_ns", "holder blocked ms", fmt_ns_ms),
                     ("verdict", "verdict", fmt_text)], "num"))
    return _section("locks", "Locks", body)


def _files(inp: ReportInputs) -> str:
    links = [name for name in inp.links]
    items = []
    desc = {"flame-oncpu.svg": "on-CPU flame graph (where the CPU time went)",
            "flame-offcpu.svg": "off-CPU flame graph (where threads blocked, weighted by µs)",
            "trace.perfetto-trace": "Perfetto trace of the whole run: CPU tracks, thread "
                                    "states, wakeups and requests (open this one)",
            "trace.json": "Chrome JSON trace of requests and thread states, for tools that "
                          "read only JSON",
            "profiles/oncpu.pb.gz": "pprof on-CPU profile (go tool pprof, Pyroscope, Parca)",
            "profiles/offcpu.pb.gz": "pprof off-CPU profile, labelled by thread and wait reason",
            "profiles/locks.pb.gz": "pprof mutex profile: wait and hold time by stack",
            "summary.json": "every figure of this page, machine-readable",
            "threads.csv": "per-thread scheduler table", "locks.csv": "per-mutex table"}
    for name in links:
        d = desc.get(name) or ("differential flame graph" if name.startswith("diff-") else "")
        items.append(f'<li><a href="{esc(name)}">{esc(name)}</a> {esc(d)}</li>')
    flames = [n for n in links if n.endswith(".svg")]
    body = ("<ul>" + "".join(items) + "</ul>") if items else ""
    if not flames:
        body += _needs("No flame graphs in this run directory (run.sh makes flame-oncpu.svg and "
                       "flame-offcpu.svg with inferno when perf and the sched stream ran).")
    if "trace.perfetto-trace" in links:
        body += _p("To open trace.perfetto-trace: go to https://ui.perfetto.dev, choose “Open "
                   "trace file” and pick it (it stays in your browser). It holds every "
                   "recorded switch and wakeup: the CPU tracks, each thread's states "
                   "(Running, Runnable, Sleeping, …) and who woke it, as Perfetto shows a "
                   "trace it recorded; each traced thread's requests are slices on its track, "
                   "their parts in the slice's arguments. trace.json is the same run as a "
                   "Chrome JSON trace, for tools that read only JSON.")
    elif "trace.json" in links:
        body += _p("To open trace.json: go to https://ui.perfetto.dev, choose “Open trace file” "
                   "and pick trace.json (it stays in your browser). Each thread has a request "
                   "track and a “· state” track: Running, Runnable, Lock wait, Blocked.")
    if "trace.json" in links and inp.trace_note:
        body += _p("trace.json: " + inp.trace_note, "small")
    return _section("files", "Flame graphs and trace", body)


def _method(inp: ReportInputs) -> str:
    cr = num_or_none(inp.summary.get("closure_ratio"))
    crt = (f"{cr:.2%}" if cr is not None else "not computed (needs probes)" if has_requests(inp)
           else "not computed (no requests)")
    text = [
        "Clock: every timestamp is CLOCK_MONOTONIC nanoseconds — bpf_ktime_get_ns() in the "
        "probes, clock_gettime(CLOCK_MONOTONIC) in the workload — so requests and kernel events "
        "join without conversion.",
        "Decomposition: for a request served by thread T during [t_start, t_end], every "
        "nanosecond of T is in exactly one state, so latency = on-CPU + runnable (after wakeup, "
        "after preemption) + mutex wait + other blocking; queue wait (t_start − t_enqueue) "
        "is added for the end-to-end time.",
        f"Closure: a request closes when its parts sum to its latency within 1%; {crt} of "
        "requests close. Lost events or threads the probes did not see break closure.",
        "Bands: requests are grouped by service-time percentile (≤P50, P50–P90, P90–P99, ≥P99, "
        "and ≥P99.9 above 10 000 requests); shares are of the band's mean end-to-end time.",
    ]
    return _section("method", "How this was measured", "".join(_p(t) for t in text))


CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;
 background:#f4f6f9;color:#1d2733}
main{max-width:1180px;margin:0 auto;padding:24px 28px 60px}
h1{font-size:20px;font-weight:600;color:#4a5868;margin:0 0 10px}
h2{font-size:19px;margin:0 0 12px;border-bottom:2px solid #e3e8ee;padding-bottom:6px}
h3{font-size:15px;margin:18px 0 8px;color:#33414f}
header{background:#fff;border-radius:10px;padding:22px 26px;box-shadow:0 1px 3px #0002}
.headline{font-size:26px;line-height:1.3;font-weight:650;color:#12202e;
 border-left:6px solid #d1402f;padding:4px 0 4px 16px;margin:6px 0 14px}
.warn{background:#fff4e5;border:1px solid #f0b45a;color:#7a4b00;border-radius:6px;
 padding:8px 12px;margin:8px 0;font-weight:550}
.tiles{display:flex;gap:12px;flex-wrap:wrap;margin-top:8px}
.tile{background:#f4f6f9;border-radius:8px;padding:8px 14px;min-width:120px}
.tile .v{font-size:20px;font-weight:650}.tile .k{font-size:12px;color:#5b6877}
section{background:#fff;border-radius:10px;padding:18px 26px;margin-top:18px;
 box-shadow:0 1px 3px #0002}
table{border-collapse:collapse;margin:6px 0 10px;font-size:13.5px}
th,td{padding:4px 10px;border-bottom:1px solid #e8ecf1;text-align:left;vertical-align:top}
thead th{background:#eef2f6;font-weight:600;white-space:nowrap}
table.num td{text-align:right;font-variant-numeric:tabular-nums}
table.num td:first-child,table.num td.t{text-align:left}
table.kv th{color:#4a5868;font-weight:550;white-space:nowrap;width:1%}
table.kv td{word-break:break-word}
tbody tr:nth-child(even){background:#fafbfd}
tr.total th,tr.total td{font-weight:650;border-top:2px solid #d5dce4}
table.bands{font-size:12.5px}
table.bands td{white-space:nowrap;padding:4px 7px}
table.bands td.t{white-space:normal;min-width:260px}
table.bands th{white-space:normal;padding:4px 7px;min-width:60px}
img{max-width:100%;height:auto;display:block;margin:10px 0}
.note{background:#eaf2fb;border:1px solid #8db4e2;color:#1f3f66;border-radius:6px;
 padding:8px 12px;margin:6px 0 12px;font-weight:550}
.needs{background:#f0f4f8;border-left:4px solid #8c9bb0;padding:8px 12px;color:#3d4b59}
.small{font-size:12.5px;color:#5b6877}
.legend{font-size:12.5px}.sw{display:inline-block;width:11px;height:11px;margin-right:4px;
 vertical-align:-1px;border-radius:2px}
a{color:#2763b8}
.stack{font:11.5px/1.35 ui-monospace,Menlo,Consolas,monospace;overflow-wrap:anywhere}
table.num td.t .stack{display:inline-block;min-width:300px;max-width:460px}
"""


def render_report(inp: ReportInputs) -> str:
    """The whole page as one string."""
    title = f"tailtrace · {_label(inp)}"
    with request_unit(inp.summary):
        parts = [_header(inp), _what_was_run(inp), _summary_table(inp), _attribution(inp),
                 _why_blocked(inp) if has_requests(inp) else _wait_objects(inp),
                 _who_had_cpu(inp), _figures(inp), _scheduler(inp), _locks(inp), _files(inp),
                 _method(inp)]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width\"><title>{esc(title)}</title>"
            f"<style>{CSS}</style></head><body><main>{''.join(parts)}</main></body></html>\n")


def write_report(path, inp: ReportInputs) -> str:
    """Write report.html atomically; returns its path."""
    path = os.fspath(path)
    tmp = path + ".tmp"
    Path(tmp).write_text(render_report(inp), encoding="utf-8")
    os.replace(tmp, path)
    return path
