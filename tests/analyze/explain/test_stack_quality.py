"""What the stacks lack, said with its fix (analyze/explain/stack_quality.py), on inline stacks."""
from fixtures import make_run
from analyze.explain.stack_quality import df_stack_ends, df_unnamed, stack_notes

WHOLE = ["clock_nanosleep+0x23 (libc.so.6)", "serve+0x9 (app)", "main+0x1 (app)",
         "__libc_start_call_main+0x7a (libc.so.6)"]
BROKEN = ["__futex_abstimed_wait_common+0xc6 (libc.so.6)", "[unknown] (libc.so.6+0x888bb)"]


def run_with(*stacks, unwind="frame_pointer", **user_stacks):
    return make_run(switches=[], stacks={("offcpu", i): s for i, s in enumerate(stacks)},
                    meta={"user_stacks": {"unwind": unwind, **user_stacks}})


def test_complete_named_stacks_need_no_note():
    assert stack_notes(run_with(WHOLE, WHOLE)) == []


def test_stacks_walked_by_frame_pointer_stopping_in_libc_say_dwarf():
    run = run_with(WHOLE, BROKEN, BROKEN)
    assert df_stack_ends(run).values.tolist() == [["libc.so.6", 2]]
    notes = stack_notes(run)
    assert notes[0].startswith("2 of the 3 off-CPU user stacks stop before their thread's "
                               "start, in libc.so.6 2: they were walked by frame pointer")
    assert "--user-stacks dwarf" in notes[0]


def test_unnamed_frames_name_their_object_and_the_debug_symbols():
    py = ["take_gil+0x232 (python3.11)", "[unknown] (python3.11+0x1f94ed)",
          "[unknown] (python3.11+0x184b23)", "start_thread+0x305 (libc.so.6)"]
    run = run_with(py, unwind="dwarf")
    assert df_unnamed(run).values.tolist() == [["python3.11", 2, 2 / 3]]
    (note,) = stack_notes(run)
    assert note.startswith("frames without a name in python3.11 (67% of its frames)")
    assert "/usr/lib/debug" in note and "DEBUGINFOD_URLS" in note


def test_copies_that_stopped_early_are_told_by_cause_each_with_its_fix():
    ended = {"outermost": 3, "copy_ended": 25, "no_cfi": 1, "no_object": 0, "depth": 4,
             "error": 0, "process_gone": 12}
    run = run_with(WHOLE, BROKEN, BROKEN, unwind="dwarf", unwound=45, copy_bytes=8192,
                   ended=ended, stopped_in={"ld-linux-x86-64.so.2": 1})
    note = stack_notes(run)[0]
    assert note.startswith("2 of the 3 off-CPU user stacks stop before their thread's start, "
                           "in libc.so.6 2: of the 45 copies unwound, 25 deeper than the copy "
                           "(8,192 bytes)"), note
    assert ("; 12 of processes that had exited" in note and "; 4 at the 64 frames kept" in note
            and "; 1 in an object without call-frame information or frame pointers "
                "(ld-linux-x86-64.so.2)" in note), note
    assert note.index("; 12 ") < note.index("; 4 ") < note.index("; 1 "), note
