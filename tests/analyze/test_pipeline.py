"""build_report on synthetic run directories: every output written, figures equal to the construction."""
import html
import json
import re

import numpy as np
import pandas as pd
import pytest

import synth
from analyze import pipeline
from analyze.render import plot
from analyze.explain.decompose import df_decompose
from analyze.load.errors import AnalysisError
from analyze.load.load import load_run
from analyze.explain.lockchain import df_lock_chains

PNGS = ["percentiles.png", "timeline.png", "decomposition.png", "runq-hist.png",
        "cpu-placement.png"]


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    d = tmp_path_factory.mktemp("probed")
    tr = synth.make_run(d, 400)
    return tr, pipeline.build_report(d)


def test_every_output_written(probed):
    tr, s = probed
    d = tr.path
    for name in ["report.html", "summary.json", "threads.csv", "locks.csv", "trace.json",
                 "trace.perfetto-trace"] + PNGS:
        assert (d / name).stat().st_size > 0, name
    assert json.loads((d / "summary.json").read_text()) == json.loads(json.dumps(s))
    assert set(s["outputs"]) == {"summary.json", "threads.csv", "locks.csv", "trace.json",
                                 "trace.perfetto-trace", "profiles/offcpu.pb.gz", "profiles/locks.pb.gz",
                                 "report.html", *PNGS}


def test_summary_matches_construction(probed):
    tr, s = probed
    assert s["requests"] == 400 and s["errors"] == 0
    # slowest request: i=250, 100+100+(800+250)+20+5000+100 µs; queue wait 100 µs on top
    assert s["latency_ms"]["max"] == pytest.approx(6.370)
    assert s["e2e_ms"]["max"] == pytest.approx(6.470)
    assert s["queue_wait_ms"]["p99"] == pytest.approx(0.1)
    assert s["closure_ratio"] == 1.0
    tail = s["attribution"]["≥P99"]
    assert tail["n"] == 4 and tail["runq_preempt_ms"] == pytest.approx(5.0)
    assert s["trace"]["requests"] == 400 and not s["trace"]["truncated"]


def test_tables_match_construction(probed):
    tr, _ = probed
    th = pd.read_csv(tr.path / "threads.csv").set_index("tid")
    # pool-w2 (tid 103) serves every request i ≡ 2 mod 4, hence all four 5 ms preemptions:
    # 100 wakeups × 20 µs + 4 × 5 ms runnable
    assert th.loc[103, "runq_ns"] == 100 * 20_000 + 4 * 5_000_000
    assert th.loc[101, "involuntary"] == 0 and th.loc[103, "involuntary"] == 4
    lk = pd.read_csv(tr.path / "locks.csv")
    # 40 contended acquisitions by workers (wait 450 µs, hold 50 µs) and 40 uncontended
    # ones by the main thread (hold 460 µs)
    assert len(lk) == 1 and lk.loc[0, "acquisitions"] == 80 and lk.loc[0, "contended"] == 40
    assert lk.loc[0, "wait_p99_ns"] == 450_000 and lk.loc[0, "hold_p99_ns"] == 460_000
    assert th.loc[100, "involuntary"] == 40 and th.loc[100, "runq_ns"] == 40 * 445_000
    ch = df_lock_chains(load_run(tr.path), df_decompose(load_run(tr.path)))
    assert len(ch) == 40 and (ch["holder_tid"] == 100).all()
    assert (ch["verdict"] == "holder preempted").all()
    assert (ch["holder_runnable_ns"] == 445_000).all()


def test_report_html_is_self_contained(probed):
    tr, s = probed
    page = (tr.path / "report.html").read_text()
    assert synth.check_self_contained(page) == len(PNGS)
    assert html.escape(s["headline"]) in page
    assert 'href="flame-offcpu.svg"' in page and 'href="trace.json"' in page


def test_without_probes_summary_says_needs_probes(tmp_path):
    tr = synth.make_run(tmp_path, 200, probes=False)
    s = pipeline.build_report(tmp_path)
    assert isinstance(s["attribution"], str) and s["attribution"].startswith("needs probes")
    assert s["requests"] == 200 and s["latency_ms"]["max"] == pytest.approx(tr.decomp["latency_ns"].max() / 1e6)
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk["attribution"] == s["attribution"]
    page = (tmp_path / "report.html").read_text()
    assert "Attribution needs probes" in page
    assert synth.check_self_contained(page) == 2          # percentiles + timeline only
    assert not (tmp_path / "decomposition.png").exists()
    trace = json.loads((tmp_path / "trace.json").read_text())
    cats = {e.get("cat") for e in trace["traceEvents"] if e["ph"] == "X"}
    assert cats == {"request"}


def test_no_plots(tmp_path):
    synth.make_run(tmp_path, 100)
    s = pipeline.build_report(tmp_path, plots=False)
    assert not list(tmp_path.glob("*.png"))
    assert synth.check_self_contained((tmp_path / "report.html").read_text()) == 0
    assert s["requests"] == 100


