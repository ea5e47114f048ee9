"""Who held the CPU while traced threads waited (analyze/explain/antagonists.py), on hand-built
runs.

Every expected figure is computed by hand from the inline records (ns offsets from T0):

  CPU 0 timeline (occupancy):  0 hog(500)  |  3 ms sib(102)  |  5 ms kworker(7, kernel)
                               | 6 ms idle | 6.5 ms victim(101) | 8 ms hog(500) | 9 ms victim
  victim 101 (pid 100) runnable on CPU 0:  [1 ms, 6.5 ms] (preempted), [8.2 ms, 9 ms] (wakeup)
    [1, 6.5]: hog 2 ms (1→3), sibling 2 ms (3→5), kernel 1 ms (5→6), idle 0.5 ms (6→6.5)
    [8.2, 9]: hog 0.8 ms
  sibling 102 runnable on CPU 1 [2 ms, 4 ms]: no record covers it: unknown 2 ms
"""
import pandas as pd
import pytest

from fixtures import MS, T0, US, make_run, occ, occupant, req, rq, task
from analyze.explain import antagonists as A
from analyze.explain.attribute import df_bands
from analyze.explain.decompose import df_decompose
from analyze.explain.findings import Findings
from analyze.load.load import OCC_HARDIRQ, OCC_IRQ_TIMER, OCC_KTHREAD, OCC_SOFTIRQ, OCC_TRUNC
from analyze.render.summary import summary_dict
from analyze.render.words import occupant_clause

OCC = [occ(0, 0, 500), occ(0, 3 * MS, 102, pid=100), occ(0, 5 * MS, 7, flags=OCC_KTHREAD),
       occ(0, 6 * MS, 0), occ(0, 6500 * US, 101, pid=100), occ(0, 8 * MS, 500),
       occ(0, 9 * MS, 101, pid=100),
       occ(0, 9 * MS, 101, pid=100)]                        # written twice: counts once
RUNQ = [rq(101, 1 * MS, 6500 * US, "preempt"), rq(101, 8200 * US, 9 * MS, waker=102),
        rq(102, 2 * MS, 4 * MS, cpu=1)]
OCCUPANTS = [occupant(500, "hog", cgroup_id=77), occupant(102, "w2", pid=100),
             occupant(101, "w1", pid=100), occupant(7, "kworker/0:1", flags=OCC_KTHREAD),
             occupant(0, "idle", flags=OCC_KTHREAD)]
META = {"cgroups": {"77": "/batch", "1": "/"}, "ncpus": 2}


def run_(**over):
    kw = dict(runq=RUNQ, occupancy=OCC, occupants=OCCUPANTS, meta=META, switches=[],
              tasks=[task(101, "w1"), task(102, "w2")])
    kw.update(over)
    return make_run(**kw)


def test_each_wait_splits_exactly_into_what_held_its_cpu():
    rows = A.df_runnable_occupants(run_())
    got = {(int(r.runq_idx), str(r.cls), int(r.pid)): int(r.ns) for r in rows.itertuples()}
    assert got == {(0, "other", 500): 2 * MS, (0, "sibling", 100): 2 * MS,
                   (0, "kernel", 7): 1 * MS, (0, "idle", 0): 500 * US,
                   (1, "other", 500): 800 * US, (2, "unknown", -1): 2 * MS}
    # Σ per interval = the interval, to the ns
    per = rows.groupby("runq_idx")["ns"].sum().to_numpy()
    assert per.tolist() == [5500 * US, 800 * US, 2 * MS]


def test_a_truncated_record_makes_the_time_before_it_unknown():
    occs = [occ(0, 0, 500), occ(0, 3 * MS, 102, pid=100, flags=OCC_TRUNC), occ(0, 4 * MS, 101)]
    rows = A.df_runnable_occupants(run_(occupancy=occs, runq=[rq(101, 1 * MS, 4 * MS)]))
    got = {str(r.cls): int(r.ns) for r in rows.itertuples()}
    assert got == {"unknown": 2 * MS, "sibling": 1 * MS}


