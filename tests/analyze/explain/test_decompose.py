"""Decomposition on inline fixtures whose parts are known by construction."""
import numpy as np
import pandas as pd
import pytest

from fixtures import MS, T0, US, gap, lk, make_run, off, req, rq, task
from analyze.explain.decompose import df_decompose
from analyze.explain.states import overlaps_gap, thread_states
from analyze.explain.intervals import Axis, iv_intersect, iv_union, window_sum
from analyze.explain.attribute import df_bands
from analyze.render.summary import summary_dict
from analyze.explain.findings import Findings


def parts(d, i=0):
    row = d.iloc[i]
    return {k: row[f"{k}_ns"] for k in ("queue_wait", "oncpu", "runq_wakeup", "runq_preempt",
                                         "lock_wait", "blocked")}


def test_ten_ms_request_six_runnable_one_oncpu_three_blocked():
    # on CPU [0,1), blocks at 1 ms, woken at 4 ms, runs again at 10 ms (= t_end)
    run = make_run(requests=[req(0, 7, 0, 10 * MS)], switches=[off(7, 1 * MS, 10 * MS)],
                   runq=[rq(7, 4 * MS, 10 * MS)], locks=[])
    d = df_decompose(run)
    assert parts(d) == {"queue_wait": 0, "oncpu": 1 * MS, "runq_wakeup": 6 * MS,
                        "runq_preempt": 0, "lock_wait": 0, "blocked": 3 * MS}
    assert d.loc[0, "latency_ns"] == 10 * MS and d.loc[0, "runnable_ns"] == 6 * MS
    assert d.loc[0, "closure_err"] == 0.0 and bool(d.loc[0, "closes"])


def test_a_waits_throttled_start_is_a_part_of_its_own_and_the_parts_still_add_up():
    # preempted at 2 ms (its quota spent), throttled until 8 ms, runnable behind another task
    # until 9 ms, on CPU to 10 ms; a second request's wait [12, 14] straddles its start (13)
    # with its throttled part [12, 13.5] cut there
    run = make_run(requests=[req(0, 7, 0, 10 * MS), req(1, 7, 13 * MS, 20 * MS)],
                   switches=[off(7, 2 * MS, 9 * MS, voluntary=False),
                             off(7, 12 * MS, 14 * MS, voluntary=False)],
                   runq=[rq(7, 2 * MS, 9 * MS, "preempt", throttled=6 * MS),
                         rq(7, 12 * MS, 14 * MS, "preempt", throttled=1500 * US)], locks=[])
    d = df_decompose(run)
    assert d.loc[0, "throttled_ns"] == 6 * MS and d.loc[0, "runq_preempt_ns"] == 1 * MS
    assert d.loc[0, "oncpu_ns"] == 3 * MS and d.loc[0, "runnable_ns"] == 1 * MS
    assert d.loc[1, "throttled_ns"] == 500 * US and d.loc[1, "runq_preempt_ns"] == 500 * US
    assert d.loc[1, "oncpu_ns"] == 6 * MS
    assert d["closure_err"].tolist() == [0.0, 0.0]


def test_intervals_cut_by_request_edges():
    # off [-2, 2] (woken at 1) starts before t_start; off [8, 15] (woken at 14) ends after t_end
    run = make_run(requests=[req(0, 7, 0, 10 * MS)],
                   switches=[off(7, -2 * MS, 2 * MS), off(7, 8 * MS, 15 * MS)],
                   runq=[rq(7, 1 * MS, 2 * MS), rq(7, 14 * MS, 15 * MS)], locks=[])
    d = df_decompose(run)
    assert parts(d) == {"queue_wait": 0, "oncpu": 6 * MS, "runq_wakeup": 1 * MS,
                        "runq_preempt": 0, "lock_wait": 0, "blocked": 3 * MS}
    assert bool(d.loc[0, "closes"])


def test_thread_without_events_was_on_cpu_all_the_time():
    run = make_run(requests=[req(0, 7, 0, 10 * MS)], switches=[off(9, 1 * MS, 5 * MS)],
                   runq=[rq(9, 4 * MS, 5 * MS)], locks=[], tasks=[task(7, "pool-w0"), task(9, "x")])
    d = df_decompose(run)
    assert parts(d) == {"queue_wait": 0, "oncpu": 10 * MS, "runq_wakeup": 0, "runq_preempt": 0,
                        "lock_wait": 0, "blocked": 0}
    assert bool(d.loc[0, "traced"]) and bool(d.loc[0, "closes"])


