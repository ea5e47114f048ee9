"""./run.sh --sweep (every combination, one comparison) and ./run.sh --diff (differential flame graphs)."""
import re


from .conftest import load_json, needs_root, run_sh


@needs_root
def test_sweep_runs_each_combination_and_compares(tmp_path):
    out = tmp_path / "sweep"
    p = run_sh("--sweep", "--workloads", "naive,pool", "--conns", "4", "--requests", 300,
               "--no-perf", "--no-flamegraph", "--out", out, check=True)
    for label in ["naive-c4", "pool-c4"]:
        s = load_json(out / label / "summary.json")
        assert s["requests"] == 300 and s["conns"] == 4 and s["workload"] == label.split("-")[0]
        # The comparison table lists each run with its throughput and its runnable share of >=P99.
        assert re.search(rf"^{label}\s+[\d,]+/s\s.*\d+%$", p.stdout, re.M), p.stdout
    assert (out / "compare.html").is_file()


def write_folded(d, lines):
    d.mkdir()
    (d / "oncpu.folded").write_text("".join(f"{s} {n}\n" for s, n in lines))
    (d / "offcpu.folded").write_text("".join(f"{s} {n * 1000}\n" for s, n in lines))


def test_diff_writes_both_differential_graphs_into_b(tmp_path):
    a, b = tmp_path / "runA", tmp_path / "runB"
    write_folded(a, [("w;main;serve", 100), ("w;main;parse", 100)])
    write_folded(b, [("w;main;serve", 100), ("w;main;parse", 300), ("w;main;lock_spin", 50)])
    p = run_sh("--diff", a, b, check=True)
    on, off = b / "diff-runA-vs-runB.svg", b / "diff-offcpu-runA-vs-runB.svg"
    assert on.is_file() and off.is_file(), p.stderr
    svg = on.read_text()
    for frame in ["serve", "parse", "lock_spin"]:
        assert frame in svg
    assert not list(a.glob("diff-*.svg")), "the diff belongs in RUN_B only"


def test_diff_needs_two_runs(tmp_path):
    p = run_sh("--diff", tmp_path)
    assert p.returncode != 0 and "two run directories" in p.stderr
    empty_a, empty_b = tmp_path / "a", tmp_path / "b"
    empty_a.mkdir(), empty_b.mkdir()
    p = run_sh("--diff", empty_a, empty_b)
    assert p.returncode != 0 and "neither oncpu.folded nor offcpu.folded" in p.stderr