def test_windows_clip_rows_at_their_edges():
    run = run_()
    # victim 101 over [2 ms, 8.5 ms]: hog 1 + sibling 2 + kernel 1 + idle 0.5 + hog 0.3
    w = A.antagonists_in_windows(run, [101, 101], [2 * MS + T0, 8500 * US + T0],
                                 [8500 * US + T0, 20 * MS + T0])
    by = w.groupby(["win", "cls"], observed=True)["ns"].sum().to_dict()
    assert by == {(0, "other"): 1300 * US, (0, "sibling"): 2 * MS, (0, "kernel"): 1 * MS,
                  (0, "idle"): 500 * US, (1, "other"): 500 * US}


def irq(num: int, kind: int = OCC_HARDIRQ) -> int:
    """The flags of an interrupt record (records.h TT_OCC_HARDIRQ / SOFTIRQ, number << 16)."""
    return kind | num << 16


def test_interrupts_are_a_class_of_their_own_named_by_kind_and_number():
    """The irq event: hog(500) at 0, a timer interrupt 2.0-2.1 ms, back to the hog, a NET_RX
    softirq 2.5-2.9 ms over the idle CPU, irq 41 2.7-2.75 inside it, back to the softirq,
    idle from 2.9 ms, the victim at 4 ms; the victim waited [1 ms, 4 ms]."""
    occs = [occ(0, 0, 500), occ(0, 2 * MS, 0, flags=irq(OCC_IRQ_TIMER)),
            occ(0, 2100 * US, 500), occ(0, 2500 * US, 0, flags=irq(3, OCC_SOFTIRQ)),
            occ(0, 2700 * US, 0, flags=irq(41)), occ(0, 2750 * US, 0, flags=irq(3, OCC_SOFTIRQ)),
            occ(0, 2900 * US, 0), occ(0, 4 * MS, 101, pid=100)]
    meta = {**META, "irqs": {"41": "virtio3-rx"}}
    run = run_(occupancy=occs, runq=[rq(101, 1 * MS, 4 * MS)], meta=meta)
    rows = A.df_runnable_occupants(run)
    got = rows.groupby(["cls", "irq"], observed=True)["ns"].sum().to_dict()
    assert got == {("other", 0): 1400 * US, ("irq", irq(OCC_IRQ_TIMER)): 100 * US,
                   ("irq", irq(3, OCC_SOFTIRQ)): 350 * US, ("irq", irq(41)): 50 * US,
                   ("idle", 0): 1100 * US}
    assert int(rows["ns"].sum()) == 3 * MS
    top = A.summarize(A.antagonists_in_windows(run, [101], [T0], [T0 + 10 * MS]), run)
    named = {t["comm"]: (t["class"], t["pid"], round(t["ms"], 3)) for t in top}
    assert named["softirq NET_RX"] == ("irq", None, 0.35)
    assert named["timer interrupt"] == ("irq", None, 0.1)
    assert named["irq 41 (virtio3-rx)"] == ("irq", None, 0.05)
    info = {"by_class": A.class_shares(rows), "top": top}
    info["by_class"]["irq"] = 0.9  # as if interrupts held most of it
    assert occupant_clause(run, info, {100}).startswith(
        "waited behind interrupts (softirq NET_RX, timer interrupt, irq 41 (virtio3-rx)) for 90%")


def test_peer_class_comes_from_also_pid():
    meta = {**META, "target": {"also_pids": [500], "also_comms": ["hog"]}}
    rows = A.df_runnable_occupants(run_(meta=meta))
    assert set(rows.loc[rows["pid"] == 500, "cls"].astype(str)) == {"peer"}


def test_band_summary_names_process_cgroup_and_shares():
    reqs = [req(1, 101, 0, 10 * MS)]
    run = run_(requests=reqs)
    d = df_decompose(run)
    s = summary_dict(Findings(run, d, df_bands(d)))
    top = s["antagonists"]["≥P99"]["top"]
    assert top[0] == {"pid": 500, "comm": "hog", "cgroup": "/batch", "container": None,
                      "class": "other", "threads": 1, "ms": 2.8,
                      "share": pytest.approx(2.8 / 6.3)}
    assert s["antagonists"]["≥P99"]["containers"] == []      # no process in a container
    assert s["antagonists"]["≥P99"]["runnable_ms"] == pytest.approx(6.3)
    assert s["antagonists"]["≥P99"]["by_class"] == pytest.approx(
        {"sibling": 2 / 6.3, "peer": 0, "other": 2.8 / 6.3, "kernel": 1 / 6.3, "irq": 0,
         "idle": 0.5 / 6.3, "unknown": 0})
    assert s["cpu_occupancy"]["runnable_ms"] == pytest.approx(8.3)


