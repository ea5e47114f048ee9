"""scripts/lib/kernel_matrix.py on inline junit files: the cells, the events line, the verdict."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from xml.sax.saxutils import quoteattr

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("kernel_matrix",
                                              ROOT / "scripts" / "lib" / "kernel_matrix.py")
km = importlib.util.module_from_spec(spec)
spec.loader.exec_module(km)


def case(name: str, failure: str | None = None, **props) -> str:
    ps = "".join(f"<property name={quoteattr(k)} value={quoteattr(v if isinstance(v, str) else json.dumps(v))}/>"
                 for k, v in props.items())
    fail = f"<failure message={quoteattr(failure)}/>" if failure else ""
    return f'<testcase name="{name}"><properties>{ps}</properties>{fail}</testcase>'


def write(out: Path, name: str, uname: str, rc: str, *cases: str) -> None:
    (out / f"{name}.xml").write_text(f"<testsuites><testsuite>{''.join(cases)}</testsuite></testsuites>")
    (out / f"{name}.uname").write_text(uname + "\n")
    (out / f"{name}.rc").write_text(rc + "\n")


def test_matrix_cells_events_and_fallbacks(tmp_path, capsys):
    fb = [{"what": "task storage", "needs": "BPF_MAP_TYPE_TASK_STORAGE", "since": "5.11",
           "instead": "a hash map keyed by tid"}]
    write(tmp_path, "5.10", "5.10.0-32-amd64", "0",
          case("test_default", feature="default events", hook="raw_tp", fallbacks=fb,
               figures={"runnable_share": 0.66},
               events={"events": 1200, "lost": 0, "unmatched": 2}),
          case("test_irq", feature="--events …,irq", outcome="refused",
               figures={"needs": "tp_btf on irq_handler_entry", "since": "5.5"},
               events={"events": 10, "lost": 1, "unmatched": 0}))
    assert km.main(tmp_path, ["5.10"]) == 0
    out = capsys.readouterr().out
    assert ("| default events | pass (raw_tp): runnable_share 0.66; events 1200, lost 0, "
            "unmatched 2 |") in out
    assert ("| --events …,irq | refused: needs tp_btf on irq_handler_entry (5.5+); events 10, "
            "lost 1, unmatched 0 |") in out
    assert "| main job | not run |" in out
    assert ("5.10: task storage: needs BPF_MAP_TYPE_TASK_STORAGE (5.11+): a hash map keyed by tid"
            in out)


def test_matrix_fails_on_a_failed_test_or_a_missing_suite(tmp_path, capsys):
    write(tmp_path, "6.1", "6.1.0-50-amd64", "1",
          case("test_main_job", failure="AssertionError: closure 0.9\nmore", feature="main job"))
    assert km.main(tmp_path, ["6.1", "6.12"]) == 1
    out = capsys.readouterr().out
    assert "| main job | **FAIL** AssertionError: closure 0.9 | not run |" in out
    assert "FAILED: 6.1: suite exit 1, 1 failed" in out
    assert "6.12: suite exit missing, 0 failed" in out


def test_matrix_cell_without_events_property():
    """A test that reported no run directory has no events: the cell shows none."""
    c = {"outcome": "pass", "hook": "tp_btf", "figures": {"spans": 200}, "events": {}}
    assert km.cell(c) == "pass (tp_btf): spans 200"
