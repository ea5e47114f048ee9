"""The source tree's shape: probes/ is folders by concern, and no include circle.

A module is a C file and its header of the same name in the same folder (sched/offcpu.c
and sched/offcpu.h; sched/sched.bpf.c is module sched/sched.bpf). `#include "x.h"` in a
module's .c or .h is an edge from that module to x's; a module including its own header
is not. Every C source and header git tracks is read (probes/, workloads/, common/,
include/, the test helpers, bench/, fuzz/), and a circle of modules fails the test with
its path: a module must not need, through its includes, a module that needs it.
"""
import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Where a quoted include that is not beside its includer is found: the include
# directories the CMakeLists.txt files give (probes/: folder-qualified, "sched/sched.h").
INCLUDE_ROOTS = ("probes", "common", "include", "workloads/server", "workloads/httpload",
                 "workloads/threadpool")
# Made by the build (build/probes/gen): not in the tree, no module of ours.
GENERATED = re.compile(r"(^|/)(vmlinux\.h|[\w.-]+\.skel\.h)$")
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([^"]+)"', re.M)


def tracked_sources():
    """The C files and headers git tracks (and new ones it does not ignore)."""
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others",
                          "--exclude-standard", "--", "*.c", "*.h"],
                         check=True, capture_output=True, text=True).stdout
    return sorted({p for p in out.split("\0") if p and (ROOT / p).is_file()})


def module_of(path):
    """probes/sched/offcpu.c -> probes/sched/offcpu (only the .c or .h goes)."""
    return re.sub(r"\.[ch]$", "", path)


def resolve(includer, name, files):
    """The tracked file `#include "name"` in includer means, as the compiler finds it:
    beside the includer first, then in the include roots. None: a generated header."""
    candidates = [os.path.join(os.path.dirname(includer), name)]
    candidates += [os.path.join(root, name) for root in INCLUDE_ROOTS]
    for c in candidates:
        c = os.path.normpath(c)  # no ./, // or ..
        if c in files:
            return c
    if GENERATED.search(name):
        return None
    raise AssertionError(f'{includer}: #include "{name}" is no tracked file '
                         f"(beside it, or under {', '.join(INCLUDE_ROOTS)})")


def module_graph(files=None, read=None):
    """{module: {module it includes: the includer file and line}}."""
    files = set(files if files is not None else tracked_sources())
    read = read or (lambda p: (ROOT / p).read_text(errors="replace"))
    graph = {module_of(f): {} for f in files}
    for f in sorted(files):
        text = read(f)
        for m in INCLUDE.finditer(text):
            target = resolve(f, m.group(1), files)
            if target is None:
                continue
            a, b = module_of(f), module_of(target)
            if a != b:
                line = text.count("\n", 0, m.start()) + 1
                graph[a].setdefault(b, f"{f}:{line}")
    return graph


def find_circle(graph):
    """One circle as [m0, m1, ..., m0], or None. Depth-first, in name order."""
    state = {}  # absent: not seen; 1: on the current path; 2: done
    path = []

    def visit(m):
        state[m] = 1
        path.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                return path[path.index(n):] + [n]
            if n not in state:
                found = visit(n)
                if found:
                    return found
        path.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def describe(graph, circle):
    return "\n".join(f"  {a} -> {b}  ({graph[a][b]})" for a, b in zip(circle, circle[1:]))


def test_no_include_circle():
    graph = module_graph()
    circle = find_circle(graph)
    assert circle is None, "include circle: " + " -> ".join(circle) + "\n" + describe(graph, circle)


def test_the_circle_finder_finds_one():
    """The check itself: a circle of three modules across folders is named, and a
    module including its own header is none."""
    src = {
        "probes/a/x.c": '#include "a/x.h"\n#include "b/y.h"\n',
        "probes/a/x.h": "",
        "probes/b/y.c": '#include "y.h"\n',
        "probes/b/y.h": '#include "c/z.h"\n',
        "probes/c/z.c": '#include "c/z.h"\n#include "a/x.h"\n#include "vmlinux.h"\n',
        "probes/c/z.h": "",
    }
    graph = module_graph(src, src.get)
    assert find_circle(graph) == ["probes/a/x", "probes/b/y", "probes/c/z", "probes/a/x"]
    src["probes/c/z.c"] = '#include "c/z.h"\n'
    assert find_circle(module_graph(src, src.get)) is None


def test_probes_holds_only_folders():
    """probes/: CMakeLists.txt, README.md and folders by concern; each folder of C sources
    has its README.md. No header sits where a bare name (-I probes/) would reach it, so none
    can shadow a system header (<features.h>, <sched.h>)."""
    probes = ROOT / "probes"
    loose = sorted(p.name for p in probes.iterdir()
                   if not p.is_dir() and p.name not in ("CMakeLists.txt", "README.md"))
    assert not loose, f"files at the top of probes/ (only CMakeLists.txt, README.md): {loose}"
    assert (probes / "CMakeLists.txt").is_file() and (probes / "README.md").is_file()
    folders = {f.split("/")[1] for f in tracked_sources() if f.startswith("probes/")}
    assert folders, "no C sources under probes/"
    for d in sorted(folders):
        assert (probes / d / "README.md").is_file(), f"probes/{d}/ has no README.md"
