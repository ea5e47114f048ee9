"""Wait reasons and the critical path on inline fixtures whose answer is known by construction."""
import numpy as np
import pandas as pd
import pytest

from fixtures import MS, make_run, off, req, rq, task
from analyze.explain.critpath import df_critical_path, overlaps
from analyze.explain.decompose import df_decompose
from analyze.explain.waits import REASONS, df_waits, describe, reason_codes
from analyze.render.words import root_cause_sentence

READ, EPOLL_WAIT, FUTEX, CLOCK_NANOSLEEP = 0, 232, 202, 230


def chain_run():
    """Request 0 on thread 11 [0, 10 ms]: reads (blocked) [1, 7], woken at 7 by thread 21 of
    the server (pid 200), runs at 8. Thread 21 meanwhile: in epoll_wait [0, 2], woken at 2 by
    a hard IRQ (the interrupted task 31 is recorded but not blamed), runnable [2, 4], on CPU
    [4, 6], preempted [6, 6.5], on CPU [6.5, 7] when it wakes 11.
    Request 1 on thread 12 [20, 30]: sleeps [21, 25] (timer IRQ over thread 21), then waits
    on futex 0xabc [26, 28], woken by thread 999 of an untraced process."""
    h = MS // 2
    switches = [off(11, 1 * MS, 8 * MS, syscall=READ, addr=5),
                off(21, 0, 4 * MS, syscall=EPOLL_WAIT, addr=4, pid=200),
                off(21, 6 * MS, 6 * MS + h, voluntary=False, pid=200),
                off(12, 21 * MS, 25 * MS, syscall=CLOCK_NANOSLEEP),
                off(12, 26 * MS, 28 * MS, syscall=FUTEX, addr=0xABC, aux=128)]
    runq = [rq(11, 7 * MS, 8 * MS, waker=21, waker_pid=200),
            rq(21, 2 * MS, 4 * MS, waker=31, waker_pid=300, ctx="hardirq", pid=200),
            rq(21, 6 * MS, 6 * MS + h, kind="preempt", pid=200),
            rq(12, 25 * MS, 25 * MS, waker=21, waker_pid=200, ctx="hardirq"),
            rq(12, 28 * MS, 28 * MS, waker=999, waker_pid=300)]
    return make_run(requests=[req(0, 11, 0, 10 * MS), req(1, 12, 20 * MS, 30 * MS)],
                    switches=switches, runq=runq,
                    tasks=[task(11, "naive-c0"), task(12, "naive-c1"),
                           task(21, "orders-w0", pid=200)])


def test_blocked_time_is_split_by_reason_and_still_closes():
    d = df_decompose(chain_run())
    assert d.loc[0, "io_wait_ns"] == 6 * MS and d.loc[0, "runq_wakeup_ns"] == 1 * MS
    assert d.loc[0, "oncpu_ns"] == 3 * MS and d.loc[0, "blocked_ns"] == 0
    assert d.loc[1, "sleep_ns"] == 4 * MS and d.loc[1, "lock_wait_ns"] == 2 * MS
    assert d.loc[1, "io_wait_ns"] == 0 and d.loc[1, "oncpu_ns"] == 4 * MS
    assert d["closes"].all() and (d["blocked_all_ns"] == [6 * MS, 6 * MS]).all()


def test_waits_join_the_wakeup_that_ended_them():
    w = df_waits(chain_run()).set_index(["tid", "t_off_ns"]).sort_index()
    r = w.loc[11].iloc[0]
    assert (r["call"], r["reason"], r["waker_tid"], r["waker_pid"], str(r["waker_ctx"])) == \
        ("read", "io", 21, 200, "task")
    assert r["t_wake_ns"] - r.name == 6 * MS    # r.name: its t_off_ns
    assert list(w.loc[12]["reason"]) == ["sleep", "lock"]
    assert len(w.loc[21]) == 1          # the preemption is not a wait


