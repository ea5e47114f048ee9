"""trace.json: valid Chrome JSON, every track properly nested, exact slices of a known run."""
import json
from collections import defaultdict

import numpy as np
import pytest
import pandas as pd

import synth
from analyze.render import perfetto
from analyze.explain.attribute import band_of
from analyze.explain.findings import Findings

US = synth.US


def _f(run, decomp) -> Findings:
    """The findings the trace renders from (it reads only the run and the requests)."""
    return Findings(run, decomp, pd.DataFrame())


def _merged_truth(tr) -> pd.DataFrame:
    """Ground-truth states, gaps filled with Running, adjacent same-state slices merged,
    clipped to what the trace observes: a worker from its first request start to its
    last request end, the main thread (no requests) from its first to its last event."""
    out = []
    for tid, g in tr.states.groupby("tid", sort=True):
        g = g.sort_values("t_start_ns", kind="stable")
        reqs = tr.decomp[tr.decomp["tid"] == tid]
        if len(reqs):
            lo, hi = reqs["t_start_ns"].min(), reqs["t_end_ns"].max()
            g = g[(g["t_start_ns"] >= lo) & (g["t_end_ns"] <= hi)]
        cur = None
        for r in g.itertuples(index=False):
            if cur and cur[3] < r.t_start_ns:          # a gap: the thread was running
                if cur[1] == "Running":
                    cur[3] = r.t_start_ns
                else:
                    out.append(tuple(cur))
                    cur = [tid, "Running", cur[3], r.t_start_ns]
            if cur and cur[1] == r.state and cur[3] == r.t_start_ns:
                cur[3] = r.t_end_ns
            else:
                if cur:
                    out.append(tuple(cur))
                cur = [tid, r.state, r.t_start_ns, r.t_end_ns]
        out.append(tuple(cur))
    return pd.DataFrame(out, columns=["tid", "state", "t_start_ns", "t_end_ns"])


