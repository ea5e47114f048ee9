"""Loss accounting: the consumer (tailtrace) is stalled with SIGSTOP for
0.3 s during a context-switch storm (4 ping-pong pairs). With one-page ring
buffers (--ringbuf-mb 0) events must be lost and reported (meta.json and the
final line); the default buffers absorb the same stall and lose nothing."""
from __future__ import annotations

import re
import signal
import subprocess
import time

from tt_run import TAILTRACE, helper, meta, needs_root, records, wait_target_running

pytestmark = needs_root
ROUNDS, PAIRS, STALL_S = 30000, 4, 0.3


def final_counts(stderr: str) -> tuple[dict[str, int], dict[str, int]]:
    line = stderr.strip().splitlines()[-1]
    written, lost = re.match(r"tailtrace: events written ([^;]*); lost ([^;]*)", line).groups()
    parse = lambda s: {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", s)}
    return parse(written), parse(lost)


def stalled_storm(out, *args: str) -> tuple[int, str]:
    target = helper("pingpong")
    cmd = [str(TAILTRACE), "--out", str(out), "--events", "runq,switch", *args, "--",
           target, str(ROUNDS), str(PAIRS)]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        first = p.stderr.readline()
        assert first.startswith("tailtrace: attached"), first
        wait_target_running(p.pid, target, threads=1 + 2 * PAIRS)  # the storm is on
        p.send_signal(signal.SIGSTOP)
        time.sleep(STALL_S)
        p.send_signal(signal.SIGCONT)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    return p.returncode, first + err


def test_tiny_ring_buffer_reports_loss(tmp_path):
    rc, err = stalled_storm(tmp_path, "--ringbuf-mb", "0")
    assert rc == 0, err
    m = meta(tmp_path)
    assert m["lost_events"]["switch"] > 0 and m["lost_events"]["runq"] > 0
    written, lost = final_counts(err)
    assert lost["switch"] == m["lost_events"]["switch"]
    assert lost["runq"] == m["lost_events"]["runq"]
    # what was written is on disk, and written + lost covers the storm
    assert written["switch"] == len(records(tmp_path, "switch")) == m["events"]["switch"]
    assert m["events"]["switch"] + m["lost_events"]["switch"] >= ROUNDS * PAIRS


def test_default_ring_buffers_absorb_the_stall(tmp_path):
    rc, err = stalled_storm(tmp_path)
    assert rc == 0, err
    m = meta(tmp_path)
    assert m["lost_events"] == {"switch": 0, "tasks": 0, "runq": 0}
    sw = records(tmp_path, "switch")
    assert len(sw) >= ROUNDS * PAIRS  # each round blocks at least one thread of a pair
    written, lost = final_counts(err)
    assert set(lost.values()) == {0} and written["switch"] == len(sw)
