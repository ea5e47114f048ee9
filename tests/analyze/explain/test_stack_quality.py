"""What the stacks lack, said with its fix (analyze/explain/stack_quality.py), on inline stacks."""
from fixtures import make_run
from analyze.explain.stack_quality import df_stack_ends, df_unnamed, stack_notes

WHOLE = ["clock_nanosleep+0x23 (libc.so.6)", "serve+0x9 (app)", "main+0x1 (app)",
         "__libc_start_call_main+0x7a (libc.so.6)"]
BROKEN = ["__futex_abstimed_wait_common+0xc6 (libc.so.6)", "[unknown] (libc.so.6+0x888bb)"]


def run_with(*stacks, unwind="frame_pointer"):
    return make_run(switches=[], stacks={("offcpu", i): s for i, s in enumerate(stacks)},
                    meta={"user_stacks": {"unwind": unwind}})


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
