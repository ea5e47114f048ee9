"""A service in a container, traced from the host by its host pid. The container is made as a
runtime makes one, with util-linux: `unshare --pid --mount --fork` and a chroot into a root of
its own: one holding span_target as /app and the libraries it links, and a Debian root built
with debootstrap (its own libc; span_target as /usr/local/bin/tt-app). No file is at /app on the
host, so the frames that name span_target's functions come from the container's own file
(/proc/PID/root). Oracle by construction: span_target calls tt_span_work 2,000 times, each
sleeping 5 ms: the 1 s traced sees a part of them. Real BPF: run as root."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tt_run import BUILD, needs_root, tailtrace

pytestmark = needs_root
SPAN_TARGET = BUILD / "tests" / "probes" / "span_target"


def linked_libraries(exe: Path) -> list[str]:
    """The paths of the libraries ldd says exe links (its loader too)."""
    out = subprocess.run(["ldd", str(exe)], capture_output=True, text=True, check=True).stdout
    return re.findall(r"(/\S+)", out)


def make_root(root: Path) -> None:
    """span_target as /app, and each library ldd says it links, at its own path."""
    root.mkdir()
    shutil.copy(SPAN_TARGET, root / "app")
    for lib in linked_libraries(SPAN_TARGET):
        dest = root / lib.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(lib, dest)


def child_of(pid: int, timeout_s: float = 10, name: str = "app") -> int:
    """unshare --fork's child (an executable called name): the container's pid 1, as the host
    numbers it."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if kids and Path(f"/proc/{kids[0]}/exe").resolve().name == name:
            return int(kids[0])
        time.sleep(0.02)
    raise AssertionError("the container's process did not start")


def maps_when_loaded(pid: int, library: str, timeout_s: float = 10) -> str:
    """pid's /proc/PID/maps once its loader has mapped library: the process is found as soon
    as it has exec'd, before ld.so has mapped what it links (a race a slow start, as in the
    ASan pass, loses)."""
    end = time.monotonic() + timeout_s
    while True:
        maps = Path(f"/proc/{pid}/maps").read_text()
        if library in maps or time.monotonic() > end:
            return maps
        time.sleep(0.02)


def test_a_service_in_a_container_is_decomposed_and_named_from_its_own_files(tmp_path):
    if not shutil.which("unshare") or not shutil.which("chroot"):
        pytest.skip("unshare and chroot (util-linux, coreutils) not installed")
    root = tmp_path / "root"
    make_root(root)
    assert not Path("/app").exists()
    # --kill-child: the container's processes go with unshare when the test kills it
    box = subprocess.Popen(["unshare", "--pid", "--mount", "--fork", "--kill-child", "chroot",
                            str(root), "/app", "work", "2000", "5000"], stdout=subprocess.DEVNULL)
    try:
        pid = child_of(box.pid)
        status = Path(f"/proc/{pid}/status").read_text()
        assert re.search(r"^NSpid:\s+\d+\s+1$", status, re.M), status
        p = tailtrace(tmp_path / "run", "--pid", str(pid), "--span", "app:tt_span_work",
                      "--duration", "1")
    finally:
        box.kill()
        box.wait()
    assert p.returncode == 0, p.stderr
    from analyze.explain.decompose import df_decompose
    from analyze.load.load import load_run
    run = load_run(tmp_path / "run")
    d = df_decompose(run)
    # ~190 calls of 5 ms in the 1 s traced (39 seen in CI's parallel phase: a slow start)
    assert 20 <= len(d) <= 205, len(d)
    assert (d["latency_ns"] >= 5_000_000).all()
    assert d["closes"].mean() >= 0.95, d["closes"].mean()
    stacks = [json.loads(line)["frames"] for line in
              (tmp_path / "run" / "stacks.jsonl").read_text().splitlines()]
    mine = [fr for fr in stacks if any(f.startswith("tt_span_work+") and f.endswith("(app)")
                                       for f in fr)]
    assert mine, stacks
    tasks = run.tasks.set_index("tid")
    assert tasks.loc[pid, "ns_tid"] == 1 and tasks.loc[pid, "ns_pid"] == 1


ROOTFS_CACHE = Path(os.environ.get("TT_ROOTFS_CACHE", "/var/cache/tailtrace/rootfs"))
SUITE = "bookworm"


def debian_root() -> Path:
    """A Debian root built with debootstrap from the Debian archive (minbase), once per
    machine: ROOTFS_CACHE/bookworm (26 s here)."""
    root = ROOTFS_CACHE / SUITE
    if (root / "etc" / "debian_version").exists():
        return root
    tmp = ROOTFS_CACHE / f"{SUITE}.{os.getpid()}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    p = subprocess.run(["debootstrap", "--variant=minbase", SUITE, str(tmp),
                        "http://deb.debian.org/debian"], capture_output=True, text=True,
                       timeout=900)
    assert p.returncode == 0, f"debootstrap {SUITE} failed: {p.stdout[-2000:]}{p.stderr[-2000:]}"
    tmp.rename(root)
    return root


def test_a_service_in_a_debootstrapped_debian_root_is_named_from_its_files(tmp_path):
    """The same service in a Debian root made by debootstrap: it links the root's own libc
    (/lib/x86_64-linux-gnu/libc.so.6 there), and is at /usr/local/bin/tt-app, a path the host
    does not have."""
    if not shutil.which("debootstrap") or not shutil.which("unshare"):
        pytest.skip("debootstrap and unshare not installed (scripts/install-deps.sh)")
    root = debian_root()
    app = Path("/usr/local/bin/tt-app")
    assert not app.exists()
    shutil.copy2(SPAN_TARGET, root / app.relative_to("/"))
    # a library the root lacks (a sanitizer's runtime, in the ASan pass) from the host; libc
    # and the rest are the root's own
    for lib in linked_libraries(SPAN_TARGET):
        dest = root / lib.lstrip("/")
        if not dest.exists():
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(lib, dest)
    box = subprocess.Popen(["unshare", "--pid", "--mount", "--fork", "--kill-child", "chroot",
                            str(root), str(app), "work", "2000", "5000"],
                           stdout=subprocess.DEVNULL)
    try:
        pid = child_of(box.pid, name=app.name)
        maps = maps_when_loaded(pid, "/lib/x86_64-linux-gnu/libc.so.6")
        assert "/usr/local/bin/tt-app" in maps and "/lib/x86_64-linux-gnu/libc.so.6" in maps
        p = tailtrace(tmp_path / "run", "--pid", str(pid), "--span", "tt-app:tt_span_work",
                      "--duration", "1")
    finally:
        box.kill()
        box.wait()
    assert p.returncode == 0, p.stderr
    from analyze.explain.decompose import df_decompose
    from analyze.load.load import load_run
    d = df_decompose(load_run(tmp_path / "run"))
    assert 20 <= len(d) <= 205, len(d)
    assert d["closes"].mean() >= 0.95, d["closes"].mean()
    stacks = [json.loads(line)["frames"] for line in
              (tmp_path / "run" / "stacks.jsonl").read_text().splitlines()]
    mine = [fr for fr in stacks if any(f.startswith("tt_span_work+") and f.endswith("(tt-app)")
                                       for f in fr)]
    assert mine, stacks
    # the root's libc, read through /proc/PID/root: its sleep named there
    assert any(any(f.endswith("(libc.so.6)") and not f.startswith("[unknown]") for f in fr)
               for fr in mine), mine