def test_several_requests_on_one_thread_share_an_interval_exactly():
    # off [8, 12] woken at 11 spans the edge between request 0 [0,10] and request 1 [10,20];
    # off [22, 24] preempted lies inside request 2 [21, 30]; nothing in the gap [20, 21].
    run = make_run(requests=[req(0, 5, 0, 10 * MS), req(1, 5, 10 * MS, 20 * MS),
                             req(2, 5, 21 * MS, 30 * MS)],
                   switches=[off(5, 8 * MS, 12 * MS), off(5, 22 * MS, 24 * MS, voluntary=False)],
                   runq=[rq(5, 11 * MS, 12 * MS), rq(5, 22 * MS, 24 * MS, "preempt")], locks=[])
    d = df_decompose(run)
    assert parts(d, 0) == {"queue_wait": 0, "oncpu": 8 * MS, "runq_wakeup": 0,
                           "runq_preempt": 0, "lock_wait": 0, "blocked": 2 * MS}
    assert parts(d, 1) == {"queue_wait": 0, "oncpu": 8 * MS, "runq_wakeup": 1 * MS,
                           "runq_preempt": 0, "lock_wait": 0, "blocked": 1 * MS}
    assert parts(d, 2) == {"queue_wait": 0, "oncpu": 7 * MS, "runq_wakeup": 0,
                           "runq_preempt": 2 * MS, "lock_wait": 0, "blocked": 0}
    assert d["closes"].all()


def test_several_threads_do_not_leak_into_each_other():
    # Same window on two threads; thread 6's intervals must not count for thread 5.
    run = make_run(requests=[req(0, 5, 0, 10 * MS), req(1, 6, 0, 10 * MS)],
                   switches=[off(5, 1 * MS, 3 * MS), off(6, 2 * MS, 9 * MS)],
                   runq=[rq(5, 2 * MS, 3 * MS), rq(6, 4 * MS, 9 * MS)], locks=[])
    d = df_decompose(run)
    assert parts(d, 0) == {"queue_wait": 0, "oncpu": 8 * MS, "runq_wakeup": 1 * MS,
                           "runq_preempt": 0, "lock_wait": 0, "blocked": 1 * MS}
    assert parts(d, 1) == {"queue_wait": 0, "oncpu": 3 * MS, "runq_wakeup": 5 * MS,
                           "runq_preempt": 0, "lock_wait": 0, "blocked": 2 * MS}


def test_preempt_and_wakeup_runnable_are_split():
    run = make_run(requests=[req(0, 7, 0, 10 * MS)],
                   switches=[off(7, 2 * MS, 5 * MS, voluntary=False), off(7, 6 * MS, 9 * MS)],
                   runq=[rq(7, 2 * MS, 5 * MS, "preempt"), rq(7, 7 * MS, 9 * MS, "wakeup", waker=3)],
                   locks=[])
    d = df_decompose(run)
    assert parts(d) == {"queue_wait": 0, "oncpu": 4 * MS, "runq_wakeup": 2 * MS,
                        "runq_preempt": 3 * MS, "lock_wait": 0, "blocked": 1 * MS}


def test_lock_wait_is_carved_out_of_blocked_time():
    # lock() entered at 1, sleeps on the futex 2..5, runnable 5..7, acquires at 6 (on CPU
    # again at 7 only because the runnable interval says so: acquisition is after t_run
    # in reality; what matters is lock ∩ off-CPU ∖ runnable = [2, 5]). Another sleep 8..9
    # outside the lock is plain blocked time.
    run = make_run(requests=[req(0, 7, 0, 10 * MS)],
                   switches=[off(7, 2 * MS, 7 * MS), off(7, 8 * MS, 9 * MS)],
                   runq=[rq(7, 5 * MS, 7 * MS), rq(7, 9 * MS, 9 * MS)],
                   locks=[lk(7, 0xA0, 1 * MS, 6 * MS, 6500 * US)])
    d = df_decompose(run)
    assert parts(d) == {"queue_wait": 0, "oncpu": 4 * MS, "runq_wakeup": 2 * MS,
                        "runq_preempt": 0, "lock_wait": 3 * MS, "blocked": 1 * MS}
    assert bool(d.loc[0, "closes"])


