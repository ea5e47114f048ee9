"""The analysis in words: the headline and the sentences of summary.json and the reports.

Everything here phrases figures already computed (findings.Findings, attribute.py,
critpath.py, antagonists.py): no function computes a figure of its own beyond the
comparison its sentence makes. fmt.dur() is the one way a duration is written.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..load.load import fold_comm
from ..explain.attribute import BANDS, BLOCKED_GROUPS, GROUPS, MS, adds_up, dominant_group
from ..explain.critpath import MAX_DEPTH, has_wakers
from ..explain.decompose import CHECK_WHY, UNTRACED
from ..explain.containers import cgroup_words
from ..explain.handoff import df_ran_on
from .fmt import dur


def _n(k: int, noun: str) -> str:
    """'1 thread', '2 threads', '1,234 migrations'."""
    return f"{k:,} {noun}{'' if k == 1 else 's'}"


PEER_EXPLAINS = 0.5   # peer runnable excess ≥ this share of the blocked excess: say so


def _peer_sentence(f) -> str | None:
    """The peer sentence of the headline, or None.

    A server shared by many clients on few CPUs has *some* thread runnable most of the
    time, tail or not, so the peer's runnable time alone says little. What points at it is
    the contrast with the median: the ≥P99 band's peer runnable time minus the ≤P50 band's,
    against the ≥P99 band's blocked time minus the ≤P50 band's. When the first covers at
    least half of the second, the extra blocking of the tail is explained by the peer
    waiting for a CPU."""
    bands = f.bands
    if f.run is None or "peer_runnable_ms" not in bands or BANDS[0] not in bands.index:
        return None
    row, med = bands.loc[BANDS[3]], bands.loc[BANDS[0]]
    peer_ex = row["peer_runnable_ms"] - med["peer_runnable_ms"]
    blocked_ex = row["blocked_all_ms"] - med["blocked_all_ms"]
    if pd.isna(peer_ex) or pd.isna(blocked_ex) or blocked_ex <= 0:
        return None
    cover = peer_ex / blocked_ex
    if cover < PEER_EXPLAINS:
        return None
    peers = f.peers
    if peers.empty:
        return None
    name = ", ".join(peers["name"]) if len(peers) > 1 else peers["name"].iloc[0]
    short = ", ".join(c or nm for c, nm in zip(peers["comm"], peers["name"]))
    who = f"a thread of {name}" if len(peers) == 1 else f"a thread of one of {name}"
    all_ms = row.get("peer_runnable_all_ms", np.nan)
    every = ("" if pd.isna(all_ms) or all_ms <= 0 else
             f"; all its threads at once during {dur(all_ms)}" if len(peers) == 1 else
             f"; all threads of one of them at once during {dur(all_ms)}")
    return (f"during {dur(row['peer_runnable_ms'])} of their {dur(row['latency_ms'])} "
            f"service time {who} was waiting for a CPU (≤P50 requests: "
            f"{dur(med['peer_runnable_ms'])} of {dur(med['latency_ms'])}), covering "
            f"{min(cover, 1.0) * 100:.0f}% of the {dur(blocked_ex)} by which their blocked "
            f"time exceeds the median band's{every}: the tail is scheduler delay in "
            f"{short}, one hop away.")


def _excess_elsewhere(te: dict, g: str) -> str:
    """When the dominant part explains under half of the tail's excess over the median:
    which part does (' Most of the excess, 0.9 ms, is I/O wait.'), else ''."""
    ex, g_ex = te["excess_ms"], te["parts"].get(g, {}).get("ms", np.nan)
    if not ex or ex <= 0 or pd.isna(g_ex) or g_ex >= 0.5 * ex:
        return ""
    best, best_ms = None, -np.inf
    for k, (cols, _, _) in GROUPS.items():
        ms = sum(te["parts"].get(c.replace("_ns", ""), {}).get("ms", np.nan) for c in cols)
        if pd.notna(ms) and ms > best_ms:
            best, best_ms = k, ms
    if best is None or best == g or best_ms <= 0:
        return ""
    return f" Most of the excess, {dur(best_ms)}, is {GROUPS[best][2]}."


WORKER_LOCK_SHARE = 0.05   # workers' lock wait worth a sentence: ≥ 5% of the queue wait


def _workers_wait(run, decomp: pd.DataFrame, wait_objects: list) -> str:
    """For a queue-wait tail: the longest lock wait of the serving threads over the run (the
    workers that could not take the request), from summary wait_objects, when it is at least
    WORKER_LOCK_SHARE of all requests' queue wait."""
    t = run.tasks if run is not None else pd.DataFrame()
    mine = t[t["tid"].isin(decomp["tid"].unique())] if len(t) else t
    serving = {fold_comm(str(c)) for c in mine["comm"]} if len(mine) else set()
    objs = [o for o in wait_objects if o.get("reason") == "lock"
            and (not serving or any(t in serving for t in str(o.get("threads")).split(", ")))]
    queued = decomp["queue_wait_ns"].sum() / MS
    if not objs or objs[0]["total_ms"] < WORKER_LOCK_SHARE * queued:
        return ""
    o = objs[0]
    sh = o.get("waker_runnable_share") or 0.0
    return (f" Meanwhile the workers' longest lock wait was {o['what']} ({o['total_ms'] / 1e3:,.2f}"
            f" s over {o['waits']:,} waits by {o['threads']}); the threads that released it "
            f"were runnable (waiting for a CPU) {sh * 100:.0f}% of that time.")


