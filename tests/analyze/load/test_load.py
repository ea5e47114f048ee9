"""Loader: records written with the schema's dtypes come back as documented DataFrames."""

import numpy as np
import pandas as pd
import pytest

from fixtures import MS, T0, lk, occ, occupant, off, req, rq, span, task, write_run
from analyze.load.errors import AnalysisError, CorruptRecordsError, MissingStreamError
from analyze.load.load import COLUMNS, load_run
from analyze.load.schema import load_schema

TRACEPARENT = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n"


@pytest.fixture(scope="module")
def schema():
    return load_schema()  # runs build/common/tt-schema


def full_run(tmp_path, schema, **over):
    streams = dict(
        requests=[req(0, 11, 0, 10 * MS, t_enqueue=-2 * MS, conn=3, status=200),
                  req(1, 12, 1 * MS, 3 * MS, status=-28)],
        runq=[rq(11, 1 * MS, 2 * MS, "wakeup", cpu=1, waker=12),
              rq(11, 4 * MS, 7 * MS, "preempt"), rq(12, 0, 5, "wakeup_new")],
        switches=[off(11, 1 * MS, 2 * MS, cpu_off=0, cpu_on=1, kstack=4, ustack=5),
                  off(11, 4 * MS, 7 * MS, voluntary=False)],
        locks=[lk(11, 0xdead0000beef, 1 * MS, 3 * MS, 4 * MS, ustack=9),
               lk(12, 0xdead0000beef, 5 * MS, 5 * MS, None, trylock=True)],
        spans=[span(11, 0, 10 * MS, ret=7)],
        tasks=[task(11, "pool-w3", migrations=2), task(12, "naive-c17")],
        occupancy=[occ(1, 1 * MS, 0), occ(1, 2 * MS, 11, pid=100)],
        occupants=[occupant(0, "idle"), occupant(11, "pool-w3", pid=100, cgroup_id=2 ** 40)],
        span_contexts=[dict(span_row=0, traceparent=TRACEPARENT)],
    )
    streams.update(over)
    streams = {k: v for k, v in streams.items() if v is not None}
    return write_run(tmp_path / "run", schema, meta={"lost_events": {"runq": 3}, "ncpus": 2},
                     workload={"model": "pool", "conns": 4},
                     stacks=[{"stream": "locks", "id": 9, "kind": "user",
                              "frames": ["pthread_mutex_lock", "order_add", "main"]}], **streams)


def test_round_trip_every_stream(tmp_path, schema):
    run = load_run(full_run(tmp_path, schema))
    for s in COLUMNS:
        assert list(getattr(run, s).columns) == COLUMNS[s], s
        assert run.has(s)
    r = run.requests
    assert r["t_start_ns"].tolist() == [T0, T0 + 1 * MS] and r["t_enqueue_ns"][0] == T0 - 2 * MS
    assert r["status"].tolist() == [200, -28] and r["conn"].tolist() == [3, 0]
    assert r["t_end_ns"].dtype == np.int64
    q = run.runq
    assert q["kind"].tolist() == ["wakeup", "preempt", "wakeup_new"]
    assert (q["t_run_ns"] - q["t_runnable_ns"]).tolist() == [1 * MS, 3 * MS, 5]
    assert q["waker_tid"].tolist() == [12, 0, 0]
    sw = run.switches
    assert sw["voluntary"].tolist() == [True, False]
    assert (sw["t_on_ns"] - sw["t_off_ns"]).tolist() == [1 * MS, 3 * MS]
    assert sw[["cpu_off", "cpu_on", "kstack_id", "ustack_id"]].iloc[0].tolist() == [0, 1, 4, 5]
    L = run.locks
    assert L["mutex"].tolist() == [0xdead0000beef] * 2 and L["mutex"].dtype == np.uint64
    assert L["wait_ns"].tolist() == [2 * MS, 0]
    assert L["hold_ns"][0] == 1 * MS and np.isnan(L["hold_ns"][1])
    assert L["contended"].tolist() == [True, False] and L["trylock"].tolist() == [False, True]
    t = run.tasks
    assert t["comm"].tolist() == ["pool-w3", "naive-c17"]
    assert t["role"].tolist() == ["worker", "conn-thread"] and t["migrations"].tolist() == [2, 0]
    assert run.spans["ret"].tolist() == [7]
    o = run.occupancy
    assert o["t_ns"].tolist() == [T0 + 1 * MS, T0 + 2 * MS] and o["tid"].tolist() == [0, 11]
    assert run.occupants["comm"].tolist() == ["idle", "pool-w3"]
    assert run.occupants["cgroup_id"].dtype == np.uint64
    assert run.occupants["cgroup_id"].tolist() == [1, 2 ** 40]
    assert run.span_contexts["traceparent"].tolist() == [TRACEPARENT]   # NULs cut
    assert run.span_contexts["span_row"].tolist() == [0]
    assert run.stacks[("locks", 9)] == ["pthread_mutex_lock", "order_add", "main"]
    assert run.lost_events == {"runq": 3} and run.workload["model"] == "pool"
    assert run.source == "requests"


