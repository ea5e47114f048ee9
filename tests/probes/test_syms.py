"""probes/symbols/syms.c through the syms_check driver: symbolization of PIE and
non-PIE executables and shared libraries, snapshots kept after exit, uprobe
file offsets checked against the ELF headers (readelf), suggestions, library
lookup and kernel symbols."""
from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

BUILD = Path(os.environ.get("TT_BUILD", Path(__file__).resolve().parents[2] / "build"))
CHECK = BUILD / "tests" / "probes" / "syms_check"
CHECK_NOPIE = BUILD / "tests" / "probes" / "syms_check_nopie"
LIBC = "/lib/x86_64-linux-gnu/libc.so.6"


def run(*args: str, ok: bool = True) -> str:
    assert CHECK.exists(), f"{CHECK} missing: build first (cmake --build build)"
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=30)
    if ok:
        assert p.returncode == 0, p.stdout + p.stderr
    else:
        assert p.returncode != 0, p.stdout
    return p.stdout


def readelf_offset(path: str, symbol: str) -> int:
    """Symbol vaddr -> file offset with readelf's own tables (independent of syms.c)."""
    syms = subprocess.run(["readelf", "-sW", path], capture_output=True, text=True).stdout
    vaddr = None
    for line in syms.splitlines():
        f = line.split()
        if len(f) >= 8 and f[3] in ("FUNC", "IFUNC") and f[7].split("@")[0] == symbol and f[6] != "UND":
            compat = "@" in f[7] and "@@" not in f[7]  # name@VERSION: not the default
            if not compat:
                vaddr = int(f[1], 16)
                break
    assert vaddr is not None, f"{symbol} not in readelf -s {path}"
    phdrs = subprocess.run(["readelf", "-lW", path], capture_output=True, text=True).stdout
    for line in phdrs.splitlines():
        f = line.split()
        if f and f[0] == "LOAD":
            off, va, filesz = int(f[1], 16), int(f[2], 16), int(f[4], 16)
            if va <= vaddr < va + filesz:
                return vaddr - va + off
    raise AssertionError(f"no PT_LOAD holds {symbol}")


@pytest.mark.skipif("address" in os.environ.get("TT_SANITIZE", ""),
                    reason="ASan interposes pthread_mutex_lock: the symbol resolves in libasan")
@pytest.mark.parametrize("exe", [CHECK, CHECK_NOPIE], ids=["pie", "no-pie"])
def test_resolve_own_and_libc_addresses(exe):
    lines = [l.split("\t") for l in run(exe, "self").splitlines()]
    assert len(lines) == 6
    name = exe.name
    got = {want: g for want, g in lines}
    assert got["syms_check_target+0x0"] == f"syms_check_target+0x0 ({name})"
    assert got["syms_check_target+0x5"] == f"syms_check_target+0x5 ({name})"
    assert got["main+0x0"] == f"main+0x0 ({name})"
    # libc is stripped (.dynsym only); aliases at one address are fine
    assert re.fullmatch(r"(__)?pthread_mutex_lock\+0x0 \(libc\.so\.6\)", got["pthread_mutex_lock+0x0"])
    assert re.fullmatch(r"(__)?pthread_mutex_lock\+0x10 \(libc\.so\.6\)", got["pthread_mutex_lock+0x10"])
    assert got["[unknown]"] == "[unknown] (0x10)"


@pytest.mark.parametrize("exe", [CHECK, CHECK_NOPIE], ids=["pie", "nopie"])
def test_data_addresses_name_their_global_variable(exe):
    """A lock in .data or .bss (past the file's end: an anonymous mapping the segment's
    size covers) and libc's stdout: the variable, the offset in it and its size; a stack
    address none."""
    for line in run(exe, "data").splitlines():
        want, got = line.split("\t")
        assert got == want.replace("(syms_check)", f"({exe.name})"), line


def test_stripped_executable_resolves_to_file_offsets(tmp_path):
    """No function symbol left at all (strip -s, nothing exported): frames
    fall back to file+offset, the offset readelf gives the unstripped copy."""
    stripped = tmp_path / "stripped_check"
    subprocess.run(["strip", "-s", "-o", str(stripped), str(CHECK)], check=True)
    got = dict(l.split("\t") for l in run(stripped, "self").splitlines())
    off = readelf_offset(str(CHECK), "syms_check_target")
    assert got["syms_check_target+0x0"] == f"[unknown] (stripped_check+{off:#x})"
    assert got["syms_check_target+0x5"] == f"[unknown] (stripped_check+{off + 5:#x})"


