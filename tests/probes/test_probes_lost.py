"""Loss accounting: a context-switch storm into a one-page ring buffer must
report lost events (meta.json and the final line); the default buffers lose
nothing at the same kind of load."""
from __future__ import annotations

import re

from tt_run import helper, meta, needs_root, records, tailtrace

pytestmark = needs_root


def final_counts(stderr: str) -> tuple[dict[str, int], dict[str, int]]:
    line = stderr.strip().splitlines()[-1]
    written, lost = re.match(r"tailtrace: events written (.*); lost (.*)$", line).groups()
    parse = lambda s: {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", s)}
    return parse(written), parse(lost)


def test_tiny_ring_buffer_reports_loss(tmp_path):
    rounds = 50000
    p = tailtrace(tmp_path, "--ringbuf-mb", "0", "--events", "runq,switch", "--",
                  helper("pingpong"), str(rounds))
    assert p.returncode == 0, p.stderr
    m = meta(tmp_path)
    lost = m["lost_events"]["switch"] + m["lost_events"]["runq"]
    assert lost > 0
    written, lost_line = final_counts(p.stderr)
    assert lost_line["switch"] == m["lost_events"]["switch"]
    assert lost_line["runq"] == m["lost_events"]["runq"]
    # what was written is on disk, and written + lost covers the storm
    assert written["switch"] == len(records(tmp_path, "switch")) == m["events"]["switch"]
    assert m["events"]["switch"] + m["lost_events"]["switch"] >= rounds


def test_default_ring_buffers_lose_nothing(tmp_path):
    rounds = 30000
    p = tailtrace(tmp_path, "--events", "runq,switch", "--", helper("pingpong"), str(rounds))
    assert p.returncode == 0, p.stderr
    m = meta(tmp_path)
    assert m["lost_events"] == {"switch": 0, "tasks": 0, "runq": 0}
    sw = records(tmp_path, "switch")
    assert len(sw) >= rounds  # each round blocks at least one of the two threads
    written, lost = final_counts(p.stderr)
    assert set(lost.values()) == {0} and written["switch"] == len(sw)