def test_absent_stream_is_empty_with_columns_and_require_names_file(tmp_path, schema):
    run = load_run(full_run(tmp_path, schema, runq=None))
    assert not run.has("runq") and len(run.runq) == 0
    assert list(run.runq.columns) == COLUMNS["runq"]
    with pytest.raises(MissingStreamError, match=r"runq\.bin is missing.*tailtrace --events runq"):
        run.require("runq")


def test_no_requests_and_no_spans_is_a_scheduler_only_run(tmp_path, schema):
    run = load_run(full_run(tmp_path, schema, requests=None, spans=None))
    assert run.source == "none" and not run.has("requests") and len(run.requests) == 0
    assert list(run.requests.columns) == COLUMNS["requests"] and len(run.runq) == 3


def test_a_run_with_no_stream_at_all_is_a_missing_stream(tmp_path, schema):
    d = write_run(tmp_path / "empty", schema, meta={"ncpus": 2})
    with pytest.raises(MissingStreamError, match=r"requests\.bin is missing.*httpload"):
        load_run(d)


def test_requests_from_outer_spans(tmp_path, schema):
    d = full_run(tmp_path, schema, requests=None,
                 spans=[span(11, 5 * MS, 9 * MS, ret=-1, span_id=1),
                        span(11, 6 * MS, 7 * MS, depth=1),
                        span(12, 0, 2 * MS, ret=0, span_id=0)])
    run = load_run(d)
    assert run.source == "spans" and not run.has("requests")
    r = run.requests
    assert r["id"].tolist() == [0, 1] and r["tid"].tolist() == [12, 11]
    assert r["t_start_ns"].tolist() == [T0, T0 + 5 * MS]
    assert r["t_enqueue_ns"].tolist() == r["t_start_ns"].tolist()
    assert r["status"].tolist() == [0, -1] and r["conn"].tolist() == [0, 1]
    assert r["ret"].tolist() == [0, -1]        # raw return values, kept as such
    # span_contexts names spans.bin's row 0: the span at 5 ms, the second request
    assert r["trace_context"].astype(str).tolist() == ["none", "ok"]
    assert r["trace_id"].tolist() == ["", "4bf92f3577b34da6a3ce929d0e0e4736"]
    assert r["parent_span_id"].tolist() == ["", "00f067aa0ba902b7"]


def test_a_span_whose_thread_was_born_during_it_starts_when_that_thread_first_ran(
        tmp_path, schema):
    """A TCP span answered by a thread started for its connection (born 2 ms into the span,
    first ran at 3 ms): service from 3 ms, the 3 ms before are its queue wait. A thread born
    before its span, or one that first ran only after the span ended, changes nothing."""
    d = full_run(tmp_path, schema, requests=None,
                 runq=[rq(21, 2 * MS, 3 * MS, "wakeup_new"), rq(22, 0, 1 * MS, "wakeup_new"),
                       rq(23, 4 * MS, 9 * MS, "wakeup_new")],
                 spans=[span(21, 0, 10 * MS), span(22, 2 * MS, 4 * MS),
                        span(23, 1 * MS, 8 * MS)])
    r = load_run(d).requests
    assert r["tid"].tolist() == [21, 23, 22]
    assert r["t_enqueue_ns"].tolist() == [T0, T0 + 1 * MS, T0 + 2 * MS]
    assert r["t_start_ns"].tolist() == [T0 + 3 * MS, T0 + 1 * MS, T0 + 2 * MS]


