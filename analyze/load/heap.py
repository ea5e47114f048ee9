"""How the analysis uses memory pages: glibc's heap and numpy's huge pages.

The analysis of a busy run writes tens of GB of short-lived arrays (10M switches: each
pass over a stream makes one or more 40-80 MB arrays). What a fresh page costs then
decides its speed more than the arithmetic does. On this project's 2-CPU VM
(docs/benchmarks.md, "Analysis at scale"):

- glibc maps every block above its mmap threshold (which rises to 32 MB at most) apart and
  unmaps it when freed: the next array of that size faults fresh pages again, ~0.4 s per
  GB touched. heap_tune raises the threshold to 1 GiB (and the trim threshold with it) so
  that freed arrays stay in the heap and the next ones reuse their pages;
- numpy asks the kernel for transparent huge pages on every array of 4 MB and more; here a
  huge page fault costs 1-2 s per GB (the hypervisor backs the block anew), several times a
  small one's; heap_tune turns that off.
Both settings hold for the whole process, so only the command line (`python3 -m analyze`,
analyze/__main__.py) calls heap_tune: a program or notebook that imports the analysis keeps
its own (tests/analyze/test_process_settings.py). The pages the heap keeps go back between
the analysis's phases (heap_trim: 5 ms, harmless untuned). Off glibc only numpy's setting
changes.
"""
from __future__ import annotations

import ctypes
import ctypes.util

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3         # glibc's mallopt parameters
MMAP_THRESHOLD_B = 1 << 30
TRIM_THRESHOLD_B = (1 << 31) - 1   # mallopt takes an int: 2 GiB at most

_LIBC = []


def _libc():
    if not _LIBC:
        name = ctypes.util.find_library("c")
        lib = ctypes.CDLL(name) if name else None
        ok = lib is not None and hasattr(lib, "malloc_trim") and hasattr(lib, "mallopt")
        _LIBC.append(lib if ok else None)
    return _LIBC[0]


def heap_tune() -> None:
    """Keep freed arrays' pages in the heap for the next ones; no huge pages for numpy
    (see the module's text). Idempotent; the settings hold for the whole process."""
    try:
        from numpy._core import multiarray
        multiarray._set_madvise_hugepage(False)
    except (ImportError, AttributeError):   # another numpy: its default stays
        pass
    lib = _libc()
    if lib is not None:
        lib.mallopt(M_MMAP_THRESHOLD, ctypes.c_int(MMAP_THRESHOLD_B))
        lib.mallopt(M_TRIM_THRESHOLD, ctypes.c_int(TRIM_THRESHOLD_B))


def heap_trim() -> None:
    """Hand the heap's free pages back to the system (glibc's malloc_trim), between
    phases: what a phase freed and the next will not reuse (at 10M switches, 0.45 GB of a
    2.4 GB process after the analysis). Nothing happens off glibc."""
    lib = _libc()
    if lib is not None:
        lib.malloc_trim(0)
