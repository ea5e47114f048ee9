"""trace.json: the run as a Chrome JSON trace, for ui.perfetto.dev.

Tracks (pid = process, tid = track):
  - thread T itself: its requests as "X" slices (lane 0). A thread serving
    overlapping requests (the async event loop) gets extra request lanes on
    synthetic tids T + k·2^22, so no track ever holds partially overlapping slices.
  - "T · state": synthetic tid T + 2^22·63, its thread states as "X" slices:
    Running / Runnable / Lock wait / I/O wait / Sleep / Blocked, back to back, never
    overlapping.
  - flow arrows ("s" -> "f", category "wakeup") from the waker's state track to the
    woken thread's at each wakeup a traced task caused (analyze/explain/waits.py; interrupts
    draw no arrow): follow them backwards from a slow request to who released it.
  - with the cpu event, a process "CPUs" (pid CPU_PID) with one track per CPU: who held
    it around the traced threads' waits (antagonists.df_occupancy segments, named by
    comm, args pid/tid; idle as "idle"), untraced tasks included.
Timestamps are µs relative to the run start (meta.json mono_start_ns, else the
first event). Thread states come from the probe streams: Runnable = a runq
interval; off CPU and not runnable: Lock wait / I/O wait / Sleep by the blocked
switch-out's wait reason (futex; read, poll, ...; nanosleep), or without wait
reasons Lock wait = between lock() entry and acquisition (locks uprobes);
Blocked = off CPU otherwise (switches), Running = the rest of the thread's
observed life. Everything is built with numpy over all threads at once.

Big runs are capped: when the trace would exceed `max_events` (requests, states, CPU
slices and wakeup arrows all count), only windows around the slowest requests are kept:
fewer of them, then a narrower margin around the slowest, then only its last part; trace
info says which.
"""
from __future__ import annotations

import heapq
import json
import os
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..load.load import WAKER_BLAMES_TASK, per_run, thread_names
from ..explain.findings import Findings
from ..explain.order import Lookup
from ..explain.waits import REASONS, has_reasons, reason_codes

STATES = np.array(["Running", "Runnable", "Lock wait", "Blocked", "I/O wait", "Sleep"])
_TID_SPAN = 1 << 22            # pid_max limit: synthetic tids live above it
_STATE_LANE = 63               # states track: tid + 63 * 2^22
CPU_PID = 2 * _TID_SPAN        # the "CPUs" process: one track per CPU (tid = CPU number)


@dataclass
class TraceInfo:
    """What went into trace.json (shown in the report)."""
    events: int = 0
    requests: int = 0
    state_slices: int = 0
    threads: int = 0
    truncated: bool = False
    windows: int = 0
    note: str = ""
    flows: int = 0      # waker -> wakee arrows
    t0_ns: int = 0
    extra: dict = field(default_factory=dict)


def _t0(run, decomp: pd.DataFrame) -> int:
    """Run start: meta mono_start_ns when it precedes every event, else the first event."""
    firsts = [decomp["t_enqueue_ns"].min()] if len(decomp) else []
    for df, col in ((run.switches, "t_off_ns"), (run.runq, "t_runnable_ns"),
                    (run.locks, "t_request_ns")):
        if len(df):
            firsts.append(df[col].min())
    first = int(min(firsts)) if firsts else 0
    start = int((run.meta or {}).get("mono_start_ns") or 0)
    return start if 0 < start <= first else first


def _interval_arrays(run) -> dict[str, tuple]:
    """Per-kind (tid, s, e) arrays of [start, end) intervals from the probe streams, as
    recorded (views where they can be; _intervals drops the empty ones): runnable, off, and
    the uprobe lock waits when the switches carry no wait reasons (with them, _intervals
    takes lock, io and sleep from the off rows it keeps), held."""
    out = {}
    derived = len(run.switches) and has_reasons(run)
    if len(run.runq):
        out["runnable"] = (run.runq["tid"].to_numpy(), run.runq["t_runnable_ns"].to_numpy(),
                           run.runq["t_run_ns"].to_numpy())
    if len(run.switches):
        sw = run.switches
        out["off"] = (sw["tid"].to_numpy(), sw["t_off_ns"].to_numpy(), sw["t_on_ns"].to_numpy())
    if len(run.locks):
        lk = run.locks
        acq = lk["t_acquired_ns"].to_numpy()
        if not derived:
            out["lock"] = (lk["tid"].to_numpy(), lk["t_request_ns"].to_numpy(), acq)
        rel = lk["t_released_ns"].to_numpy()
        out["held"] = (lk["tid"].to_numpy(), acq, np.where(rel > acq, rel, acq))
    return out


