"""Scheduler views: per thread, per mutex, run-queue histogram, CPU placement."""
import numpy as np
import pytest

from fixtures import MS, US, lk, make_run, off, rq, task
from analyze.load.load import role_of
from analyze.explain.sched import df_cpu_placement, df_locks, df_runq_hist, df_threads


def sched_run():
    # tid 1: pinned to CPU 1; off [2,3] voluntary, [5,6] preempted, [9,10] voluntary:
    #        on-CPU slices between switches: [3,5] + [6,9] = 5 ms, all on CPU 1.
    # tid 2: leaves CPU 0, comes back on CPU 1 once.
    return make_run(
        switches=[off(1, 2 * MS, 3 * MS, cpu_off=1), off(1, 5 * MS, 6 * MS, voluntary=False, cpu_off=1),
                  off(1, 9 * MS, 10 * MS, cpu_off=1),
                  off(2, 1 * MS, 4 * MS, cpu_off=0, cpu_on=1), off(2, 7 * MS, 8 * MS, cpu_off=1)],
        runq=[rq(1, 2500 * US, 3 * MS, cpu=1), rq(1, 5 * MS, 6 * MS, "preempt", cpu=1),
              rq(2, 3 * MS, 4 * MS, cpu=1)],
        tasks=[task(1, "pool-w0", migrations=0), task(2, "naive-c5", migrations=1),
               task(3, "idle-thread")])


def test_threads_table():
    t = df_threads(sched_run()).set_index("tid")
    assert t.index.tolist() == [1, 2, 3]
    assert t.loc[1, ["comm", "role", "cpus"]].tolist() == ["pool-w0", "worker", "1"]
    assert t.loc[1, "runq_ns"] == 1500 * US and t.loc[1, "offcpu_ns"] == 3 * MS
    assert t.loc[1, "oncpu_ns"] == 5 * MS
    assert (t.loc[1, "voluntary"], t.loc[1, "involuntary"]) == (2, 1)
    assert t.loc[2, "cpus"] == "0,1" and t.loc[2, "migrations"] == 1
    assert t.loc[2, "oncpu_ns"] == 3 * MS and t.loc[2, "role"] == "conn-thread"
    assert t.loc[3, "oncpu_ns"] == 0 and t.loc[3, "cpus"] == ""


def test_a_thread_in_a_container_has_its_own_id_there():
    """ns_tid: the id the thread has in its own PID namespace where it differs (the
    container's init is 1 there), 0 where it is the host's tid."""
    run = make_run(switches=[off(7, 1 * MS, 2 * MS), off(8, 1 * MS, 2 * MS)], runq=[],
                   tasks=[task(7, "server", ns_tid=1), task(8, "sidecar")])
    t = df_threads(run).set_index("tid")
    assert t["ns_tid"].to_dict() == {7: 1, 8: 0}


def test_roles_from_comm():
    assert [role_of(c) for c in ["naive-c12", "pool-w3", "httpload-w7", "async-loop",
                                 "orders-w1", "bash"]] == [
        "conn-thread", "worker", "worker", "event-loop", "server", "other"]


def test_cpu_placement_shows_pinning():
    p = df_cpu_placement(sched_run())
    # every on-CPU slice (switch-in to next switch-out) of both threads is on CPU 1
    assert list(p.columns) == [1] and list(p.index) == [1, 2]
    assert p.loc[1, 1] == 5 * MS and p.loc[2, 1] == 3 * MS
    two = make_run(switches=[off(4, 0, 1 * MS, cpu_on=0), off(4, 3 * MS, 4 * MS, cpu_off=0, cpu_on=1),
                             off(4, 6 * MS, 7 * MS, cpu_off=1)])
    assert df_cpu_placement(two).loc[4].to_dict() == {0: 2 * MS, 1: 2 * MS}


def test_runq_hist_log2_buckets_like_runqlat():
    durs_us = [0, 1, 3, 2, 5, 1000, 1023, 1024]
    run = make_run(runq=[rq(1, 0, d * US) for d in durs_us] + [rq(1, 0, 999)])  # 999 ns -> 0 µs
    h = df_runq_hist(run)
    assert h["lo_us"].tolist()[:4] == [0, 1, 2, 4] and h["hi_us"].tolist()[:4] == [0, 1, 3, 7]
    counts = dict(zip(h["lo_us"], h["count"]))
    assert counts == {0: 2, 1: 1, 2: 2, 4: 1, 8: 0, 16: 0, 32: 0, 64: 0, 128: 0, 256: 0,
                      512: 2, 1024: 1}
    assert h["count"].sum() == len(durs_us) + 1


def test_locks_table():
    M1, M2 = 0x1000, 0x2000
    run = make_run(
        locks=[lk(1, M1, 0, 0, 1 * MS, ustack=4), lk(2, M1, 500 * US, 1 * MS, 3 * MS, ustack=5),
               lk(1, M1, 2 * MS, 3 * MS, 6 * MS, ustack=5), lk(1, M2, 7 * MS, 7 * MS, 8 * MS)],
        stacks={("locks", 5): ["pthread_mutex_lock", "order_add", "handle_request", "worker_main",
                               "start_thread", "clone3"],
                ("locks", 4): ["pthread_mutex_lock", "stats_bump"]})
    t = df_locks(run)
    assert t["mutex"].tolist() == [M1, M2]
    r = t.iloc[0]
    assert (r["acquisitions"], r["contended"]) == (3, 2)
    assert r["hold_p50_ns"] == 2 * MS
    assert r["hold_p99_ns"] == pytest.approx(np.percentile([1, 2, 3], 99) * MS)
    assert r["wait_p50_ns"] == 500 * US and r["symbol"] == "0x1000"
    assert r["top_stack"] == "order_add;handle_request;worker_main;start_thread"
    assert t.iloc[1]["contended"] == 0 and t.iloc[1]["top_stack"] == ""


def test_empty_streams_give_empty_tables_with_columns():
    run = make_run(switches=[], runq=[], locks=[], tasks=[])
    assert len(df_threads(run)) == 0 and "cpus" in df_threads(run).columns
    assert len(df_locks(run)) == 0 and "top_stack" in df_locks(run).columns
    assert len(df_runq_hist(run)) == 0 and len(df_cpu_placement(run)) == 0