def test_truncated_file_is_corrupt_and_named(tmp_path, schema):
    d = full_run(tmp_path, schema)
    p = d / "switches.bin"
    p.write_bytes(p.read_bytes()[:-5])
    with pytest.raises(CorruptRecordsError, match=r"switches\.bin: truncated"):
        load_run(d)
    p.write_bytes(b"TTRE")
    with pytest.raises(CorruptRecordsError, match=r"switches\.bin: truncated header"):
        load_run(d)


def test_wrong_kind_or_magic_is_corrupt(tmp_path, schema):
    d = full_run(tmp_path, schema)
    (d / "runq.bin").write_bytes((d / "switches.bin").read_bytes())
    with pytest.raises(CorruptRecordsError, match=r"runq\.bin: not a runq record file"):
        load_run(d)


def test_bad_run_dir_is_an_analysis_error(tmp_path):
    with pytest.raises(AnalysisError, match="no such run directory"):
        load_run(tmp_path / "nope")


def test_loading_writes_nothing_and_reads_the_bin_as_it_is_now(tmp_path, schema):
    """The loader only reads: the run directory holds the same files afterwards (a read-only
    or shared run directory is fine), and a .bin written again is read again."""
    d = full_run(tmp_path, schema)
    before = sorted((p.relative_to(d), p.stat().st_mtime_ns) for p in d.rglob("*"))
    assert load_run(d).runq["kind"].tolist() == ["wakeup", "preempt", "wakeup_new"]
    assert sorted((p.relative_to(d), p.stat().st_mtime_ns) for p in d.rglob("*")) == before
    write_run(d, schema, runq=[rq(11, 0, 9, "preempt", cpu=0)])
    q = load_run(d).runq
    assert len(q) == 1 and (q["t_run_ns"] - q["t_runnable_ns"]).tolist() == [9]


def test_malformed_stack_lines_are_skipped_and_reported(tmp_path, schema):
    d = full_run(tmp_path, schema)
    with open(d / "stacks.jsonl", "a") as f:
        f.write('{"stream": "offcpu", "id": 1, "kind": "kernel", "frames": ["schedule"]}\n{"stre')
    run = load_run(d)
    assert run.stacks[("offcpu", 1)] == ["schedule"]
    assert any("skipped 1 malformed" in w for w in run.warnings)


def test_empty_stream_file_loads_as_present_and_empty(tmp_path, schema):
    run = load_run(full_run(tmp_path, schema, locks=[]))
    assert run.has("locks") and len(run.locks) == 0
    assert isinstance(run.locks, pd.DataFrame)


def test_bin_files_decompose_exactly(tmp_path, schema):
    """The whole path: records on disk -> load_run -> df_decompose, exact parts."""
    from analyze.explain.decompose import df_decompose
    d = write_run(tmp_path / "r", schema,
                  requests=[req(0, 7, 0, 10 * MS, t_enqueue=-1 * MS)],
                  switches=[off(7, 1 * MS, 10 * MS)], runq=[rq(7, 4 * MS, 10 * MS)], locks=[],
                  tasks=[task(7, "pool-w0")],
                  meta={"mono_start_ns": T0 - 5 * MS, "mono_end_ns": T0 + 20 * MS,
                        "lost_events": {"runq": 0}})
    row = df_decompose(load_run(d)).iloc[0]
    assert [row[c] for c in ("queue_wait_ns", "oncpu_ns", "runq_wakeup_ns", "runq_preempt_ns",
                             "lock_wait_ns", "blocked_ns")] == [1 * MS, 1 * MS, 6 * MS, 0, 0, 3 * MS]
    assert bool(row["closes"]) and bool(row["traced"])


def test_records_read_a_chunk_at_a_time_are_the_same_frames(tmp_path, schema, monkeypatch):
    """read_bin fills each column chunk by chunk: with chunks of 2 records (files of 1, 2,
    3 and 7 records: chunk edges inside and at the end), every stream's frame equals the
    one read in a single chunk, dtypes included."""
    import analyze.load.load as L
    many = [off(11, k * MS, k * MS + 5, cpu_on=k % 2, ustack=k) for k in range(7)]
    d = full_run(tmp_path, schema, switches=many)
    one = load_run(d)
    monkeypatch.setattr(L, "READ_CHUNK", 2)
    two = load_run(d)
    for s in COLUMNS:
        pd.testing.assert_frame_equal(getattr(one, s), getattr(two, s), check_exact=True)
    assert two.switches["ustack_id"].tolist() == list(range(7))