def _intervals(run, win: tuple | None = None) -> dict[str, pd.DataFrame]:
    """Per-kind [start, end) intervals with tid (int64 frames), the empty ones dropped;
    win: merged windows (_merge_windows), only the intervals that overlap one. The wait
    reasons' subsets are taken from the off rows kept, not from the whole run."""
    out = {}
    sw = run.switches
    derived = len(sw) and has_reasons(run)
    for k, (tid, s, e) in _interval_arrays(run).items():
        rows = _rows_in(s, e, win)
        out[k] = pd.DataFrame({"tid": tid[rows].astype(np.int64),
                               "s": s[rows].astype(np.int64, copy=False),
                               "e": e[rows].astype(np.int64, copy=False)})
        if k == "off" and derived:   # wait reasons: futex, I/O, sleep
            code = np.where(sw["voluntary"].to_numpy(bool)[rows],
                            reason_codes(sw["syscall"].to_numpy()[rows]), -1)
            for r in ("lock", "io", "sleep"):
                out[r] = out["off"][code == REASONS.index(r)].reset_index(drop=True)
    return out


def _rows_in(s, e, win: tuple | None) -> np.ndarray:
    """The rows of non-empty intervals [s, e) (s > 0) that overlap the merged windows
    win (all of them without)."""
    if win is None:
        return np.flatnonzero((e > s) & (s > 0))
    lo, hi = win
    if not len(lo):
        return np.zeros(0, np.int64)
    rows = np.flatnonzero((e > lo[0]) & (s < hi[-1]))   # inside the windows' span: cut first
    s, e = s[rows].astype(np.int64, copy=False), e[rows].astype(np.int64, copy=False)
    return rows[(e > s) & (s > 0) & _overlaps(s, e, lo, hi)]


def _extents(run, observed: pd.DataFrame | None) -> pd.DataFrame:
    """Each probed thread's [first, last] edge over the whole run (tid, s, e; the requests
    in `observed` count for a probed thread): the span its state track covers
    (df_thread_states), for a computation inside windows to know a thread exists there.
    Kept on the run. Reduced source by source, in place: no whole-run copy."""
    key = (id(run.runq), id(run.switches), id(run.locks), id(observed))
    return per_run(run, "_extents", key, lambda: _extents_of(run, observed))


def _extents_of(run, observed: pd.DataFrame | None) -> pd.DataFrame:
    src = [(t, a, z, True) for t, a, z in _interval_arrays(run).values()]
    if observed is not None and len(observed):
        src.append(tuple(observed[c].to_numpy(np.int64)
                         for c in ("tid", "t_start_ns", "t_end_ns")) + (False,))
    if not src:
        return pd.DataFrame({"tid": [], "s": [], "e": []}, dtype=np.int64)
    tids = np.unique(np.concatenate([pd.unique(t) for t, _, _, _ in src]).astype(np.int64))
    first = np.full(len(tids), np.iinfo(np.int64).max)
    last = np.full(len(tids), np.iinfo(np.int64).min)
    probed = np.zeros(len(tids), bool)   # a thread seen only in `observed` has no track
    lookup = Lookup(tids)
    for tid, s, e, probe in src:
        s, e = s.astype(np.int64, copy=False), e.astype(np.int64, copy=False)
        ok = (e > s) & (s > 0)
        if not ok.all():
            tid, s, e = tid[ok], s[ok], e[ok]
        g = lookup(tid)[0]
        np.minimum.at(first, g, s)
        np.maximum.at(last, g, e)
        if probe:
            probed |= np.bincount(g, minlength=len(tids)) > 0
    return pd.DataFrame({"tid": tids[probed], "s": first[probed], "e": last[probed]})


def df_thread_states(run, t0_ns: int = 0, observed: pd.DataFrame | None = None,
                     windows: np.ndarray | None = None) -> pd.DataFrame:
    """Back-to-back state slices per thread: tid, state, t_start_ns, t_end_ns.

    Each thread is observed from its first to its last probe event (a mutex
    held counts, and so does a request in `observed`: tid, t_start_ns, t_end_ns,
    e.g. the decomposition); inside,
    every ns is in exactly one state, as decompose.py counts them: Runnable (a
    runq interval), else off CPU inside a lock wait: Lock wait, else off CPU:
    Blocked, else Running. Adjacent segments of the same state are merged.
    Built once per run, `observed` and `windows` (the frame returned is the cached one,
    never to be modified); t0_ns only bounds the time keys. windows: [[lo, hi], ...]: only
    the slices inside them, clipped to them, computed from the intervals that overlap them
    (the same slices as the whole run's, clipped, at a fraction of the cost).
    """
    wkey = None if windows is None else np.asarray(windows, np.int64).tobytes()
    key = (id(run.runq), id(run.switches), id(run.locks), id(observed), wkey)
    return per_run(run, "_thread_states", key,
                   lambda: _thread_states(run, t0_ns, observed, windows))


