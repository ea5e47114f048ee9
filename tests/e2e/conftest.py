"""Shared helpers for the run.sh end-to-end tests (root, real BPF, real binaries).

Each test runs ./run.sh into a pytest tmp directory with --out, so nothing lands in results/.
"""
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RUN_SH = REPO / "run.sh"
NGINX_DEMO = REPO / "scripts" / "nginx-demo.sh"
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="end-to-end runs load eBPF: run as root")
E2E_TIMEOUT_S = 240


def run_sh(*args, timeout_s=E2E_TIMEOUT_S, check=False):
    """./run.sh ARGS; returns CompletedProcess (text). check=True: fail with its stderr."""
    p = subprocess.run([str(RUN_SH), *map(str, args)], cwd=REPO, capture_output=True, text=True,
                       timeout=timeout_s, stdin=subprocess.DEVNULL)
    if check and p.returncode != 0:
        pytest.fail(f"run.sh {' '.join(map(str, args))} exited {p.returncode}\n"
                    f"--- stdout\n{p.stdout[-3000:]}\n--- stderr\n{p.stderr[-5000:]}")
    return p


def start_until_attached(*args):
    """./run.sh ARGS in the background, returned once tailtrace says it attached: the process,
    the stderr lines so far (a thread keeps appending) and that thread. Fails if it never does."""
    proc = subprocess.Popen([str(RUN_SH), *map(str, args)], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    stderr_lines, attached = [], threading.Event()

    def pump():
        for line in proc.stderr:
            stderr_lines.append(line)
            if line.startswith("tailtrace: attached"):
                attached.set()
    t = threading.Thread(target=pump, daemon=True)
    t.start()
    if not attached.wait(300):
        proc.kill()
        pytest.fail("tailtrace never attached:\n" + "".join(stderr_lines)[-3000:])
    return proc, stderr_lines, t


def pid_alive(pid):
    """True for a live, non-zombie process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def procs_mentioning(text):
    """PIDs (not ours) whose command line contains text."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmd and pid_alive(int(d)):
            found.append((int(d), cmd.strip()))
    return found


def assert_nothing_left(run_dir):
    """Every process run.sh started for run_dir (pids.txt) is gone, and no process names run_dir."""
    pids_txt = Path(run_dir) / "pids.txt"
    assert pids_txt.exists(), "run.sh wrote no pids.txt"
    started = [line.split() for line in pids_txt.read_text().splitlines() if line.strip()]
    assert started, "pids.txt is empty"
    deadline = time.monotonic() + 5
    while True:
        alive = [(pid, name) for pid, name in started if pid_alive(int(pid))]
        left = procs_mentioning(str(run_dir))
        if not alive and not left:
            return started
        if time.monotonic() > deadline:
            pytest.fail(f"left behind: started={alive} mentioning run dir={left}")
        time.sleep(0.2)


def load_json(path):
    with open(path) as f:
        return json.load(f)


def read_records(run_dir, filename, kind):
    """Records of RUN/<filename> (kind 'request', 'runq', 'span', ...) through analyze/load/schema.py."""
    from analyze.load import schema
    sch = schema.load_schema(str(run_dir))
    return schema.read_records(str(Path(run_dir) / filename), sch, kind)


class NginxDemo:
    """Debian's nginx on a free port (scripts/nginx-demo.sh) with one worker process."""

    def __init__(self, workers=1):
        out = subprocess.run([str(NGINX_DEMO), "start", "--workers", str(workers)], capture_output=True,
                             text=True, timeout=30, check=True).stdout
        m = re.search(r"127\.0\.0\.1:(\d+) master=(\d+) workers=([\d,]+) dir=(\S+)", out)
        assert m, f"unexpected nginx-demo output: {out!r}"
        self.port, self.master = int(m.group(1)), int(m.group(2))
        self.workers = [int(w) for w in m.group(3).split(",")]
        self.dir = m.group(4)
        self.url = f"http://127.0.0.1:{self.port}/"

    def stop(self):
        subprocess.run([str(NGINX_DEMO), "stop", self.dir], capture_output=True, timeout=30)


@pytest.fixture
def nginx():
    n = NginxDemo(workers=1)
    try:
        yield n
    finally:
        n.stop()