def _antagonist_words(f) -> str:
    """' While runnable, they were preempted by …' for a runnable tail, from the findings'
    antagonists (analyze/explain/antagonists.py), or ''."""
    info = (f.antagonists or {}).get(BANDS[3])
    if not info or f.run is None:
        return ""
    row = f.bands.loc[BANDS[3]]
    pre = row["runq_preempt_ms"] / row["runnable_ms"] if row["runnable_ms"] else 0.0
    d = f.decomp
    words = occupant_clause(f.run, info, set(d["pid"].astype(int)) if "pid" in d else set(),
                            pre)
    return f" While runnable, they {words}." if words else ""


def _not_adding_up(row, decomp: pd.DataFrame, mask: np.ndarray) -> str:
    """The headline's end for a ≥P99 band whose parts do not add up: no share, the check
    that failed and why (decompose.CHECK_WHY of the band's commonest failure)."""
    chk = decomp["check"][mask] if "check" in decomp else pd.Series(dtype="category")
    bad = chk[~chk.isin(["ok", "no_switches"])].astype(str).value_counts()
    why = (f"; {bad.iloc[0]:,} {CHECK_WHY[bad.index[0]]}" if len(bad) else "")
    return (f": their parts add up to {row['parts_share'] * 100:.0f}% of their time, not "
            f"100%, so no share is given ({int(row['not_closing']):,} of them fail the "
            f"decomposition check{why}; summary.json checks lists them).")


