"""compare: table values equal to the fixtures' construction, text table, compare.html."""
import numpy as np
import pytest

import synth
from analyze import pipeline
from analyze.render import compare
from analyze.load.errors import AnalysisError


def _expected(tr):
    """Row values computed straight from the ground truth."""
    d = tr.decomp
    e2e = d["e2e_ns"].to_numpy() / 1e6
    lat = d["latency_ns"].to_numpy()
    tail = d[lat >= np.percentile(lat, 99)]
    return {"avg_ms": e2e.mean(), "p99_ms": np.percentile(e2e, 99), "max_ms": e2e.max(),
            "p99_runnable_share": tail["runnable_ns"].mean() / tail["e2e_ns"].mean()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("cmp")
    a = synth.make_run(base / "a", 400, label="pool-5ms", preempt_us=5000)
    b = synth.make_run(base / "b", 400, label="pool-10ms", preempt_us=10000)
    c = synth.make_run(base / "c", 400, label="pool-10ms", probes=False, preempt_us=10000)
    return base, [a, b, c]


def test_table_values_from_fixtures(runs):
    base, trs = runs
    df, decomps = pipeline.df_compare([t.path for t in trs])
    assert list(df["run"]) == ["pool-5ms", "pool-10ms", "pool-10ms#2"]
    assert list(decomps) == list(df["run"])
    for (_, row), tr in zip(df.iterrows(), trs[:2]):
        exp = _expected(tr)
        for k, v in exp.items():
            assert row[k] == pytest.approx(v, rel=1e-9), k
        assert row["requests"] == 400 and row["closure_ratio"] == 1.0
    # by construction: the slowest request is 100 µs queue + 1570 µs + the preemption
    assert df.loc[0, "max_ms"] == pytest.approx(6.470)
    assert df.loc[1, "max_ms"] == pytest.approx(11.470)
    assert df.loc[1, "p99_runnable_share"] > df.loc[0, "p99_runnable_share"] > 0.7
    assert np.isnan(df.loc[2, "p99_runnable_share"])           # no probes


def test_text_table_and_html(runs, tmp_path):
    base, trs = runs
    df, files = pipeline.write_compare([t.path for t in trs], tmp_path)
    text = compare.format_table(df)
    lines = text.splitlines()
    assert lines[0].split()[0] == "run" and len(lines) == 2 + 3
    assert "6.470" in lines[2] and "11.5" in lines[3] and "needs probes" in lines[4]
    assert lines[2].split()[-1] == "100%" and lines[4].split()[-1] == "–"
    page = (tmp_path / "compare.html").read_text()
    assert synth.check_self_contained(page) == 1
    assert (tmp_path / "percentiles.png").stat().st_size > 5000
    for label in ["pool-5ms", "pool-10ms#2"]:
        assert f"<td>{label}</td>" in page


def test_no_runs_is_an_error():
    with pytest.raises(AnalysisError):
        pipeline.df_compare([])
