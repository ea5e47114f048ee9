"""bench/analyze_scale.py still runs end to end (tiny sizes; the lead runs the full size)."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _bench(*args: str) -> str:
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "analyze_scale.py"), *args],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def test_scale_bench_smoke(tmp_path):
    out = _bench("--scale", "0.001", "--threads", "10", "--keep", str(tmp_path / "run"))
    assert "10000 switches, 10000 runq, 1000 requests" in out
    assert out.count("closure 1.0000") == 1 and "every request closes: MET" in out
    # the full report's phases, each with its time and peak
    for phase in ("load", "decompose", "perfetto trace", "pprof profiles", "report.html"):
        assert f"\n{phase} " in out, out
    assert (tmp_path / "run" / "trace.perfetto-trace").stat().st_size > 0


def test_span_bench_smoke(tmp_path):
    out = _bench("--spans", "2000", "--threads", "4", "--keep", str(tmp_path / "run"))
    assert "2000 spans, 4 threads" in out and "every span closes: MET" in out
    assert "closure 1.0000" in out