def headline(f) -> str:
    """One plain sentence naming the dominant part of the ≥P99 band of the findings
    (findings.Findings), with figures; when it is a blocked part and the wakers were
    recorded, what was waited for and who ended it (the critical path, critpath.py)."""
    decomp, bands, run = f.decomp, f.bands, f.run
    if len(decomp) == 0 or BANDS[3] not in bands.index:
        return "No requests in this run: nothing to attribute."
    row = bands.loc[BANDS[3]]
    g, ms, share = dominant_group(bands)
    mask = f.masks[BANDS[3]]
    head = f"≥P99 requests (n={int(row['n'])}, mean {dur(decomp['e2e_ns'][mask].mean() / MS)})"
    if g is None:
        why = _unknown_words(run, decomp, mask) if int(row.get("n_unknown", 0) or 0) else ""
        return head + ": no part could be measured" + (f": {why}." if why else ".")
    if pd.isna(row.get("oncpu_ms", np.nan)) and (_sched_records(run) or
                                                 decomp["oncpu_ns"].notna().any()):
        # queue wait alone is known for requests the probes did not cover
        return f"{head}: no part could be measured: {_unknown_words(run, decomp, mask)}."
    if not adds_up(row):
        return head + _not_adding_up(row, decomp, mask)
    _, label, noun = GROUPS[g]
    te = f.tail_excess
    ex = te["excess_ms"]
    g_ex = te["parts"][g]["ms"]
    s = (f"{head} spent {share * 100:.0f}% of their time {label}: "
         f"{dur(g_ex)} of the {dur(ex)} excess over the median is {noun}.")
    if g == "throttled":
        s = (f"{head} were throttled by {quota_words(run)} for {share * 100:.0f}% of their "
             f"time (runnable, held back until the quota's next period): {dur(g_ex)} of the "
             f"{dur(ex)} excess over the median is {noun}.")
    rc = f.root_cause(BANDS[3], g) if g in BLOCKED_GROUPS else None
    peer = _peer_sentence(f) if g in BLOCKED_GROUPS else None
    if rc and rc["verdict"] == "unknown" and (peer or not has_wakers(run)):
        rc = None      # nothing learnt from the wakers: the peer sentence or the plain one
    if rc and g == "io_wait" and rc.get("ended_by_task_share", 0) >= 0.5:
        # the syscall was I/O, but another task ended it: a wait for that task
        label = "waiting for other tasks (blocked in I/O syscalls that tasks, not devices, ended)"
    if rc:
        what = f", {rc['what_phrase']}" if rc["what_phrase"] else ""
        s = (f"{head} spent {share * 100:.0f}% of their time {label}{what}; "
             f"{root_cause_sentence(run, rc, g)}. "
             f"{dur(g_ex)} of the {dur(ex)} excess over the median is {noun}.")
    elif peer:
        s = f"{head} spent {share * 100:.0f}% of their time {label}; {peer}"
    s += _excess_elsewhere(te, g)
    if g == "queue_wait" and f.wait_objects:
        s += _workers_wait(run, decomp, f.wait_objects)
    if g == "runnable":
        s += _antagonist_words(f)
        s += (f" (Mean per request: {dur(row['runq_wakeup_ms'])} runnable after wakeups, "
              f"{dur(row['runq_preempt_ms'])} after preemption.)")
    s += _ran_on_words(run, decomp, mask)
    s += _left_out_words(run, decomp, row, mask)
    if decomp["oncpu_ns"].isna().all() and not _sched_records(run):
        s += " No scheduler events were recorded: on-CPU, runnable and blocked time are unknown."
    caveats = []
    if run is not None:
        lost = {k: v for k, v in (getattr(run, "lost_events", {}) or {}).items() if v}
        if lost:
            caveats.append("events were lost (" + ", ".join(f"{k}: {v}" for k, v in lost.items())
                           + ")")
    # the traced requests' two columns this needs, not the whole frame
    traced = (decomp[["oncpu_ns", "closes"]][decomp["traced"].to_numpy(bool)]
              if "traced" in decomp else decomp)
    if len(traced) and traced["oncpu_ns"].notna().any():
        closes = traced["closes"].mean()
        if closes < 0.99:
            caveats.append(f"only {closes * 100:.0f}% of requests close")
    if caveats:
        s += " Caution: " + "; ".join(caveats) + "."
    return s


def busiest_quota(run) -> dict | None:
    """The CPU quota over the traced processes (meta.json cpu_quotas) that the kernel says
    throttled them the longest during the run, else the tightest one; None without any."""
    quotas = (run.meta.get("cpu_quotas") if run is not None else None) or []
    if not quotas:
        return None

    def key(q):
        t = q.get("throttled_ns") or [None, None]
        grew = t[1] - t[0] if None not in t else -1
        return (grew, -q["quota_us"] / max(q["period_us"], 1))
    return max(quotas, key=key)


def quota_words(run) -> str:
    """'the CPU quota of cgroup /kubepods/… (20 ms per 100 ms)', or 'a CPU quota' when
    meta.json names none (the quota was found on no traced process's cgroup)."""
    q = busiest_quota(run)
    if q is None:
        return "a CPU quota"
    where = cgroup_words(q["path"]) or "the root cgroup"

    def setting(us: int) -> str:   # as it was set: '20 ms', '2.5 ms'
        return f"{us // 1000} ms" if us % 1000 == 0 else dur(us / 1e3)
    return f"the CPU quota of {where} ({setting(q['quota_us'])} per {setting(q['period_us'])})"



def _sched_records(run) -> int:
    """How many scheduler records the run has (switches and run-queue waits)."""
    if run is None:
        return 0
    return sum(len(getattr(run, s)) for s in ("switches", "runq") if run.has(s))