def test_queue_wait_precedes_the_window():
    # thread 7 is traced (tasks.bin) and never left the CPU during the request
    run = make_run(requests=[req(0, 7, 0, 10 * MS, t_enqueue=-4 * MS)], switches=[], runq=[],
                   locks=[], tasks=[task(7, "w0")])
    d = df_decompose(run)
    assert d.loc[0, "queue_wait_ns"] == 4 * MS
    assert d.loc[0, "e2e_ns"] == 14 * MS and d.loc[0, "latency_ns"] == 10 * MS
    assert d.loc[0, "oncpu_ns"] == 10 * MS and bool(d.loc[0, "closes"])


def test_a_thread_no_probe_saw_has_unknown_parts_not_time_on_cpu():
    """Scheduler streams recorded, but no record of thread 9 (a process the probes did not
    trace): its request's parts are unknown, never 100% on CPU."""
    run = make_run(requests=[req(0, 9, 0, 10 * MS, pid=200)], switches=[], runq=[], locks=[])
    d = df_decompose(run)
    assert d.loc[0, "check"] == "thread" and np.isnan(d.loc[0, "oncpu_ns"])
    assert not bool(d.loc[0, "traced"])


def test_runnable_outside_off_cpu_makes_closure_fail():
    # tid 7 has a runnable interval [3, 5] that no off-CPU interval holds (its one is [1, 2]):
    # streams disagree.
    run = make_run(requests=[req(0, 7, 0, 10 * MS), req(1, 8, 0, 10 * MS)],
                   switches=[off(7, 1 * MS, 2 * MS), off(8, 3 * MS, 5 * MS)],
                   runq=[rq(7, 3 * MS, 5 * MS), rq(8, 4 * MS, 5 * MS)], locks=[])
    d = df_decompose(run)
    assert d.loc[0, "closure_err"] == pytest.approx(0.2)
    assert not bool(d.loc[0, "closes"])
    assert d.loc[1, "closure_err"] == 0.0 and bool(d.loc[1, "closes"])


def test_a_thread_asleep_since_before_the_run_is_off_cpu_until_its_first_wakeup():
    """tid 7's first event is a wakeup at 3 ms, run at 5 ms, and no switch-out of it came
    before: it slept since before the run began (the switch-out was before the attach). Its
    request [0, 10] ms: 3 ms blocked (no reason recorded), 2 ms runnable, 5 ms on CPU; not
    8 ms on CPU with the runnable 2 ms counted twice. tid 8, switched out at 1 ms before its
    first wakeup, keeps its streams' disagreement (outside)."""
    run = make_run(requests=[req(0, 7, 0, 10 * MS), req(1, 8, 0, 10 * MS)],
                   switches=[off(8, 1 * MS, 2 * MS)],
                   runq=[rq(7, 3 * MS, 5 * MS), rq(8, 4 * MS, 6 * MS)], locks=[])
    d = df_decompose(run)
    assert d.loc[0, "oncpu_ns"] == 5 * MS and d.loc[0, "runq_wakeup_ns"] == 2 * MS
    assert d.loc[0, "blocked_ns"] == 3 * MS
    assert d.loc[0, "closure_err"] == 0.0 and bool(d.loc[0, "closes"])
    assert d.loc[1, "closure_err"] == pytest.approx(0.2) and not bool(d.loc[1, "closes"])


def test_overlapping_off_cpu_intervals_make_closure_fail():
    run = make_run(requests=[req(0, 7, 0, 10 * MS)],
                   switches=[off(7, 1 * MS, 5 * MS), off(7, 3 * MS, 7 * MS)], runq=[], locks=[])
    d = df_decompose(run)
    assert d.loc[0, "oncpu_ns"] == 4 * MS          # complement of the union [1, 7]
    assert d.loc[0, "blocked_ns"] == 8 * MS        # sum of both intervals
    assert d.loc[0, "closure_err"] == pytest.approx(0.2) and not bool(d.loc[0, "closes"])


def test_absent_streams_give_nan_parts_not_zero():
    run = make_run(requests=[req(0, 7, 0, 10 * MS)])
    d = df_decompose(run)
    assert d[["oncpu_ns", "runq_wakeup_ns", "lock_wait_ns", "blocked_ns"]].isna().all(axis=None)
    assert not bool(d.loc[0, "closes"])
    # switches only: runnable unknown (NaN), its time stays in blocked
    run = make_run(requests=[req(0, 7, 0, 10 * MS)], switches=[off(7, 1 * MS, 4 * MS)])
    d = df_decompose(run)
    assert np.isnan(d.loc[0, "runq_wakeup_ns"]) and d.loc[0, "blocked_ns"] == 3 * MS
    assert d.loc[0, "oncpu_ns"] == 7 * MS


