"""run.sh's clean exits and error lines.

SIGINT mid-run: run.sh stops tailtrace (which stops httpload), perf and orders-server, leaves no
process behind, keeps what was recorded and marks meta.json incomplete. Bad input: one line that
says what to do, non-zero exit.
"""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from .conftest import (REPO, RUN_SH, assert_nothing_left, load_json, needs_root, read_records,
                       run_sh, start_until_attached)


def error_lines(p):
    return [line for line in p.stderr.splitlines() if "error:" in line]


def test_unknown_option_is_one_line_and_nonzero():
    p = run_sh("--frobnicate")
    assert p.returncode != 0
    assert error_lines(p) == ["run.sh: error: unknown option '--frobnicate'; see ./run.sh --help"]


def test_bad_values_name_the_fix():
    p = run_sh("--workload", "threads")
    assert p.returncode != 0 and "naive, pool or async" in p.stderr
    p = run_sh("--conns", "many")
    assert p.returncode != 0 and "--conns wants a positive integer" in p.stderr
    p = run_sh("--requests", "10", "--duration", "5")
    assert p.returncode != 0 and "exclude each other" in p.stderr
    p = run_sh("--")
    assert p.returncode != 0 and "needs a command" in p.stderr
    p = run_sh("--ringbuf-mb", "4096")
    assert p.returncode != 0 and "--ringbuf-mb wants MiB from 0 to 2048" in p.stderr


def test_help_lists_every_option_with_default():
    p = run_sh("--help")
    assert p.returncode == 0
    for opt in ["--workload", "--conns", "--workers", "--requests", "--duration", "--rate", "--url",
                "--cpus", "--numa", "--events", "--no-flamegraph", "--out", "--sweep", "--workloads",
                "--diff", "--pid", "--span", "--install", "--user-stacks", "--ringbuf-mb"]:
        assert opt in p.stdout, f"--help does not mention {opt}"
    assert "[pool]" in p.stdout and "[20000]" in p.stdout


@needs_root
def test_port_busy_is_reported(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        p = run_sh("--port", port, "--requests", "10", "--out", tmp_path / "run", timeout_s=600)
    assert p.returncode != 0
    assert f"port {port} is busy" in p.stderr and "--port" in p.stderr.split("busy", 1)[1]
    assert len(error_lines(p)) == 1
    assert not (tmp_path / "run").exists(), "a run directory was created for a run that never started"


@needs_root
def test_missing_pid_and_command_are_reported(tmp_path):
    p = run_sh("--pid", "4194303", "--duration", "1")
    assert p.returncode != 0 and "no process 4194303" in p.stderr
    p = run_sh("--", "/nonexistent/tt-e2e-cmd")
    assert p.returncode != 0 and "command not found: /nonexistent/tt-e2e-cmd" in p.stderr
    # tailtrace refuses the span: its own line, then run.sh's, and the command never ran.
    p = run_sh("--span", "libcurl.so.4:tt_e2e_no_such_function", "--out", tmp_path / "run", "--", "true")
    assert p.returncode != 0 and "tt_e2e_no_such_function" in p.stderr
    assert "run.sh: error: tailtrace stopped before it ran true" in p.stderr


@needs_root
def test_not_root_is_reported():
    # setpriv drops to nobody; run.sh must refuse before touching anything.
    if subprocess.run(["which", "setpriv"], capture_output=True).returncode != 0:
        pytest.skip("setpriv (util-linux) not installed")
    as_nobody = ["setpriv", "--reuid", "nobody", "--regid", "nogroup", "--clear-groups"]
    run_sh_path = RUN_SH
    with tempfile.TemporaryDirectory() as tmp:
        if subprocess.run([*as_nobody, "test", "-r", str(RUN_SH)]).returncode != 0:
            # a checkout nobody may read (under root's home, mode 700): run.sh and its
            # libraries from a world-readable copy, which is all that runs before the check
            os.chmod(tmp, 0o755)
            shutil.copy2(RUN_SH, tmp)
            shutil.copytree(REPO / "scripts", Path(tmp) / "scripts")
            run_sh_path = Path(tmp) / RUN_SH.name
        p = subprocess.run([*as_nobody, str(run_sh_path), "--requests", "10"],
                           capture_output=True, text=True, timeout=60, cwd="/tmp")
    assert p.returncode != 0
    assert "must run as root" in p.stderr, p.stderr


@pytest.mark.parametrize("args,message", [
    (["--duration", "0"], "--duration wants a number above 0, got '0'"),
    (["--rate", "0.0"], "--rate wants a number above 0"),
    (["--cpus", "99"], "--cpus: CPU 99 is offline or outside this process's allowed CPUs"),
    (["--cpus", "0-"], "--cpus wants a CPU list like 0-1,3"),
])
def test_bad_values_are_refused_before_anything_starts(tmp_path, args, message):
    """Values httpload would refuse are caught by run.sh itself: one line, non-zero exit, no
    run directory and no orders-server left behind (they used to start first)."""
    out = tmp_path / "run"
    p = run_sh("--workload", "pool", "--conns", "10", *args, "--no-perf", "--out", out)
    assert p.returncode != 0
    errs = error_lines(p)
    assert len(errs) == 1 and message in errs[0], p.stderr
    assert not out.exists()
    assert subprocess.run(["pgrep", "-f", str(out)], capture_output=True).returncode == 1


def test_a_build_directory_of_another_generator_is_reused(tmp_path):
    """After `cmake -S . -B build` (Unix Makefiles), run.sh builds in that directory as it is;
    it configures (with Ninja) only a directory without a CMakeCache.txt. A stub cmake on PATH
    records the calls and makes the binaries the build would."""
    stub, log = tmp_path / "bin", tmp_path / "cmake.log"
    stub.mkdir()
    (stub / "cmake").write_text(
        "#!/bin/sh\necho \"$*\" >> " + str(log) + "\n"
        "if [ \"$1\" = --build ]; then for b in workloads/server/orders-server "
        "workloads/httpload/httpload probes/tailtrace; do mkdir -p \"$2/$(dirname $b)\"; "
        "printf '#!/bin/sh\\n' > \"$2/$b\"; chmod +x \"$2/$b\"; done; fi\n")
    (stub / "cmake").chmod(0o755)

    def build(build_dir):
        script = (f'TT_TOP={REPO}; TT_BUILD={build_dir}; TT_SERVER=$TT_BUILD/workloads/server/'
                  'orders-server; TT_HTTPLOAD=$TT_BUILD/workloads/httpload/httpload; '
                  'TT_TAILTRACE=$TT_BUILD/probes/tailtrace; TT_ME=test; '
                  f'. {REPO}/scripts/lib/common.sh; build_if_stale')
        env = {**os.environ, "PATH": f"{stub}:{os.environ['PATH']}"}
        return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True)

    made = tmp_path / "makefiles"
    made.mkdir()
    (made / "CMakeCache.txt").write_text("CMAKE_GENERATOR:INTERNAL=Unix Makefiles\n")
    p = build(made)
    assert p.returncode == 0, p.stderr
    calls = log.read_text().splitlines()
    assert calls and all(c.startswith("--build") for c in calls), calls
    log.unlink()
    p = build(tmp_path / "fresh")
    assert p.returncode == 0, p.stderr
    calls = log.read_text().splitlines()
    assert "-G Ninja" in calls[0] and calls[1].startswith("--build"), calls


