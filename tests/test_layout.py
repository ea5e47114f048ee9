"""The source tree's shape: probes/ is folders by concern, no include circle, and the analysis
is stages that import one way.

A module is a C file and its header of the same name in the same folder (sched/offcpu.c
and sched/offcpu.h; sched/sched.bpf.c is module sched/sched.bpf). `#include "x.h"` in a
module's .c or .h is an edge from that module to x's; a module including its own header
is not. Every C source and header git tracks is read (probes/, workloads/, common/,
include/, the test helpers, bench/, fuzz/), and a circle of modules fails the test with
its path: a module must not need, through its includes, a module that needs it.

analyze/ is three stages, analyze/load, analyze/explain and analyze/render, driven by
analyze/pipeline.py (and the CLI, analyze/__main__.py). A stage imports only from itself and
the stages before it: load ← explain ← render ← the top, and no module of it is in an import
circle. Every import of every analyze/**/*.py (at module level or inside a function, relative
or absolute) is read with ast.
"""
import ast
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


# The analysis' stages, in the order they may import: each from itself and those before it.
STAGES = ("load", "explain", "render")
TOP = len(STAGES)  # analyze/__init__.py, __main__.py, pipeline.py: may import any stage
TOP_MODULES = {"__init__.py", "__main__.py", "pipeline.py"}


def tracked_python(under):
    """The .py files git tracks under a folder (and new ones it does not ignore)."""
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others",
                          "--exclude-standard", "--", f"{under}/*.py"],
                         check=True, capture_output=True, text=True).stdout
    return sorted({p for p in out.split("\0") if p and (ROOT / p).is_file()})


def stage_of(module):
    """analyze.explain.decompose -> 1 (its index in STAGES); TOP for analyze itself, its
    top-level modules and anything not under a stage."""
    parts = module.split(".")
    if len(parts) > 1 and parts[0] == "analyze" and parts[1] in STAGES:
        return STAGES.index(parts[1])
    return TOP