def test_untraced_thread_and_time_are_flagged():
    run = make_run(requests=[req(0, 99, 0, 10 * MS), req(1, 7, 0, 10 * MS),
                             req(2, 7, 20 * MS, 40 * MS)],
                   switches=[off(7, 1 * MS, 2 * MS)], runq=[rq(7, 1 * MS, 2 * MS)], locks=[],
                   tasks=[task(7, "pool-w0")], meta={"mono_start_ns": T0, "mono_end_ns": T0 + 30 * MS})
    d = df_decompose(run)
    assert d["traced"].tolist() == [False, True, False]
    assert np.isnan(d.loc[0, "oncpu_ns"]) and np.isnan(d.loc[2, "oncpu_ns"])
    assert d.loc[1, "runq_wakeup_ns"] == 1 * MS and bool(d.loc[1, "closes"])


def test_a_gap_makes_the_requests_it_overlaps_untraced_not_on_cpu():
    # thread 7 slept [2, 6] ms, but the kernel never reported its switch-in: tailtrace wrote
    # a gap [2, 9] (to its next switch-out) instead of an interval. Request 0 [0, 10] overlaps
    # it: its parts are unknown (without the gap it would show 10 ms on CPU, a lie); request
    # 1 [10, 20] on the same thread and request 2 [0, 10] on thread 8 are untouched.
    run = make_run(requests=[req(0, 7, 0, 10 * MS), req(1, 7, 10 * MS, 20 * MS),
                             req(2, 8, 0, 10 * MS)],
                   switches=[gap(7, 2 * MS, 9 * MS), off(7, 9 * MS, 9 * MS + 10 * US, False),
                             off(7, 12 * MS, 14 * MS, syscall=230)],
                   runq=[rq(7, 9 * MS, 9 * MS + 10 * US, "preempt"), rq(7, 13 * MS, 14 * MS)],
                   locks=[], tasks=[task(7, "w0"), task(8, "w1")])
    assert len(run.gaps) == 1 and run.gaps.loc[0, "t_to_ns"] == T0 + 9 * MS
    assert len(run.switches) == 2 and not run.switches["unmatched"].any()
    d = df_decompose(run)
    assert d["traced"].tolist() == [False, True, True]
    assert np.isnan(d.loc[0, "oncpu_ns"]) and not d.loc[0, "closes"]
    assert d.loc[1, "sleep_ns"] == 1 * MS and d.loc[1, "runq_wakeup_ns"] == 1 * MS
    assert d.loc[2, "oncpu_ns"] == 10 * MS
    w = summary_dict(Findings(run, d, df_bands(d)))["warnings"]
    assert any("never reported 1 context-switch edge" in x for x in w), w
    assert d["check"].astype(str).tolist() == ["gap", "ok", "ok"]
    assert any(x.startswith("1 of 3 requests fail the decomposition check: 1 overlap a "
                            "context-switch edge the kernel never reported") for x in w), w


def test_overlaps_gap_matches_brute_force():
    rng = np.random.default_rng(7)
    g_tid = rng.integers(0, 4, 40)
    g_from = rng.integers(0, 1000, 40)
    g_to = g_from + rng.integers(1, 80, 40)
    gaps = pd.DataFrame({"pid": 1, "tid": g_tid, "t_from_ns": g_from, "t_to_ns": g_to})
    tid = rng.integers(0, 5, 500)
    t0 = rng.integers(0, 1000, 500)
    t1 = t0 + rng.integers(0, 60, 500)
    want = [any(gt == t and a < e and b > s for gt, a, b in zip(g_tid, g_from, g_to))
            for t, s, e in zip(tid, t0, t1)]
    assert overlaps_gap(gaps, tid, t0, t1).tolist() == want


# ---- the vectorised primitives against brute force ----------------------------

def _brute_sum(s, e, ws, we):
    return np.array([sum(max(0, min(b, y) - max(a, x)) for a, b in zip(s, e))
                     for x, y in zip(ws, we)], dtype=np.int64)


def test_window_sum_matches_brute_force_with_overlaps_and_large_keys():
    rng = np.random.default_rng(1)
    base = 2 ** 61  # cumulative sums wrap around int64; differences must stay exact
    s = base + rng.integers(0, 10_000, 300)
    e = s + rng.integers(0, 500, 300)
    ws = base + rng.integers(0, 10_000, 200)
    we = ws + rng.integers(0, 2_000, 200)
    assert np.array_equal(window_sum(s, e, ws, we), _brute_sum(s, e, ws, we))