def test_critical_path_follows_the_waker_and_its_waker():
    run = chain_run()
    per, segs = df_critical_path(run, df_decompose(run))
    # request 0: waker 21 was blocked 1 ms (ended by an IRQ: hop 2), runnable 2 + 0.5 ms,
    # on CPU 2 + 0.5 ms during the 6 ms read
    assert per.loc[0].to_dict() == {"cp_oncpu_ns": 2.5 * MS, "cp_runnable_ns": 2.5 * MS,
                                     "cp_runnable_hop1_ns": 2.5 * MS, "cp_blocked_ns": 0,
                                     "cp_irq_ns": 1 * MS, "cp_unknown_ns": 0}
    # request 1: the timer IRQ is not blamed on thread 21 (it was interrupted, not waking);
    # the futex was released by a thread that was not traced
    assert per.loc[1, "cp_irq_ns"] == 4 * MS and per.loc[1, "cp_unknown_ns"] == 2 * MS
    assert per.loc[1, ["cp_oncpu_ns", "cp_runnable_ns", "cp_blocked_ns"]].sum() == 0
    hop2 = segs[segs["depth"] == 1]
    assert len(hop2) == 1 and hop2.iloc[0]["tid"] == 21 and hop2.iloc[0]["verdict"] == "interrupt"
    assert hop2.iloc[0]["root"] == segs[(segs["depth"] == 0) & (segs["tid"] == 11)].index[0]


def test_depth_one_stops_at_the_waker_blocked():
    run = chain_run()
    per, _ = df_critical_path(run, df_decompose(run), max_depth=1)
    assert per.loc[0, "cp_blocked_ns"] == 1 * MS and per.loc[0, "cp_irq_ns"] == 0


def test_overlaps_finds_each_wait_inside_each_window():
    # thread 1: waits [0,10) [20,30) [40,50); thread 2: [5, 45)
    qi, wi, a, b = overlaps([1, 1, 1, 2], [0, 20, 40, 5], [10, 30, 50, 45],
                            [1, 2, 1, 3], [5, 0, 31, 0], [25, 100, 39, 9])
    got = sorted(zip(qi.tolist(), wi.tolist(), a.tolist(), b.tolist()))
    assert got == [(0, 0, 5, 10), (0, 1, 20, 25), (1, 3, 5, 45)]


def test_one_wait_index_answers_any_windows_as_brute_force_does():
    """Windows before, across and after the waits' span, of threads with and without waits,
    against every (window, wait) pair checked by hand."""
    from analyze.explain.critpath import WaitIndex
    rng = np.random.default_rng(7)
    w_tid = rng.integers(1, 6, 300)
    w_s = rng.integers(1_000, 9_000, 300)
    w_e = w_s + rng.integers(1, 400, 300)
    idx = WaitIndex(w_tid, w_s, w_e)
    for _ in range(3):
        q_tid = rng.integers(0, 8, 200)             # 0, 6, 7: no waits
        q_s = rng.integers(0, 12_000, 200)
        q_e = q_s + rng.integers(0, 3_000, 200)
        qi, wi, a, b = idx.query(q_tid, q_s, q_e)
        got = sorted(zip(qi.tolist(), wi.tolist(), a.tolist(), b.tolist()))
        want = sorted((i, j, max(w_s[j], q_s[i]), min(w_e[j], q_e[i]))
                      for i in range(200) for j in range(300)
                      if w_tid[j] == q_tid[i] and max(w_s[j], q_s[i]) < min(w_e[j], q_e[i]))
        assert got == want and len(want) > 50


def test_reasons_of_syscalls_and_words_for_a_wait():
    assert [REASONS[c] for c in reason_codes([0, 7, 202, 230, 35, 61, -1, 999, 10, 9])] == \
        ["io", "io", "lock", "sleep", "sleep", "other", "other", "other", "other", "other"]
    run = chain_run()
    run.stacks = {("offcpu", 3): ["__lll_lock_wait+0x30 (libc.so.6)",
                                  "[unknown] (libc.so.6+0x8a0)", "tp_submit+0x44 (httpload)"]}
    row = {"call": "futex", "wait_addr": 0x55AA, "wait_aux": 128, "ustack_id": 3}
    assert describe(run, row) == "mutex 0x55aa in tp_submit"
    assert describe(run, {**row, "wait_aux": 137, "ustack_id": -1}) == "condvar 0x55aa"
    assert describe(run, {"call": "read", "wait_addr": 7, "wait_aux": 0,
                          "ustack_id": -1}) == "read fd 7"
    # mprotect blocks on the address-space lock (malloc arenas growing), not on I/O
    assert describe(run, {"call": "mprotect", "wait_addr": 0x7F00, "wait_aux": 0,
                          "ustack_id": -1}) == "mprotect (address-space lock)"


