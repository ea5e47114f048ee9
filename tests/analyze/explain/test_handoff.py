"""A request across threads (analyze/explain/handoff.py), on inline fixtures with exact answers.

The loop thread L (tid 11, pid 100) serves a request [0, 10 ms]: it runs until 1 ms, having
handed the work to worker W (tid 12) at 0.5 ms (W's wakeup, by L), then waits in epoll_wait
[1, 9] until W wakes it at 9, is runnable [9, 9.1] and answers until 10. W is runnable [0.5,
0.6], runs [0.6, 3.6], sleeps [3.6, 8.6] (a timer wakes it), is runnable [8.6, 8.7], runs [8.7,
9] and waits on its condition variable from 9. Along the handoff the request's [0.5, 9] is
W's: on CPU 3.3 ms, runnable 0.2, asleep 5; the rest L's: on CPU 1.4 (0-0.5, 9.1-10),
runnable 0.1."""
import numpy as np
import pytest

from fixtures import MS, US, gap, make_run, off, req, rq, task
from analyze.explain.decompose import df_decompose
from analyze.explain.handoff import df_handoffs

L, W = 11, 12
EPOLL_WAIT, CLOCK_NANOSLEEP, FUTEX = 232, 230, 202
COND_OP, MUTEX_OP = 9 | 128, 0 | 128          # FUTEX_WAIT_BITSET / FUTEX_WAIT, private


def _run(loop_call=EPOLL_WAIT, loop_aux=0, w_wakes_l=True, l_wakes_w=True, gaps=(),
         w_ctx=None, w_born_ms=None):
    """w_ctx: the context W's wakeup of L is recorded in (None: "task"); w_born_ms: W is made
    by L at 0.5 ms and first runs then (runnable from its birth, no switch-out before)."""
    switches = [off(L, 1 * MS, 9100 * US, syscall=loop_call, addr=7, aux=loop_aux),
                off(W, 3600 * US, 8700 * US, syscall=CLOCK_NANOSLEEP),
                off(W, 9 * MS, 20 * MS, syscall=FUTEX, addr=0x50, aux=COND_OP)]
    if w_born_ms is None:
        switches.append(off(W, 0, 600 * US, syscall=FUTEX, addr=0x50, aux=COND_OP))
        first = rq(W, 500 * US, 600 * US, waker=L if l_wakes_w else 0,
                   ctx=None if l_wakes_w else "hardirq")
    else:
        first = rq(W, 500 * US, w_born_ms * MS, kind="wakeup_new", waker=L)
    runq = [first, rq(W, 8600 * US, 8700 * US, ctx="hardirq"),
            rq(L, 9 * MS, 9100 * US, waker=W if w_wakes_l else 0,
               ctx=w_ctx if w_wakes_l else "hardirq")]
    return make_run(requests=[req(1, L, 0, 10 * MS)], switches=switches + list(gaps),
                    runq=runq, tasks=[task(L, "loop"), task(W, "worker")])


def _parts(d) -> dict:
    r = d.iloc[0]
    return {c: r[f"{c}_ns"] / MS for c in ("oncpu", "runq_wakeup", "runq_preempt", "lock_wait",
                                           "io_wait", "sleep", "blocked")}


def test_the_loops_wait_is_charged_to_the_worker_from_the_handoff():
    d = df_decompose(_run())
    seg = df_handoffs(_run(), df_decompose(_run()))
    assert seg[["hop", "tid", "from_tid", "t_start_ns", "t_end_ns"]].values.tolist() == [
        [1, W, L, seg["t_start_ns"][0], seg["t_end_ns"][0]]]
    assert (seg["t_end_ns"][0] - seg["t_start_ns"][0]) == 8500 * US   # [0.5, 9]
    assert _parts(d) == pytest.approx({"oncpu": 4.7, "runq_wakeup": 0.3, "runq_preempt": 0,
                                       "lock_wait": 0, "io_wait": 0, "sleep": 5.0,
                                       "blocked": 0}, abs=1e-9)
    r = d.iloc[0]
    assert r["handoff_ns"] == 8500 * US and r["handoff_tid"] == W
    assert bool(r["closes"]) and r["handoff_unknown_ns"] == 0


@pytest.mark.parametrize("why,kw", [
    ("a mutex wait is contention, not the request's work elsewhere",
     {"loop_call": FUTEX, "loop_aux": MUTEX_OP}),
    ("the worker never wakes the loop: no handoff back", {"w_wakes_l": False}),
    ("the loop never wakes the worker: threads waking each other one way",
     {"l_wakes_w": False}),
])
def test_waits_that_are_no_handoff_stay_the_threads_own(why, kw):
    d = df_decompose(_run(**kw))
    p = _parts(d)
    own = "lock_wait" if kw.get("loop_call") == FUTEX else "io_wait"
    assert p[own] == pytest.approx(8.0) and p["sleep"] == 0, why
    assert d.iloc[0]["handoff_ns"] == 0 and d.iloc[0]["handoff_tid"] == 0, why