def test_sentences_name_the_culprit():
    run = run_(requests=[req(1, 101, 0, 10 * MS)])
    info = {"by_class": {"other": 0.9, "sibling": 0.1}, "top": [
        {"pid": 500, "comm": "hog", "cgroup": "/batch", "class": "other", "threads": 3,
         "ms": 9, "share": 0.9}]}
    assert occupant_clause(run, info, {100}, 0.8) == (
        "were preempted by 3 threads of hog (pid 500, not traced, cgroup /batch) for 90% of "
        "that time: "
        "a noisy neighbour")
    sib = {"by_class": {"sibling": 0.83}, "top": [
        {"pid": 100, "comm": "w1", "cgroup": "/", "class": "sibling", "threads": 41, "ms": 1,
         "share": 0.83}]}
    assert occupant_clause(run, sib, {100}) == (
        "waited behind 41 other threads of the same process for 83% of that time: "
        "oversubscription, 2 threads for 2 CPUs")
    idle = {"by_class": {"idle": 1.0}, "top": [
        {"pid": None, "comm": "idle", "cgroup": None, "class": "idle", "threads": 1, "ms": 1,
         "share": 1.0}]}
    assert occupant_clause(run, idle, {100}).startswith("found their CPUs idle for 100%")


def test_threads_table_shares_and_top_antagonist():
    t = A.thread_antagonists(run_()).set_index("tid")
    assert t.at[101, "other_share"] == pytest.approx(2.8 / 6.3)
    assert t.at[101, "top_antagonist"] == "hog (pid 500)"
    assert t.at[102, "unknown_share"] == 1.0


def test_without_the_cpu_event_nothing_is_claimed():
    run = make_run(runq=RUNQ, switches=[], requests=[req(1, 101, 0, 10 * MS)])
    assert not A.has_occupancy(run)
    assert A.df_runnable_occupants(run).empty
    d = df_decompose(run)
    s = summary_dict(Findings(run, d, df_bands(d)))
    assert s["antagonists"] is None and s["cpu_occupancy"] is None


def test_report_section_and_perfetto_cpu_tracks(tmp_path):
    import json
    from fixtures import write_run
    from analyze.render.perfetto import CPU_PID
    from analyze.pipeline import build_report
    from analyze.load.schema import load_schema
    d = write_run(tmp_path / "run", load_schema(), meta={**META, "mono_start_ns": T0},
                  requests=[req(1, 101, 0, 10 * MS)], runq=RUNQ, occupancy=OCC,
                  occupants=OCCUPANTS, switches=[], tasks=[task(101, "w1"), task(102, "w2")])
    s = build_report(d, plots=False)
    page = (d / "report.html").read_text()
    assert 'id="cpu"' in page and "Who had the CPU" in page
    assert "hog (pid 500, /batch) 44%" in page          # 2.8 of 6.3 ms, ≥P99 band
    trace = json.loads((d / "trace.json").read_text())["traceEvents"]
    cpu = [e for e in trace if e.get("cat") == "cpu"]
    # CPU 0's segments (the last record opens none): hog, w2, kworker, idle, w1, hog
    assert [e["name"] for e in cpu] == ["hog", "w2", "kworker/0:1", "idle", "w1", "hog"]
    assert all(e["pid"] == CPU_PID and e["tid"] == 0 for e in cpu)
    assert cpu[0]["dur"] == 3000.0 and cpu[0]["args"] == {"pid": 500, "tid": 500}
    names = [e["args"].get("name") for e in trace if e.get("ph") == "M" and e["pid"] == CPU_PID]
    assert "CPU 0" in names
    assert s["cpu_occupancy"]["records"] == len(OCC)


def test_report_says_what_is_needed_without_the_cpu_event(tmp_path):
    from fixtures import write_run
    from analyze.pipeline import build_report
    from analyze.load.schema import load_schema
    d = write_run(tmp_path / "run", load_schema(), meta=META, requests=[req(1, 101, 0, 10 * MS)],
                  runq=RUNQ, switches=[], tasks=[task(101, "w1")])
    build_report(d, plots=False)
    assert "needs tailtrace&#x27;s cpu event" in (d / "report.html").read_text()


