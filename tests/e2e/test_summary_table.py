"""scripts/lib/summary_table.py on inline summaries with known values."""
import sys

from .conftest import REPO

sys.path.insert(0, str(REPO / "scripts" / "lib"))
import summary_table as st  # noqa: E402


def summary(wake, pre):
    return {"throughput_rps": 1234.4, "latency_ms": {"avg": 1.5, "p99": 7.25, "max": 12.0},
            "e2e_ms": {"p99": 9.0},
            "attribution": {"≥P99": {"runq_wakeup_share": wake, "runq_preempt_share": pre}}}


def test_runnable_share_adds_wakeup_and_preempt():
    assert st.runnable_share(summary(0.25, 0.125)) == 0.375


def test_runnable_share_absent_without_probes():
    assert st.runnable_share({"attribution": {}}) is None
    assert st.runnable_share(summary(float("nan"), 0.1)) is None


def test_table_formats_values_and_dashes():
    rows = [st.row_from_summary("pool-c20", summary(0.25, 0.125)), st.row_from_summary("bare", {})]
    lines = st.format_table(rows).splitlines()
    assert lines[0].split() == ["run", "req/s", "avg", "ms", "P99", "ms", "max", "ms", "e2e", "P99", "ms",
                                "runnable", "≥P99"]
    assert lines[2].split() == ["pool-c20", "1234", "1.500", "7.250", "12.000", "9.000", "38%"]
    assert lines[3].split() == ["bare", "-", "-", "-", "-", "-", "-"]
