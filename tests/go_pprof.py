"""`go tool pprof` for the tests, the one way they run it: pprof's own files (HOME,
PPROF_TMPDIR) in the test's directory, Go's build cache where it always is. Go 1.24 and later
build pprof on first use and keep it in that cache: a cache under each test's fresh HOME built
it again in every test, half a minute of two CPUs, past the timeout on a loaded machine."""
import functools
import os
import shutil
import subprocess
from pathlib import Path


@functools.cache
def go() -> str:
    exe = shutil.which("go") or "/usr/local/go/bin/go"
    assert os.access(exe, os.X_OK), "no Go for `go tool pprof`: run scripts/install-deps.sh"
    return exe


@functools.cache
def gocache() -> str:
    return subprocess.run([go(), "env", "GOCACHE"], capture_output=True, text=True,
                          check=True).stdout.strip()


def pprof(*args, home: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, HOME=str(home), PPROF_TMPDIR=str(home), GOCACHE=gocache(),
               GOFLAGS="-mod=mod")
    return subprocess.run([go(), "tool", "pprof", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env=env)
