"""Locks named by what they are (analyze/explain/known_locks.py), on inline fixtures: the GIL
by its place in _PyRuntime, a condition variable's two words as one object, a timed wait's
timeouts said as such."""
import pytest

from fixtures import MS, make_run, off, rq, task
from analyze.explain.critpath import df_wait_objects
from analyze.explain.known_locks import GIL_OFFSET, known_lock, word_name
from analyze.render.words import wait_object_line

FUTEX, WAIT_BITSET_PRIVATE = 202, 9 | 128
RUNTIME, COND_WORD = 0x7F0000A00000, 40          # _PyRuntime; __g_signals[0] in a pthread_cond_t


def gil_word(version, field_offset):
    return RUNTIME + GIL_OFFSET[version] + field_offset


@pytest.mark.parametrize("version,obj", [((3, 11), "python3.11"), ((3, 12), "libpython3.12.so.1.0"),
                                         ((3, 8), "python3.8")])
def test_the_gils_fields_by_their_offset_in_pyruntime(version, obj):
    base = GIL_OFFSET[version]
    run = make_run(switches=[])
    run.wait_names = {(100, gil_word(version, o)): ("_PyRuntime", base + o, obj, 0x28B20)
                      for o in (32 + COND_WORD, 80, 120 + COND_WORD, 200)}
    said = [known_lock(run, 100, gil_word(version, o)) for o in (32 + COND_WORD, 80, 120 + COND_WORD)]
    assert said == ["the GIL", "the GIL's mutex", "the GIL's switch condition"]
    assert word_name(run, 100, gil_word(version, 80)) == f"_PyRuntime+0x{base + 80:x} in {obj}"


def test_what_the_table_does_not_know_keeps_its_symbol():
    run = make_run(switches=[])
    run.wait_names = {(100, 1): ("_PyRuntime", 8, "python3.11", 0x28B20),       # not the GIL
                      (100, 2): ("_PyRuntime", GIL_OFFSET[(3, 11)] + 40, "python3.14", 9),
                      (100, 3): ("main_arena", 0, "libc.so.6", 2200),
                      (100, 4): ("LOCK_open", 0, "mariadbd", 40)}
    assert [known_lock(run, 100, a) for a in (1, 2, 3, 4)] == \
        ["", "", "glibc's main malloc arena lock", ""]
    assert word_name(run, 100, 4) == "LOCK_open in mariadbd"   # the variable is the lock
    assert word_name(run, 100, 9) == ""
    # a heap arena has no symbol: its lock is told by malloc's frames above the wait
    frames = ["__lll_lock_wait_private+0x2b (libc.so.6)", "_int_malloc+0x1a0 (libc.so.6)"]
    assert known_lock(run, 100, 0x55AA, frames) == "a glibc malloc arena lock"


def condvar_run():
    """Thread 11 waits 6 times on one condition variable at 0x5000 (3 times on each of its two
    words, 4 bytes apart): 4 waits of 5 ms end by a timer (timed out), 2 of 1 ms by thread 12."""
    sw, runq = [], []
    for i in range(6):
        t, word = i * 10 * MS, 0x5000 + COND_WORD + 4 * (i % 2)
        dur = 5 * MS if i < 4 else 1 * MS
        sw.append(off(11, t, t + dur, syscall=FUTEX, addr=word, aux=WAIT_BITSET_PRIVATE))
        runq.append(rq(11, t + dur, t + dur, waker=0 if i < 4 else 12,
                       ctx="hardirq" if i < 4 else "task"))
    return make_run(switches=sw, runq=runq, tasks=[task(11, "app-w0"), task(12, "app-w1")])


def test_a_condvars_two_words_are_one_object_and_its_timeouts_are_said():
    run = condvar_run()
    run.wait_names = {(100, 0x5000 + COND_WORD): ("work_ready", COND_WORD, "app", 48)}
    o = df_wait_objects(run, min_waits=1)
    assert len(o) == 1, o["what"].tolist()
    r = o.iloc[0]
    assert r["what"] == "condvar work_ready in app" and r["waits"] == 6
    assert r["timed_out_share"] == pytest.approx(4 / 6) and r["timeout_ms"] == 5.0
    line = wait_object_line(r.to_dict())
    assert "67% timed out, after 5.0 ms (the wait's own timeout)" in line
    assert "interrupts" not in line


def test_a_wrappers_own_helper_is_looked_through():
    """latch_block is only ever called by latch_wait, which two functions call: both are the
    program's wait machinery, and a wait is named by the function that called them; a
    function with one caller that is no wrapper (wait_for_db in handle) is named itself."""
    from analyze.explain.waits import waited_in, wait_wrappers
    lib = "epoll_wait+0x13 (libc.so.6)"
    stacks = {("offcpu", 1): [lib, "latch_block+0x9 (app)", "latch_wait+0x5 (app)",
                              "order_lock_wait+0x7 (app)", "main+0x1 (app)"],
              ("offcpu", 2): [lib, "latch_block+0x9 (app)", "latch_wait+0x5 (app)",
                              "idle+0x3 (app)", "main+0x1 (app)"],
              ("offcpu", 3): [lib, "wait_for_db+0x2 (app)", "handle+0x4 (app)"]}
    run = make_run(switches=[], stacks=stacks)
    assert wait_wrappers(run) == {"latch_block", "latch_wait"}
    assert waited_in(run, stacks[("offcpu", 1)]) == "order_lock_wait (via latch_block ← latch_wait)"
    assert waited_in(run, stacks[("offcpu", 3)]) == "wait_for_db"
