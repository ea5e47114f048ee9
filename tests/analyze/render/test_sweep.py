"""analyze/render/sweep.py on inline rows whose answers are known by construction."""
import pandas as pd

from analyze.render.sweep import df_knee, df_seed_table, knee_sentences, seed_table_markdown


def rows(spec):
    """spec: (workload, conns, workers, throughput, avg, p99, max) tuples -> df_compare-like."""
    return pd.DataFrame([dict(workload=w, conns=c, workers=k, throughput_rps=t, avg_ms=a,
                              p99_ms=p, max_ms=m) for w, c, k, t, a, p, m in spec])


def test_seed_table_order_and_markdown():
    df = rows([("async", 10, 2, 70000, 0.2, 0.9, 3.0), ("pool", 100, 20, 60000, 1.5, 3.0, 9.0),
               ("naive", 100, 100, 40000, 2.5, 13.0, 40.0), ("naive", 10, 10, 50000, 0.2, 0.5, 2.0),
               (None, 5, None, 1.0, 1.0, 1.0, 1.0)])
    t = df_seed_table(df)
    assert list(zip(t["model"], t["conns"])) == [("naive", 10), ("naive", 100), ("pool", 100),
                                                 ("async", 10)]
    md = seed_table_markdown(t).splitlines()
    assert md[0].startswith("| model | connections | workers | throughput")
    assert md[3] == "| naive | 100 | 100 | 40,000 | 2.50 | 13.00 | 40.00 |"
    assert len(md) == 6 and seed_table_markdown(df_seed_table(rows([]).reindex(
        columns=["workload", "conns", "workers"]))) == ""


def test_knee_is_the_lowest_p99_and_what_follows():
    # 100 conns: P99 falls to 8 workers then rises; 10 conns: only two counts (no knee table);
    # 50 conns: still falling at the largest count
    df = rows([("pool", 100, w, t, 1.0, p, 5.0) for w, t, p in
               [(2, 30000, 4.0), (4, 45000, 2.0), (8, 61000, 0.9), (20, 60000, 1.5),
                (50, 52000, 3.1)]] +
              [("pool", 10, w, 40000, 1.0, 1.0, 2.0) for w in (2, 4)] +
              [("pool", 50, w, 50000, 1.0, p, 2.0) for w, p in ((2, 3.0), (4, 2.0), (8, 1.0))] +
              [("naive", 100, 100, 40000, 2.0, 13.0, 40.0)])
    k = df_knee(df)
    assert sorted(k["conns"].unique().tolist()) == [50, 100]
    assert k[k["conns"] == 100]["workers"].tolist() == [2, 4, 8, 20, 50]
    s = knee_sentences(k)
    assert s == ["pool at 50 connections: P99 is lowest with 8 workers (1.00 ms, 50,000 req/s); "
                 "it still falls at 8, the most tried: no knee in this range",
                 "pool at 100 connections: P99 is lowest with 8 workers (0.90 ms, 61,000 req/s); "
                 "past it P99 rises to 3.10 ms at 50 workers (throughput 52,000)"]