def _unknown_words(run, decomp: pd.DataFrame, mask) -> str:
    """Why the parts of the requests in mask whose parts are unknown are unknown, in a
    clause with 'they' as subject; for requests on threads the probes did not trace, those
    threads' processes and the option that traces them."""
    m = np.asarray(mask, bool) & (decomp["check"].isin(UNTRACED).to_numpy()
                                  if "check" in decomp else False)
    if not np.any(m):
        return ("they ran on threads or at times the probes did not cover (an edge the "
                "kernel never reported, or outside the trace)")
    chk = decomp["check"][m].astype(str)
    c = chk.value_counts().index[0]
    if c != "thread":
        return f"they {CHECK_WHY[c]}"
    rows = decomp.loc[m & (decomp["check"].astype(str) == "thread").to_numpy()]
    pids = sorted(set(rows["pid"].astype(int)))
    n = rows["tid"].nunique()
    listed = ",".join(str(p) for p in pids[:8])
    procs = "1 process" if len(pids) == 1 else f"{len(pids):,} processes"
    return (f"they ran on {_n(n, 'thread')} of {procs} the probes did not "
            f"trace (pid {', '.join(str(p) for p in pids[:8])}{' …' if len(pids) > 8 else ''}): "
            f"trace {'it' if len(pids) == 1 else 'them'} with --pid {listed}, or with the pid "
            "of the process that started them")


RAN_ELSEWHERE = 0.2   # a band whose time ran this much on other threads: say on which


def ran_on_clause(threads: pd.DataFrame, k: int = 3) -> str:
    """'62% of their time ran on other threads of their process: worker-* (4 threads) 62%'
    from a df_ran_on frame ('' when none ran elsewhere)."""
    other = threads[~threads["own"].astype(bool)]
    if other.empty:
        return ""
    who = ", ".join(f"{t.thread} ({_n(int(t.threads), 'thread')}) {share_words(t.share)}"
                    for t in other.head(k).itertuples())
    return (f"{share_words(other['share'].sum())} of their time ran on other threads of their "
            f"process: {who}")


def _ran_on_words(run, decomp: pd.DataFrame, mask) -> str:
    """' 62% of their time ran on other threads of their process: worker-* (4 threads) 62%.'
    when a fifth of the band's time or more did (handoff.py), else ''."""
    if "handoff_ns" not in decomp:
        return ""
    m = np.asarray(mask, bool) & decomp["traced"].to_numpy(bool)
    if not m.any() or decomp["handoff_ns"][m].sum() < RAN_ELSEWHERE * decomp["latency_ns"][m].sum():
        return ""
    clause = ran_on_clause(df_ran_on(run, decomp, mask))
    return f" {clause[0].upper()}{clause[1:]}." if clause else ""


def _left_out_words(run, decomp: pd.DataFrame, row, mask) -> str:
    """' (3 of the 21 ≥P99 requests, the slowest among them, are not in these figures: …)'
    when some of the band's requests have unknown parts, else ''."""
    k = int(row.get("n_unknown", 0) or 0)
    if not k or k >= int(row["n"]):
        return ""
    slowest = ", the slowest among them," if row.get("slowest_unknown") else ""
    return (f" ({k:,} of the {int(row['n']):,} ≥P99 requests{slowest} are not in these "
            f"figures: {_unknown_words(run, decomp, mask)}.)")


def no_requests_headline(run, sched: dict, threads: int) -> str:
    """The headline of a run without requests: what the scheduler figures say."""
    why = {"none": "No requests in this run (no --span)",
           "spans": "No call of the --span function completed while tracing",
           }.get(run.source, "requests.bin holds no complete request")
    s = f"{why}: scheduler view of {_n(threads, 'thread')}"
    facts = []
    if run.has("runq") and sched["runq_p50_us"] is not None:
        facts.append(f"run-queue latency P50 {sched['runq_p50_us']:,.1f} µs, "
                     f"P99 {sched['runq_p99_us']:,.1f} µs")
    if run.has("switches"):
        facts.append(f"{sched['voluntary']:,} voluntary and {sched['involuntary']:,} "
                     f"involuntary switches, {_n(sched['migrations'], 'migration')}")
    return s + (" — " + "; ".join(facts) if facts else "") + "."