def test_snapshot_survives_exit():
    out = run(CHECK, "exited")
    assert "refresh_after_exit=-2" in out  # /proc/PID/maps gone: ENOENT
    assert "syms_check_target+0x0\tsyms_check_target+0x0 (syms_check)" in out


def test_jit_addresses_from_the_perf_map_as_it_grows():
    """/tmp/perf-PID.map written in steps while one symbolizer resolves: each address gets the
    entry written last over it (once the symbolizer refreshes, as the loader does), lines appended
    later are read when an address misses, a half-written one waits."""
    lines = run(CHECK, "perfmap").splitlines()
    assert len(lines) == 7
    for line in lines:
        want, got = line.split("\t")
        pid = got.rpartition("perf-")[2].partition(".map")[0]
        assert got == want.replace("PID", pid), line


def test_jitdump_read_as_it_grows(tmp_path):
    """DIR/jit-PID.dump (perf's jitdump), mapped executable as perf's marker, written in steps
    while one symbolizer resolves: a half-written record waits, a record that names nothing is
    skipped, a code move names the code at its new address."""
    lines = run(CHECK, "jitdump", str(tmp_path)).splitlines()
    assert len(lines) == 5
    for line in lines:
        want, got = line.split("\t")
        pid = got.rpartition("jit-")[2].partition(".dump")[0]
        assert got == want.replace("PID", pid), line


@pytest.mark.parametrize("path,symbol", [
    (LIBC, "pthread_mutex_lock"), (LIBC, "pthread_mutex_unlock"), (LIBC, "pthread_mutex_trylock"),
    # default version, not the GLIBC_2.2.5 compat function listed first
    (LIBC, "pthread_cond_timedwait"), (LIBC, "pthread_cond_wait"),
    (str(CHECK), "syms_check_target"), (str(CHECK_NOPIE), "syms_check_target"),
])
def test_uprobe_offset_matches_elf_headers(path, symbol):
    assert int(run(CHECK, "offset", path, symbol).strip(), 16) == readelf_offset(path, symbol)


def test_unknown_symbol_suggests_close_matches():
    out = run(CHECK, "offset", LIBC, "pthread_mutex_lok", ok=False)
    assert out.startswith("error=-2 suggestions=5: pthread_mutex_lock, ")
    assert "pthread_mutex_unlock" in out
    out = run(CHECK, "offset", str(CHECK), "SYMS_CHECK_TARGT", ok=False)
    assert out.strip() == "error=-2 suggestions=1: syms_check_target"
    out = run(CHECK, "offset", LIBC, "zzzqqqxxxyyy", ok=False)
    assert out.strip() == "error=-2 suggestions=0:"


def test_find_library():
    me = str(os.getpid())
    libc = run(CHECK, "findlib", me, "libc.so.6").strip()
    assert os.path.samefile(libc, LIBC)
    curl = Path(run(CHECK, "findlib", me, "libcurl.so.4").strip())
    assert curl.is_absolute() and curl.name.startswith("libcurl.so.4")
    # mapped by the target: the file the target really maps
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        for _ in range(200):  # until the dynamic loader mapped libc
            maps = Path(f"/proc/{sleeper.pid}/maps").read_text()
            if "libc.so" in maps:
                break
            time.sleep(0.01)
        mapped = run(CHECK, "findlib", str(sleeper.pid), "libc.so.6").strip()
        assert mapped in maps
    finally:
        sleeper.kill()
        sleeper.wait()
    assert run(CHECK, "findlib", me, "libdoesnotexist.so.9", ok=False).strip() == "error=-2"
    assert run(CHECK, "findlib", me, "/no/such/file.so", ok=False).strip() == "error=-2"


LDCACHE = "/etc/ld.so.cache"


def ldconfig_entries(x86_64: bool = True) -> list[tuple[str, str]]:
    """(name, path) of every x86-64 entry (or every other one), in cache order, as
    glibc's ldconfig reads it."""
    out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=True).stdout
    got = []
    for line in out.splitlines()[1:]:
        m = re.match(r"\s+(\S+) \(([^)]*)\) => (\S+)$", line)
        if m and ("x86-64" in m.group(2)) == x86_64:
            got.append((m.group(1), m.group(3)))
    return got


