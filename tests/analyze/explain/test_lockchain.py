"""Lock chains: the holder of the mutex a request waited for, and what it was doing."""
from fixtures import MS, US, lk, make_run, off, req, rq
from analyze.explain.decompose import df_decompose
from analyze.explain.lockchain import df_lock_chains

M = 0x7f00_0000_1000
H, W = 2, 3  # holder and waiter threads


def chain(holder_switches, holder_runq, extra_locks=()):
    """W serves request 0 [0, 10 ms]; it calls lock(M) at 0.5 ms while H holds M
    (acquired at 0, released at 5 ms); W sleeps 0.6..5.0, runnable 5.0..5.1, gets M at 5.2."""
    run = make_run(
        requests=[req(0, W, 0, 10 * MS)],
        switches=[off(W, 600 * US, 5100 * US)] + holder_switches,
        runq=[rq(W, 5 * MS, 5100 * US, waker=H)] + holder_runq,
        locks=[lk(H, M, 0, 0, 5 * MS), lk(W, M, 500 * US, 5200 * US, 6 * MS)] + list(extra_locks))
    return df_lock_chains(run, df_decompose(run))


def test_preempted_holder_is_named_with_exact_runnable_time():
    # H is preempted 1..4 ms while holding M: 3 ms of lock-holder preemption.
    c = chain([off(H, 1 * MS, 4 * MS, voluntary=False)], [rq(H, 1 * MS, 4 * MS, "preempt")])
    assert len(c) == 1
    r = c.iloc[0]
    assert (r["request_id"], r["waiter_tid"], r["holder_tid"], r["mutex"]) == (0, W, H, M)
    assert r["wait_ns"] == 4700 * US
    assert r["holder_window_ns"] == 4500 * US          # [0.5, 5.0]: until H released M
    assert r["holder_runnable_ns"] == 3 * MS
    assert r["holder_running_ns"] == 1500 * US and r["holder_blocked_ns"] == 0
    assert r["verdict"] == "holder preempted"


def test_blocked_holder():
    # H sleeps 1..4.5 ms (e.g. I/O under the lock), woken at 4.5, runs at 4.6.
    c = chain([off(H, 1 * MS, 4600 * US)], [rq(H, 4500 * US, 4600 * US)])
    r = c.iloc[0]
    assert r["holder_blocked_ns"] == 3500 * US and r["holder_runnable_ns"] == 100 * US
    assert r["holder_running_ns"] == 900 * US
    assert r["verdict"] == "holder blocked"


def test_holder_waiting_for_another_mutex_is_the_next_link():
    # While holding M, H waits for mutex N (held by tid 4 over 0..4 ms): asleep 1..4 ms,
    # runnable 4..4.1 ms, so of its 4.5 ms window 3 ms are spent waiting for N.
    c = chain([off(H, 1 * MS, 4100 * US)], [rq(H, 4 * MS, 4100 * US, waker=4)],
              extra_locks=[lk(4, M + 64, 0, 0, 4 * MS), lk(H, M + 64, 800 * US, 4100 * US, 4200 * US)])
    r = c.iloc[0]
    assert r["verdict"] == "holder blocked"
    assert r["holder_lock_wait_ns"] == 3 * MS and r["holder_blocked_ns"] == 3 * MS
    assert r["holder_runnable_ns"] == 100 * US and r["holder_running_ns"] == 1400 * US


def test_holder_is_the_last_one_before_the_waiter_got_the_mutex():
    # Convoy: tid 2 holds M 0..2 ms, tid 4 2..4 ms (preempted 2.2..3.6); W waits 0.5..4.1.
    # Race: W enters lock(N) at 6.0 ms just before tid 4 acquires N at 6.1 (held to 7).
    run = make_run(
        requests=[req(0, W, 0, 10 * MS)], switches=[off(4, 2200 * US, 3600 * US, voluntary=False)],
        runq=[rq(4, 2200 * US, 3600 * US, "preempt")],
        locks=[lk(2, M, 0, 0, 2 * MS), lk(4, M, 1 * MS, 2 * MS, 4 * MS),
               lk(W, M, 500 * US, 4100 * US, 4200 * US),
               lk(4, M + 8, 6100 * US, 6100 * US, 7 * MS), lk(W, M + 8, 6 * MS, 7100 * US, 8 * MS)])
    c = df_lock_chains(run, df_decompose(run))
    assert c["holder_tid"].tolist() == [4, 4]
    assert c["holder_window_ns"].tolist() == [2 * MS, 900 * US]
    assert c.loc[0, "holder_runnable_ns"] == 1400 * US and c.loc[0, "verdict"] == "holder preempted"
    assert c.loc[1, "holder_running_ns"] == 900 * US


def test_running_holder():
    c = chain([], [])
    r = c.iloc[0]
    assert r["holder_running_ns"] == 4500 * US and r["verdict"] == "holder running"


def test_unknown_holder_and_filters():
    run = make_run(
        requests=[req(0, W, 0, 10 * MS)], switches=[], runq=[],
        locks=[lk(W, M, 1 * MS, 2 * MS, 3 * MS),            # nobody recorded holding M
               lk(W, M + 8, 4 * MS, 4 * MS + 50, 5 * MS, contended=False),  # 50 ns: not a wait
               lk(W, M, 20 * MS, 25 * MS, 26 * MS)])        # outside the request
    c = df_lock_chains(run, df_decompose(run))
    assert len(c) == 1
    assert c.loc[0, "holder_tid"] == -1 and c.loc[0, "verdict"] == "holder unknown"


def test_holder_released_just_before_the_stamped_request_is_still_the_holder():
    # H's unlock() entered at 5.000 ms, W's lock() at 5.003 ms, yet W took the futex path: H's
    # release landed after W's attempt (each stamp precedes its own atomic operation). Within
    # RELEASE_SKEW_NS (50 us) H is the holder, with an empty window; 200 us earlier it is not.
    def one(t_req):
        run = make_run(requests=[req(0, W, 0, 10 * MS)], switches=[], runq=[],
                       locks=[lk(H, M, 0, 1 * MS, 5 * MS), lk(W, M, t_req, t_req + 20 * US, 6 * MS)])
        return df_lock_chains(run, df_decompose(run)).iloc[0]
    r = one(5003 * US)
    assert r["holder_tid"] == H and r["holder_window_ns"] == 0
    assert one(5200 * US)["holder_tid"] == -1


def test_no_locks_stream_gives_empty_frame_with_columns():
    run = make_run(requests=[req(0, W, 0, 10 * MS)])
    c = df_lock_chains(run, df_decompose(run))
    assert len(c) == 0 and "verdict" in c.columns and "holder_runnable_ns" in c.columns
