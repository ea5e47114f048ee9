"""Critical path: who ended each wait of a request, and what that thread was doing.

A request on thread T is blocked during [t0, t1] (a blocked interval of
waits.wait_core clipped to the request's window), and the wakeup at t1 names
the waker H (runq.bin, taken at sched_waking in H's context). H's time in
[t0, t1] is on CPU, runnable (waiting for a CPU) or itself blocked, measured
with the same interval algebra as the decomposition (decompose.thread_brief).
H's blocked part is followed in turn: H's own waits inside [t0, t1] and their
wakers, up to MAX_DEPTH hops. Each ns of the request's blocked time ends in
exactly one of:

  cp_oncpu_ns     a waker was running (the wait was for its work)
  cp_runnable_ns  a waker was runnable: scheduler delay one or more hops away
                  (cp_runnable_hop1_ns: of it, the first hop's)
  cp_blocked_ns   a waker was blocked and the chain ends there (depth limit, or its
                  waits have no wakeup recorded)
  cp_irq_ns       the wait was ended by a hard IRQ or a softirq not run by a task
                  (timers, devices): nobody is blamed, least of all the interrupted task
  cp_unknown_ns   no wakeup record, or the waker was not traced (another process: add
                  it with --also-pid PID)

so Σ cp = the request's blocked time (lock_wait + io_wait + sleep + blocked) up to
the streams' agreement, and it says where that time went. Nothing here is a part
of the closure; it explains the blocked parts.

Every step is vectorised: the waits that overlap a set of windows are found with
one searchsorted on a thread axis (overlaps), and each hop is one thread_brief
call over all of that hop's segments (the run's interval sets are built once), for
CP_CHUNK requests at a time.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..load.load import WAKER_BLAMES_TASK, fold_comm, per_run, thread_names
from .states import thread_brief
from .antagonists import antagonists_in_windows, has_occupancy, occupant_summary
from .intervals import Axis
from .order import Lookup, argsort_unless_sorted, row_index, unique_of
from .peer import process_name, also_comm
from .known_locks import condvar_word, lock_group
from .waits import FUTEX_CMD_MASK, FUTEX_WAIT_BITSET, REASONS, describe, switch_fields, wait_core

MAX_DEPTH = 3
MAX_REQUESTS = 50_000   # requests followed in full; above, ≥P99 and band samples (_followed)
CP_COLS = ["cp_oncpu_ns", "cp_runnable_ns", "cp_runnable_hop1_ns", "cp_blocked_ns",
           "cp_irq_ns", "cp_unknown_ns"]
IRQ_CTXS = ("hardirq", "softirq")
SEG_COLS = ["request_row", "root", "depth", "tid", "t_start_ns", "t_end_ns", "reason", "call",
            "wait_addr", "wait_aux", "ustack_id", "waker_tid", "waker_pid", "waker_ctx",
            "w_oncpu_ns", "w_runnable_ns", "w_blocked_ns", "w_blocked_rest_ns", "verdict",
            "blame"]
VERDICTS = ["waker on CPU", "waker runnable", "waker blocked", "interrupt", "unknown waker"]


class WaitIndex:
    """Waits [w_s, w_e) of threads w_tid on one axis, sorted once: many overlaps queries
    (each critical-path hop, the wait objects) without sorting the run's waits again.
    rows: only these rows of the arrays are waits (wait i is row rows[i]; no copy made)."""

    def __init__(self, w_tid, w_s, w_e, rows: np.ndarray | None = None):
        self.w_s, self.w_e = np.asarray(w_s, np.int64), np.asarray(w_e, np.int64)
        self.rows = rows
        sel = slice(None) if rows is None else rows     # a view, or the rows' values
        tid, s, e = np.asarray(w_tid)[sel], self.w_s[sel], self.w_e[sel]
        self.axis = Axis(tid, s.min(), e.max()) if len(tid) else None
        if self.axis is None:
            return
        gw, _ = self.axis.index(tid)
        ks = self.axis.key(gw, s)
        self.order = argsort_unless_sorted(ks, stable=True)     # None: in order already
        self.ks = ks if self.order is None else ks[self.order]
        ke = self.axis.key(gw, e)
        self.reach = np.maximum.accumulate(ke if self.order is None else ke[self.order])

    def query(self, q_tid, q_s, q_e):
        """(query index, wait index, start, end) of each wait of thread q_tid[i] that
        overlaps window [q_s[i], q_e[i]), clipped to the window. The windows' times are
        clipped to the waits' span on the axis, which loses no overlap."""
        z = np.zeros(0, np.int64)
        q_tid = np.asarray(q_tid, np.int64)
        if self.axis is None or not len(q_tid):
            return z, z, z, z
        q_s, q_e = np.asarray(q_s, np.int64), np.asarray(q_e, np.int64)
        gq, on = self.axis.index(q_tid)
        lo = np.searchsorted(self.reach, self.axis.key(gq, q_s), side="right")
        hi = np.searchsorted(self.ks, self.axis.key(gq, q_e), side="left")
        cnt = np.where(on, np.maximum(hi - lo, 0), 0)   # a thread without waits: none
        qi = np.repeat(np.arange(len(q_tid)), cnt)
        wi = np.arange(cnt.sum()) + np.repeat(lo - (np.cumsum(cnt) - cnt), cnt)
        if self.order is not None:
            wi = self.order[wi]
        r = wi if self.rows is None else self.rows[wi]
        a, b = np.maximum(self.w_s[r], q_s[qi]), np.minimum(self.w_e[r], q_e[qi])
        keep = b > a
        return qi[keep], wi[keep], a[keep], b[keep]