def check_words(checks: dict) -> str | None:
    """The checks in one sentence for the warnings and the report, or None when every
    request's parts are known and close."""
    by = checks.get("by_check") or {}
    bad = {c: n for c, n in by.items() if c not in ("ok", "no_switches")}
    if not bad:
        return None
    reasons = "; ".join(f"{n:,} {CHECK_WHY[c]}" for c, n in bad.items())
    out = checks.get("left_out", 0)
    tail = (f" The {out:,} whose parts are unknown are left out of the bands." if out else "")
    return (f"{sum(bad.values()):,} of {checks['requests']:,} requests fail the "
            f"decomposition check: {reasons}.{tail}")


# ---- who held the CPU, and who ended the waits ---------------------------------------

OCCUPANT_VERDICT = {
    "sibling": "oversubscription",
    "peer": "the client and the process it talks to compete for the CPUs",
    "other": "a noisy neighbour",
    "kernel": "kernel work",
    "irq": "interrupt load on these CPUs (spread or steer the IRQs, or move the work away)",
    "idle": "wakeup latency, not a competitor",
    "unknown": "not recorded",
}


def share_words(share: float) -> str:
    """A share as the sentences write it: '79%', and under 10% with a decimal, '6.8%'."""
    pct = share * 100
    return f"{pct:.0f}%" if pct >= 9.95 else f"{pct:.1f}%"


def process_words(run, top: dict) -> str:
    """'tt-hog (pid 4242, not traced, cgroup /batch)', or with several of its threads
    '63 threads of httpload (pid 24026)'; a process in a container by its container
    ('java (pid 4242, not traced, containerd container 3f2a9c1b7d4e in pod 5c2e7a1f,
    burstable)', explain/containers.py)."""
    traced = set(run.tasks["pid"].astype(int)) if len(run.tasks) else set()
    bits = [f"pid {top['pid']}"]
    if top["pid"] not in traced:
        bits.append("not traced")
    where = top.get("container") or cgroup_words(top.get("cgroup"))
    if where:
        bits.append(where)
    who = f"{top['comm'] or '?'} ({', '.join(bits)})"
    return f"{top['threads']} threads of {who}" if top.get("threads", 1) > 1 else who


def occupant_clause(run, info: dict | None, victim_pids, preempted_share: float = 0.0) -> str | None:
    """What held the CPUs during the waits summarised in `info` (an occupant_summary of
    analyze/explain/antagonists.py), as a clause with 'they' (the waiting threads) as
    subject: 'were preempted by tt-hog (pid 4242, not traced, cgroup /batch) for 97% of
    that time: a noisy neighbour'. Every share is the share of what it stands next to: a
    process's own, or the class's after 'N processes', N counting every process of the
    class. None without data."""
    if not info or not info.get("top"):
        return None
    by = info["by_class"]
    cls = max(by, key=by.get)
    share = by[cls]
    if share <= 0:
        return None
    pct = f"{share_words(share)} of that time"
    if cls == "idle":
        return f"found their CPUs idle for {pct}: {OCCUPANT_VERDICT['idle']}"
    if cls == "unknown":
        return f"cannot be followed for {pct} (too many switches on their CPUs to remember)"
    verb = "were preempted by" if preempted_share >= 0.5 else "waited behind"
    inside = [t for t in info["top"] if t["class"] == cls]
    if cls == "sibling":
        t = inside[0] if inside else {"threads": 0}
        n_proc = int(run.runq.loc[run.runq["pid"].isin(list(victim_pids)), "tid"].nunique()) \
            if len(run.runq) else 0
        ncpus = (run.meta or {}).get("ncpus")
        load = f", {n_proc} threads for {ncpus} CPUs" if n_proc and ncpus else ""
        who = (f"{t['threads']} other threads of the same process" if t["threads"] != 1
               else "another thread of the same process")
        return f"{verb} {who} for {pct}: {OCCUPANT_VERDICT['sibling']}{load}"
    if cls in ("kernel", "irq"):
        names = ", ".join(t["comm"] for t in inside[:3] if t["comm"])
        what = "kernel threads" if cls == "kernel" else "interrupts"
        return f"{verb} {what} ({names}) for {pct}: {OCCUPANT_VERDICT[cls]}"
    top = inside[0] if inside else None
    if top is None or top["pid"] is None:
        return None
    n = (info.get("processes") or {}).get(cls) or len(inside)
    if n > 1 and top["share"] < 0.5 * share:
        return (f"{verb} {n:,} processes for {pct}, the most {process_words(run, top)} for "
                f"{share_words(top['share'])}: {OCCUPANT_VERDICT[cls]}")
    return (f"{verb} {process_words(run, top)} for {share_words(top['share'])} of that time: "
            f"{OCCUPANT_VERDICT[cls]}")