def test_an_unexplained_wait_a_kernel_guessed_the_waker_of_stays_the_threads_own():
    """Kernels before 5.11 cannot tell an interrupt from the task it ran over (waker_ctx
    task_guess): a wait for no recorded reason (a page fault's read over FUSE, a disk's) so
    "woken" by W is most likely the device's, and stays L's, blocked; an epoll wait so woken
    is still a handoff."""
    d = df_decompose(_run(loop_call=-1, w_ctx="task_guess"))
    assert _parts(d)["blocked"] == pytest.approx(8.0) and d.iloc[0]["handoff_ns"] == 0
    d = df_decompose(_run(w_ctx="task_guess"))
    assert d.iloc[0]["handoff_ns"] == 8500 * US and d.iloc[0]["handoff_tid"] == W


def test_a_handoff_to_a_worker_made_inside_it_stays_the_threads_own():
    """W is made by L at 0.5 ms and first runs at 3 (seen on 5.10 under emulation: a new
    thread waits 100 ms and more for its first turn): no switch-out of W bounds that runnable
    stretch, so W's states over [0.5, 9] do not add up to it (2.5 ms "outside"); the wait is
    not followed into them, and the request's parts still add up."""
    d = df_decompose(_run(w_born_ms=3))
    p = _parts(d)
    assert p["io_wait"] == pytest.approx(8.0) and p["sleep"] == 0
    r = d.iloc[0]
    assert r["handoff_ns"] == 0 and r["handoff_unknown_ns"] == 0
    assert bool(r["closes"]) and r["check"] == "ok"


def test_a_handoff_whose_worker_lost_an_edge_stays_unknown_and_counted():
    """A gap of W (a switch edge the kernel never reported) inside [0.5, 9]: W's states there
    are unknown, so the wait stays the loop's I/O wait, its 8.5 ms are counted, and the
    request's parts are unknown (checked "gap", out of the bands)."""
    d = df_decompose(_run(gaps=[gap(W, 5 * MS, 6 * MS)]))
    p = _parts(d)
    assert p["io_wait"] == pytest.approx(8.0) and p["sleep"] == 0
    r = d.iloc[0]
    assert r["handoff_ns"] == 0 and r["handoff_unknown_ns"] == 8500 * US
    assert r["check"] == "gap"


def test_a_loop_serving_two_requests_charges_each_to_its_own_worker():
    """Two requests on the loop at once: [0, 10] answered after W (tid 12) wakes the loop at
    9, and [2, 6] answered after V (tid 13) wakes it at 5.5. The loop's first wait [1, 5.5]
    ends with V's wakeup: it is the second request's last handoff, not the first's, whose
    handoff to W runs from W's wakeup at 0.5 to 9 all the same."""
    V = 13
    switches = [off(L, 1 * MS, 5600 * US, syscall=EPOLL_WAIT, addr=7),
                off(L, 5800 * US, 9100 * US, syscall=EPOLL_WAIT, addr=7),
                off(W, 0, 600 * US, syscall=FUTEX, addr=0x50, aux=COND_OP),
                off(W, 9 * MS, 20 * MS, syscall=FUTEX, addr=0x50, aux=COND_OP),
                off(V, 0, 2200 * US, syscall=FUTEX, addr=0x50, aux=COND_OP),
                off(V, 5500 * US, 20 * MS, syscall=FUTEX, addr=0x50, aux=COND_OP)]
    runq = [rq(W, 500 * US, 600 * US, waker=L), rq(V, 2100 * US, 2200 * US, waker=L),
            rq(L, 5500 * US, 5600 * US, waker=V), rq(L, 9 * MS, 9100 * US, waker=W)]
    run = make_run(requests=[req(1, L, 0, 10 * MS), req(2, L, 2 * MS, 6 * MS)],
                   switches=switches, runq=runq,
                   tasks=[task(L, "loop"), task(W, "w1"), task(V, "w2")])
    d = df_decompose(run).set_index("id")
    assert d.loc[1, "handoff_tid"] == W and d.loc[1, "handoff_ns"] == 8500 * US
    assert d.loc[2, "handoff_tid"] == V and d.loc[2, "handoff_ns"] == 3400 * US  # [2.1, 5.5]
    # W ran [0.6, 9] for the first: 8.4 ms on CPU of its 8.5
    assert d.loc[1, "oncpu_ns"] == pytest.approx((8.4 + 0.5 + 0.9) * MS)
    assert np.isclose(d["closure_err"].to_numpy(float), 0).all()


def test_summary_and_report_say_which_threads_the_time_ran_on():
    """The request's 10 ms: 8.5 charged to the worker, 1.5 kept by the loop."""
    from analyze.explain.attribute import df_bands
    from analyze.explain.findings import Findings
    from analyze.render.html import _ran_on_note
    from analyze.render.summary import summary_dict
    run = _run()
    d = df_decompose(run)
    s = summary_dict(Findings(run, d, df_bands(d)))
    h = s["handoffs"]
    assert (h["requests"], h["handed_ms"], h["unknown_requests"]) == (1, 8.5, 0)
    assert h["ran_on"]["≥P99"] == [
        {"own": False, "thread": "worker", "threads": 1, "share": pytest.approx(0.85)},
        {"own": True, "thread": "loop", "threads": 1, "share": pytest.approx(0.15)}]
    assert "85% of their time ran on other threads of their process: worker (1 thread) 85%" \
        in s["headline"]
    assert "≥P99: other threads: worker (1) 85" in _ran_on_note(h)