@needs_root
def test_sigint_mid_run_leaves_nothing_and_marks_incomplete(tmp_path):
    out = tmp_path / "interrupted"
    proc, stderr_lines, t = start_until_attached("--workload", "pool", "--conns", "10",
                                                 "--duration", "120", "--out", out)
    try:
        time.sleep(3)  # recording under way
        t_sig = time.monotonic()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=90)
        stop_s = time.monotonic() - t_sig
    finally:
        if proc.poll() is None:
            proc.kill()
    t.join(5)
    err = "".join(stderr_lines)
    assert proc.returncode == 130, err[-3000:]
    assert stop_s < 60, f"took {stop_s:.1f}s to stop"
    started = {name for _, name in assert_nothing_left(out)}
    assert {"orders-server", "tailtrace", "perf"} <= started
    meta = load_json(out / "meta.json")
    assert meta["incomplete"] is True
    # What was recorded is kept: httpload flushed its requests, tailtrace its run-queue records.
    assert len(read_records(out, "requests.bin", "request")) > 0
    assert len(read_records(out, "runq.bin", "runq")) > 0
    assert "incomplete" in err and str(out) in err


@needs_root
def test_target_exiting_early_is_reported_and_run_marked_incomplete(tmp_path):
    # A detached sleep (reparented, so it is reaped when it exits), killed once tailtrace has
    # attached to it: the target dies early in a 30 s trace however slowly run.sh started.
    pid = int(subprocess.run(["sh", "-c", "sleep 600 >/dev/null 2>&1 & echo $!"],
                             capture_output=True, text=True, check=True).stdout)
    out = tmp_path / "early"
    try:
        proc, stderr_lines, t = start_until_attached("--pid", pid, "--duration", 30, "--out", out)
    finally:
        os.kill(pid, signal.SIGKILL)
    try:
        proc.wait(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    t.join(5)
    err = "".join(stderr_lines)
    assert proc.returncode != 0, err[-3000:]
    assert f"target {pid} exited during the 30s" in err and "./run.sh -- CMD" in err, err[-3000:]
    meta = load_json(out / "meta.json")
    assert meta["incomplete"] is True and meta["duration_s"] < 30


@needs_root
def test_out_dir_with_old_records_is_refused(tmp_path):
    (tmp_path / "requests.bin").write_bytes(b"old")
    p = run_sh("--requests", "10", "--out", tmp_path)
    assert p.returncode != 0 and "is not empty" in p.stderr
    assert (tmp_path / "requests.bin").read_bytes() == b"old"


@needs_root
def test_missing_tool_names_the_install_command(tmp_path):
    # Debian installs bpftool in /usr/sbin: leave that out of PATH and run.sh must stop at once.
    import os
    import shutil
    import sys
    if shutil.which("bpftool") != "/usr/sbin/bpftool":
        pytest.skip("bpftool is not /usr/sbin/bpftool here")
    path = ":".join([os.path.dirname(sys.executable), "/usr/local/bin", "/usr/bin", "/bin"])
    p = subprocess.run([str(RUN_SH), "--requests", "10", "--out", str(tmp_path / "run")], cwd=REPO,
                       capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PATH": path, "HOME": "/nonexistent"})
    assert p.returncode == 1
    assert error_lines(p) == ["run.sh: error: missing tools: bpftool; install them with: "
                              "bash scripts/install-deps.sh (or rerun with --install)"]
    assert not (tmp_path / "run").exists()
