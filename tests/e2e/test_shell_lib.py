"""scripts/lib/common.sh, the shell library of run.sh and the benches: server_start under
`set -euo pipefail`, as its callers run it."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from .conftest import REPO as ROOT

BUILD = Path(os.environ.get("TT_BUILD", ROOT / "build"))


def sh(script: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", "set -euo pipefail\nTT_ME=t TT_TOP=" + str(ROOT) +
                           "\n. scripts/lib/common.sh\n" + script], cwd=ROOT, text=True,
                          capture_output=True, timeout=60, stdin=subprocess.DEVNULL)


def test_server_start_reads_the_port_of_a_port_0_server(tmp_path):
    p = sh(f"TT_SERVER={BUILD}/workloads/server/orders-server\n"
           f"server_start {tmp_path}/server.log --workers 1\n"
           "echo port=$SERVER_PORT pid=$SERVER_PID\n"
           "exec 3<>/dev/tcp/127.0.0.1/$SERVER_PORT\n"
           "pg_stop $SERVER_PID TERM 5")
    assert p.returncode == 0, p.stderr
    port = int(p.stdout.split("port=")[1].split()[0])
    assert 0 < port < 65536
    assert "listening on 127.0.0.1:%d" % port in (tmp_path / "server.log").read_text()


def test_server_start_whose_log_never_appears_fails_with_a_message(tmp_path):
    """The log cannot be created (no such directory), so the server never starts: a
    one-line error, not a silent `set -e` exit on the missing file (sed's status 2)."""
    p = sh(f"TT_SERVER={BUILD}/workloads/server/orders-server\n"
           f"server_start {tmp_path}/missing/server.log --workers 1")
    assert p.returncode == 1
    assert "t: error: orders-server exited during start-up" in p.stderr, p.stderr


def test_tailtrace_args_pass_the_ring_size_and_stacks_run_sh_was_given():
    """run.sh --ringbuf-mb N (what the report's lost-events warning advises) and
    --user-stacks reach tailtrace; left out, tailtrace's own defaults hold."""
    common = ("EVENTS= SPANS=() SPAN_EXIT= FLIGHT= TRIGGER= MODE=pid TT_TAILTRACE=tt\n"
              ". scripts/lib/record.sh\n")
    p = sh(common + "USER_STACKS=fp RINGBUF_MB=256\ntailtrace_args /r\necho \"${TT_ARGS[*]}\"")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["tt", "--out", "/r", "--user-stacks", "fp", "--ringbuf-mb", "256"]
    p = sh(common + "USER_STACKS= RINGBUF_MB=\ntailtrace_args /r\necho \"${TT_ARGS[*]}\"")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["tt", "--out", "/r"]