def overlaps(w_tid, w_s, w_e, q_tid, q_s, q_e):
    """(query index, wait index, start, end) of each wait [w_s, w_e) of thread q_tid[i]
    that overlaps window [q_s[i], q_e[i]), clipped to the window (WaitIndex.query)."""
    return WaitIndex(w_tid, w_s, w_e).query(q_tid, q_s, q_e)


def _followable(run) -> tuple[pd.DataFrame, np.ndarray, WaitIndex]:
    """wait_core's frame, the rows of it with a blocked part, and their WaitIndex (kept on
    the run while wait_core's frame is the same: the rows, not a copy of them)."""
    w = wait_core(run)

    def build():
        rows = row_index(np.flatnonzero(w["t_wake_ns"].to_numpy() > w["t_off_ns"].to_numpy()),
                         len(w))
        return rows, WaitIndex(*(w[c].to_numpy() for c in ("tid", "t_off_ns", "t_wake_ns")),
                               rows=rows)

    return (w, *per_run(run, "_followable", (id(w),), build))


def _segments(run, waits: pd.DataFrame, qi, wi, a, b) -> pd.DataFrame:
    seg = {c: take(waits[c], wi) for c in ("tid", "reason", "call")}
    seg.update(switch_fields(run, waits, wi, ("wait_addr", "wait_aux", "ustack_id")))
    seg.update({c: take(waits[c], wi) for c in ("waker_tid", "waker_pid", "waker_ctx")})
    seg["t_start_ns"], seg["t_end_ns"], seg["parent"] = a, b, qi
    return pd.DataFrame(seg, copy=False)