_STATE_CHUNK = 2_000_000        # intervals per chunk of whole threads: bounds the sort's memory
_STATE_COLS = ["tid", "state", "t_start_ns", "t_end_ns"]


def _thread_states(run, t0_ns: int, observed: pd.DataFrame | None,
                   windows: np.ndarray | None) -> pd.DataFrame:
    win = None if windows is None else _merge_windows(np.asarray(windows, np.int64))
    iv = _intervals(run, win)
    if not iv or ("off" not in iv and "runnable" not in iv):
        return pd.DataFrame(columns=_STATE_COLS)
    if win is not None:   # every probed thread's extent: its track spans the windows
        ext = _extents(run, observed)
        iv["extent"] = ext[_overlaps(ext["s"].to_numpy(), ext["e"].to_numpy(), *win)]
        probed = ext["tid"].to_numpy()
    if observed is not None and len(observed):
        if win is None:
            probed = np.unique(np.concatenate([v["tid"].to_numpy(np.int64)
                                               for v in iv.values()]))
        o = pd.DataFrame({"tid": observed["tid"].to_numpy(np.int64),
                          "s": observed["t_start_ns"].to_numpy(np.int64),
                          "e": observed["t_end_ns"].to_numpy(np.int64)})
        o = o[o["tid"].isin(probed)]
        iv["observed"] = o if win is None else o[_overlaps(o["s"].to_numpy(),
                                                           o["e"].to_numpy(), *win)]
    if not sum(len(v) for v in iv.values()):      # nothing inside the windows
        return pd.DataFrame(columns=_STATE_COLS)
    kinds = list(iv)
    tid_all = np.concatenate([iv[k]["tid"].to_numpy(np.int64) for k in kinds])
    s_all = np.concatenate([iv[k]["s"].to_numpy(np.int64) for k in kinds])
    e_all = np.concatenate([iv[k]["e"].to_numpy(np.int64) for k in kinds])
    kind_all = np.repeat(np.arange(len(kinds), dtype=np.int8), [len(iv[k]) for k in kinds])
    del iv
    tids, ti = _thread_index(tid_all)
    del tid_all
    t0 = min(int(t0_ns) or int(s_all.min()), int(s_all.min()))
    # threads are independent: whole threads in chunks of about _STATE_CHUNK intervals
    order = np.argsort(ti, kind="stable")    # a radix sort while ti fits in 16 bits
    ends = np.cumsum(np.bincount(ti, minlength=len(tids)))
    cuts = np.unique(np.r_[np.searchsorted(ends, np.arange(_STATE_CHUNK, ends[-1],
                                                              _STATE_CHUNK)), len(tids) - 1])
    parts, lo = [], 0
    for g in cuts:
        hi = int(ends[g])
        rows = order[lo:hi]
        parts.append(_states_of(ti[rows], s_all[rows], e_all[rows], kind_all[rows], kinds, t0))
        lo = hi
    out = {c: np.concatenate([p[i] for p in parts]) for i, c in enumerate(_STATE_COLS)}
    out["tid"] = tids[out["tid"]]
    return _states_frame(out if win is None else _clip(out, *win))


def _states_frame(sl: dict) -> pd.DataFrame:
    """State slices (arrays of _STATE_COLS, state as codes into STATES) as the frame
    df_thread_states returns."""
    sl["state"] = pd.Categorical.from_codes(sl["state"], categories=STATES)
    return pd.DataFrame(sl, copy=False)[_STATE_COLS]


def _clip_frame(states: pd.DataFrame, win: np.ndarray) -> pd.DataFrame:
    """df_thread_states' frame cut to the windows [[lo, hi], ...] (_clip)."""
    if not len(states):
        return states
    return _states_frame(_clip({"tid": states["tid"].to_numpy(),
                                "state": states["state"].cat.codes.to_numpy(),
                                "t_start_ns": states["t_start_ns"].to_numpy(np.int64),
                                "t_end_ns": states["t_end_ns"].to_numpy(np.int64)},
                               *_merge_windows(win)))


def _clip(sl: dict, lo: np.ndarray, hi: np.ndarray) -> dict:
    """State slices (arrays tid, state, t_start_ns, t_end_ns) cut to the merged windows
    [lo, hi]: one piece per window a slice overlaps, none outside them."""
    s, e = sl["t_start_ns"], sl["t_end_ns"]
    first = np.searchsorted(hi, s, side="right")          # first window ending after s
    n = _windows_overlapped(s, e, lo, hi)
    rows = np.repeat(np.arange(len(s)), n)
    w = first[rows] + (np.arange(len(rows)) - np.repeat(np.cumsum(n) - n, n))
    out = {k: v[rows] for k, v in sl.items()}
    out["t_start_ns"] = np.maximum(s[rows], lo[w])
    out["t_end_ns"] = np.minimum(e[rows], hi[w])
    keep = out["t_end_ns"] > out["t_start_ns"]
    return {k: v[keep] for k, v in out.items()}