def test_without_wakers_nothing_is_invented():
    run = make_run(requests=[req(0, 11, 0, 10 * MS)],
                   switches=[off(11, 1 * MS, 8 * MS, syscall=READ)], runq=[])
    per, segs = df_critical_path(run, df_decompose(run))
    assert per.loc[0, "cp_unknown_ns"] == 7 * MS and np.isclose(per.loc[0].sum(), 7 * MS)
    assert (segs["verdict"] == "unknown waker").all()


@pytest.mark.parametrize("drop", ["switches", "runq"])
def test_missing_stream_gives_nan(drop):
    kw = dict(requests=[req(0, 11, 0, 10 * MS)], switches=[off(11, 1 * MS, 8 * MS)],
              runq=[rq(11, 7 * MS, 8 * MS)])
    kw.pop(drop)
    run = make_run(**kw)
    per, segs = df_critical_path(run, df_decompose(run))
    assert per.isna().all().all() and segs.empty


def test_trace_has_one_arrow_per_wakeup_a_traced_task_caused():
    from analyze.explain.findings import Findings
    from analyze.render.perfetto import _STATE_LANE, _TID_SPAN, build_trace
    run = chain_run()
    trace, info = build_trace(Findings(run, df_decompose(run), pd.DataFrame()))
    flows = [e for e in trace["traceEvents"] if e.get("cat") == "wakeup"]
    # only 21 -> 11: the IRQ wakeups (of 21 and of 12) and the untraced waker 999 draw none
    assert sorted(e["ph"] for e in flows) == ["f", "s"] and info.flows == 1
    start = next(e for e in flows if e["ph"] == "s")
    end = next(e for e in flows if e["ph"] == "f")
    assert start["tid"] == 21 + _STATE_LANE * _TID_SPAN and start["pid"] == 200
    assert end["tid"] == 11 + _STATE_LANE * _TID_SPAN and end["id"] == start["id"]
    assert end["bp"] == "e" and start["ts"] == end["ts"] == 7000.0   # µs after the first event
    states = {e["name"] for e in trace["traceEvents"] if e.get("cat") == "state"}
    assert {"I/O wait", "Sleep", "Lock wait", "Runnable", "Running"} <= states


def test_critical_path_figure_draws(tmp_path):
    from analyze.render.perfetto import df_thread_states
    from analyze.render.plot import plot_critical_path
    run = chain_run()
    d = df_decompose(run)
    _, segs = df_critical_path(run, d)
    p = plot_critical_path(d, segs, lambda win: df_thread_states(run, observed=d, windows=win),
                           tmp_path / "cp.png", names={11: "naive-c0", 21: "orders-w0"})
    assert (tmp_path / "cp.png").stat().st_size > 5000 and p.endswith("cp.png")


def test_wait_objects_whole_run():
    from analyze.explain.critpath import df_wait_objects
    from analyze.render.words import wait_object_line
    assert df_wait_objects(chain_run()).empty          # no object waited on 3 times
    o = df_wait_objects(chain_run(), min_waits=1).set_index("what")
    assert list(o.index[:2]) == ["read fd 5", "clock_nanosleep"]
    r = o.loc["read fd 5"]
    assert (r["waits"], r["total_ms"], r["threads"]) == (1, 6.0, "naive-c*")
    assert r["ended_by"] == "orders-w0 of pid 200 (orders-w*)"   # main thread not seen
    assert (r["waker_runnable_share"], r["waker_oncpu_share"], r["irq_share"]) == \
        pytest.approx((2.5 / 6, 2.5 / 6, 1 / 6))
    assert o.loc["clock_nanosleep", "irq_share"] == 1.0
    assert set(o.loc["mutex 0xabc", ["reason", "unknown_share"]]) == {"lock", 1.0}
    line = wait_object_line(o.reset_index().iloc[0].to_dict())
    assert line.startswith("read fd 5: 0.01 s over 1 waits by naive-c* (mean 6,000 µs)")
    assert "runnable 42%, on CPU 42%, interrupts 17%" in line