def test_a_vanished_cgroup_and_a_reused_tid_are_named_as_such():
    occupants = [occupant(500, "hog", cgroup_id=77), occupant(102, "w2", pid=100),
                 occupant(101, "w1", pid=100, reused=1),
                 occupant(7, "kworker/0:1", flags=OCC_KTHREAD)]
    run = run_(occupants=occupants, meta={"cgroups": {"77": None}, "ncpus": 2},
               requests=[req(1, 101, 0, 10 * MS)])
    procs = A.process_table(run).set_index("pid")
    assert procs.at[500, "cgroup"] == "cgroup 77 (gone)"
    d = df_decompose(run)
    s = summary_dict(Findings(run, d, df_bands(d)))
    top = s["antagonists"]["≥P99"]["top"][0]
    assert top["comm"] == "hog" and top["cgroup"] == "cgroup 77 (gone)"
    # an occupant no row names (exited before it was named) still counts, by pid
    occs = OCC + [occ(1, 0, 999), occ(1, 3 * MS, 102, pid=100)]
    rows = A.df_runnable_occupants(run_(occupancy=occs))
    assert int(rows.loc[rows["pid"] == 999, "ns"].sum()) == 1 * MS   # CPU 1, [2 ms, 3 ms]


def oversubscribed_cpu():
    """CPU 0 round-robins 100 µs slices: threads 101..104 of process 100, now and then the
    hog (500, another process), a kernel thread (7) or nothing (idle). Each thread is
    runnable from the end of one of its slices to the start of its next; one wait of 102
    starts 10 µs before its slice ended and one of 104 ends 50 µs into its next (clock-edge
    slivers of their own time, class "other"), and 103 waits once on CPU 1, which has no
    record (unknown)."""
    cycle = [(101, 100), (102, 100), (500, 500), (103, 100), (104, 100), (7, 7), (0, 0)]
    occs, slices = [], {}
    for k in range(140):
        tid, pid = cycle[k % len(cycle)]
        occs.append(occ(0, k * 100 * US, tid, pid=pid, flags=OCC_KTHREAD if tid == 7 else 0))
        slices.setdefault(tid, []).append(k * 100 * US)
    runq = []
    for tid in (101, 102, 103, 104):
        for k, (t_on, t_next) in enumerate(zip(slices[tid][:-1], slices[tid][1:])):
            early = 10 * US if (tid, k) == (102, 4) else 0
            late = 50 * US if (tid, k) == (104, 2) else 0
            runq.append(rq(tid, t_on + 100 * US - early, t_next + late, "preempt"))
    runq.append(rq(103, 20 * MS, 21 * MS, cpu=1))
    return run_(occupancy=occs, runq=runq)


@pytest.mark.parametrize("heavy", [0.0, 1e18])
def test_merged_parts_equal_the_exact_tables_sums_and_first_thread(monkeypatch, heavy):
    """The merged table, each antagonist summed by prefix sums (HEAVY 0) or pair by pair
    (HEAVY huge): per (wait, class, pid) the exact table's time, named by its first thread
    in time; the victim's own sliver stays apart (class other)."""
    exact = A.df_runnable_occupants(oversubscribed_cpu())
    monkeypatch.setattr(A, "ROW_BUDGET", 10)
    monkeypatch.setattr(A, "HEAVY", heavy)
    merged = A.df_runnable_occupants(oversubscribed_cpu())
    key = ["runq_idx", "cls", "pid"]
    want = exact.sort_values(["runq_idx", "t_from_ns"]).groupby(key, observed=True).agg(
        ns=("ns", "sum"), tid=("tid", "first"))
    got = merged.groupby(key, observed=True).agg(ns=("ns", "sum"), tid=("tid", "first"))
    assert got.to_dict() == want.to_dict()
    assert len(merged) < len(exact)
    own = merged[(merged["cls"] == "other") & (merged["pid"] == 100)]
    assert own["ns"].tolist() == [10 * US, 50 * US] and own["tid"].tolist() == [102, 104]
    assert set(merged["cls"]) == {"sibling", "other", "kernel", "idle", "unknown"}


@pytest.mark.parametrize("make", [lambda: run_(), oversubscribed_cpu])
def test_pairs_counted_from_the_segments_equal_those_from_the_waits(make):
    """ROW_BUDGET is checked against the pairs counted per segment (_cpu_waits, which the
    merged table reuses); per wait (_overlaps) they are the same pairs."""
    run = make()
    o, w = A._Occ(run), A._Waits(run.runq)
    by_segment = sum(int(p.sum()) for _, _, p in A._cpu_waits(o, w))
    assert by_segment == int(A._overlaps(w, o.S, o.cpu_slice)[1].sum()) > 0