def _thread_index(tid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct tids, sorted; each row's index among them, in the narrowest integer
    type): np.unique's answer from a count over the tid values, not a sort, when tids
    are thread ids (0 <= tid < 2^23)."""
    if not len(tid) or tid.min() < 0 or tid.max() >= 1 << 23:
        tids, ti = np.unique(tid, return_inverse=True)
    else:
        tids = np.flatnonzero(np.bincount(tid))
        lut = np.zeros(int(tids[-1]) + 1, dtype=np.int64)
        lut[tids] = np.arange(len(tids))
        ti = lut[tid]
    return tids, ti.astype(np.int16 if len(tids) < 1 << 15 else np.int32)


def _distinct_edges(ti: np.ndarray, t: np.ndarray) -> tuple:
    """(thread index, time) of the distinct (ti, t) pairs in (ti, t) order, and each input
    pair's place among them. One sort of a packed int64 key when the thread index and the
    times since the first fit in it side by side (weeks of run for thousands of threads),
    else a sort on both columns."""
    t_min = int(t.min())
    shift = max(int(ti.max()).bit_length(), 1)
    if int(t.max()) - t_min < 1 << (62 - shift):
        key = (ti.astype(np.int64) << (62 - shift)) | (t - t_min)
        b, pos = np.unique(key, return_inverse=True)
        return b >> (62 - shift), (b & ((1 << (62 - shift)) - 1)) + t_min, pos
    order = np.lexsort((t, ti))
    ts, tis = t[order], ti[order]
    new = np.r_[True, (ts[1:] != ts[:-1]) | (tis[1:] != tis[:-1])]
    pos = np.empty(len(t), np.int64)
    pos[order] = np.cumsum(new) - 1
    return tis[new].astype(np.int64), ts[new], pos


def _states_of(ti, s, e, kind, kinds: list, t0: int) -> tuple:
    """The state slices of the intervals of some whole threads (ti: thread index, kind: an
    index into kinds; times before t0 count from t0): (thread index, state code, start,
    end) arrays, by thread then time."""
    n = len(ti)
    if not n:
        return tuple(np.zeros(0, np.int64) for _ in range(4))
    # every edge's place among the sorted distinct edges, from one sort (no searches)
    b_ti, b_t, pos = _distinct_edges(np.concatenate([ti, ti]),
                                     np.maximum(np.concatenate([s, e]).astype(np.int64), t0))
    pos_s, pos_e = pos[:n], pos[n:]
    nb = len(b_t)
    nseg = nb - 1
    if nseg <= 0:
        return tuple(np.zeros(0, np.int64) for _ in range(4))
    valid = b_ti[:-1] == b_ti[1:]

    def covered(name):
        if name not in kinds:
            return np.zeros(nseg, dtype=bool)
        m = kind == kinds.index(name)
        cnt = (np.bincount(pos_s[m], minlength=nb) - np.bincount(pos_e[m], minlength=nb))
        return np.cumsum(cnt)[:nseg] > 0

    runnable = covered("runnable")
    lock = covered("lock")
    io, sleep = covered("io"), covered("sleep")
    off = covered("off")
    why = np.where(lock, 2, np.where(io, 4, np.where(sleep, 5, 3)))
    state = np.where(runnable, 1, np.where(off, why, 0))
    idx = np.flatnonzero(valid)
    if not len(idx):
        return tuple(np.zeros(0, np.int64) for _ in range(4))
    st = state[idx]
    new = np.ones(len(idx), dtype=bool)
    new[1:] = (st[1:] != st[:-1]) | (idx[1:] != idx[:-1] + 1)
    first = idx[new]
    last = idx[np.r_[np.flatnonzero(new)[1:] - 1, len(idx) - 1]]
    return b_ti[first], st[new], b_t[first], b_t[last + 1]


def _lanes(tid: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Lane per slice so that slices of one (tid, lane) never overlap (greedy)."""
    order = np.lexsort((s, tid))
    lane = np.zeros(len(s), dtype=np.int64)
    ts, ss, es = tid[order], s[order], e[order]
    same = np.r_[False, ts[1:] == ts[:-1]]
    prev_end = _running_max_per_group(np.where(same, np.r_[0, es[:-1]], 0), np.cumsum(~same))
    # Threads whose requests never overlap stay in lane 0 (the common case).
    bad_tids = np.unique(ts[same & (ss < prev_end)])
    for t in bad_tids:
        pos = np.flatnonzero(ts == t)
        heap: list[tuple[int, int]] = []   # (end, lane) of lanes in use
        free: list[int] = []
        nlanes = 0
        for p in pos:
            while heap and heap[0][0] <= ss[p]:
                heapq.heappush(free, heapq.heappop(heap)[1])
            if free:
                ln = heapq.heappop(free)
            else:
                ln, nlanes = nlanes, nlanes + 1
            lane[order[p]] = ln
            heapq.heappush(heap, (int(es[p]), ln))
    return lane


