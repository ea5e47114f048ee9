"""Frames named as each runtime names them: C++ and Rust demangled in stacks, folded stacks
and spans; JIT code by the runtime's perf map.

demangle_target runs five functions that each sleep 2 ms, N rounds: tt::Worker::serve(long),
tt::overloaded(int) and (double) (C++), ttcrate::worker::serve (a legacy Rust symbol) and
ttcrate::worker::poll (a Rust v0 symbol). Oracles: c++filt (binutils) for the C++ names; for the
Rust ones the names rustfilt prints, known by construction (the symbols are written by hand).
jit_target copies a function into anonymous executable memory and names it in
/tmp/perf-PID.map, as V8 with --perf-basic-prof does. Real BPF: run as root."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np

from test_spans import BUILD, expect_error, spans, tailtrace

TARGET = BUILD / "tests" / "probes" / "demangle_target"
JIT = BUILD / "tests" / "probes" / "jit_target"
MS = 1_000_000
CXX = ["_ZN2tt6Worker5serveEl", "_ZN2tt10overloadedEi", "_ZN2tt10overloadedEd"]
RUST = {"_ZN7ttcrate6worker5serve17h0123456789abcdefE": "ttcrate::worker::serve",
        "_RNvNtCs1a2b3c_7ttcrate6worker4poll": "ttcrate::worker::poll"}


def cxxfilt(names: list[str]) -> dict[str, str]:
    out = subprocess.run(["c++filt", *names], capture_output=True, text=True, check=True).stdout
    return dict(zip(names, out.splitlines()))


def test_offcpu_frames_read_as_cxxfilt_and_rustfilt_print_them(tmp_path):
    p = tailtrace(tmp_path, "--events", "runq,switch,offcpu", "--", str(TARGET), "run", "20")
    assert p.returncode == 0, p.stderr
    want = {**cxxfilt(CXX), **RUST}
    seen = {}
    for line in (tmp_path / "stacks.jsonl").read_text().splitlines():
        s = json.loads(line)
        for i, name in s.get("mangled", {}).items():
            seen[name] = s["frames"][int(i)]
    for mangled, shown in want.items():
        assert mangled in seen, (mangled, sorted(seen))
        fn, _, module = seen[mangled].rpartition("+0x")
        assert fn == shown and module.endswith("(demangle_target)"), seen[mangled]
    folded = (tmp_path / "offcpu.folded").read_text()
    for shown in want.values():
        assert f";{shown};" in folded or f";{shown} " in folded, shown
    assert "_ZN2tt" not in folded and "_RNv" not in folded


def test_spans_take_demangled_names(tmp_path):
    """tt::Worker::serve names _ZN2tt6Worker5serveEl: 20 calls of >= 2 ms returning 2i+1; a
    Rust v0 path names its symbol too, and a const method in an anonymous namespace its own,
    without its parameters and qualifier. meta.json keeps both names."""
    p = tailtrace(tmp_path, "--events", "spans", "--span", f"{TARGET}:tt::Worker::serve", "--",
                  str(TARGET), "run", "20")
    assert p.returncode == 0, p.stderr
    assert "tailtrace: span tt::Worker::serve(long):" in p.stderr
    s = spans(tmp_path)
    assert sorted(s["ret"].tolist()) == [2 * i + 1 for i in range(20)]
    assert ((s["t_end_ns"] - s["t_start_ns"]).astype(np.int64) >= 2 * MS).all()
    site = json.loads((tmp_path / "meta.json").read_text())["span_sites"][0]
    assert (site["symbol"], site["name"]) == ("_ZN2tt6Worker5serveEl", "tt::Worker::serve(long)")

    for name in ("ttcrate::worker::poll", "(anonymous namespace)::Probe::peek"):
        out = tmp_path / name.replace(":", "_").replace(" ", "_")
        p = tailtrace(out, "--events", "spans", "--span", f"{TARGET}:{name}", "--",
                      str(TARGET), "run", "20")
        assert p.returncode == 0, p.stderr
        assert len(spans(out)) == 20, name


def test_overloads_are_told_apart_by_their_parameters(tmp_path):
    p = tailtrace(tmp_path, "--events", "spans", "--span", f"{TARGET}:tt::overloaded", "--",
                  str(TARGET), "run", "2")
    expect_error(p, "more than one function", "tt::overloaded(int); tt::overloaded(double)",
                 "give the parameters")
    p = tailtrace(tmp_path, "--events", "spans", "--span", f"{TARGET}:tt::overloaded(double)",
                  "--", str(TARGET), "run", "5")
    assert p.returncode == 0, p.stderr
    assert len(spans(tmp_path)) == 5
    p = tailtrace(tmp_path, "--events", "spans", "--span", f"{TARGET}:tt::Worker::serv", "--",
                  str(TARGET), "run", "1")
    expect_error(p, "not found", "did you mean", "tt::Worker::serve(long)")


def test_an_error_keeps_its_fix_under_a_long_path(tmp_path):
    """The overload error names the binary's path twice, then the fix. Under a path of ~900
    characters (six directories of 140; a --span is at most 1,023) the whole line arrives, the
    fix at its end: the test no longer passes or fails by where the repository was cloned."""
    deep = tmp_path.joinpath(*[f"{i}" + "d" * 139 for i in range(6)])
    deep.mkdir(parents=True)
    target = deep / "demangle_target"
    target.write_bytes(TARGET.read_bytes())
    target.chmod(0o755)
    p = tailtrace(tmp_path / "out", "--events", "spans", "--span", f"{target}:tt::overloaded",
                  "--", str(target), "run", "1")
    err = expect_error(p, "more than one function", str(target), "give the parameters",
                       "e.g. 'tt::overloaded(int)'", f"nm {target} | grep)")
    assert len(err.splitlines()) == 1, err


def test_jit_frames_are_named_from_the_perf_map(tmp_path):
    """20 calls of JIT code that sleeps 2 ms below it: its off-CPU stacks name the code as the
    perf map does, between nap and main, and the folded stacks too."""
    p = tailtrace(tmp_path, "--events", "runq,switch,offcpu", "--", str(JIT), "20")
    assert p.returncode == 0, p.stderr
    info = dict(kv.split("=") for kv in p.stdout.split())
    try:
        stacks = [json.loads(line) for line in
                  (tmp_path / "stacks.jsonl").read_text().splitlines()]
        user = [s["frames"] for s in stacks if s["kind"] == "user"]
        pid = info["map"].rpartition("perf-")[2].partition(".map")[0]
        jit = [f for fr in user for f in fr
               if f.startswith("JS:*handleRequest /srv/app.js:7+0x")]
        assert jit and all(f.endswith(f" (perf-{pid}.map)") for f in jit), user
        for fr in user:
            if any(f in jit for f in fr):
                i = next(i for i, f in enumerate(fr) if f in jit)
                assert fr[i + 1].startswith("main+"), fr
        assert ";JS:*handleRequest /srv/app.js:7;" in (tmp_path / "offcpu.folded").read_text()
    finally:
        Path(info["map"]).unlink(missing_ok=True)


def test_jit_frames_are_named_from_a_jitdump_after_a_move(tmp_path):
    """The same code named only in a jitdump (perf's format, the file mapped as perf's marker):
    loaded at one address, moved to another, called there: its frames are named from the move,
    as the dump spells them, called from main."""
    dump_dir = tmp_path / "dump"
    dump_dir.mkdir()
    p = tailtrace(tmp_path / "run", "--events", "runq,switch,offcpu", "--", str(JIT), "20",
                  str(dump_dir))
    assert p.returncode == 0, p.stderr
    info = dict(kv.split("=") for kv in p.stdout.split())
    pid = info["map"].rpartition("jit-")[2].partition(".dump")[0]
    stacks = [json.loads(line) for line in
              (tmp_path / "run" / "stacks.jsonl").read_text().splitlines()]
    user = [s["frames"] for s in stacks if s["kind"] == "user"]
    jit = [f for fr in user for f in fr if f.startswith("JS:*handleRequest /srv/app.js:7+0x")]
    assert jit and all(f.endswith(f" (jit-{pid}.dump)") for f in jit), user
    for fr in user:
        if any(f in jit for f in fr):
            i = next(i for i, f in enumerate(fr) if f in jit)
            assert fr[i + 1].startswith("main+"), fr