def test_merged_parts_are_the_same_summed_or_paired(monkeypatch):
    """Both ways of merging give the same table, row for row."""
    monkeypatch.setattr(A, "ROW_BUDGET", 10)
    tables = []
    for heavy in (0.0, 1e18):
        monkeypatch.setattr(A, "HEAVY", heavy)
        tables.append(A.df_runnable_occupants(oversubscribed_cpu()))
    pd.testing.assert_frame_equal(tables[0], tables[1], check_exact=True)


def test_a_traced_process_is_named_as_it_was_last_seen():
    """A command tailtrace starts is first seen holding a CPU before its exec, named
    'tailtrace'; tasks.bin's name (refreshed at exit) wins for traced processes."""
    occupants = [occupant(500, "hog"), occupant(100, "tailtrace", pid=100),
                 occupant(101, "w1", pid=100)]
    run = run_(occupants=occupants, tasks=[task(100, "python3"), task(101, "w1"),
                                            task(102, "w2")])
    procs = A.process_table(run).set_index("pid")
    assert procs.at[100, "comm"] == "python3" and procs.at[500, "comm"] == "hog"


def test_a_peer_whose_main_thread_never_ran_is_named_by_also_pid():
    """orders-server's main thread sleeps in accept: only its workers hold CPUs. The name
    is the one meta.json keeps for the --also-pid process, not a worker's."""
    occupants = [occupant(500, "orders-w1", pid=499), occupant(101, "w1", pid=100)]
    meta = dict(META, target={"also_pids": [499], "also_comms": ["orders-server"]})
    procs = A.process_table(run_(occupants=occupants, meta=meta)).set_index("pid")
    assert procs.at[499, "comm"] == "orders-server"


@pytest.mark.parametrize("trailing", [False, True])
def test_over_the_row_budget_each_waits_parts_merge_by_antagonist(monkeypatch, trailing):
    """Above ROW_BUDGET (pairs of a wait and a switch meanwhile) the parts of each wait are
    merged by (class, process, interrupt), in chunks: the same time per wait and antagonist
    as the exact table, laid back to back inside the wait, and a warning says so.
    trailing: the last waits are on a CPU without records, so the last chunk has no pair."""
    occs = OCC + [occ(0, 10 * MS, 102, pid=100), occ(0, 11 * MS, 500), occ(0, 12 * MS, 102,
                                                                         pid=100),
                  occ(0, 13 * MS, 101, pid=100)]
    runq = RUNQ + [rq(101, 9500 * US, 13 * MS, "preempt")]
    if trailing:
        runq += [rq(102, 20 * MS, 21 * MS, cpu=1), rq(102, 22 * MS, 23 * MS, cpu=1)]
    exact = A.df_runnable_occupants(run_(occupancy=occs, runq=runq))
    monkeypatch.setattr(A, "ROW_BUDGET", 2)
    monkeypatch.setattr(A, "_CHUNK", 3)
    run = run_(occupancy=occs, runq=runq)
    merged = A.df_runnable_occupants(run)
    key = ["runq_idx", "cls", "pid"]
    want = exact.groupby(key, observed=True)["ns"].sum()
    got = merged.groupby(key, observed=True)["ns"].sum()
    assert got.to_dict() == want.to_dict()
    assert len(merged) < len(exact)
    # back to back inside each wait: disjoint, from its start, ending at its end
    for i, g in merged.groupby("runq_idx"):
        g = g.sort_values("t_from_ns")
        assert (g["t_from_ns"].to_numpy()[1:] == g["t_to_ns"].to_numpy()[:-1]).all()
        assert g["t_from_ns"].iloc[0] == run.runq["t_runnable_ns"].iloc[i]
        assert g["t_to_ns"].iloc[-1] == run.runq["t_run_ns"].iloc[i]
    assert any("merged by antagonist" in w for w in run.warnings)
    # windows still work on the merged table: the whole run of thread 101
    w = A.antagonists_in_windows(run, [101], [0], [T0 + 100 * MS])
    assert int(w["ns"].sum()) == int(exact.loc[exact["victim_tid"] == 101, "ns"].sum())
