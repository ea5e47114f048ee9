"""Importing the analysis and building a report change no setting of the process that does it
(a notebook, a service embedding it): glibc's malloc thresholds and numpy's huge-page advice
stay as they were. Only `python3 -m analyze` tunes them (analyze/load/heap.py).

Measured in a child process, before and after build_report on a small synthetic run: numpy's
own flag, and where glibc puts a fresh 64 MiB block. Untuned glibc maps every block above its
mmap threshold (at most 32 MiB) apart; tuned (1 GiB) it takes the block from the heap."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

CHILD = r"""
import ctypes, json, sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]
from numpy._core import multiarray

libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]

def settings():
    p = libc.malloc(64 << 20)
    heap = []
    with open("/proc/self/maps") as f:
        for line in f:
            if line.rstrip().endswith("[heap]"):
                lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
                heap.append(lo <= p < hi)
    libc.free(p)
    return {"hugepage": bool(multiarray._get_madvise_hugepage()), "64MiB_in_heap": any(heap)}

before = settings()
import synth
from analyze.pipeline import build_report
tr = synth.make_run(__import__("pathlib").Path(sys.argv[3]), 50)
build_report(tr.path, plots=False)
print(json.dumps({"before": before, "after": settings()}))
"""


def test_build_report_leaves_malloc_and_numpy_settings_alone(tmp_path):
    out = subprocess.run([sys.executable, "-c", CHILD, str(ROOT), str(HERE), str(tmp_path)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.splitlines()[-1])
    assert got["before"] == {"hugepage": True, "64MiB_in_heap": False}, got
    assert got["after"] == got["before"], got
