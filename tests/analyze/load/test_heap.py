"""analyze/load/heap.py: a freed large array keeps its pages in the heap (glibc would unmap it),
heap_trim gives them back, numpy asks for no huge pages. Measured in a child process."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

CHILD = r"""
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
from numpy._core import multiarray
from analyze.load.heap import heap_trim, heap_tune

def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20

heap_tune()
a = np.ones(200 * 2**17)          # 200 MiB, above glibc's default mmap threshold
held = rss_mb()
del a
kept = rss_mb()
heap_trim()
print(multiarray._get_madvise_hugepage(), held, kept, rss_mb())
"""


def test_freed_pages_stay_in_the_heap_until_trimmed():
    out = subprocess.run([sys.executable, "-c", CHILD, str(ROOT)], capture_output=True,
                         text=True, check=True).stdout.split()
    hugepage, held, kept, trimmed = out[0], *map(float, out[1:])
    assert hugepage == "False"
    assert kept > held - 20, (held, kept)            # without heap_tune: 200 MiB unmapped
    assert trimmed < kept - 150, (kept, trimmed)     # heap_trim gave them back