def _points(s, e):
    return set().union(*[set(range(a, b)) for a, b in zip(s, e)]) if len(s) else set()


def test_union_and_intersection_match_brute_force():
    rng = np.random.default_rng(2)
    a_s = rng.integers(0, 1000, 60); a_e = a_s + rng.integers(1, 40, 60)
    b_s = rng.integers(0, 1000, 60); b_e = b_s + rng.integers(1, 40, 60)
    ua, ub = iv_union(a_s, a_e), iv_union(b_s, b_e)
    assert _points(*ua) == _points(a_s, a_e)
    assert np.all(ua[0][1:] > ua[1][:-1])  # disjoint and sorted
    inter = iv_intersect(*ua, *ub)
    assert _points(*inter) == _points(a_s, a_e) & _points(b_s, b_e)


def test_axis_keeps_threads_apart_and_thread_states_window():
    ax = Axis(np.array([5, 9]), T0, T0 + 100)
    g, ok = ax.index(np.array([5, 9, 7]))
    assert ok.tolist() == [True, True, False]
    assert ax.key(g[1:2], np.array([T0]))[0] == ax.span
    run = make_run(switches=[off(5, 10, 20, voluntary=False)], runq=[rq(5, 10, 20, "preempt")])
    st = thread_states(run, [5, 5], [T0 + 0, T0 + 15], [T0 + 30, T0 + 30])
    assert st["runq_preempt_ns"].tolist() == [10, 5] and st["oncpu_ns"].tolist() == [20, 10]


def _disjoint(rng, n, touching: bool):
    """n disjoint intervals in random order (touching ones share an edge), as (s, e)."""
    gaps = rng.integers(0 if touching else 1, 30, n)
    lens = rng.integers(1, 40, n)
    s = np.cumsum(gaps + np.r_[0, lens[:-1]])
    o = rng.permutation(n)
    return s[o], (s + lens)[o]


@pytest.mark.parametrize("touching", [False, True])
def test_disjoint_sets_are_kept_compact_and_measure_exactly(touching):
    """A disjoint set (given in any order) is found disjoint and kept as starts and length
    prefix sums; its sums equal brute force, windows before, across and after it included."""
    from analyze.explain.intervals import IntervalSet
    rng = np.random.default_rng(3)
    s, e = _disjoint(rng, 200, touching)
    st = IntervalSet(s, e)
    assert st.disjoint and not hasattr(st, "E")
    assert np.array_equal(st.ends(), np.sort(e))
    ws = rng.integers(-50, int(e.max()) + 50, 300)
    we = ws + rng.integers(0, 400, 300)
    assert np.array_equal(st.sum(ws, we), _brute_sum(s, e, ws, we))
    # one overlapping pair makes it the general form, with the same answers
    s2, e2 = np.r_[s, s[0]], np.r_[e, e[0] + 3]
    assert not IntervalSet(s2, e2).disjoint
    assert np.array_equal(IntervalSet(s2, e2).sum(ws, we), _brute_sum(s2, e2, ws, we))


def test_intersection_of_touching_disjoint_sets_matches_brute_force():
    """iv_intersect's sets may touch (a thread's back-to-back intervals): each overlapping
    pair gives its piece, in order, and the points are the intersection's."""
    rng = np.random.default_rng(4)
    for _ in range(20):
        a_s, a_e = _disjoint(rng, 40, True)
        b_s, b_e = _disjoint(rng, 40, True)
        oa, ob = np.argsort(a_s), np.argsort(b_s)
        s, e = iv_intersect(a_s[oa], a_e[oa], b_s[ob], b_e[ob])
        assert np.all(e > s) and np.all(s[1:] >= e[:-1])        # disjoint and sorted
        assert _points(s, e) == _points(a_s, a_e) & _points(b_s, b_e)


def test_axis_rows_sort_by_thread_then_time_and_name_their_rows():
    ax = Axis(np.array([5, 9]), T0, T0 + 1000)
    tid = np.array([9, 5, 7, 9, 5])
    t_s = T0 + np.array([10, 300, 5, 5, 20])
    t_e = t_s + np.array([5, 5, 5, 0, 5])             # row 3 is empty, row 2 off the axis
    s, e, rows = ax.rows(tid, t_s, t_e)
    assert rows.tolist() == [4, 1, 0]
    assert np.all(s[1:] >= s[:-1]) and np.array_equal(e - s, (t_e - t_s)[rows])