def test_queue_wait_headline_names_the_workers_lock_only_when_it_matters():
    from analyze.render.words import _workers_wait
    run = chain_run()
    d = df_decompose(run).assign(queue_wait_ns=[10 * MS, 10 * MS])
    obj = {"reason": "lock", "what": "mutex 0x55aa in tp_submit", "total_ms": 0.9, "waits": 9,
           "threads": "naive-c*", "waker_runnable_share": 0.6}
    assert _workers_wait(run, d, [obj]) == ""                  # 0.9 ms of 20 ms: 5% needed
    s = _workers_wait(run, d, [{**obj, "total_ms": 2.0}])
    assert "mutex 0x55aa in tp_submit (0.00 s over 9 waits by naive-c*)" in s and "60%" in s
    assert _workers_wait(run, d, [{**obj, "total_ms": 2.0, "threads": "other-w*"}]) == ""


def test_above_the_cap_the_tail_and_band_samples_are_followed():
    from analyze.explain.critpath import _followed
    d = __import__("pandas").DataFrame({"latency_ns": np.arange(1000, dtype=float)})
    rows = _followed(d, np.ones(1000, bool), 200)
    # ≥P99 (990..999) all; 63 = (200 - 10) // 3 of each lower band, spread evenly over it
    assert set(range(990, 1000)) <= set(rows) and len(rows) == 10 + 3 * 63
    for lo, hi in ((0, 500), (500, 900), (900, 990)):    # ≤P50, P50–P90, P90–P99
        b = rows[(rows >= lo) & (rows < hi)]
        assert len(b) == 63 and b[0] == lo and b[-1] == hi - 1 and np.all(np.diff(b) >= 1)
        assert np.diff(b).max() - np.diff(b).min() <= 1
    run = chain_run()
    d = df_decompose(run)
    per, _ = df_critical_path(run, d, max_requests=1)
    assert per.notna().all().all()         # both are ≥P99 of two equal latencies: kept