def _running_max_per_group(v: np.ndarray, group: np.ndarray) -> np.ndarray:
    """The running maximum of v (>= 0) restarting at each group (group: non-decreasing ids):
    one accumulate over group · span + v, when that fits in int64."""
    v = v.astype(np.int64, copy=False)
    if not len(v):
        return v
    span = int(v.max()) + 1
    if int(group[-1]) * span < (1 << 62):
        base = group.astype(np.int64) * span
        return np.maximum.accumulate(base + v) - base
    out = np.empty_like(v)
    cuts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    for lo, hi in zip(cuts, np.r_[cuts[1:], len(v)]):
        out[lo:hi] = np.maximum.accumulate(v[lo:hi])
    return out


def _band_names(band: pd.Series) -> np.ndarray:
    """A request slice's name: its band among the run's requests (Findings.band), so a
    capped trace labels by the run's percentiles, not those of the requests it kept."""
    codes, distinct = pd.factorize(band.astype(object).to_numpy())   # NaN, None: code -1
    names = np.array([f"request {x}" for x in distinct] + ["request"], dtype=object)
    return names[codes]


def _windows(decomp: pd.DataFrame, k: int, pad_scale: float = 1.0,
             tail_ns: int | None = None) -> np.ndarray:
    """[lo, hi] around the k slowest requests: one request length of margin each side (at
    least 1 ms) times pad_scale; tail_ns: only the last tail_ns of each request, no margin."""
    slow = decomp.nlargest(k, "latency_ns")
    s, e = slow["t_start_ns"].to_numpy(np.int64), slow["t_end_ns"].to_numpy(np.int64)
    if tail_ns is not None:
        return np.stack([np.maximum(s, e - tail_ns), e], axis=1)
    pad = (np.maximum(slow["latency_ns"].to_numpy(), 1_000_000) * pad_scale).astype(np.int64)
    return np.stack([s - pad, e + pad], axis=1)


