"""report.html: headline first, self-contained (data: PNGs only), escaped, honest about gaps."""
import re

import pytest

import synth
from analyze.explain import attribute
from analyze.render import plot
from analyze.render.html import ReportInputs, render_report

check_self_contained = synth.check_self_contained


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    d = tmp_path_factory.mktemp("html")
    tr = synth.truth(400)
    bands = attribute.df_bands(tr.decomp)
    images = {"percentiles": plot.plot_percentiles(tr.decomp, d / "p.png"),
              "decomposition": plot.plot_decomposition(bands, d / "d.png")}
    summary = {"headline": "≥P99 requests <b>spent</b> 79% runnable & more", "requests": 400,
               "errors": 0, "throughput_rps": 2642.6,
               "latency_ms": {"avg": 1.369, "p50": 1.289, "p90": 1.645, "p99": 1.958,
                              "p999": 6.33, "max": 6.37},
               "e2e_ms": {"avg": 1.469, "p99": 2.058}, "queue_wait_ms": {"p99": 0.1},
               "closure_ratio": 1.0, "lost_events": {"runq": 0}}
    meta = {"command": "httpload --url 'http://x/<y>'", "kernel": "6.18", "ncpus": 2,
            "hooks": {"runq": "tp_btf"}, "lost_events": {"runq": 0}, "label": "pool"}
    inp = ReportInputs(summary=summary, meta=meta, workload={"model": "pool", "workers": 4},
                       run_dir="/r/pool", bands=bands,
                       tail_excess=attribute.tail_excess(tr.decomp), images=images,
                       links=["flame-offcpu.svg", "diff-naive-pool.svg", "trace.json"],
                       streams={"runq": True, "switches": True, "locks": False})
    return inp, render_report(inp)


def test_headline_first_and_escaped(full):
    inp, page = full
    body = page[page.index("<body>"):]
    first = body.index('class="headline"')
    assert first < body.index("What was run") < body.index("Summary")
    assert "≥P99 requests &lt;b&gt;spent&lt;/b&gt; 79% runnable &amp; more" in page
    assert "<b>spent</b>" not in page
    assert "http://x/&lt;y&gt;" in page        # command escaped, and not a link


def test_images_embedded_and_nothing_external(full):
    _, page = full
    assert check_self_contained(page) == 2


def test_sections_tables_and_links(full):
    inp, page = full
    for text in ["Where the time went", "Tail excess over the median", "Latency by percentile",
                 "Scheduler", "Locks", "How this was measured", "ui.perfetto.dev",
                 'href="flame-offcpu.svg"', 'href="diff-naive-pool.svg"', 'href="trace.json"',
                 "100.00% of requests close"]:
        assert text in page, text
    # band table: the ≥P99 row shows the 5 ms of preemption and its share
    row = re.search(r"<tr><td>≥P99</td>(.*?)</tr>", page).group(1)
    share = inp.bands.loc["≥P99", "runq_preempt_share"]
    assert f"5.000 · {share * 100:.0f}%" in row
    # no flame graph of on-CPU time: no link to it
    assert "flame-oncpu.svg" not in page
    assert "Lock analysis needs the locks stream" in page
    assert "⚠" not in page                      # nothing lost, everything closes


def test_warnings_for_lost_events_and_low_closure(full):
    inp, _ = full
    inp2 = ReportInputs(**{**inp.__dict__, "summary": {**inp.summary, "closure_ratio": 0.9,
                                                       "lost_events": {"switches": 12}}})
    page = render_report(inp2)
    warns = re.findall(r'<div class="warn">(.*?)</div>', page)
    assert any("switches: 12" in w for w in warns)
    assert any("90.0%" in w for w in warns)


def test_no_probes_page_says_what_is_needed():
    summary = {"headline": "h", "requests": 3, "latency_ms": {"p99": 1.0}}
    page = render_report(ReportInputs(summary=summary, run_dir="/r/x",
                                      streams={"runq": False, "switches": False,
                                               "locks": False}))
    assert "Attribution needs probes" in page
    assert "Run-queue latency needs the runq stream" in page
    assert "No flame graphs in this run directory" in page
    assert check_self_contained(page) == 0