def ldcache_lookup(cache: str, names: list[str]) -> list[str]:
    return run(CHECK, "ldcache", cache, *names).splitlines()


def test_ldcache_read_directly_agrees_with_ldconfig():
    """Every name in the cache resolves to the file ldconfig -p gives for its first
    entry (names that another entry's name extends, libfoo.so vs libfoo.so.1, are
    left out: which of those a bare prefix means is lib_name_matches' rule)."""
    entries = ldconfig_entries()
    assert len(entries) > 50
    first: dict[str, str] = {}
    for name, path in entries:
        first.setdefault(name, path)
    names = [n for n in first if not any(o != n and (o.startswith(n + ".") or o.startswith(n + "-"))
                                         for o in first)]
    assert len(names) > 20
    want = [os.path.realpath(first[n]) for n in names]
    assert ldcache_lookup(LDCACHE, names) == want
    assert ldcache_lookup(LDCACHE, ["libdoesnotexist.so.9"]) == ["error=-2"]
    # 32-bit only (ld-linux.so.2 of the lib32 packages here): not a library for us
    only32 = sorted({n for n, _ in ldconfig_entries(x86_64=False)} - set(first))
    assert ldcache_lookup(LDCACHE, only32 or ["libdoesnotexist.so.9"]) == ["error=-2"] * max(1, len(only32))


def test_ldcache_behind_the_old_format_table(tmp_path):
    """glibc < 2.32 wrote the old "ld.so-1.7.0" table first; the new header follows it,
    8-byte aligned, and its string offsets are from that header."""
    new = Path(LDCACHE).read_bytes()
    assert new.startswith(b"glibc-ld.so.cache1.1")
    old = b"ld.so-1.7.0\0" + (3).to_bytes(4, "little") + bytes(12 * 3)
    old += bytes(-len(old) % 8)
    combined = tmp_path / "ld.so.cache"
    combined.write_bytes(old + new)
    names = ["libc.so.6", "libcurl.so.4"]
    assert ldcache_lookup(str(combined), names) == ldcache_lookup(LDCACHE, names)
    assert all(p.startswith("/") for p in ldcache_lookup(str(combined), names))


def test_ldcache_damaged_files_fail_cleanly(tmp_path):
    """Truncated or lying caches: an error or no match, never a read outside the file
    (the sanitizer build runs this too)."""
    new = bytearray(Path(LDCACHE).read_bytes())
    cases = {
        "empty": b"", "short": bytes(new[:40]), "header_only": bytes(new[:48]),
        "half": bytes(new[:len(new) // 2]), "not_a_cache": b"\x7fELF" + bytes(100),
    }
    huge = bytearray(new)
    huge[20:24] = (0xFFFFFFFF).to_bytes(4, "little")  # nlibs beyond the file
    cases["huge_count"] = bytes(huge)
    wild = bytearray(new)
    for i in range(48, min(len(wild), 48 + 24 * 50), 24):  # name/path offsets past the end
        wild[i + 4:i + 12] = (0xFFFFFF00).to_bytes(4, "little") * 2
    cases["wild_offsets"] = bytes(wild)
    old_lie = b"ld.so-1.7.0\0" + (0x7FFFFFFF).to_bytes(4, "little")
    cases["old_count_lies"] = old_lie
    for label, data in cases.items():
        f = tmp_path / label
        f.write_bytes(data)
        got = ldcache_lookup(str(f), ["libc.so.6"])
        if label in ("empty", "short", "not_a_cache", "old_count_lies"):
            assert got == ["error=-22"], label
        elif label in ("header_only", "huge_count"):
            assert got == ["error=-2"], label
        else:
            assert len(got) == 1 and (got[0] == "error=-2" or got[0].startswith("/")), (label, got)


def test_kernel_symbols():
    want = None
    with open("/proc/kallsyms") as f:
        for line in f:
            addr, kind, name = line.split()[:3]
            if name == "schedule" and kind in "tT":
                want = int(addr, 16)
                break
    if not want:
        pytest.skip("kallsyms addresses hidden (kptr_restrict, not root)")
    assert run(CHECK, "ksym", hex(want + 4)).strip() == "schedule+0x4"
