"""runq and switch records share one timestamp per sched_switch (switch_clock.bpf.h):
an interval's switch-in edge is the same nanosecond in runq.bin and switches.bin, so
runnable time nests exactly inside off-CPU time and short requests still close. Both
with one sched_switch program doing both streams' work (the default: it reads the clock
once) and with one program per stream (--debug split-switch: the second program at a
switch takes the first one's time)."""
import numpy as np
import pytest

from tt_run import helper, needs_root, records, tailtrace

pytestmark = needs_root


@pytest.mark.parametrize("split", [False, True], ids=["one_program", "split"])
def test_runq_switch_in_equals_switch_on_to_the_nanosecond(tmp_path, split):
    debug = ["--debug", "split-switch"] if split else []
    p = tailtrace(tmp_path, *debug, "--events", "runq,switch", "--", helper("sleeper"), "500",
                  "100")
    assert p.returncode == 0, p.stderr
    rq, sw = records(tmp_path, "runq"), records(tmp_path, "switch")
    assert len(rq) >= 400 and len(sw) >= 400
    on = set(zip(sw["tid"].tolist(), sw["t_on_ns"].tolist()))
    same = np.array([(t, r) in on for t, r in zip(rq["tid"].tolist(), rq["t_run_ns"].tolist())])
    # every interval that both streams closed at the same switch carries one timestamp;
    # the few left are switch-ins one stream saw without the other (counted as unmatched)
    assert same.mean() >= 0.99, same.mean()
    # and runnable time starts inside the off-CPU interval it ends
    off = dict(zip(zip(sw["tid"].tolist(), sw["t_on_ns"].tolist()), sw["t_off_ns"].tolist()))
    starts = [(r0, off[(t, r1)]) for t, r0, r1 in
              zip(rq["tid"].tolist(), rq["t_runnable_ns"].tolist(), rq["t_run_ns"].tolist())
              if (t, r1) in off]
    assert all(r0 >= t_off for r0, t_off in starts)