def _fit_windows(req, intervals, max_events: int, k: int, states_in):
    """The widest windows whose events fit max_events: fewer slow requests (k halves to
    1), then a narrower margin around the slowest, then only the last part of it (its
    end, where the tail was decided). intervals: [(start, end, weight, limit)] of every
    kind of event a window keeps besides the thread states: each kept one counts weight
    events, at most limit kept (None: no limit). states_in(windows): the thread-state
    slices inside the windows, cut to them; a slice counts once per window it overlaps.
    The counts grow with the windows, so the search starts from the slowest request's
    window and widens while the next fits: no window's states are computed beyond the
    first that overflows (the 40 slowest requests' windows of a busy run hold millions of
    slices; the slowest one's, a few hundred thousand). Narrower windows are counted on
    the slowest one's slices. Returns (windows, k, words for the note, their states)."""
    def count(win, st):
        lo, hi = _merge_windows(win)
        n = int(_windows_overlapped(st["t_start_ns"].to_numpy(np.int64),
                                    st["t_end_ns"].to_numpy(np.int64), lo, hi).sum()) \
            if len(st) else 0
        for s, e, w, lim in intervals:
            kept = int(_overlaps(s, e, lo, hi).sum())
            n += w * (kept if lim is None else min(kept, lim))
        return n

    ks = [k]
    while ks[-1] > 1:
        ks.append(max(1, ks[-1] // 2))
    win = _windows(req, 1)
    st = states_in(win)
    if count(win, st) <= max_events:
        k = 1
        for wider in reversed(ks[:-1]):
            w2 = _windows(req, wider)
            s2 = states_in(w2)
            if count(w2, s2) > max_events:
                break
            win, k, st = w2, wider, s2
        return win, k, f"the {k} slowest requests (± one request length, at least 1 ms)", st
    for scale in (0.25, 0.05, 0.0):
        w2 = _windows(req, 1, scale)
        if count(w2, st) <= max_events:
            return w2, 1, f"the slowest request (± {scale:g} of its length)", _clip_frame(st, w2)
    lat = int(req["latency_ns"].max())
    lo, hi = 1, max(lat, 1)              # the longest tail of it that fits
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(_windows(req, 1, tail_ns=mid), st) <= max_events:
            lo = mid
        else:
            hi = mid - 1
    w2 = _windows(req, 1, tail_ns=lo)
    return (w2, 1, f"the last {lo / 1e6:.3g} ms of the slowest request ({lat / 1e6:.3g} ms)",
            _clip_frame(st, w2))


def _merge_windows(win: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[[lo, hi], ...] as two sorted arrays of disjoint windows (overlapping ones merged)."""
    if len(win) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    win = win[np.argsort(win[:, 0])]
    lo, hi = [win[0, 0]], [win[0, 1]]
    for a, z in win[1:]:
        if a <= hi[-1]:
            hi[-1] = max(hi[-1], z)
        else:
            lo.append(a)
            hi.append(z)
    return np.array(lo, np.int64), np.array(hi, np.int64)


def _overlaps(s, e, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Does [s, e) overlap one of the merged windows (lo, hi)?"""
    i = np.searchsorted(lo, e, side="left") - 1  # last window starting before e
    return (i >= 0) & (hi[np.clip(i, 0, None)] > s) if len(lo) else np.zeros(len(s), bool)


def _windows_overlapped(s, e, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """How many of the merged windows (lo, hi) each [s, e) overlaps."""
    return np.maximum(np.searchsorted(lo, e, side="left") - np.searchsorted(hi, s, side="right"),
                      0)


def _in_windows(s, e, win: np.ndarray) -> np.ndarray:
    return _overlaps(s, e, *_merge_windows(win))


def tid_pids(*frames) -> dict:
    """tid -> pid from frames with tid and pid columns: each frame's last row for a tid, a
    later frame's word over an earlier one's."""
    pids = {}
    for df in frames:
        if df is not None and len(df) and "pid" in df and "tid" in df:
            last = df[["tid", "pid"]].drop_duplicates("tid", keep="last")
            pids.update(zip(last["tid"].astype(int).tolist(), last["pid"].astype(int).tolist()))
    return pids


def _pid_of(pids: dict, tid: np.ndarray) -> np.ndarray:
    """pid of each tid (the tid itself when unknown)."""
    return pd.Series(tid).map(pids).fillna(pd.Series(tid)).to_numpy(np.int64)


MAX_FLOWS = 50_000


def _task_wakeups(rq) -> np.ndarray:
    """The runq rows that draw an arrow: wakeups a task caused (not preemptions, not
    interrupts)."""
    return ((rq["kind"] != "preempt").to_numpy()
            & rq["waker_ctx"].isin(WAKER_BLAMES_TASK).to_numpy())


def _flows(run, states: pd.DataFrame, pids: dict, t0: int, win) -> list[pd.DataFrame]:
    """Flow arrows waker -> wakee (Chrome JSON flow events "s"/"f", bound to the enclosing
    state slices): one per wakeup that a traced task caused (waker_ctx task or softirq run
    in its syscall; interrupts are not arrows), both threads having a state track, inside
    the windows kept (win, when the trace is capped); at most MAX_FLOWS."""
    rq = run.runq
    if not len(rq) or not len(states) or "waker_ctx" not in rq:
        return []
    tids = states["tid"].unique()
    m = (_task_wakeups(rq) & rq["tid"].isin(tids).to_numpy()
         & rq["waker_tid"].isin(tids).to_numpy())
    t = rq["t_runnable_ns"].to_numpy(np.int64)
    m &= (t >= states["t_start_ns"].min()) & (t < states["t_end_ns"].max())
    if win is not None:
        m &= _in_windows(t, t + 1, win)
    f = rq[m].head(MAX_FLOWS)
    if f.empty:
        return []
    ids, ts = np.arange(1, len(f) + 1), (f["t_runnable_ns"].to_numpy(np.int64) - t0) / 1e3
    wk, wt = f["waker_tid"].to_numpy(np.int64), f["tid"].to_numpy(np.int64)
    common = {"name": "wakeup", "cat": "wakeup", "id": ids, "ts": ts}
    start = pd.DataFrame({**common, "ph": "s", "pid": _pid_of(pids, wk),
                          "tid": wk + _STATE_LANE * _TID_SPAN})
    end = pd.DataFrame({**common, "ph": "f", "bp": "e", "pid": _pid_of(pids, wt),
                        "tid": wt + _STATE_LANE * _TID_SPAN})
    return [start, end]


def _capped_kinds(run, req) -> list:
    """(start, end, weight, limit) of every event kind the cap counts (_fit_windows) besides
    the thread states: requests, CPU slices, and wakeup arrows (two events each, at most
    MAX_FLOWS)."""
    i64 = np.int64
    kinds = [(req["t_start_ns"].to_numpy(i64), req["t_end_ns"].to_numpy(i64), 1, None)] \
        if len(req) else []
    if len(getattr(run, "occupancy", ())):
        from ..explain.antagonists import df_occupancy
        seg = df_occupancy(run)
        kinds.append((seg["t_from_ns"].to_numpy(i64), seg["t_to_ns"].to_numpy(i64), 1, None))
    rq = run.runq
    if len(rq) and "waker_ctx" in rq:
        t = rq["t_runnable_ns"].to_numpy(i64)[_task_wakeups(rq)]
        kinds.append((t, t + 1, 2, MAX_FLOWS))
    return kinds


def _build(f: Findings, max_events: int, slow_windows: int):
    """(metadata events, [X-event DataFrames], other data, TraceInfo)."""
    run, decomp = f.run, f.decomp
    info = TraceInfo(t0_ns=_t0(run, decomp))
    t0 = info.t0_ns
    req = decomp[decomp["t_end_ns"] >= decomp["t_start_ns"]] if len(decomp) else decomp
    # a thread's state track has a slice per off-CPU interval at least: with more of them
    # than the cap, the trace is capped for sure, and the states are computed only inside
    # the windows _fit_windows tries (a fraction of the whole run's cost)
    sw = run.switches
    n_off = int(np.count_nonzero(sw["t_on_ns"].to_numpy() > sw["t_off_ns"].to_numpy())) \
        if len(sw) else 0
    certain = bool(len(req)) and len(req) + n_off > max_events
    states = None if certain else df_thread_states(run, t0, observed=decomp)
    win = None
    kinds = _capped_kinds(run, req)
    if certain or (len(req) and len(states) + sum(
            w * (len(s) if lim is None else min(len(s), lim)) for s, _, w, lim in kinds)
            > max_events):
        whole = states
        states_in = ((lambda w: df_thread_states(run, t0, observed=decomp, windows=w))
                     if whole is None else (lambda w: _clip_frame(whole, w)))
        win, k, what, states = _fit_windows(req, kinds, max_events, slow_windows, states_in)
        keep_r = _in_windows(req["t_start_ns"].to_numpy(), req["t_end_ns"].to_numpy(), win)
        info.truncated, info.windows = True, k
        info.note = (f"trace capped at {max_events:,} events: only the windows around {what} "
                     f"are included, {int(keep_r.sum()):,} of {len(req):,} requests")
        req = req[keep_r]
    names = thread_names(run)
    pids = tid_pids(run.tasks, decomp, run.switches, run.runq)

    ev = []
    # Request slices.
    if len(req):
        tid = req["tid"].to_numpy(np.int64)
        s = req["t_start_ns"].to_numpy(np.int64)
        e = req["t_end_ns"].to_numpy(np.int64)
        lane = _lanes(tid, s, e)
        rq = pd.DataFrame({
            "name": _band_names(f.band.loc[req.index]), "cat": "request", "ph": "X",
            "ts": (s - t0) / 1e3, "dur": (e - s) / 1e3,
            "pid": _pid_of(pids, tid),
            "tid": tid + lane * _TID_SPAN,
        })
        # span-sourced requests: the raw return value, never shown as a status
        outcome = "ret" if "ret" in req else "status"
        args = {"id": req["id"].to_numpy(), "conn": req["conn"].to_numpy(),
                outcome: req[outcome].to_numpy()}
        for c in ("queue_wait_ns", "oncpu_ns", "runnable_ns", "lock_wait_ns", "io_wait_ns",
                  "sleep_ns", "blocked_ns", "cp_runnable_ns", "cp_oncpu_ns", "cp_irq_ns"):
            if c in req:
                args[c.replace("_ns", "_us")] = np.round(req[c].to_numpy(np.float64) / 1e3, 3)
        adf = pd.DataFrame(args)
        rq["args"] = adf.to_dict("records")
        ev.append(rq)
        info.requests = len(rq)
        lanes_used = set(zip(tid.tolist(), lane.tolist()))
    else:
        lanes_used = set()
    if len(states):
        tid = states["tid"].to_numpy(np.int64)
        s = states["t_start_ns"].to_numpy(np.int64)
        e = states["t_end_ns"].to_numpy(np.int64)
        ev.append(pd.DataFrame({
            "name": states["state"].to_numpy(), "cat": "state", "ph": "X",
            "ts": (s - t0) / 1e3, "dur": (e - s) / 1e3,
            "pid": _pid_of(pids, tid),
            "tid": tid + _STATE_LANE * _TID_SPAN,
        }))
        info.state_slices = len(states)
    flows = _flows(run, states, pids, t0, win)
    ev += flows
    info.flows = len(flows[0]) if flows else 0
    cpu_ev, cpu_meta = _cpu_tracks(run, t0, win)
    if len(cpu_ev):
        ev.append(cpu_ev)
    info.extra["cpu_slices"] = len(cpu_ev)
    # Metadata: process and thread names, threads sorted by tid, states under requests.
    meta = []
    for pid in sorted(set(pids.get(t, t) for t, _ in lanes_used) |
                      set(pids.get(int(t), int(t)) for t in states["tid"].unique())):
        meta.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                     "args": {"name": f"{names.get(pid, 'pid')} {pid}"}})
    tracks = {(t, ln) for t, ln in lanes_used} | {(int(t), _STATE_LANE)
                                                 for t in states["tid"].unique()}
    for t, ln in sorted(tracks):
        base = f"{names.get(t, 'tid')} {t}"
        label = base if ln == 0 else (f"{base} · state" if ln == _STATE_LANE
                                      else f"{base} · requests lane {ln}")
        tt = t + ln * _TID_SPAN
        meta.append({"name": "thread_name", "ph": "M", "pid": pids.get(t, t), "tid": tt,
                     "args": {"name": label}})
        meta.append({"name": "thread_sort_index", "ph": "M", "pid": pids.get(t, t), "tid": tt,
                     "args": {"sort_index": t * 64 + (ln if ln != _STATE_LANE else 63)}})
    meta += cpu_meta
    info.threads = len({t for t, _ in tracks})
    info.events = len(meta) + sum(len(df) for df in ev)
    other = {"tool": "tailtrace", "t0_mono_ns": t0, "truncated": info.truncated,
             "note": info.note}
    return meta, ev, other, info


def _cpu_tracks(run, t0: int, win) -> tuple[pd.DataFrame, list]:
    """X slices of who held each CPU (antagonists.df_occupancy), and their track names."""
    from ..explain.antagonists import df_occupancy, irq_code, irq_label, occupant_names
    seg = df_occupancy(run) if len(getattr(run, "occupancy", ())) else pd.DataFrame()
    if not len(seg):
        return pd.DataFrame(), []
    s, e = seg["t_from_ns"].to_numpy(np.int64), seg["t_to_ns"].to_numpy(np.int64)
    if win is not None:
        keep = _in_windows(s, e, win)
        seg, s, e = seg[keep], s[keep], e[keep]
    names = occupant_names(run)
    tid = seg["tid"].to_numpy(np.int64)
    irq = irq_code(seg["flags"].to_numpy(np.int64))
    # a label per distinct (tid, interrupt), not per segment
    pairs, inv = np.unique(np.stack([tid, irq.astype(np.int64)]), axis=1, return_inverse=True)
    distinct = [irq_label(run, q) if q else names.get(int(t), f"tid {int(t)}")
                if t >= 0 else "unknown" for t, q in pairs.T]
    label = np.array(distinct, dtype=object)[inv.ravel()] if len(tid) \
        else np.zeros(0, dtype=object)
    ev = pd.DataFrame({"name": label, "cat": "cpu", "ph": "X", "ts": (s - t0) / 1e3,
                       "dur": (e - s) / 1e3, "pid": CPU_PID,
                       "tid": seg["cpu"].to_numpy(np.int64)})
    ev["args"] = pd.DataFrame({"pid": seg["pid"].to_numpy(), "tid": tid}).to_dict("records")
    meta = [{"name": "process_name", "ph": "M", "pid": CPU_PID, "tid": 0,
             "args": {"name": "CPUs (who held them while traced threads waited)"}},
            {"name": "process_sort_index", "ph": "M", "pid": CPU_PID, "tid": 0,
             "args": {"sort_index": -1}}]
    for c in sorted(seg["cpu"].unique()):
        meta.append({"name": "thread_name", "ph": "M", "pid": CPU_PID, "tid": int(c),
                     "args": {"name": f"CPU {int(c)}"}})
    return ev, meta


def build_trace(f: Findings, max_events: int = 300_000,
                slow_windows: int = 40) -> tuple[dict, TraceInfo]:
    """The trace of the findings' run and requests (f.run, f.decomp) as a dict
    ({"traceEvents": [...]}) and what it holds."""
    meta, ev, other, info = _build(f, max_events, slow_windows)
    events = [r for df in ev for r in df.to_dict("records")]
    return {"traceEvents": meta + events, "displayTimeUnit": "ms", "otherData": other}, info


def write_trace(f: Findings, path, max_events: int = 300_000,
                slow_windows: int = 40) -> TraceInfo:
    """Write trace.json of the findings (the same content as build_trace, serialised by
    pandas' C encoder); returns what it holds (for the report)."""
    meta, ev, other, info = _build(f, max_events, slow_windows)
    parts = [json.dumps(m, ensure_ascii=False, default=_np_default) for m in meta]
    parts += [df.to_json(orient="records", force_ascii=False, double_precision=15)[1:-1]
              for df in ev if len(df)]
    tmp = os.fspath(path) + ".tmp"
    with open(tmp, "w", encoding="utf-8") as out:
        out.write('{"traceEvents":[')
        out.write(",".join(parts))
        out.write('],"displayTimeUnit":"ms","otherData":')
        out.write(json.dumps(other, ensure_ascii=False, default=_np_default))
        out.write("}")
    os.replace(tmp, path)
    return info


def _np_default(o):
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")
