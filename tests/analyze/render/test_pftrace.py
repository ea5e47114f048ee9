"""trace.perfetto-trace of a small known run, decoded with the perfetto protos: every CPU's
switches, every wakeup and its waker, the request slices and the wakeup flow, exactly."""
import numpy as np
import pandas as pd
import pytest

from analyze.pipeline import analyse
from analyze.render import pftrace
from fixtures import T0, US, make_run, occ, occupant, off, req, rq, task

pytest.importorskip("perfetto")

A, B, X = 11, 12, 50     # A and B traced (pid 100); X a task of another process (pid 50)


def _run():
    """A runs on CPU 0 and blocks at 100 µs (X takes the CPU); B, on CPU 1, wakes it at
    250; at 300 B is preempted and A runs on CPU 1 until it blocks at 500 (B back in); an
    interrupt wakes A at 800 and it runs on CPU 0 at 900, where X was. One request on A
    from 50 to 950."""
    return make_run(
        requests=[req(1, A, 50 * US, 950 * US, conn=3)],
        switches=[off(A, 100 * US, 300 * US, cpu_off=0, cpu_on=1),
                  off(B, 300 * US, 500 * US, voluntary=False, cpu_off=1, cpu_on=1),
                  off(A, 500 * US, 900 * US, cpu_off=1, cpu_on=0)],
        runq=[rq(A, 250 * US, 300 * US, cpu=1, waker=B),
              rq(B, 300 * US, 500 * US, kind="preempt", cpu=1),
              rq(A, 800 * US, 900 * US, cpu=0, ctx="hardirq")],
        tasks=[task(A, "worker-a"), task(B, "worker-b")],
        occupancy=[occ(0, 100 * US, X), occ(0, 900 * US, A, pid=100, flags=4)],
        occupants=[occupant(X, "antagonist"), occupant(A, "worker-a", pid=100, flags=4)],
        meta={"kernel": "6.1.0-test", "mono_start_ns": T0})


def _decode(path):
    packets = pftrace.read_packets(path)
    switches, wakings, slices, infos = [], [], [], {}
    interned = {}
    for p in packets:
        if p.HasField("system_info"):
            infos["release"] = p.system_info.utsname.release
        if p.HasField("process_tree"):
            infos["threads"] = {(t.tid, t.tgid, t.name) for t in p.process_tree.threads}
            infos["processes"] = {(q.pid, tuple(q.cmdline)) for q in p.process_tree.processes}
        if p.HasField("interned_data"):
            interned.update({n.iid: n.name for n in p.interned_data.event_names})
            interned.update({("arg", n.iid): n.name
                             for n in p.interned_data.debug_annotation_names})
        if p.HasField("ftrace_events"):
            b = p.ftrace_events
            cs = b.compact_sched
            t = np.cumsum(np.array(cs.switch_timestamp, np.int64))
            for ts, st, nxt, ci in zip(t, cs.switch_prev_state, cs.switch_next_pid,
                                       cs.switch_next_comm_index):
                switches.append((b.cpu, int(ts) - T0, nxt, st, cs.intern_table[ci]))
            for e in b.event:
                w = e.sched_waking
                wakings.append((e.timestamp - T0, w.pid, w.target_cpu, e.pid, e.common_flags,
                                w.comm))
        if p.HasField("track_event"):
            te = p.track_event
            args = {interned[("arg", a.name_iid)]: a.int_value for a in te.debug_annotations}
            slices.append((p.timestamp - T0, te.type, te.track_uuid,
                           interned.get(te.name_iid, ""), args, list(te.flow_ids),
                           list(te.terminating_flow_ids)))
    return switches, wakings, slices, infos


def test_switches_wakings_requests_and_flows_exact(tmp_path):
    run = _run()
    info = pftrace.write_perfetto_trace(analyse(run)["findings"], tmp_path / "t.pftrace")
    switches, wakings, slices, infos = _decode(tmp_path / "t.pftrace")
    S, R, RP = 1, 0, 0x100
    assert switches == [(0, 100 * US, X, S, "antagonist"), (0, 900 * US, A, R, "worker-a"),
                        (1, 300 * US, A, RP, "worker-a"), (1, 500 * US, B, S, "worker-b")]
    assert wakings == [(800 * US, A, 0, 0, 0x08, "worker-a"), (250 * US, A, 1, B, 0, "worker-a")]
    assert infos["release"] == "6.1.0-test"
    assert infos["threads"] == {(A, 100, "worker-a"), (B, 100, "worker-b"), (X, 50, "antagonist")}
    assert (50, ("antagonist",)) in infos["processes"]
    TE = pftrace.protos().TrackEvent
    thread_a, thread_b = pftrace._UUID_THREAD + A, pftrace._UUID_THREAD + B
    begin, = [s for s in slices if s[1] == TE.TYPE_SLICE_BEGIN]
    assert begin[:3] == (50 * US, TE.TYPE_SLICE_BEGIN, thread_a)
    assert begin[3].startswith("request")
    args = begin[4]
    assert (args["id"], args["conn"], args["status"]) == (1, 3, 200)
    parts = sum(v for k, v in args.items() if k.endswith("_ns") and k != "latency_ns")
    assert parts == args["latency_ns"] == 900 * US
    assert args["runq_wakeup_ns"] == 150 * US and args["runq_preempt_ns"] == 0
    assert [s[:3] for s in slices if s[1] == TE.TYPE_SLICE_END] == \
        [(950 * US, TE.TYPE_SLICE_END, thread_a)]
    wakes, woken = [s for s in slices if s[1] == TE.TYPE_INSTANT]
    assert wakes[:4] == (250 * US, TE.TYPE_INSTANT, thread_b, "wakes") and wakes[5] == [1]
    assert woken[:4] == (300 * US, TE.TYPE_INSTANT, thread_a, "woken") and woken[6] == [1]
    assert (info.switches, info.wakings, info.requests, info.flows) == (4, 2, 1, 1)
    assert info.bytes == (tmp_path / "t.pftrace").stat().st_size


@pytest.mark.parametrize("raw,voluntary,want", [
    (0, True, 0),            # a yield: still runnable
    (1, True, 1),            # TASK_INTERRUPTIBLE: S
    (2, True, 2),            # TASK_UNINTERRUPTIBLE: D
    (0x402, True, 0x80),     # TASK_IDLE: I
    (0x1002, True, 2),       # an rtlock wait reads as D
    (0x81, True, 1),         # TASK_DEAD is not reported: its other bit
    (1, False, 0x100),       # preempted: R+ whatever the state
])
def test_ftrace_state_is_what_sched_switch_reports(raw, voluntary, want):
    assert pftrace.ftrace_state([raw], [voluntary]).tolist() == [want]


def test_a_run_without_scheduler_streams_still_writes_its_requests(tmp_path):
    run = make_run(requests=[req(1, A, 0, 100 * US), req(2, A, 50 * US, 150 * US)],
                   meta={"mono_start_ns": T0})
    info = pftrace.write_perfetto_trace(analyse(run)["findings"], tmp_path / "t.pftrace")
    _, _, slices, _ = _decode(tmp_path / "t.pftrace")
    TE = pftrace.protos().TrackEvent
    tracks = {s[2] for s in slices if s[1] == TE.TYPE_SLICE_BEGIN}
    assert info.requests == 2 and len(tracks) == 2   # overlapping: the second on a lane
    assert pftrace._lane_uuid(A, 1) in tracks
