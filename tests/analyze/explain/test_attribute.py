"""Bands, tail excess, Spearman and headline on distributions with known values."""
import numpy as np
import pandas as pd
import pytest

from fixtures import MS
from analyze.explain.findings import Findings
from analyze.explain.attribute import BANDS, band_of, df_bands, spearman_runnable, tail_excess
from analyze.render.words import headline


def decomp_from(lat_ns, **parts):
    """A decomposition frame (df_decompose's columns) with given latencies and parts."""
    lat = np.asarray(lat_ns, dtype=np.int64)
    n = len(lat)
    d = pd.DataFrame({"id": np.arange(n), "latency_ns": lat})
    qw = np.asarray(parts.pop("queue_wait_ns", np.zeros(n)), dtype=np.float64)
    d["queue_wait_ns"] = qw
    d["e2e_ns"] = lat + qw
    for c in ("oncpu_ns", "runq_wakeup_ns", "runq_preempt_ns", "lock_wait_ns", "blocked_ns"):
        d[c] = np.asarray(parts.get(c, np.zeros(n)), dtype=np.float64)
    d["runnable_ns"] = d["runq_wakeup_ns"] + d["runq_preempt_ns"]
    d["closes"] = True
    d["closure_err"] = 0.0
    d["traced"] = True
    return d


def test_bands_on_1_to_1000_ms():
    lat = np.arange(1, 1001) * MS
    d = decomp_from(lat, oncpu_ns=np.full(1000, 1 * MS), blocked_ns=lat - 1 * MS)
    b = df_bands(d)
    assert list(b.index) == BANDS  # no ≥P99.9 below 10k requests
    assert b["n"].tolist() == [500, 400, 90, 10]
    assert b["latency_ms"].tolist() == pytest.approx([250.5, 700.5, 945.5, 995.5])
    assert b["lo_ms"].tolist() == [1, 501, 901, 991] and b["hi_ms"].tolist() == [500, 900, 990, 1000]
    assert b.loc["≥P99", "oncpu_ms"] == pytest.approx(1.0)
    assert b.loc["≥P99", "blocked_share"] == pytest.approx(994.5 / 995.5)
    assert b.loc["≤P50", "oncpu_share"] == pytest.approx(1 / 250.5)
    assert (band_of(d).value_counts()[BANDS].tolist()) == [500, 400, 90, 10]
    assert band_of(d)[990] == "≥P99" and band_of(d)[989] == "P90–P99"


def test_p999_band_appears_at_10k_requests():
    lat = np.arange(1, 10_001) * 1000
    b = df_bands(decomp_from(lat, oncpu_ns=lat))
    assert list(b.index) == BANDS + ["≥P99.9"]
    assert b.loc["≥P99.9", "n"] == 10 and b.loc["≥P99", "n"] == 100
    assert b.loc["≥P99.9", "latency_ms"] == pytest.approx(9995.5 * 1000 / MS)


def test_shares_are_of_e2e_including_queue_wait():
    d = decomp_from([4 * MS, 4 * MS], queue_wait_ns=[4 * MS, 4 * MS], oncpu_ns=[4 * MS] * 2)
    b = df_bands(d)
    assert b.loc["≤P50", "queue_wait_share"] == pytest.approx(0.5)
    assert b.loc["≤P50", "oncpu_share"] == pytest.approx(0.5)


def tail_fixture():
    """990 requests of 1.000..1.989 ms (1 ms on CPU, rest blocked) and 10 tail requests of
    20..29 ms: 1 ms on CPU, 12+j ms runnable after wakeup, 2 ms preempted, 5 ms blocked."""
    i = np.arange(990)
    body = (1 * MS + i * 1000).astype(np.int64)
    j = np.arange(10)
    tail = (20 + j) * MS
    lat = np.concatenate([body, tail])
    return decomp_from(
        lat,
        oncpu_ns=np.full(1000, 1 * MS),
        runq_wakeup_ns=np.concatenate([np.zeros(990), (12 + j) * MS]),
        runq_preempt_ns=np.concatenate([np.zeros(990), np.full(10, 2 * MS)]),
        blocked_ns=np.concatenate([body - 1 * MS, np.full(10, 5 * MS)]))


