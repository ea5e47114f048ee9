"""The kernel suite's refusal rule (tests/kernels/test_kernel_suite.py `refused`): a feature
tailtrace refuses on a kernel older than the version its line names is reported refused; one
refused on a kernel that has it is feature detection gone wrong and fails."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
for d in (ROOT / "tests" / "probes", ROOT / "tests" / "kernels"):
    if str(d) not in sys.path:
        sys.path.insert(0, str(d))

import test_kernel_suite as suite  # noqa: E402

LINE = ("tailtrace: --span usdt:/bin/x:p:n needs BPF cookies on uprobes (Linux {}+); "
        "recording without it: no spans of it\n")


def test_kernel_version_of_a_release():
    assert suite.kernel_version("6.12.117+deb13-amd64") == (6, 12)
    assert suite.kernel_version("5.10.0-32-amd64") == (5, 10)


def test_a_refusal_on_an_older_kernel_is_reported(tmp_path, monkeypatch):
    monkeypatch.setattr(suite.os, "uname", lambda: type("u", (), {"release": "5.10.0-32-amd64"}))
    props = []
    monkeypatch.setattr(suite, "report", lambda rp, d, outcome, **f: props.append((outcome, f)))
    assert suite.refused(None, LINE.format("5.15"), "--span usdt:", tmp_path)
    assert props == [("refused", {"needs": "BPF cookies on uprobes", "since": "5.15"})]
    assert not suite.refused(None, LINE.format("5.15"), "--listen", tmp_path)


def test_a_refusal_on_a_kernel_that_has_the_feature_fails(tmp_path, monkeypatch):
    monkeypatch.setattr(suite.os, "uname", lambda: type("u", (), {"release": "6.1.0-50-amd64"}))
    monkeypatch.setattr(suite, "report", lambda *a, **k: None)
    with pytest.raises(AssertionError, match="on 6.1.0-50-amd64, which has it"):
        suite.refused(None, LINE.format("5.15"), "--span usdt:", tmp_path)
