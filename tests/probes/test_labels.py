"""Waits named in the program's own words, and wakers in other processes named as such
(analyze/explain/waits.py wait_wrappers, critpath._who), on tests/probes/latch.c: two processes of
one program; the parent's requests wait in order_lock_wait() -> latch_wait() (the program's
generic wrapper around epoll_wait on a self-pipe, also used by idle_nap()) until the child
sets the latch. Real BPF: run as root."""
from __future__ import annotations

import re
import subprocess

import pytest

from analyze.pipeline import build_report
from tt_run import BUILD, needs_root, TAILTRACE

pytestmark = needs_root
LATCH = BUILD / "tests" / "probes" / "latch"


@pytest.mark.serial   # the headline names the tail's largest part: others' load makes it a CPU wait
def test_a_wait_behind_a_wrapper_is_named_by_its_caller_and_its_waker_process(tmp_path):
    prog = subprocess.Popen([str(LATCH), "600", "1000", "gate"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    tt = None
    try:
        m = re.match(r"ready (\d+)", prog.stdout.readline())
        assert m, "latch did not start"
        tt = subprocess.Popen([str(TAILTRACE), "--out", str(tmp_path), "--comm", "latch",
                               "--span", f"{LATCH}:serve_order", "--duration", "30"],
                              stderr=subprocess.PIPE, text=True)
        for line in tt.stderr:
            if "attached" in line:
                break
        prog.stdin.write("go\n")
        prog.stdin.flush()
        out, _ = prog.communicate(timeout=60)
        assert "served 600" in out
    finally:
        if prog.poll() is None:
            prog.kill()
        if tt is not None:
            tt.send_signal(2)
            tt.communicate(timeout=60)
    s = build_report(tmp_path, plots=False)
    assert s["requests"] == 600
    tail = s["critical_path"]["≥P99"]
    assert tail["reason"] == "io_wait", tail
    # named by the function that waited, through the wrapper and the wrapper's own helper
    # (latch_block, which the unwind by call-frame information shows: the frame-pointer walk
    # skipped it); the waker: the other process
    assert "in order_lock_wait (via latch_block ← latch_wait)" in tail["what"], tail
    assert "another process of the same program" in tail["who"], tail
    assert "same process" not in tail["who"].replace("same program", "")
    assert "order_lock_wait" in s["headline"], s["headline"]
    # the wait was ended by a task (the child's write), not a device
    assert "waiting for other tasks" in s["headline"], s["headline"]