def test_a_blocked_waker_is_followed_into_what_it_waited_for():
    """Request 0 on thread 11 [0, 10 ms] reads [1, 9], woken by server thread 21 (pid 200),
    which was itself blocked on futex 0xf00 [2, 8.5] until orders-ledger (22) released it;
    the ledger slept [0, 8] (a timer). The sentence names the lock and its releaser."""
    from analyze.explain.critpath import root_cause
    switches = [off(11, 1 * MS, 9 * MS, syscall=READ, addr=5),
                off(21, 2 * MS, 8 * MS + MS // 2, syscall=FUTEX, addr=0xF00, aux=128, pid=200),
                off(22, 0, 8 * MS, syscall=CLOCK_NANOSLEEP, pid=200)]
    runq = [rq(11, 9 * MS, 9 * MS, waker=21, waker_pid=200),
            rq(21, 8 * MS + MS // 2, 8 * MS + MS // 2, waker=22, waker_pid=200, pid=200),
            rq(22, 8 * MS, 8 * MS, waker=0, waker_pid=0, ctx="hardirq", pid=200)]
    run = make_run(requests=[req(0, 11, 0, 10 * MS)], switches=switches, runq=runq,
                   tasks=[task(11, "client"), task(21, "orders-w0", pid=200),
                          task(22, "orders-ledger", pid=200), task(200, "orders-server", pid=200)])
    d = df_decompose(run)
    _, segs = df_critical_path(run, d)
    rc = root_cause(run, d, segs, np.array([True]), "io_wait")
    # the chain ends at the ledger's timer: the largest part is the interrupt, 2 hops away
    assert rc["verdict"] == "irq"
    assert rc["hop2"] == ("mutex 0xf00, which orders-ledger (same process) ended after "
                          "being blocked in turn")
    words = root_cause_sentence(run, rc, "io_wait")
    assert words.startswith("the thread that ended it (orders-w0 of orders-server "
                            "(pid 200)) was itself blocked for ")
    assert words.endswith("of that wait, mostly in " + rc["hop2"])


def test_a_lock_convoy_is_named_by_the_thread_it_formed_behind():
    """As above, but thread 21 got the mutex from thread 23, which had waited for it
    too [1.5, 8.4] until orders-ledger released it: the queue formed behind the ledger."""
    from analyze.explain.critpath import root_cause
    h = MS // 2
    switches = [off(11, 1 * MS, 9 * MS, syscall=READ, addr=5),
                off(21, 2 * MS, 8 * MS + h, syscall=FUTEX, addr=0xF00, aux=128, pid=200),
                off(23, 1 * MS + h, 8 * MS + 2 * h // 5, syscall=FUTEX, addr=0xF00, aux=128,
                    pid=200),
                off(22, 0, 8 * MS, syscall=CLOCK_NANOSLEEP, pid=200)]
    runq = [rq(11, 9 * MS, 9 * MS, waker=21, waker_pid=200),
            rq(21, 8 * MS + h, 8 * MS + h, waker=23, waker_pid=200, pid=200),
            rq(23, 8 * MS + 2 * h // 5, 8 * MS + 2 * h // 5, waker=22, waker_pid=200, pid=200),
            rq(22, 8 * MS, 8 * MS, waker=0, waker_pid=0, ctx="hardirq", pid=200)]
    run = make_run(requests=[req(0, 11, 0, 10 * MS)], switches=switches, runq=runq,
                   tasks=[task(11, "client"), task(21, "orders-w0", pid=200),
                          task(23, "orders-w2", pid=200), task(22, "orders-ledger", pid=200),
                          task(200, "orders-server", pid=200)])
    d = df_decompose(run)
    _, segs = df_critical_path(run, d)
    rc = root_cause(run, d, segs, np.array([True]), "io_wait")
    assert rc["hop2"] == "mutex 0xf00, a convoy behind orders-ledger (same process)"


def test_wait_index_over_some_rows_answers_as_over_their_copy():
    """WaitIndex(rows=...) indexes rows of the arrays in place: the same overlaps, its wait
    indices counting those rows, as an index built over a copy of them."""
    from analyze.explain.critpath import WaitIndex
    rng = np.random.default_rng(5)
    tid = rng.integers(1, 4, 300)
    s = rng.integers(0, 10_000, 300)
    e = s + rng.integers(1, 200, 300)
    rows = np.flatnonzero(rng.random(300) < 0.5)
    q = (rng.integers(0, 5, 50), rng.integers(0, 10_000, 50))
    q = (*q, q[1] + rng.integers(1, 500, 50))
    a = WaitIndex(tid, s, e, rows=rows).query(*q)
    b = WaitIndex(tid[rows], s[rows], e[rows]).query(*q)
    assert len(a[0]) > 0 and all(np.array_equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("chunk", [1, 2, 4])
def test_requests_followed_in_chunks_give_the_same_path(monkeypatch, chunk):
    """The critical path follows the requests CP_CHUNK at a time (bounding its temporary
    arrays): per-request columns and segments, their order, roots and parents included,
    equal those of one pass. Five requests, each read woken by a server thread that waited
    on a futex its ledger thread released (two hops)."""
    import analyze.explain.critpath as C
    switches, runq, requests = [], [], []
    for i in range(5):
        t = i * 20 * MS
        switches += [off(11 + i, t + 1 * MS, t + 9 * MS, syscall=READ, addr=5),
                     off(21, t + 2 * MS, t + 8 * MS, syscall=FUTEX, addr=0xF00, aux=128,
                         pid=200),
                     off(22, t, t + 7 * MS, syscall=CLOCK_NANOSLEEP, pid=200)]
        runq += [rq(11 + i, t + 9 * MS, t + 9 * MS, waker=21, waker_pid=200),
                 rq(21, t + 8 * MS, t + 8 * MS, waker=22, waker_pid=200, pid=200),
                 rq(22, t + 7 * MS, t + 7 * MS, waker=0, waker_pid=0, ctx="hardirq",
                    pid=200)]
        requests.append(req(i, 11 + i, t, t + 10 * MS))
    run = make_run(requests=requests, switches=switches, runq=runq,
                   tasks=[task(21, "orders-w0", pid=200), task(22, "orders-ledger", pid=200)])
    d = df_decompose(run)
    per1, segs1 = df_critical_path(run, d)
    assert len(segs1) == 15 and set(segs1["depth"]) == {0, 1, 2}
    monkeypatch.setattr(C, "CP_CHUNK", chunk)
    per, segs = df_critical_path(run, d)
    pd.testing.assert_frame_equal(per, per1)
    pd.testing.assert_frame_equal(segs, segs1)