def test_a_failing_figure_does_not_lose_the_rest(tmp_path, monkeypatch, capsys):
    synth.make_run(tmp_path, 100)

    def boom(*a, **k):
        raise ValueError("synthetic failure")
    monkeypatch.setattr(plot, "plot_timeline", boom)
    s = pipeline.build_report(tmp_path)
    assert "timeline.png" not in s["outputs"] and "percentiles.png" in s["outputs"]
    page = (tmp_path / "report.html").read_text()
    assert "timeline.png could not be drawn: ValueError: synthetic failure" in page
    assert "timeline.png" in capsys.readouterr().err


def test_bad_run_dirs(tmp_path):
    with pytest.raises(AnalysisError, match="no such run directory"):
        pipeline.build_report(tmp_path / "missing")
    synth.make_run(tmp_path, 50)
    raw = (tmp_path / "requests.bin").read_bytes()
    (tmp_path / "requests.bin").write_bytes(raw[:-7])      # a torn last record
    with pytest.raises(AnalysisError, match="requests.bin"):
        pipeline.build_report(tmp_path)


def test_jsonable():
    out = pipeline.jsonable({"a": np.int64(3), "b": float("nan"), "c": [np.float32(0.5)],
                           1: np.bool_(True)})
    assert out == {"a": 3, "b": None, "c": [0.5], "1": True}
    json.dumps(out, allow_nan=False)


@pytest.mark.parametrize("drop, figures, text", [
    ("switches.bin", {"percentiles", "timeline", "decomposition", "runq-hist"},
     "CPU placement needs the sched stream"),
    ("runq.bin", {"percentiles", "timeline", "decomposition", "cpu-placement"},
     "Run-queue latency needs the runq stream"),
    ("locks.bin", {"percentiles", "timeline", "decomposition", "runq-hist", "cpu-placement"},
     "Lock analysis needs the locks stream"),
])
def test_stream_subsets(tmp_path, drop, figures, text):
    """tailtrace --events subsets: each section shows what it can and names what is missing."""
    synth.make_run(tmp_path, 100)
    (tmp_path / drop).unlink()
    s = pipeline.build_report(tmp_path)
    assert {o[:-4] for o in s["outputs"] if o.endswith(".png")} == figures
    page = (tmp_path / "report.html").read_text()
    assert synth.check_self_contained(page) == len(figures)
    assert text in page


def test_lost_events_are_a_visible_warning(tmp_path):
    synth.make_run(tmp_path, 100, lost=7)
    pipeline.build_report(tmp_path)
    page = (tmp_path / "report.html").read_text()
    warns = re.findall(r'<div class="warn">(.*?)</div>', page)
    assert any("runq: 7" in w for w in warns)


def test_summary_percentiles_completed(probed):
    tr, s = probed
    e2e = tr.decomp["e2e_ns"].to_numpy() / 1e6
    assert s["e2e_ms"]["p90"] == pytest.approx(np.percentile(e2e, 90))
    assert s["e2e_ms"]["p999"] == pytest.approx(np.percentile(e2e, 99.9))
    assert s["queue_wait_ms"]["avg"] == pytest.approx(0.1)
    page = (tr.path / "report.html").read_text()
    row = re.search(r"<tr><th>end to end \(t_end − t_enqueue\)</th>(.*?)</tr>", page).group(1)
    assert "–" not in row


def test_run_json_label_and_command(tmp_path):
    """run.sh's run.json names the run and gives the command the user typed."""
    synth.make_run(tmp_path, 50, label="")
    (tmp_path / "run.json").write_text(json.dumps(
        {"command": ["./run.sh", "--workload", "pool", "--label", "a b"], "label": "pool-c20",
         "started_utc": "2026-11-21T10:32:32Z"}))
    s = pipeline.build_report(tmp_path)
    assert s["label"] == "pool-c20"
    page = (tmp_path / "report.html").read_text()
    assert "tailtrace report · pool-c20" in page
    assert "./run.sh --workload pool --label &#x27;a b&#x27;" in page    # shell-quoted, escaped
    assert "recorded by" in page and "2026-11-21T10:32:32Z" in page


def test_analyse_lets_go_of_the_interval_sets_and_the_waits(tmp_path):
    """analyse() measures the lock chains before the critical path (they need every interval
    set, the hops five) and keeps neither the sets nor the waits once the summary is made;
    its chains are df_lock_chains' own."""
    synth.make_run(tmp_path, 200)
    run = load_run(tmp_path)
    a = pipeline.analyse(run, lock_chains=True)
    assert all(getattr(run, k, None) is None for k in ("_state_sets", "_waits", "_followable"))
    fresh = load_run(tmp_path)
    want = df_lock_chains(fresh, df_decompose(fresh))
    assert len(want) > 0
    pd.testing.assert_frame_equal(a["chains"], want, check_exact=True)
    assert pipeline.analyse(load_run(tmp_path))["chains"] is None
