"""pprof profiles (analyze/render/pprof.py): exact values on inline fixtures, decoded with the
profile messages, and read back by `go tool pprof` (install-deps brings Go)."""
import gzip
from pathlib import Path

import pandas as pd
import pytest

from fixtures import MS, US, lk, make_run, off, task
from analyze.explain.sched import df_threads
from analyze.render import pprof
from go_pprof import pprof as go_pprof

KSTACK, USTACK, LSTACK = 7, 8, 9
STACKS = {("offcpu", KSTACK): ["__schedule+0x618", "schedule+0x23", "futex_wait+0x12"],
          ("offcpu", USTACK): ["__lll_lock_wait+0x2a (libc.so.6)", "handle+0x10 (orders)",
                               "[unknown] (orders+0x99)"],
          ("locks", LSTACK): ["pthread_mutex_lock+0x4 (libc.so.6)", "ledger_add+0x8 (orders)"]}
META = {"mono_start_ns": 5_000_000_000_000, "mono_end_ns": 5_000_100_000_000,
        "wall_start": "2026-11-28T18:47:19.5Z"}


def run_fixture():
    """Thread 101 blocks twice in futex (202) with one stack (3 + 5 ms) and once in read
    (0) without stacks (2 ms), and is preempted once (1 ms); thread 102 sleeps in
    nanosleep (35) 4 ms. Thread 101 takes mutex 0x10 twice (waits 1 + 2 ms, holds 0.5 +
    0.25 ms), from one stack."""
    sw = [off(101, 0, 3 * MS, kstack=KSTACK, ustack=USTACK, syscall=202),
          off(101, 4 * MS, 9 * MS, kstack=KSTACK, ustack=USTACK, syscall=202),
          off(101, 10 * MS, 12 * MS, syscall=0),
          off(101, 13 * MS, 14 * MS, voluntary=False),
          off(102, 0, 4 * MS, syscall=35)]
    locks = [lk(101, 0x10, 20 * MS, 21 * MS, 21 * MS + 500 * US, ustack=LSTACK),
             lk(101, 0x10, 30 * MS, 32 * MS, 32 * MS + 250 * US, ustack=LSTACK)]
    return make_run(switches=sw, locks=locks, tasks=[task(101, "pool-w0"), task(102, "main")],
                    stacks=STACKS, meta=META)


def decode(path: Path):
    p = pprof.profile_class()()
    p.ParseFromString(gzip.decompress(path.read_bytes()))
    return p


def samples(p) -> list:
    """[(frames leaf first, values, {label: value})] of a decoded profile."""
    st = p.string_table
    fn = {f.id: st[f.name] for f in p.function}
    loc = {l.id: fn[l.line[0].function_id] for l in p.location}
    return [([loc[i] for i in s.location_id], list(s.value),
             {st[lb.key]: (st[lb.str] if lb.str else lb.num) for lb in s.label})
            for s in p.sample]


def test_offcpu_profile_holds_every_switch_once_by_thread_reason_and_stack(tmp_path):
    run = run_fixture()
    assert pprof.write_profiles(run, tmp_path) == ["profiles/offcpu.pb.gz",
                                                   "profiles/locks.pb.gz"]
    p = decode(tmp_path / "profiles" / "offcpu.pb.gz")
    st = p.string_table
    assert [(st[t.type], st[t.unit]) for t in p.sample_type] == [("waits", "count"),
                                                                 ("off_cpu", "nanoseconds")]
    assert st[p.default_sample_type] == "off_cpu"
    assert p.duration_nanos == 100 * MS
    assert p.time_nanos == pd.Timestamp("2026-11-28T18:47:19.5Z").value
    got = sorted(samples(p), key=lambda s: (s[2]["tid"], s[2]["reason"], s[2].get("call", "")))
    futex = ["__schedule", "schedule", "futex_wait", "__lll_lock_wait", "handle",
             "[unknown] orders+0x99"]
    assert got == [
        (["[no stack recorded]"], [1, 2 * MS], {"thread": "pool-w0", "tid": 101, "reason": "io",
                                                "call": "read"}),
        (futex, [2, 8 * MS], {"thread": "pool-w0", "tid": 101, "reason": "lock",
                              "call": "futex"}),
        (["[preempted]"], [1, 1 * MS], {"thread": "pool-w0", "tid": 101,
                                        "reason": "preempted"}),
        (["[no stack recorded]"], [1, 4 * MS], {"thread": "main", "tid": 102,
                                                "reason": "sleep", "call": "nanosleep"})]
    # every off-CPU nanosecond of threads.csv, once
    assert sum(s[1][1] for s in got) == df_threads(run)["offcpu_ns"].sum() == 15 * MS