def root_cause_sentence(run, rc: dict, part: str) -> str:
    """A root cause (critpath.root_cause) in words: who ended the waits and what that thread
    was doing, then, when it was runnable, what held the CPU meanwhile."""
    comp = {"runnable": rc["waker_runnable_ms"], "oncpu": rc["waker_oncpu_ms"],
            "blocked": rc["waker_blocked_ms"], "irq": rc["irq_ms"], "unknown": rc["unknown_ms"]}
    k = rc["verdict"]
    pct = 100 * comp[k] / rc["wait_ms"] if rc["wait_ms"] else 0.0
    who = f"the thread that ended it ({rc['who']})" if rc["who"] else "the thread that ended it"
    if part == "lock_wait":
        who = f"its holder ({rc['who']})" if rc["who"] else "its holder"
    hop1 = rc["waker_runnable_hop1_ms"] >= 0.5 * rc["waker_runnable_ms"]
    hop = "one hop away" if hop1 else "one or more hops away"
    were = "was" if hop1 else "and the threads it waited for in turn were"
    if k == "runnable":
        words = (f"{who} {were} runnable (waiting for a CPU) for {pct:.0f}% of that wait: "
                 + ("lock-holder preemption" if part == "lock_wait" else f"scheduler delay {hop}"))
    elif k == "oncpu":
        words = f"{who} was on CPU for {pct:.0f}% of that wait: the wait was for its work"
    elif k == "blocked":
        words = (f"{who} was itself blocked for {pct:.0f}% of that wait"
                 + (f", mostly in {rc['hop2']}" if rc.get("hop2") else
                    f" (followed {MAX_DEPTH} hops)"))
    elif k == "irq" and part == "lock_wait":
        # a futex wait an interrupt ended is a timed wait that timed out
        words = f"{pct:.0f}% of that wait timed out (its own timer ended it, not a task)"
    elif k == "irq":
        words = ((f"{pct:.0f}% of that wait was ended by interrupts (timers, devices), "
                  "not by a task") if rc.get("irq_hop1_ms", rc["irq_ms"]) >= 0.5 * rc["irq_ms"]
                 else (f"{who} was itself blocked for {pct:.0f}% of that wait, mostly in "
                       f"{rc['hop2']}" if rc.get("hop2") else
                       f"{who} was itself waiting for an interrupt (a timer, a device) for "
                       f"{pct:.0f}% of that wait"))
    else:
        words = (f"for {pct:.0f}% of that wait the thread that ended it was not traced "
                 "(trace its process with --also-pid PID)")
    if k == "runnable" and rc.get("antagonists"):
        clause = occupant_clause(run, rc["antagonists"], set(rc.get("own_pids") or ()))
        if clause:
            words += f"; while runnable, they {clause}"
    return words


def wait_object_line(o: dict) -> str:
    """One wait object (a df_wait_objects row) in a sentence."""
    timed = o.get("timed_out_share") or 0.0
    sh = [(o.get(f"{k}_share") or 0.0, label) for k, label in
          (("waker_runnable", "runnable"), ("waker_blocked", "blocked"),
           ("waker_oncpu", "on CPU"), ("irq", "interrupts"), ("unknown", "not traced"))
          if not (k == "irq" and timed >= 0.05)]   # those interrupts are the timeouts
    parts = ", ".join(f"{label} {v * 100:.0f}%" for v, label in sorted(sh, reverse=True)
                      if v >= 0.05)
    by = f"; the threads that ended them ({o['ended_by']}): {parts} of it" if o.get(
        "ended_by") else (f"; {parts} of it" if parts else "")
    procs = o.get("processes") or 1
    across = f" in {procs} processes" if procs > 1 else ""
    out = (f"{o['what'] or o['reason']}: {o['total_ms'] / 1e3:,.2f} s over {o['waits']:,} "
           f"waits by {o['threads']}{across} (mean {o['mean_us']:,.0f} µs)")
    if timed >= 0.05:
        out += (f"; {timed * 100:.0f}% timed out, after {o['timeout_ms']:,.1f} ms (the wait's "
                "own timeout)")
    return out + by