def test_tail_excess_split_by_part():
    te = tail_excess(tail_fixture())
    assert te["n_tail"] == 10 and te["n_median"] == 500
    assert te["tail_ms"] == pytest.approx(24.5) and te["median_ms"] == pytest.approx(1.2495)
    assert te["excess_ms"] == pytest.approx(23.2505)
    assert te["parts"]["runnable"]["ms"] == pytest.approx(18.5)
    assert te["parts"]["runq_wakeup"]["ms"] == pytest.approx(16.5)
    assert te["parts"]["blocked"]["ms"] == pytest.approx(5 - 0.2495)
    assert te["parts"]["runnable"]["share"] == pytest.approx(18.5 / 23.2505)
    total = sum(te["parts"][p]["ms"] for p in ("queue_wait", "oncpu", "runq_wakeup",
                                                "runq_preempt", "lock_wait", "blocked"))
    assert total == pytest.approx(te["excess_ms"])


def test_headline_names_the_dominant_part_with_figures():
    d = tail_fixture()
    s = headline(Findings(None, d, df_bands(d)))
    assert s == ("≥P99 requests (n=10, mean 24.5 ms) spent 76% of their time runnable "
                 "(waiting for a CPU): 18.5 ms of the 23.3 ms excess over the median is "
                 "scheduler delay. (Mean per request: 16.5 ms runnable after wakeups, 2.0 ms after "
                 "preemption.)")


def test_headline_when_queue_wait_dominates_and_closure_is_poor():
    lat = np.full(100, 2 * MS)
    qw = np.concatenate([np.zeros(99), [30 * MS]])
    lat = lat + np.arange(100)  # distinct latencies, the last one is the ≥P99 band
    d = decomp_from(lat, queue_wait_ns=qw, oncpu_ns=lat)
    d.loc[:49, "closes"] = False
    s = headline(Findings(None, d, df_bands(d)))
    assert s.startswith("≥P99 requests (n=1, mean 32.0 ms) spent 94% of their time waiting in "
                        "the queue for a worker: 30.0 ms of the 30.0 ms excess")
    assert s.endswith("Caution: only 50% of requests close.")


def test_spearman_runnable():
    lat = np.arange(1, 101) * MS
    assert spearman_runnable(decomp_from(lat, runq_wakeup_ns=lat ** 2)) == pytest.approx(1.0)
    assert spearman_runnable(decomp_from(lat, runq_wakeup_ns=-lat)) == pytest.approx(-1.0)
    assert np.isnan(spearman_runnable(decomp_from(lat)))  # constant runnable: undefined


def test_spearman_ranks_ties_by_their_mean():
    """Ties take their mean rank (x ranks 1.5 1.5 3 4, y ranks 1 2 3 4): by hand,
    Pearson of the ranks = 4.5 / sqrt(4.5 · 5) = 0.9487; requests without a runnable
    part (NaN) are left out."""
    from analyze.explain.attribute import _average_ranks
    r, n = _average_ranks(np.array([5.0, 5.0, 7.0, 9.0]))
    assert r.tolist() == [1.5, 1.5, 3.0, 4.0] and n == 3
    d = pd.DataFrame({"runnable_ns": [5.0, 5.0, 7.0, 9.0, np.nan],
                      "latency_ns": [1, 2, 3, 4, 0]})
    assert spearman_runnable(d) == pytest.approx(4.5 / np.sqrt(4.5 * 5))


def test_durations_in_sentences_keep_their_figures_below_a_millisecond():
    """A 33 µs tail must not read '0.0 ms' (nginx's requests are tens of µs)."""
    from analyze.render.fmt import dur
    assert [dur(x) for x in (24.49, 3.04, 1.0, 0.9996, 0.033, 0.0101, 0.0021, 0.0)] == \
        ["24.5 ms", "3.0 ms", "1.0 ms", "1.0 ms", "33 µs", "10 µs", "2.1 µs", "0.0 ms"]


def test_an_uncovered_tail_says_its_parts_are_unknown():
    """The slowest request ran where the probes saw nothing (a gap): its parts are NaN and
    only its queue wait (0) is known; the headline must not call it '0% queue wait'."""
    lat = np.arange(1, 101) * MS
    d = decomp_from(lat, oncpu_ns=lat)
    for c in ("oncpu_ns", "runq_wakeup_ns", "runq_preempt_ns", "lock_wait_ns", "blocked_ns",
              "runnable_ns"):
        d.loc[99, c] = np.nan
    d.loc[99, "traced"] = False
    s = headline(Findings(None, d, df_bands(d)))
    assert s.startswith("≥P99 requests (n=1, mean 100.0 ms): no part could be measured")
    assert "queue" not in s