def test_locks_profile_sums_the_waits_and_holds_of_each_stack(tmp_path):
    pprof.write_profiles(run_fixture(), tmp_path)
    p = decode(tmp_path / "profiles" / "locks.pb.gz")
    st = p.string_table
    assert [st[t.type] for t in p.sample_type] == ["acquisitions", "wait", "hold"]
    assert st[p.default_sample_type] == "wait"
    assert samples(p) == [(["pthread_mutex_lock", "ledger_add"], [2, 3 * MS, 750 * US],
                           {"thread": "pool-w0", "tid": 101, "mutex": "0x10"})]


def test_oncpu_profile_splits_each_threads_cpu_time_by_its_samples(tmp_path):
    (tmp_path / "oncpu.folded").write_text(
        "pool-w0;main;handle;parse 30\n"
        "pool-w0;main;handle 10\n"
        "pool-w0;main;handle;parse 20\n"      # the same stack again: summed
        "perf-only;x 5\n"                     # a thread name the switches never saw
        "garbage line\n")
    threads = pd.DataFrame({"comm": ["pool-w0", "pool-w0", "main"],
                            "oncpu_ns": [600_001, 399_999, 7 * MS]})
    df = pprof.df_oncpu_profile(None, tmp_path / "oncpu.folded", threads)
    assert df.to_dict("records") == [
        {"comm": "pool-w0", "frames": ("handle", "main"), "samples": 10, "ns": 166_666},
        {"comm": "pool-w0", "frames": ("parse", "handle", "main"), "samples": 50,
         "ns": 833_334},
        {"comm": "main", "frames": ("[not sampled]",), "samples": 0, "ns": 7 * MS}]
    run = run_fixture()
    pprof.write_profiles(run, tmp_path, threads)
    p = decode(tmp_path / "profiles" / "oncpu.pb.gz")
    assert sum(s.value[1] for s in p.sample) == threads["oncpu_ns"].sum()
    assert sum(s.value[0] for s in p.sample) == 60


def test_go_tool_pprof_reads_all_three_profiles(tmp_path):
    (tmp_path / "oncpu.folded").write_text("pool-w0;main;handle 10\n")
    threads = pd.DataFrame({"comm": ["pool-w0"], "oncpu_ns": [5 * MS]})
    names = pprof.write_profiles(run_fixture(), tmp_path, threads)
    assert sorted(names) == ["profiles/locks.pb.gz", "profiles/offcpu.pb.gz",
                             "profiles/oncpu.pb.gz"]
    totals = {"oncpu": "Total samples = 5ms", "offcpu": "Total samples = 15ms",
              "locks": "Total samples = 3ms"}
    for name, total in totals.items():
        for view in ("-top", "-traces"):
            r = go_pprof(view, tmp_path / "profiles" / f"{name}.pb.gz", home=tmp_path)
            assert r.returncode == 0, r.stderr
            assert total in r.stdout, r.stdout
    top = go_pprof("-top", "-sample_index=hold", tmp_path / "profiles" / "locks.pb.gz",
                home=tmp_path).stdout
    assert "Total samples = 750us" in top and "ledger_add" in top, top
