"""Peer runnable time: the traced server's threads waiting for a CPU during a client request."""
import json

import numpy as np
import pandas as pd
import pytest

from analyze import pipeline
from analyze.render import compare
from analyze.explain.attribute import df_bands
from analyze.render.words import headline
from analyze.explain.decompose import df_decompose
from analyze.render.html import ReportInputs, render_report
from analyze.explain.peer import df_peer_runnable, df_peers
from analyze.pipeline import analyse, jsonable
from analyze.load.schema import load_schema
from analyze.explain.findings import Findings
from fixtures import MS, T0, make_run, off, req, rq, task, write_run

CLIENT, SERVER = 100, 200
ALSO = {"target": {"mode": "command", "pid": CLIENT, "also_pids": [SERVER]}}


def client_run(server_runq, meta=ALSO, tasks=None, n=1):
    """n client requests on threads 11.. (pid 100), each [10k ms, 10k+10 ms]: on CPU 0.5 ms,
    blocked 9 ms (off CPU [0.5, 9.5], no client runnable time), on CPU 0.5 ms."""
    reqs, sw = [], []
    for i in range(n):
        t = i * 10_000 * MS
        reqs.append(req(i, 11 + i, t, t + 10 * MS, pid=CLIENT))
        sw.append(off(11 + i, t + MS // 2, t + 9 * MS + MS // 2, pid=CLIENT))
    tasks = tasks if tasks is not None else [task(11 + i, "naive-c%d" % i, pid=CLIENT)
                                             for i in range(n)]
    return make_run(requests=reqs, switches=sw, runq=server_runq, tasks=tasks, meta=meta)


def server_rq(t0=0):
    """Two server threads runnable [1, 5] ms and [3, 8] ms: union [1, 8] = 7 ms."""
    return [rq(21, t0 + 1 * MS, t0 + 5 * MS, pid=SERVER), rq(22, t0 + 3 * MS, t0 + 8 * MS,
                                                              kind="preempt", pid=SERVER)]


def peer_ns(run):
    d = df_decompose(run)
    return df_peer_runnable(run, d)["peer_runnable_ns"].to_numpy()


def test_union_of_overlapping_server_intervals_inside_the_window():
    run = client_run(server_rq())
    d = df_decompose(run)
    assert d["blocked_ns"].iloc[0] == 9 * MS and d["closes"].all()
    assert peer_ns(run).tolist() == [7 * MS]
    # the client's own parts are untouched: peer time is not a part of the closure
    assert d["runnable_ns"].iloc[0] == 0


def peer_all_ns(run):
    return df_peer_runnable(run, df_decompose(run))["peer_runnable_all_ns"].to_numpy()


def test_all_peer_threads_runnable_at_once():
    # [1, 5] and [3, 8]: both runnable during [3, 5] = 2 ms
    assert peer_all_ns(client_run(server_rq())).tolist() == [2 * MS]
    # thread 21 also runnable [4, 6] (overlaps its own [1, 5]: merged to [1, 6] first),
    # and [9, 12] with 22 at [7.5, 11]: [3, 6] + [9, 10 (window edge)] = 4 ms
    sr = server_rq() + [rq(21, 4 * MS, 6 * MS, pid=SERVER), rq(21, 9 * MS, 12 * MS, pid=SERVER),
                        rq(22, 7 * MS + MS // 2, 11 * MS, pid=SERVER)]
    assert peer_all_ns(client_run(sr)).tolist() == [4 * MS]
    # a third server thread seen runnable only after the window: never all three at once
    sr = server_rq() + [rq(23, 50 * MS, 51 * MS, pid=SERVER)]
    assert peer_all_ns(client_run(sr)).tolist() == [0]
    assert peer_ns(client_run(sr)).tolist() == [7 * MS]
    # no peer: NaN
    meta = {"target": {"mode": "command", "pid": CLIENT, "also_pids": []}}
    assert np.isnan(peer_all_ns(client_run(server_rq(), meta=meta))).all()


def test_intervals_cut_by_the_window_edges():
    # [-3, 2] ms and [9, 14] ms: only [0, 2] and [9, 10] are inside [0, 10] -> 3 ms;
    # [12, 13] is entirely after the window; touching [2, 4] joins the first one -> +2 ms
    sr = [rq(21, -3 * MS, 2 * MS, pid=SERVER), rq(22, 9 * MS, 14 * MS, pid=SERVER),
          rq(21, 12 * MS, 13 * MS, pid=SERVER), rq(22, 2 * MS, 4 * MS, pid=SERVER)]
    assert peer_ns(client_run(sr)).tolist() == [5 * MS]


def test_each_request_gets_its_own_window_and_client_intervals_do_not_count():
    # request 0: server union 7 ms; request 1 (10 s later): one 2.5 ms server interval;
    # the client's own runnable interval (pid 100) is not a peer's
    sr = server_rq() + [rq(21, 10_000 * MS + 4 * MS, 10_000 * MS + 6 * MS + MS // 2,
                           pid=SERVER),
                        rq(11, 9 * MS + MS // 2 - 100, 9 * MS + MS // 2, pid=CLIENT)]
    assert peer_ns(client_run(sr, n=2)).tolist() == [7 * MS, 2.5 * MS]


def test_no_peer_is_nan():
    # also_pids present and empty: the server's pid in runq.bin is not a peer
    meta = {"target": {"mode": "command", "pid": CLIENT, "also_pids": []}}
    assert np.isnan(peer_ns(client_run(server_rq(), meta=meta))).all()
    # older meta without also_pids and only the client's pid in the streams
    only_client = [rq(11, 9 * MS + MS // 2 - 100, 9 * MS + MS // 2, pid=CLIENT)]
    assert np.isnan(peer_ns(client_run(only_client, meta={}))).all()
    # system-wide run without also_pids: other processes are not peers
    assert np.isnan(peer_ns(client_run(server_rq(), meta={"target": {"mode": "all"}}))).all()


def test_without_also_pids_key_other_traced_pids_are_peers():
    assert peer_ns(client_run(server_rq(), meta={})).tolist() == [7 * MS]


def test_peer_traced_but_never_runnable_in_window_is_zero():
    assert peer_ns(client_run(server_rq(t0=100 * MS))).tolist() == [0]


def test_peer_names_from_tasks():
    tasks = [task(11, "naive-c0", pid=CLIENT), task(21, "orders-w0", pid=SERVER),
             task(22, "orders-w1", pid=SERVER)]
    run = client_run(server_rq(), tasks=tasks)
    p = df_peers(run, df_decompose(run))
    assert p.to_dict("records") == [{"pid": SERVER, "comm": "", "threads": 2,
                                     "name": "pid 200 (orders-w*)"}]
    run = client_run(server_rq(), tasks=tasks + [task(SERVER, "orders-server", pid=SERVER)])
    p = df_peers(run, df_decompose(run))
    assert p.to_dict("records") == [{"pid": SERVER, "comm": "orders-server", "threads": 3,
                                     "name": "orders-server (pid 200)"}]


def tail_run(peer_ms_per_request):
    return make_run(**tail_rows(peer_ms_per_request), meta=ALSO)


def tail_rows(peer_ms_per_request):
    """100 client requests: request i lasts 10+i ms ([0.5 ms on CPU, blocked, 0.5 ms on CPU]);
    the server (main thread seen) has a thread runnable for peer_ms_per_request(i) ms from
    1 ms on, both its workers for half of that."""
    reqs, sw, sr = [], [], []
    for i in range(100):
        t, lat = i * 1000 * MS, (10 + i) * MS
        reqs.append(req(i, 11, t, t + lat, pid=CLIENT))
        sw.append(off(11, t + MS // 2, t + lat - MS // 2, pid=CLIENT))
        p = peer_ms_per_request(i)
        if p:   # worker 0 runnable p ms, worker 1 the first half of that: both for p/2 ms
            sr.append(rq(21, t + MS, t + MS + int(p * MS), pid=SERVER))
            sr.append(rq(22, t + MS, t + MS + int(p * MS) // 2, kind="preempt", pid=SERVER))
    tasks = [task(11, "naive-c0", pid=CLIENT), task(SERVER, "orders-server", pid=SERVER),
             task(21, "orders-w0", pid=SERVER), task(22, "orders-w1", pid=SERVER)]
    return dict(requests=reqs, switches=sw, runq=sr, tasks=tasks)


def test_bands_and_headline_name_the_server_when_it_covers_the_blocked_time():
    # ≥P99 (x ≥ p99 = 108.01 ms): only request 99, 109 ms, blocked 108 ms; server runnable 100 ms
    run = tail_run(lambda i: 100 if i == 99 else 0)
    a = analyse(run)
    b = a["bands"]
    tail = b.loc["≥P99"]
    assert tail["n"] == 1 and tail["blocked_ms"] == 108.0
    assert tail["peer_runnable_ms"] == 100.0 and tail["peer_runnable_all_ms"] == 50.0
    assert tail["peer_runnable_of_blocked"] == pytest.approx(100 / 108)
    assert b.loc["≤P50", "peer_runnable_ms"] == 0.0
    h = a["summary"]["headline"]
    assert h.startswith("≥P99 requests (n=1, mean 109.0 ms) spent 99% of their time blocked")
    # ≤P50 = requests 0..49 (10..59 ms, each blocked 1 ms less): mean 34.5 ms, blocked 33.5 ms;
    # the tail's blocked excess is 108 - 33.5 = 74.5 ms, its peer excess 100 - 0 ms: covered
    assert ("during 100.0 ms of their 109.0 ms service time a thread of orders-server "
            "(pid 200) was waiting for a CPU (≤P50 requests: 0.0 ms of 34.5 ms), covering 100% "
            "of the 74.5 ms by which their blocked time exceeds the median band's; all its "
            "threads at once during 50.0 ms: the tail is scheduler delay in orders-server, "
            "one hop away.") in h
    peer = a["summary"]["peer"]
    assert peer["pids"] == [SERVER] and peer["comms"] == ["orders-server"]
    assert peer["runnable_ms"]["≥P99"] == 100.0 and peer["runnable_all_ms"]["≥P99"] == 50.0
    assert peer["runnable_of_blocked"]["≥P99"] == pytest.approx(100 / 108)


def test_headline_keeps_the_old_sentence_below_half_of_blocked():
    run = tail_run(lambda i: 30 if i == 99 else 0)   # 30 of the 74.5 ms blocked excess: 40%
    a = analyse(run)
    assert a["bands"].loc["≥P99", "peer_runnable_ms"] == 30.0
    h = a["summary"]["headline"]
    assert "orders-server" not in h
    assert "excess over the median is blocked time" in h


def test_a_peer_busy_in_every_band_does_not_take_the_blame():
    # the server has a thread runnable for the whole of every request: no contrast with the median
    run = tail_run(lambda i: 10 + i - 1)
    a = analyse(run)
    assert a["bands"].loc["≥P99", "peer_runnable_of_blocked"] == pytest.approx(1.0)
    h = a["summary"]["headline"]
    assert "orders-server" in h or "excess over the median is blocked time" in h
    # peer excess 108 - 33.5 = 74.5 ms vs blocked excess 74.5 ms: covered only because the tail's
    # peer time grows with its blocked time; a constant peer time would not be
    run = tail_run(lambda i: 9)
    h = analyse(run)["summary"]["headline"]
    assert "orders-server" not in h and "excess over the median is blocked time" in h


def test_no_peer_old_headline_and_no_peer_in_summary():
    run = tail_run(lambda i: 0)
    run.meta = {"target": {"mode": "command", "pid": CLIENT, "also_pids": []}}
    a = analyse(run)
    assert np.isnan(a["decomp"]["peer_runnable_ns"]).all()
    assert a["bands"]["peer_runnable_ms"].isna().all()
    assert a["summary"]["peer"] is None
    assert a["summary"]["headline"] == headline(Findings(run, a["decomp"], df_bands(a["decomp"])))
    assert "excess over the median is blocked time" in a["summary"]["headline"]


def _page(a):
    inp = ReportInputs(summary=jsonable(a["summary"]), bands=a["bands"],
                       streams={"requests": True, "runq": True, "switches": True})
    return render_report(inp)


def test_report_page_has_the_peer_column_and_paragraph_only_with_a_peer():
    page = _page(analyse(tail_run(lambda i: 100 if i == 99 else 0)))
    assert "<th>peer runnable ms · of blocked</th>" in page
    assert "<td>100.0 · 93%</td>" in page                      # ≥P99 row
    assert "Peer runnable: orders-server (pid 200) was traced too" in page
    assert ("In the ≥P99 band: 100.0 ms per request, equal to 93% of its mean blocked time; "
            "all of a peer&#x27;s threads waiting at once (it could make no progress): "
            "50.0 ms.") in page
    run = tail_run(lambda i: 0)
    run.meta = {"target": {"mode": "command", "pid": CLIENT, "also_pids": []}}
    page = _page(analyse(run))
    assert "peer runnable" not in page and "Peer runnable" not in page


def test_compare_html_shows_the_peer_column_the_text_table_keeps_its_columns():
    with_peer = analyse(tail_run(lambda i: 100 if i == 99 else 0))["summary"]
    run = tail_run(lambda i: 0)
    run.meta = {"target": {"mode": "command", "pid": CLIENT, "also_pids": []}}
    without = analyse(run)["summary"]
    df = pd.DataFrame([compare.compare_row("naive", jsonable(with_peer)),
                       compare.compare_row("alone", jsonable(without))], columns=compare.COLUMNS)
    assert df.loc[0, "p99_peer_runnable_ms"] == 100.0
    assert df.loc[0, "p99_peer_runnable_of_blocked"] == pytest.approx(100 / 108)
    assert np.isnan(df.loc[1, "p99_peer_runnable_ms"])
    page = compare.render_compare(df, None)
    assert "<th>≥P99 peer runnable ms · of blocked</th>" in page
    assert "<td>100.0 · 93%</td>" in page and "<td>no peer traced</td>" in page
    head = compare.format_table(df).splitlines()[0]
    assert "peer" not in head and head.split()[-1] == "close"
    assert "peer" not in compare.render_compare(df.iloc[1:], None)


def test_build_report_from_bin_files_writes_peer_into_summary_json(tmp_path):
    """Through load_run: real .bin files, meta.json also_pids, tasks comm orders-w* → server."""
    meta = dict(ALSO, mono_start_ns=T0 - MS, mono_end_ns=T0 + 200_000 * MS)
    write_run(tmp_path, load_schema(), meta=meta, **tail_rows(lambda i: 100 if i == 99 else 0))
    s = pipeline.build_report(tmp_path, plots=False)
    disk = json.loads((tmp_path / "summary.json").read_text())
    assert disk["peer"]["pids"] == [SERVER] and disk["peer"]["comms"] == ["orders-server"]
    assert disk["peer"]["runnable_ms"]["≥P99"] == 100.0
    assert disk["peer"]["runnable_ms"]["≤P50"] == 0.0
    assert "a thread of orders-server (pid 200) was waiting for a CPU" in disk["headline"]
    assert s["headline"] == disk["headline"]
    page = (tmp_path / "report.html").read_text()
    assert "Peer runnable: orders-server (pid 200) was traced too" in page
    roles = dict(zip(*[pd.read_csv(tmp_path / "threads.csv")[c] for c in ("tid", "role")]))
    assert roles[21] == "server" and roles[11] == "conn-thread"
