"""bench/analyze_scale.py still runs end to end (tiny size; the lead runs the full size)."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_scale_bench_smoke(tmp_path):
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "analyze_scale.py"), "--scale", "0.001",
                        "--threads", "10", "--keep", str(tmp_path / "run")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "10000 switches, 10000 runq, 1000 requests" in p.stdout
    assert p.stdout.count("closure 1.0000") == 2 and "every request closes: MET" in p.stdout
    assert (tmp_path / "run" / ".cache" / "switches.parquet").exists()