def imported_modules(path, text):
    """[(line, absolute module)] that the file at path (analyze/explain/x.py) imports from
    analyze. `from .a import b` counts as analyze.<pkg>.a.b: b may be a module, and the stage
    is named by the part after analyze either way."""
    package = path[:-3].replace("/", ".").split(".")[:-1]  # analyze/explain/x.py -> analyze.explain
    out = []
    for node in ast.walk(ast.parse(text, filename=path)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            out += [(node.lineno, f"{mod}.{a.name}") for a in node.names]
    return [(line, m) for line, m in out if m == "analyze" or m.startswith("analyze.")]


def backward_imports(files=None, read=None):
    """['analyze/load/x.py:3 imports analyze.explain.y (load may import load)', ...]."""
    files = files if files is not None else tracked_python("analyze")
    read = read or (lambda p: (ROOT / p).read_text())
    bad = []
    for f in sorted(files):
        own = stage_of(f[:-3].replace("/", "."))
        for line, mod in imported_modules(f, read(f)):
            if stage_of(mod) > own:
                allowed = ", ".join(STAGES[:own + 1])
                bad.append(f"{f}:{line} imports {mod} ({STAGES[own]} may import {allowed})")
    return bad


def test_analyze_stages_import_one_way():
    files = tracked_python("analyze")
    assert any(f.startswith("analyze/explain/") for f in files), "no analyze/explain/*.py"
    bad = backward_imports(files)
    assert not bad, ("a stage imports a later stage (load <- explain <- render <- pipeline):\n  "
                     + "\n  ".join(bad))


def test_the_stage_check_finds_a_backward_import():
    """The check itself: relative and absolute imports, at module level or in a function,
    of a later stage or of the pipeline, are named; imports of earlier stages are not."""
    src = {
        "analyze/load/a.py": "from .b import x\nfrom ..load import c\n",
        "analyze/explain/d.py": "from ..load.a import y\n\ndef f():\n    from ..render import e\n",
        "analyze/render/e.py": "import analyze.explain.d\nfrom .. import pipeline\n",
        "analyze/load/b.py": "from analyze.explain.d import z\nimport numpy\n",
        "analyze/pipeline.py": "from .render import e\nfrom .load.a import y\n",
    }
    assert backward_imports(src, src.get) == [
        "analyze/explain/d.py:4 imports analyze.render.e (explain may import load, explain)",
        "analyze/load/b.py:1 imports analyze.explain.d.z (load may import load)",
        "analyze/render/e.py:2 imports analyze.pipeline (render may import load, explain, render)",
    ]


def python_module_of(name, modules):
    """The module of analyze an imported name lives in: its longest prefix that is one of
    modules (analyze.explain.decompose.Axis -> analyze.explain.decompose), or None."""
    parts = name.split(".")
    for k in range(len(parts), 0, -1):
        if ".".join(parts[:k]) in modules:
            return ".".join(parts[:k])
    return None


def import_graph(files=None, read=None):
    """{module: {module it imports: the importing file and line}} of analyze's modules,
    imports inside functions included (find_circle's form); a module importing its own
    package's __init__ is no edge."""
    files = files if files is not None else tracked_python("analyze")
    read = read or (lambda p: (ROOT / p).read_text())
    name = {f: f[:-3].replace("/", ".").removesuffix(".__init__") for f in files}
    modules = set(name.values())
    graph = {m: {} for m in modules}
    for f in sorted(files):
        for line, imp in imported_modules(f, read(f)):
            target = python_module_of(imp, modules)
            if target and target != name[f] and not name[f].startswith(target + "."):
                graph[name[f]].setdefault(target, f"{f}:{line}")
    return graph


def test_analyze_has_no_import_circle():
    """A stage's modules import one way too: no module needs, through its imports (at module
    level or inside a function), a module that needs it."""
    graph = import_graph()
    circle = find_circle(graph)
    assert circle is None, ("import circle (move what both need into a module of its own): "
                            + " -> ".join(circle) + "\n" + describe(graph, circle))


def test_the_circle_check_finds_circles_inside_functions_too():
    src = {
        "analyze/explain/a.py": "from .b import x\n",
        "analyze/explain/b.py": "def f():\n    from .c import y\n",
        "analyze/explain/c.py": "from analyze.explain.a import z\nfrom .d import w\n",
        "analyze/explain/d.py": "import numpy\nfrom . import e\n",
        "analyze/explain/__init__.py": "",
        "analyze/explain/e.py": "from .. import explain\n",
    }
    graph = import_graph(src, src.get)
    assert find_circle(graph) == ["analyze.explain.a", "analyze.explain.b", "analyze.explain.c",
                                  "analyze.explain.a"]
    assert graph["analyze.explain.b"]["analyze.explain.c"] == "analyze/explain/b.py:2"
    src["analyze/explain/b.py"] = "import numpy\n"
    assert find_circle(import_graph(src, src.get)) is None


def test_analyze_is_three_stages_and_the_pipeline():
    """analyze/ holds __init__.py, __main__.py, pipeline.py and the stages' folders, each a
    package whose docstring says what it owns and what it may import."""
    top = ROOT / "analyze"
    loose = sorted(p.name for p in top.iterdir()
                   if p.suffix == ".py" and p.name not in TOP_MODULES)
    assert not loose, f"modules at the top of analyze/ (put each in its stage): {loose}"
    folders = sorted(p.name for p in top.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert folders == sorted(STAGES), f"analyze/ folders: {folders}, want {sorted(STAGES)}"
    for stage in STAGES:
        doc = ast.get_docstring(ast.parse((top / stage / "__init__.py").read_text()))
        assert doc and "Imports:" in doc, f"analyze/{stage}/__init__.py: no docstring with Imports:"


# A test file that starts a program we build names the build directory (TT_BUILD) or takes
# the shared helpers that do (tt_run, orders_proc).
RUNS_C = re.compile(r"TT_BUILD|^from (tt_run|orders_proc) import|^import (tt_run|orders_proc)", re.M)


def sanitized_paths(script=None):
    """The paths scripts/sanitize.sh gives the ASan pass (its asan_tests array)."""
    text = script if script is not None else (ROOT / "scripts" / "sanitize.sh").read_text()
    m = re.search(r"^asan_tests=\(([^)]*)\)", text, re.M)
    assert m, "scripts/sanitize.sh has no asan_tests=(...) array"
    return m.group(1).split()


def unsanitized_c_tests(paths, files):
    """Test files (repo-relative, with their text) that run C of ours but no sanitized path
    covers; tests/kernels is left to the plain pass on purpose (scripts/sanitize.sh)."""
    covered = lambda f: any(f == p or f.startswith(p.rstrip("/") + "/") for p in paths)
    return sorted(f for f, text in files.items()
                  if RUNS_C.search(text) and not covered(f) and not f.startswith("tests/kernels/"))


def test_every_test_that_runs_c_is_in_the_asan_pass():
    files = {str(p.relative_to(ROOT)): p.read_text() for p in (ROOT / "tests").rglob("test_*.py")
             if p != Path(__file__).resolve()}  # this file names TT_BUILD in its pattern
    assert not unsanitized_c_tests(sanitized_paths(), files)


def test_the_asan_check_finds_a_test_left_out():
    paths = sanitized_paths("asan_tests=(tests/probes\n\ttests/analyze/a/test_x.py)\n")
    files = {"tests/analyze/a/test_x.py": "BUILD = os.environ.get('TT_BUILD')",
             "tests/analyze/b/test_y.py": "from tt_run import helper\n",
             "tests/analyze/b/test_z.py": "import pandas\n",
             "tests/probes/test_w.py": "from tt_run import helper\n"}
    assert unsanitized_c_tests(paths, files) == ["tests/analyze/b/test_y.py"]