def take(col: pd.Series, rows: np.ndarray):
    """col's values at rows, as an array (a Categorical for a categorical column): without
    indexing the whole frame they belong to."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        return pd.Categorical.from_codes(col.cat.codes.to_numpy()[rows],
                                         dtype=col.dtype)
    return col.to_numpy()[rows]


def _resolve(run, seg: pd.DataFrame, traced: np.ndarray) -> pd.DataFrame:
    """Measure each segment's waker in its window: w_oncpu/w_runnable/w_blocked (ns) and
    the verdict. Segments whose waker is not blamed get zeros and an irq/unknown verdict."""
    ctx = seg["waker_ctx"]
    wk = seg["waker_tid"].to_numpy(np.int64)
    blame = (ctx.isin(WAKER_BLAMES_TASK).to_numpy() & np.isin(wk, traced)
             & (wk != seg["tid"].to_numpy(np.int64)))
    irq = ctx.isin(IRQ_CTXS).to_numpy()
    n = len(seg)
    on, rn, bl = np.zeros(n), np.zeros(n), np.zeros(n)
    if blame.any():
        # windows sorted by (thread, start): the binary searches inside walk memory in order
        b = np.flatnonzero(blame)
        a0 = seg["t_start_ns"].to_numpy()[b]
        b = b[np.lexsort((a0, wk[b]))]
        st = thread_brief(run, wk[b], seg["t_start_ns"].to_numpy()[b],
                          seg["t_end_ns"].to_numpy()[b])
        on[b] = st["oncpu_ns"].fillna(0).to_numpy()
        rn[b] = st["runnable_ns"].fillna(0).to_numpy()
        bl[b] = st["blocked_all_ns"].fillna(0).to_numpy()
    seg["w_oncpu_ns"], seg["w_runnable_ns"], seg["w_blocked_ns"] = on, rn, bl
    v = np.argmax(np.stack([on, rn, bl]), axis=0)       # VERDICTS[0..2]
    seg["verdict"] = pd.Categorical.from_codes(np.where(blame, v, np.where(irq, 3, 4)),
                                               categories=VERDICTS)
    seg["blame"] = blame
    return seg


def _followed(decomp: pd.DataFrame, ok: np.ndarray, max_requests: int) -> np.ndarray:
    """Rows of decomp whose critical path is followed: every traced one up to max_requests;
    beyond, every ≥P99 request (the tail the headline explains) and, in each lower band
    (≤P50, P50–P90, P90–P99), an evenly spaced sample of an equal share of what is left of
    max_requests, so every band's means stay measured and the work stays bounded."""
    rows = np.flatnonzero(ok)
    if len(rows) <= max_requests or "latency_ns" not in decomp:
        return rows
    lat = decomp["latency_ns"].to_numpy(np.float64)[rows]
    p50, p90, p99 = np.percentile(lat, [50, 90, 99])
    tail = lat >= p99
    k = max((max_requests - int(tail.sum())) // 3, 1)
    keep = [rows[tail]]
    for band in (lat <= p50, (lat > p50) & (lat <= p90), (lat > p90) & ~tail):
        r = rows[band]
        keep.append(r[np.linspace(0, len(r) - 1, k).astype(np.int64)] if k < len(r) else r)
    return np.sort(np.concatenate(keep))


CP_CHUNK = 10_000   # requests followed at a time: bounds the hops' temporary arrays


def df_critical_path(run, decomp: pd.DataFrame, max_depth: int = MAX_DEPTH,
                     max_requests: int = MAX_REQUESTS):
    """(per request, segments): per request (decomp's index) the CP_COLS; segments: one
    row per wait followed (SEG_COLS), root = the index of the request's own wait (depth 0)
    it explains. Empty / NaN without switches, runq or wait reasons' wakers. Above
    max_requests requests, only _followed's are followed; the others' CP_COLS are NaN."""
    per = pd.DataFrame(np.nan, index=decomp.index, columns=CP_COLS)
    if not (run.has("switches") and run.has("runq")) or not len(decomp):
        return per, pd.DataFrame(columns=SEG_COLS)
    waits, wrows, index = _followable(run)
    traced = unique_of(run.switches["tid"].to_numpy())
    ok = decomp["traced"].to_numpy(bool) if "traced" in decomp else np.ones(len(decomp), bool)
    rows = _followed(decomp, ok, max_requests)
    tid, t_s, t_e = (decomp[c].to_numpy(np.int64) for c in ("tid", "t_start_ns", "t_end_ns"))
    by_depth = [[] for _ in range(max_depth)]   # each depth's segments, chunk after chunk
    n_seg = [0] * max_depth                      # and how many so far: parent / root offsets
    seg = child = None
    for lo in range(0, len(rows), CP_CHUNK):
        part = rows[lo:lo + CP_CHUNK]
        qi, wi, a, b = index.query(tid[part], t_s[part], t_e[part])
        seg = _segments(run, waits, qi + lo, wrows[wi], a, b)
        seg["request_row"], seg["root"], seg["depth"] = \
            part[qi], np.arange(len(seg)) + n_seg[0], 0
        for depth in range(max_depth):
            if not len(seg):
                break
            seg = _resolve(run, seg, traced)
            child = pd.DataFrame()
            if depth + 1 < max_depth and seg["blame"].any():
                p = np.flatnonzero(seg["blame"].to_numpy())
                ci, wi, a, b = index.query(seg["waker_tid"].to_numpy(np.int64)[p],
                                           seg["t_start_ns"].to_numpy(np.int64)[p],
                                           seg["t_end_ns"].to_numpy(np.int64)[p])
                child = _segments(run, waits, p[ci] + n_seg[depth], wrows[wi], a, b)
                child["request_row"] = seg["request_row"].to_numpy()[p[ci]]
                child["root"] = seg["root"].to_numpy()[p[ci]]
                child["depth"] = depth + 1
                followed = np.bincount(p[ci], weights=(b - a), minlength=len(seg))
                seg["w_blocked_rest_ns"] = np.maximum(seg["w_blocked_ns"].to_numpy() - followed,
                                                      0)
            else:
                seg["w_blocked_rest_ns"] = seg["w_blocked_ns"]
            by_depth[depth].append(seg)
            n_seg[depth] += len(seg)
            seg = child
    done = [f for fs in by_depth for f in fs]
    del by_depth, seg, child
    segs = _stack(done) if done else pd.DataFrame(columns=SEG_COLS)
    _accumulate(per, segs, decomp.index)
    skipped = np.ones(len(decomp), bool)
    skipped[rows] = False
    per.loc[skipped] = np.nan
    return per, segs


def _stack(frames: list) -> pd.DataFrame:
    """pd.concat(frames, ignore_index=True) of frames with the same columns and dtypes,
    column after column, the columns of one dtype together: each piece is let go of once
    joined, so the segments are held about once, not twice (frames is emptied)."""
    pieces = [{c: f[c] for c in f.columns} for f in frames]
    names, dtypes = list(frames[0].columns), frames[0].dtypes
    frames.clear()
    out = {}
    for c in sorted(names, key=lambda c: str(dtypes[c])):
        col = [p.pop(c) for p in pieces]
        if isinstance(dtypes[c], pd.CategoricalDtype):
            out[c] = pd.Categorical.from_codes(
                np.concatenate([x.cat.codes.to_numpy() for x in col]), dtype=dtypes[c])
        elif isinstance(dtypes[c], np.dtype):
            out[c] = np.concatenate([x.to_numpy() for x in col])
        else:                                           # another extension type
            out[c] = pd.concat(col, ignore_index=True)
        del col
    return pd.DataFrame({c: out.pop(c) for c in names}, copy=False)


def has_wakers(run) -> bool:
    """Were wakers recorded (any wakeup with a context other than none / unknown)?"""
    ctx = run.runq["waker_ctx"]     # categorical: compared by code, not as 3M strings
    return bool(len(ctx)) and bool((~ctx.isin(("none", "unknown"))).any())


def _accumulate(per: pd.DataFrame, segs: pd.DataFrame, index) -> None:
    """Sum the segments into the per-request CP_COLS (requests with no wait: zeros)."""
    n = len(index)
    row = segs["request_row"].to_numpy(np.int64)
    dur = (segs["t_end_ns"] - segs["t_start_ns"]).to_numpy(np.float64)
    blame = segs["blame"].to_numpy(bool)

    def total(w):
        return np.bincount(row, weights=w, minlength=n)[:n]

    hop1 = segs["depth"].to_numpy() == 0
    per["cp_oncpu_ns"] = total(segs["w_oncpu_ns"].to_numpy())
    per["cp_runnable_ns"] = total(segs["w_runnable_ns"].to_numpy())
    per["cp_runnable_hop1_ns"] = total(np.where(hop1, segs["w_runnable_ns"], 0))
    per["cp_blocked_ns"] = total(np.where(blame, segs["w_blocked_rest_ns"], 0))
    per["cp_irq_ns"] = total(np.where(_is(segs["verdict"], VERDICTS[3]), dur, 0))
    per["cp_unknown_ns"] = total(np.where(_is(segs["verdict"], VERDICTS[4]), dur, 0))


def _is(col: pd.Series, value: str) -> np.ndarray:
    """col == value as a bool array (a categorical column compared by its code)."""
    return (col == value).to_numpy(bool)


# ---- the root cause of a band's blocked time, in numbers and in words -----------------

REASON_OF_PART = {"lock_wait": "lock", "io_wait": "io", "sleep": "sleep", "blocked": "other"}


def _dur(s: pd.DataFrame) -> np.ndarray:
    return (s["t_end_ns"] - s["t_start_ns"]).to_numpy(np.float64)


def _pid_of_tid(run) -> dict[int, int]:
    """tid -> pid of the traced threads (tasks.bin, switches.bin, runq.bin)."""
    def build() -> dict[int, int]:
        m = {}
        for df in (run.runq, run.switches, run.tasks):
            if len(df):
                u = df[["tid", "pid"]].drop_duplicates("tid")
                m.update(zip(u["tid"].astype(int), u["pid"].astype(int)))
        return m
    return per_run(run, "_pid_of_tid", (id(run.runq), id(run.switches), id(run.tasks)), build)


def _proc_comm(run, pid: int, any_thread: bool = False) -> str:
    """The comm of a process's main thread (with any_thread, else of one of its threads,
    its digits folded: the program), '' if unknown."""
    t = run.tasks
    mine = t[t["pid"].to_numpy(np.int64) == pid] if len(t) else t
    main = mine.loc[mine["tid"].to_numpy(np.int64) == pid, "comm"] if len(mine) else []
    if len(main):
        return str(main.iloc[0])
    if any_thread and len(mine):
        return fold_comm(str(mine["comm"].iloc[0]))
    return also_comm(run, pid)


def _who(run, first: pd.DataFrame, own_pids) -> str:
    """'orders-w0, orders-w1 of orders-server (pid 1234)': the threads that ended most of
    the waits (by time), in the process that ended most of them; '(same process)' only
    when that is the waiting threads' own process, 'of another process of the same
    program, postgres (pid 4711)' when it runs the same program (a pre-fork server)."""
    b = first[first["blame"].to_numpy(bool)]
    if b.empty:
        return ""
    w = pd.Series(_dur(b), index=pd.MultiIndex.from_arrays(
        [b["waker_pid"].to_numpy(np.int64), b["waker_tid"].to_numpy(np.int64)]))
    by_pid = w.groupby(level=0).sum().sort_values(ascending=False)
    pid = int(by_pid.index[0])
    tids = w.loc[pid].groupby(level=0).sum().sort_values(ascending=False)
    names = thread_names(run)
    comms = [str(names.get(int(t), f"tid {int(t)}")) for t in tids.index[:2]]
    more = f" and {len(tids) - 2} more" if len(tids) > 2 else ""
    pids = _pid_of_tid(run)
    mine = b[b["waker_pid"].to_numpy(np.int64) == pid]
    u, inv = np.unique(mine["tid"].to_numpy(np.int64), return_inverse=True)
    waiting = pd.Series(_dur(mine), index=np.array([pids.get(int(t), -1) for t in u],
                                                   dtype=np.int64)[inv.reshape(-1)])
    waiting = waiting.groupby(level=0).sum()
    if len(waiting) and int(waiting.idxmax()) == pid:
        return f"{', '.join(comms)}{more} (same process)"
    t = run.tasks
    proc = process_name(pid, list(t.loc[t["pid"].to_numpy(np.int64) == pid, "comm"])
                         if len(t) else [], _proc_comm(run, pid) or None)
    their = _proc_comm(run, int(waiting.idxmax()), True) if len(waiting) else ""
    if their and their == _proc_comm(run, pid, True):
        return f"{', '.join(comms)}{more} of another process of the same program, {proc}"
    return f"{', '.join(comms)}{more} of {proc}"


def root_cause(run, decomp: pd.DataFrame, segs: pd.DataFrame, mask, part: str) -> dict | None:
    """Where the `part` (lock_wait, io_wait, sleep, blocked) time of the requests in mask
    went: {wait_ms, waker_oncpu_ms, waker_runnable_ms, waker_runnable_hop1_ms,
    waker_blocked_ms, irq_ms, unknown_ms (sums over the requests, ms), what (the object
    waited on most), what_share, what_phrase (for a sentence: 'mostly … (N% of it)' or
    'spread over N futexes (…)'), who (the threads that ended it), hop2, verdict (the largest
    component), antagonists (an occupant_summary of the wakers' runnable time), own_pids (the
    requests' processes)}; render/words.py root_cause_sentence says it in words.
    None when those requests have no such wait."""
    if segs is None or segs.empty or part not in REASON_OF_PART:
        return None
    rows = np.flatnonzero(np.asarray(mask, bool))
    first = segs[(segs["depth"].to_numpy() == 0) & np.isin(segs["request_row"], rows)
                 & (segs["reason"].cat.codes.to_numpy()
                    == REASONS.index(REASON_OF_PART[part]))]
    if first.empty:
        return None
    chain = segs[np.isin(segs["root"], first["root"])]
    dur, blame = _dur(chain), chain["blame"].to_numpy(bool)
    ms = {"wait_ms": _dur(first).sum() / 1e6,
          "waker_oncpu_ms": chain["w_oncpu_ns"].sum() / 1e6,
          "waker_runnable_ms": chain["w_runnable_ns"].sum() / 1e6,
          "waker_runnable_hop1_ms": first["w_runnable_ns"].sum() / 1e6,
          "waker_blocked_ms": np.where(blame, chain["w_blocked_rest_ns"], 0).sum() / 1e6,
          "irq_ms": dur[_is(chain["verdict"], VERDICTS[3])].sum() / 1e6,
          "irq_hop1_ms": _dur(first)[_is(first["verdict"], VERDICTS[3])].sum() / 1e6,
          "unknown_ms": dur[_is(chain["verdict"], VERDICTS[4])].sum() / 1e6}
    obj = first.assign(_d=_dur(first)).groupby(["call", "wait_addr", "wait_aux"],
                                               observed=True)["_d"].sum()
    top = obj.idxmax()
    row = first[(first["call"] == top[0]) & (first["wait_addr"] == top[1])
                & (first["wait_aux"] == top[2])].iloc[0]
    own = np.unique(decomp["pid"].to_numpy(np.int64)[rows]) if "pid" in decomp else []
    what, share = describe(run, row), obj.max() / obj.sum()
    phrase = f"mostly {what} ({share * 100:.0f}% of it)" if what else ""
    if share < 0.5 and str(row["call"]) and "futex" not in str(row["call"]):
        by_call = first.assign(_d=_dur(first)).groupby("call", observed=True)["_d"].sum()
        n = first.loc[first["call"] == top[0], "tid"].nunique()
        what, share = f"in {top[0]}() across {n} thread{'s' if n > 1 else ''}", \
            by_call.max() / by_call.sum()
        phrase = f"mostly {what} ({share * 100:.0f}% of it)"
    elif share < 0.5 and what:
        phrase = f"spread over {len(obj)} futexes (the largest: {what}, {share * 100:.0f}%)"
    by_task = first["waker_ctx"].isin(WAKER_BLAMES_TASK).to_numpy()
    d1 = _dur(first)
    out = {**ms, "what": what, "what_share": share, "what_phrase": phrase,
           "who": _who(run, first, own),
           # who ended the waits: a task of the traced program(s), or an interrupt
           "ended_by_task_share": float(d1[by_task].sum() / d1.sum())
           if d1.sum() else 0.0}
    out["hop2"] = _second_hop(run, chain, own)
    out["verdict"] = _verdict(out)
    out["antagonists"] = _chain_antagonists(run, chain)
    out["own_pids"] = [int(p) for p in own]
    return out


HOP2_END = dict(zip(VERDICTS, ["on CPU", "runnable (waiting for a CPU)", "blocked in turn",
                               "itself waiting for a timer or a device", "not traced"]))


def _second_hop(run, chain: pd.DataFrame, own) -> str:
    """What the wakers of the first waits were blocked in, and who ended that: 'mutex
    0x55d0... in stall_order, which orders-ledger of ... ended, which itself waited for
    a timer or a device'; '' when the chain stops at the first hop."""
    d1 = chain[chain["depth"].to_numpy() == 1]
    if d1.empty:
        return ""
    d = _dur(d1)
    key = d1.assign(_d=d).groupby(["call", "wait_addr", "wait_aux"], observed=True)["_d"].sum()
    top = key.idxmax()
    row = d1[(d1["call"] == top[0]) & (d1["wait_addr"] == top[1])
             & (d1["wait_aux"] == top[2])].iloc[0]
    what = describe(run, row) or "an unknown wait"
    holder = _convoy_holder(run, d1, top, own)
    if holder:
        return f"{what}, a convoy behind {holder}"
    who = _who(run, d1, own)
    how = HOP2_END.get(_top_verdict(d1["verdict"], d), "")
    if not who:
        return what
    return f"{what}, which {who} ended" + (f" after being {how}" if how else "")


def _top_verdict(verdict: pd.Series, d: np.ndarray) -> str:
    """The verdict with the most time d (of a tie, the first by name)."""
    code = pd.Categorical(verdict, categories=VERDICTS).codes
    seen = np.bincount(code, minlength=len(VERDICTS)) > 0
    tot = np.bincount(code, weights=d, minlength=len(VERDICTS))
    return min(v for v, n, t in zip(VERDICTS, seen, tot) if n and t == tot[seen].max())


def _convoy_holder(run, d1: pd.DataFrame, top, own) -> str:
    """When the threads that released a lock had waited for it themselves (a convoy), the
    one the queue formed behind: over the waits on that object around these, the wakers
    that never waited for it, by the wait time they ended ('' when it is no convoy)."""
    b = d1[d1["blame"].to_numpy(bool)]
    if b.empty or top[0] not in ("futex", "futex_waitv"):
        return ""
    w = wait_core(run)
    t0, t1 = int(b["t_start_ns"].min()), int(b["t_end_ns"].max())
    # the waits on that object (call is categorical: compared by code)
    near = np.flatnonzero((w["t_wake_ns"].to_numpy() >= t0 - (t1 - t0))
                          & (w["t_off_ns"].to_numpy() <= t1))
    near = near[switch_fields(run, w, near, ("wait_addr",))["wait_addr"] == top[1]]
    same = w.iloc[near]
    same = same[(same["call"] == top[0]).to_numpy()]
    waiters = set(same["tid"].astype(int))
    if not set(b["waker_tid"].astype(int)) & waiters:
        return ""               # the releasers did not wait for it: no convoy
    held = same[~same["waker_tid"].isin(waiters).to_numpy()
                & same["waker_ctx"].isin(WAKER_BLAMES_TASK).to_numpy()]
    if held.empty:
        return ""
    held = held.assign(t_start_ns=held["t_off_ns"], t_end_ns=held["t_wake_ns"], blame=True)
    return _who(run, held, own)


def _chain_antagonists(run, chain: pd.DataFrame) -> dict | None:
    """Who held the CPUs while the wakers of a chain were runnable: an occupant_summary over
    the blamed segments' windows (analyze/explain/antagonists.py); None without the cpu
    event or without such time."""
    b = chain[chain["blame"].to_numpy(bool)]
    if not has_occupancy(run) or b.empty:
        return None
    part = antagonists_in_windows(run, b["waker_tid"].to_numpy(np.int64),
                                  b["t_start_ns"].to_numpy(np.int64),
                                  b["t_end_ns"].to_numpy(np.int64))
    if part.empty:
        return None
    return occupant_summary(part, run, float(part["ns"].sum()) / 1e6)


def _verdict(c: dict) -> str:
    """The largest component of a root_cause dict: runnable, oncpu, blocked, irq or
    unknown (render/words.py root_cause_sentence says it)."""
    comp = {"runnable": c["waker_runnable_ms"], "oncpu": c["waker_oncpu_ms"],
            "blocked": c["waker_blocked_ms"], "irq": c["irq_ms"], "unknown": c["unknown_ms"]}
    return max(comp, key=comp.get)


# ---- what the traced threads waited on, over the whole run -----------------------------

MIN_WAITS = 3
SAMPLE_WAITS = 20_000   # waits per object followed for its shares (evenly spaced)
OBJ_COLS = ["pid", "processes", "reason", "what", "threads", "waits", "total_ms", "mean_us",
            "ended_by", "timed_out_share", "timeout_ms",
            "waker_oncpu_share", "waker_runnable_share", "waker_blocked_share", "irq_share",
            "unknown_share"]


def _object_keys(run, w: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """A futex is one object per address; other waits are grouped by syscall (fds of many
    connections are one kind of wait). The processes of one program (same name: a pre-fork
    server's workers) count as one. One integer per (program, syscall, futex address) of
    each of w's rows, numbered in order of first appearance."""
    lock = w["reason"].cat.codes.to_numpy()[rows] == REASONS.index("lock")
    pids = switch_fields(run, w, rows, ("pid",))["pid"]
    u = unique_of(pids)
    prog = pd.factorize(np.array([_proc_comm(run, int(p), True) or f"pid {int(p)}"
                                  for p in u], dtype=object))[0].astype(np.int64)
    k = prog[Lookup(u)(pids)[0]]
    del pids
    call = switch_fields(run, w, rows, ("syscall",))["syscall"]
    lo = int(call.min())
    k *= int(call.max()) - lo + 1
    k += call
    k -= lo
    del call
    # the reason follows the call: only futex waits (lock) have an object per address, a
    # condition variable's two words one, a known lock's words one (known_locks.py)
    addr = np.zeros(len(rows), np.int64)
    addr[lock] = pd.factorize(_futex_objects(run, w, rows[lock]))[0] + 1
    k *= int(addr.max()) + 1
    k += addr
    return pd.factorize(k)[0]


def _futex_objects(run, w: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """One value per futex wait of rows that is the same for the words of one object."""
    f = switch_fields(run, w, rows, ("wait_addr", "wait_aux", "pid"))
    addr = f["wait_addr"].astype(np.int64)
    cond = (f["wait_aux"].astype(np.int64) & FUTEX_CMD_MASK) == FUTEX_WAIT_BITSET
    obj = np.where(cond, condvar_word(addr), addr).astype(object)
    if run.wait_names:
        pid = f["pid"].astype(np.int64)
        pairs, inv = np.unique(np.stack([pid, addr]), axis=1, return_inverse=True)
        group = np.array([lock_group(run, int(p), int(a)) for p, a in pairs.T], dtype=object)
        g = group[inv.reshape(-1)]
        obj = np.where(g != "", g, obj)
    return obj


def _wait_row(run, w: pd.DataFrame, i: int) -> dict:
    """Row i of wait_core's frame with the switch record's fields: what describe reads."""
    f = switch_fields(run, w, np.array([i]), ("wait_addr", "wait_aux", "ustack_id", "pid"))
    return {**w.iloc[i].to_dict(), **{c: v[0] for c, v in f.items()}}


def df_wait_objects(run, top: int = 10, max_depth: int = 2,
                    min_waits: int = MIN_WAITS) -> pd.DataFrame:
    """The objects the traced threads spent most blocked time on, whole run (OBJ_COLS), each
    waited on at least MIN_WAITS times: a
    futex by address ('mutex 0x… in tp_submit'), else a syscall ('epoll_wait epoll fd 6'
    as an example), over the processes of one program (pid: one of them, processes: how
    many); threads ('pool-w*' patterns), count, total and mean wait, the threads that
    ended most of it, and the shares of the wait during which they were on CPU, runnable,
    blocked — each wait treated as a window of its own through df_critical_path, over at
    most SAMPLE_WAITS evenly spaced waits per object (count and total: all of them); for
    futex waits, the share that timed out (a timer ended them) and their median length."""
    if not (run.has("switches") and run.has("runq")) or not len(run.switches):
        return pd.DataFrame(columns=OBJ_COLS)
    w, blocked, _ = _followable(run)        # the waits with a blocked part
    if not len(blocked):
        return pd.DataFrame(columns=OBJ_COLS)
    key = _object_keys(run, w, blocked)
    d = (w["t_wake_ns"].to_numpy()[blocked] - w["t_off_ns"].to_numpy()[blocked]).astype(
        np.float64)
    tot, size = np.bincount(key, weights=d), np.bincount(key)
    # a thread that waited once or twice for the whole run (main() joining its workers)
    # says little: objects waited on at least MIN_WAITS times
    per_key = pd.Series(tot)[size >= min_waits]
    keys = per_key.nlargest(top).index.to_numpy()
    if not len(keys):
        return pd.DataFrame(columns=OBJ_COLS)
    # the shares need a sample, not every wait: at most SAMPLE_WAITS per object, evenly spaced
    members = {k: np.flatnonzero(key == k) for k in keys}   # into blocked, in order
    sample = np.sort(np.concatenate(
        [m[::max(len(m) // SAMPLE_WAITS, 1)] for m in members.values()]))
    rows = blocked[sample]
    pseudo = pd.DataFrame({"tid": w["tid"].to_numpy()[rows],
                           "pid": switch_fields(run, w, rows, ("pid",))["pid"],
                           "t_start_ns": w["t_off_ns"].to_numpy()[rows],
                           "t_end_ns": w["t_wake_ns"].to_numpy()[rows], "traced": True})
    per, segs = df_critical_path(run, pseudo, max_depth=max_depth)
    names = thread_names(run)
    first_segs = segs[segs["depth"].to_numpy() == 0]
    s_key, s_d = key[sample], d[sample]
    out = []
    for k in keys:
        g = blocked[members[k]]
        total, n = float(tot[k]), len(g)
        tids, pids = w["tid"].to_numpy()[g], switch_fields(run, w, g, ("pid",))["pid"]
        comms = sorted({fold_comm(str(names.get(int(t), t))) for t in np.unique(tids)})
        mine = np.flatnonzero(s_key == k)
        first = first_segs[np.isin(first_segs["request_row"].to_numpy(), mine)]
        tot_s = s_d[mine].sum()
        # waits the critical path did not follow (above its MAX_REQUESTS) are NaN: skipped
        sh = {c: np.nansum(per[f"cp_{c}_ns"].to_numpy()[mine]) / tot_s
              for c in ("oncpu", "runnable", "blocked", "irq", "unknown")}
        # a futex wait a timer ended timed out (pthread_cond_timedwait: the GIL's 5 ms)
        timed = (w["waker_ctx"].to_numpy()[g] == "hardirq") & (
            w["reason"].cat.codes.to_numpy()[g] == REASONS.index("lock"))
        out.append({"pid": int(pids[0]), "processes": int(len(np.unique(pids))),
                    "timed_out_share": float(timed.mean()),
                    "timeout_ms": float(np.median(d[members[k]][timed])) / 1e6 if timed.any()
                    else 0.0,
                    "reason": str(w["reason"].iloc[g[0]]),
                    "what": describe(run, _wait_row(run, w, g[0])),
                    "threads": ", ".join(comms[:4]),
                    "waits": n, "total_ms": total / 1e6, "mean_us": total / n / 1e3,
                    "ended_by": _who(run, first, []) if len(first) else "",
                    "waker_oncpu_share": sh["oncpu"], "waker_runnable_share": sh["runnable"],
                    "waker_blocked_share": sh["blocked"], "irq_share": sh["irq"],
                    "unknown_share": sh["unknown"]})
    return pd.DataFrame(out, columns=OBJ_COLS)