def _check_nesting(events):
    """Within each (pid, tid) track, two X slices are either disjoint or nested."""
    tracks = defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            tracks[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    for key, sl in tracks.items():
        sl.sort(key=lambda x: (x[0], -x[1]))
        stack = []
        for s, e in sl:
            while stack and stack[-1] <= s + 1e-9:
                stack.pop()
            assert not stack or e <= stack[-1] + 1e-9, f"partial overlap on track {key}"
            stack.append(e)
    return tracks


DAY_NS = 86_400 * 10**9


@pytest.mark.parametrize("chunk,since_ns", [(None, 0), (7, 0), (None, 3 * DAY_NS)])
def test_thread_states_exact(monkeypatch, chunk, since_ns):
    """Exact against the truth; also when the threads are taken a few at a time (chunk:
    intervals per chunk), which changes nothing but the memory the sort takes; and when the
    requests come three days into the run (since_ns after its start: a run of days)."""
    if chunk:
        monkeypatch.setattr(perfetto, "_STATE_CHUNK", chunk)
    tr = synth.truth(200)
    run = synth.frames(tr)
    got = perfetto.df_thread_states(run, synth.T_BASE - since_ns, observed=tr.decomp)
    want = _merged_truth(tr)
    assert list(got["state"].cat.categories) == list(perfetto.STATES)
    pd.testing.assert_frame_equal(got.reset_index(drop=True).astype({"tid": "int64",
                                                                     "state": object}),
                                  want.astype({"tid": "int64", "t_start_ns": "int64",
                                               "t_end_ns": "int64", "state": object}),
                                  check_dtype=False)
    # by construction: 200 requests, 20 lock waits of 400 µs, 2 preemptions of 5 ms
    lw = got[got["state"] == "Lock wait"]
    assert len(lw) == 20 and ((lw["t_end_ns"] - lw["t_start_ns"]) == 400 * US).all()
    rn = got[got["state"] == "Runnable"]
    assert ((rn["t_end_ns"] - rn["t_start_ns"]) == 5020 * US).sum() == 2
    # the lock holder (main thread) is runnable while the waiter waits: 400+50-5 µs each time
    hold = rn[rn["tid"] == synth.PID]
    assert len(hold) == 20 and ((hold["t_end_ns"] - hold["t_start_ns"]) == 445 * US).all()


@pytest.mark.parametrize("threads,span_ns", [(5, 10**9), (1 << 21, 3600 * 10**9)])
def test_distinct_edges_of_many_threads_and_long_runs(threads, span_ns):
    """The distinct (thread, time) edges in order and each edge's place among them, as numpy
    finds them on pairs: through a packed key (few threads, seconds) and through the sort on
    both columns that takes over when they do not fit in one (2^21 threads over an hour)."""
    rng = np.random.default_rng(3)
    ti = rng.integers(0, threads, 5000)
    t = synth.T_BASE + rng.integers(0, span_ns, 5000)
    t[::7] = t[1::7][:len(t[::7])]           # repeated times, on the same thread or not
    ti[::14] = ti[1::14][:len(ti[::14])]
    b_ti, b_t, pos = perfetto._distinct_edges(ti, t)
    pairs, inv = np.unique(np.stack([ti, t], axis=1), axis=0, return_inverse=True)
    assert (b_ti == pairs[:, 0]).all() and (b_t == pairs[:, 1]).all()
    assert (pos == inv.ravel()).all()


def test_trace_json_valid_nested_and_exact(tmp_path):
    tr = synth.truth(400)
    run = synth.frames(tr)
    path = tmp_path / "trace.json"
    info = perfetto.write_trace(_f(run, tr.decomp), path)
    trace = json.loads(path.read_text())
    ev = trace["traceEvents"]
    assert info.events == len(ev) and not info.truncated
    tracks = _check_nesting(ev)
    # one request track + one state track per worker, a state track for the main thread
    assert len(tracks) == 9
    req = [e for e in ev if e["ph"] == "X" and e["cat"] == "request"]
    assert len(req) == 400
    r50 = next(e for e in req if e["args"]["id"] == 50)
    d50 = tr.decomp.set_index("id").loc[50]
    assert r50["ts"] == (d50["t_start_ns"] - synth.T_BASE) / 1e3
    assert r50["dur"] == d50["latency_ns"] / 1e3 == 6170.0   # 100+100+(800+50)+20+5000+100 µs
    assert r50["name"] == "request ≥P99" and r50["tid"] == d50["tid"] and r50["pid"] == 100
    assert r50["args"]["runnable_us"] == 5020.0
    names = {(e["tid"], e["args"]["name"]) for e in ev if e["name"] == "thread_name"}
    assert (101, "pool-w0 101") in names
    assert (101 + 63 * (1 << 22), "pool-w0 101 · state") in names
    states = [e for e in ev if e["ph"] == "X" and e["cat"] == "state"]
    want = _merged_truth(tr)
    assert len(states) == len(want)
    assert sum(e["dur"] for e in states) == (want["t_end_ns"] - want["t_start_ns"]).sum() / 1e3


def test_overlapping_requests_get_lanes():
    """An event loop serving 3 overlapping requests: no partial overlap on any track."""
    d = pd.DataFrame({"id": [0, 1, 2, 3], "conn": [0, 1, 2, 3], "tid": 7, "pid": 7, "status": 200,
                      "t_enqueue_ns": [0, 10, 20, 100], "t_start_ns": [0, 10, 20, 100],
                      "t_end_ns": [50, 60, 30, 120]})
    d["latency_ns"] = d["t_end_ns"] - d["t_start_ns"]
    empty = synth.frames(synth.truth(1))
    run = type(empty)(meta={}, runq=empty.runq.iloc[:0], switches=empty.switches.iloc[:0],
                      locks=empty.locks.iloc[:0], tasks=empty.tasks.iloc[:0])
    trace, info = perfetto.build_trace(_f(run, d))
    _check_nesting(trace["traceEvents"])
    lanes = {e["args"]["id"]: e["tid"] >> 22 for e in trace["traceEvents"] if e["ph"] == "X"}
    assert lanes == {0: 0, 1: 1, 2: 2, 3: 0}


def test_cap_keeps_windows_around_slowest():
    tr = synth.truth(400)
    run = synth.frames(tr)
    trace, info = perfetto.build_trace(_f(run, tr.decomp), max_events=1200, slow_windows=4)
    assert info.truncated and "slowest" in info.note
    x = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(x) <= 1200 and info.windows == 4
    ids = {e["args"]["id"] for e in x if e["cat"] == "request"}
    assert {50, 150, 250, 350} <= ids          # the four 5 ms preemptions
    assert len(ids) < 400
    _check_nesting(trace["traceEvents"])
    assert np.isfinite([e["ts"] for e in x]).all()
    # a kept request is named by its band among all 400, not among the ones kept: the
    # windows keep mostly slow ones, whose own median would call some ≤P50 a tail
    band = band_of(tr.decomp).set_axis(tr.decomp["id"]).astype(str)
    names = {e["args"]["id"]: e["name"] for e in x if e["cat"] == "request"}
    assert names == {i: f"request {band[i]}" for i in names}
    assert {"request ≤P50", "request ≥P99"} <= set(names.values())


def test_state_tracks_agree_with_the_decomposition(tmp_path):
    """Clipped to a request's window, the state track sums to that request's parts."""
    from analyze.explain.decompose import df_decompose
    from analyze.load.load import load_run

    synth.make_run(tmp_path, 200)
    run = load_run(tmp_path)
    d = df_decompose(run)
    st = perfetto.df_thread_states(run, 0, observed=d)
    parts = {"Running": ["oncpu_ns"], "Runnable": ["runq_wakeup_ns", "runq_preempt_ns"],
             "Lock wait": ["lock_wait_ns"], "Blocked": ["blocked_ns"]}
    picked = d[(d["id"] % 10 == 5) | (d["id"] % 100 == 50) | (d["id"] < 8)]
    assert len(picked) == 20 + 2 + 7       # id 5 is in two groups
    for r in picked.itertuples():
        s = st[st["tid"] == r.tid]
        lo = np.maximum(s["t_start_ns"], r.t_start_ns)
        hi = np.minimum(s["t_end_ns"], r.t_end_ns)
        dur = (hi - lo).clip(lower=0).groupby(s["state"]).sum()
        for state, cols in parts.items():
            assert dur.get(state, 0) == sum(getattr(r, c) for c in cols), (r.id, state)


def test_cap_holds_when_the_slowest_requests_window_alone_exceeds_it():
    """Fewer windows, then a narrower margin, then only the end of the slowest request:
    every event counts (requests, states, arrows), and the cap holds whatever the run."""
    tr = synth.truth(400)
    run = synth.frames(tr)
    full, _ = perfetto.build_trace(_f(run, tr.decomp))
    slowest = int(tr.decomp.loc[tr.decomp["latency_ns"].idxmax(), "id"])
    for cap in (40, 12):  # (below what overlaps its last instant it cannot go)
        trace, info = perfetto.build_trace(_f(run, tr.decomp), max_events=cap, slow_windows=4)
        body = [e for e in trace["traceEvents"] if e["ph"] != "M"]
        assert info.truncated and info.windows == 1 and len(body) <= cap, (cap, len(body))
        assert "slowest request" in info.note, info.note
        ids = {e["args"]["id"] for e in body if e.get("cat") == "request"}
        assert slowest in ids, (cap, ids)
        _check_nesting(trace["traceEvents"])
    assert len([e for e in full["traceEvents"] if e["ph"] != "M"]) > 40


def test_states_inside_windows_are_the_whole_runs_cut_to_them(tmp_path):
    """df_thread_states(windows=...) reads only the intervals that overlap the windows, yet
    gives exactly the whole run's slices cut to them: windows that overlap each other, one
    inside a single slice, one across the run's start, one past its end, none."""
    from analyze.explain.decompose import df_decompose
    from analyze.load.load import load_run

    synth.make_run(tmp_path, 200)
    run = load_run(tmp_path)
    d = df_decompose(run)
    whole = perfetto.df_thread_states(run, 0, observed=d)
    t = synth.T_BASE
    ms = 1_000_000
    cases = [[[t + 5 * ms, t + 9 * ms], [t + 8 * ms, t + 12 * ms], [t + 40 * ms, t + 41 * ms]],
             [[t + 20 * ms + 1234, t + 20 * ms + 1300]],
             [[t - 5 * ms, t + 2 * ms]],
             [[int(whole["t_end_ns"].max()) - ms, int(whole["t_end_ns"].max()) + 9 * ms]],
             [[t - 9 * ms, t - 8 * ms]]]
    key = ["tid", "t_start_ns"]
    for win in cases:
        win = np.array(win, np.int64)
        got = perfetto.df_thread_states(run, 0, observed=d, windows=win)
        want = perfetto._clip_frame(whole, win)
        assert len(want) or win[0, 1] < t, win
        if not len(want):
            assert not len(got)
            continue
        pd.testing.assert_frame_equal(got.sort_values(key).reset_index(drop=True),
                                      want.sort_values(key).reset_index(drop=True),
                                      check_dtype=False)
        lo, hi = win.min(), win.max()
        assert not len(got) or (got["t_start_ns"].min() >= lo and got["t_end_ns"].max() <= hi)


@pytest.mark.parametrize("cap", [1200, 800])
def test_a_capped_trace_holds_the_state_slices_cut_to_its_windows(cap):
    """Capped, the trace's state slices are the whole run's cut to the windows it kept, and
    the cap counts a slice once per window it spans. 400 requests and 484 off-CPU
    intervals: under a cap of 800 the states are computed inside the windows only."""
    tr = synth.truth(400)
    run = synth.frames(tr)
    whole = perfetto.df_thread_states(run, synth.T_BASE, observed=tr.decomp)
    trace, info = perfetto.build_trace(_f(run, tr.decomp), max_events=cap, slow_windows=4)
    assert info.truncated
    x = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(x) <= cap
    got = sorted((e["tid"] % (1 << 22), e["name"], e["ts"], e["dur"]) for e in x
                 if e["cat"] == "state")
    win = perfetto._windows(tr.decomp, info.windows)
    want = perfetto._clip_frame(whole, win)
    t0 = trace["otherData"]["t0_mono_ns"]
    assert got == sorted(zip(want["tid"].tolist(), want["state"].astype(str).tolist(),
                             ((want["t_start_ns"] - t0) / 1e3).tolist(),
                             ((want["t_end_ns"] - want["t_start_ns"]) / 1e3).tolist()))


def test_the_fit_widens_from_the_slowest_window_and_stops_at_the_first_overflow(monkeypatch):
    """The cap keeps the most slow requests' windows that fit (k of 8, 4, 2, 1), counted
    exhaustively here on the whole run's states; the trace computes states for no window
    set wider than the first that overflows."""
    tr = synth.truth(400)
    run = synth.frames(tr)
    whole = perfetto.df_thread_states(run, synth.T_BASE, observed=tr.decomp)
    req = tr.decomp

    def events(k):
        lo, hi = perfetto._merge_windows(perfetto._windows(req, k))
        n = len(perfetto._clip_frame(whole, perfetto._windows(req, k)))
        for s, e, w, lim in perfetto._capped_kinds(run, req):
            kept = int(perfetto._overlaps(s, e, lo, hi).sum())
            n += w * (kept if lim is None else min(kept, lim))
        return n

    counts = {k: events(k) for k in (1, 2, 4, 8)}
    assert counts[1] < counts[2] < counts[4] < counts[8], counts
    calls = []
    real = perfetto.df_thread_states

    def spy(run, t0_ns=0, observed=None, windows=None):
        calls.append(None if windows is None else len(windows))
        return real(run, t0_ns, observed=observed, windows=windows)

    monkeypatch.setattr(perfetto, "df_thread_states", spy)
    # below the whole run's events, and below what 400 requests alone make: capped for sure
    trace, info = perfetto.build_trace(_f(run, tr.decomp), max_events=counts[2],
                                       slow_windows=8)
    assert info.truncated and info.windows == 2, info
    assert len([e for e in trace["traceEvents"] if e["ph"] != "M"]) == counts[2]
    assert calls and max(c for c in calls if c is not None) <= 4, calls
