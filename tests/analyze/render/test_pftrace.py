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


def test_columnar_packets_are_the_protobuf_runtimes_bytes():
    """The request slices, wakings and flow instants are encoded a column at a time
    (analyze/render/protowire.py): their bytes must be what the protobuf runtime writes for
    the same messages, negative values and omitted fields included."""
    pb = pftrace.protos()
    TE = pb.TrackEvent
    req = pd.DataFrame({"id": [1, 2], "conn": [3, 4], "status": [200, -28], "tid": [A, B],
                        "t_start_ns": [T0, T0 + 5], "t_end_ns": [T0 + 10, T0 + 300 * US],
                        "oncpu_ns": [7, 0]})
    interned = pftrace._Interned()
    band = np.array(["request ≥P99", "request"], dtype=object)
    lane = np.array([0, 1])
    got = b"".join(pftrace._request_slices(pb, req, band, lane, interned))
    want = pb.Trace()
    tracks = [pftrace._UUID_THREAD + A, pftrace._lane_uuid(B, 1)]
    for i in range(2):
        pk = want.packet.add(timestamp=int(req["t_start_ns"][i]),
                             trusted_packet_sequence_id=pftrace.SEQ, sequence_flags=2)
        for c in ("id", "conn", "status", "oncpu_ns"):
            pk.track_event.debug_annotations.add(name_iid=interned.arg(c), int_value=int(req[c][i]))
        pk.track_event.type = TE.TYPE_SLICE_BEGIN
        pk.track_event.name_iid = interned.event(band[i])
        pk.track_event.track_uuid = tracks[i]
    for i in range(2):
        pk = want.packet.add(timestamp=int(req["t_end_ns"][i]),
                             trusted_packet_sequence_id=pftrace.SEQ, sequence_flags=2)
        pk.track_event.type = TE.TYPE_SLICE_END
        pk.track_event.track_uuid = tracks[i]
    assert got == want.SerializeToString()

    wk = pd.DataFrame({"t_ns": [T0, T0 + 1], "tid": [A, B], "cpu": [1, 1], "waker": [B, 0],
                       "flags": [0, 0x10]})
    slices = [{k: wk[k].to_numpy(np.int64) for k in wk}]
    got = b"".join(pftrace._waking_bundles(pb, slices, {A: "worker-a", B: "b"}))
    want = pb.Trace()
    b = want.packet.add().ftrace_events
    b.cpu = 1
    for r, comm in zip(wk.itertuples(), ("worker-a", "b")):
        e = b.event.add(timestamp=r.t_ns, pid=r.waker)
        if r.flags:
            e.common_flags = r.flags
        e.sched_waking.comm, e.sched_waking.pid, e.sched_waking.prio = comm, r.tid, pftrace.PRIO
        e.sched_waking.success, e.sched_waking.target_cpu = 1, r.cpu
    assert got == want.SerializeToString()

    runq = pd.DataFrame({"t_runnable_ns": [T0 - 5, T0], "t_run_ns": [T0, T0 + 9],
                         "waker_tid": [A, B], "tid": [B, A]})
    got = b"".join(pftrace._flow_instants(pb, runq, np.array([1]), interned))
    want = pb.Trace()
    for ts, who, name, field in ((T0, B, "wakes", "flow_ids"),
                                 (T0 + 9, A, "woken", "terminating_flow_ids")):
        pk = want.packet.add(timestamp=ts, trusted_packet_sequence_id=pftrace.SEQ,
                             sequence_flags=2)
        pk.track_event.type = TE.TYPE_INSTANT
        pk.track_event.name_iid = interned.event(name)
        pk.track_event.track_uuid = pftrace._UUID_THREAD + who
        getattr(pk.track_event, field).append(1)
    assert got == want.SerializeToString()

    # switches: two slices of one CPU, then one of another; a bundle of 3 rows at most
    # takes rows across the first two, and the CPU's last bundle is short
    sl = [{"cpu": np.array([0, 0]), "t_ns": np.array([T0, T0 + 4]), "next_tid": np.array([A, 0]),
           "prev_state": np.array([0, 0x100])},
          {"cpu": np.array([0, 0]), "t_ns": np.array([T0 + 9, T0 + 20]),
           "next_tid": np.array([B, A]), "prev_state": np.array([1, 2])},
          {"cpu": np.array([3]), "t_ns": np.array([T0 + 2]), "next_tid": np.array([X]),
           "prev_state": np.array([0])}]
    names = {A: "worker-a", B: "b", X: "x"}
    per_bundle, pftrace.SWITCHES_PER_BUNDLE = pftrace.SWITCHES_PER_BUNDLE, 3
    try:
        got = b"".join(pftrace._switch_bundles(pb, sl, names))
    finally:
        pftrace.SWITCHES_PER_BUNDLE = per_bundle
    want = pb.Trace()
    for cpu, rows in ((0, [(T0, A, 0), (T0 + 4, 0, 0x100), (T0 + 9, B, 1)]),
                      (0, [(T0 + 20, A, 2)]), (3, [(T0 + 2, X, 0)])):
        b = want.packet.add().ftrace_events
        b.cpu = cpu
        cs = b.compact_sched
        tids = sorted({nxt for _, nxt, _ in rows})
        cs.intern_table.extend(names.get(t, "") if t else "swapper" for t in tids)
        prev = 0
        for t, nxt, state in rows:
            cs.switch_timestamp.append(t - prev)
            prev = t
            cs.switch_prev_state.append(state)
            cs.switch_next_pid.append(nxt)
            cs.switch_next_prio.append(pftrace.PRIO)
            cs.switch_next_comm_index.append(tids.index(nxt))
    assert got == want.SerializeToString()


def test_a_new_threads_first_switch_out_names_it_leaving(tmp_path):
    """A thread created during the run: its first run is in no switch record (a switch record
    pairs a switch-in with the thread's switch-out before it), only in the run-queue record of
    its wakeup_new. X holds CPU 0 from 100 µs; the new thread C runs there from 650 and blocks
    at 700: the switch-out at 700 shows C leaving, not X."""
    C = 13
    run = make_run(
        switches=[off(C, 700 * US, 800 * US, cpu_off=0, cpu_on=1)],
        runq=[rq(C, 600 * US, 650 * US, kind="wakeup_new", cpu=0, waker=A),
              rq(C, 780 * US, 800 * US, cpu=1, waker=A)],
        tasks=[task(A, "worker-a"), task(C, "worker-c")],
        occupancy=[occ(0, 100 * US, X)], occupants=[occupant(X, "antagonist")],
        meta={"kernel": "6.1.0-test", "mono_start_ns": T0})
    pftrace.write_perfetto_trace(analyse(run)["findings"], tmp_path / "t.pftrace")
    c = pftrace.check_against_records(run, tmp_path / "t.pftrace")
    assert c["switch_outs_found"] == c["switch_ins_found"] == c["switch_records"] == 1, c
    switches, *_ = _decode(tmp_path / "t.pftrace")
    assert switches[:3] == [(0, 100 * US, X, 0, "antagonist"), (0, 650 * US, C, 0, "worker-c"),
                            (0, 700 * US, 0, 1, "swapper")], switches
