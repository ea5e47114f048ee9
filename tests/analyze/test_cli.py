"""The CLI as a user runs it: exit codes, one-line errors, what it prints and writes."""
import os
import subprocess
import sys
from pathlib import Path


import synth

ROOT = Path(__file__).resolve().parents[2]


def cli(*args, timeout=120):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "analyze", *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_help():
    r = cli("--help")
    assert r.returncode == 0 and "report" in r.stdout and "compare" in r.stdout
    r = cli("report", "--help")
    assert r.returncode == 0 and "--no-plots" in r.stdout


def test_bad_run_dir_is_one_line_and_exit_2(tmp_path):
    r = cli("report", tmp_path / "nope")
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("analyze: ")
    assert "nope" in r.stderr and "no such run directory" in r.stderr
    assert r.stdout == ""


def test_corrupt_records_exit_2(tmp_path):
    synth.make_run(tmp_path, 20)
    raw = (tmp_path / "runq.bin").read_bytes()
    (tmp_path / "runq.bin").write_bytes(b"XXXXXXXX" + raw[8:])
    r = cli("report", tmp_path, "--no-plots")
    assert r.returncode == 2 and r.stderr.startswith("analyze: ") and "runq.bin" in r.stderr
    assert "Traceback" not in r.stderr


def test_report_and_compare(tmp_path):
    a = synth.make_run(tmp_path / "a", 200, label="A")
    r = cli("report", a.path, "--no-plots")        # figures: test_pipeline / test_plot
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("≥P99 requests (n=2,")
    assert "200 requests, 0 errors" in r.stdout and "100.0% close" in r.stdout
    svc = next(l for l in r.stdout.splitlines() if l.startswith("service"))
    assert svc.split()[-1] == "6.270"         # max: i=150, 100+100+(800+150)+20+5000+100 µs
    assert (a.path / "report.html").exists() and (a.path / "trace.json").exists()
    b = synth.make_run(tmp_path / "b", 200, label="B", probes=False)
    out = tmp_path / "cmp"
    r = cli("compare", a.path, b.path, "--out", out)
    assert r.returncode == 0, r.stderr
    rows = r.stdout.splitlines()
    assert rows[2].startswith("A ") and rows[3].startswith("B ") and "needs probes" in rows[3]
    assert (out / "compare.html").exists() and (out / "percentiles.png").exists()


def test_compare_with_a_bad_dir_exit_2(tmp_path):
    r = cli("compare", tmp_path / "missing")
    assert r.returncode == 2 and "missing" in r.stderr
