"""--also-pid: a second process (e.g. the server the target talks to) is traced beside the target."""
import subprocess
import time

import numpy as np

from tt_run import helper, meta, needs_root, records, tailtrace

pytestmark = needs_root


def test_also_pid_adds_the_other_process_and_only_it(tmp_path):
    # the "server" and a bystander: sleepers blocking 1 ms at a time until killed, so they
    # outlive tailtrace's start however slow; the target: a sleeper blocking 200 x 1 ms
    other = subprocess.Popen([helper("sleeper"), "1000000", "1000"], stdout=subprocess.PIPE,
                             text=True)
    bystander = subprocess.Popen([helper("sleeper"), "1000000", "1000"], stdout=subprocess.PIPE,
                                 text=True)
    try:
        time.sleep(0.05)
        p = tailtrace(tmp_path, "--events", "runq,switch", "--also-pid", str(other.pid),
                      "--", helper("sleeper"), "200", "1000")
        assert p.returncode == 0, p.stderr
    finally:
        for proc in (other, bystander):
            proc.kill()
            proc.wait(timeout=20)
    m = meta(tmp_path)
    assert m["target"]["also_pids"] == [other.pid]
    assert m["target"]["also_comms"] == ["tt-sleeper"]   # its name when tailtrace ended
    sw = records(tmp_path, "switch")
    pids = set(np.unique(sw["pid"]).tolist())
    target = m["target"]["pid"]
    assert pids == {target, other.pid}, pids          # the bystander is not traced
    # both processes blocked on their sleeps while traced: voluntary switches from each
    vol = sw[sw["voluntary"] == 1]
    assert (vol["pid"] == target).sum() >= 150
    assert (vol["pid"] == other.pid).sum() >= 50
    tasks = records(tmp_path, "task")
    assert other.pid in set(tasks["pid"].tolist())


def test_also_pid_errors(tmp_path):
    p = tailtrace(tmp_path, "--also-pid", "4194000", "--", "true")
    assert p.returncode != 0 and "no such process" in p.stderr
    p = tailtrace(tmp_path, "--also-pid", "1", "--all", "--duration", "1")
    assert p.returncode != 0 and "--also-pid goes with -- CMD or --pid" in p.stderr
