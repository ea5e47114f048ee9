"""Every figure the headline writes beside a name is that name's figure: a property test over
synthetic mixes of what held the CPU while a request waited (one process dominant, several
equal, many small), each checked against the mix as built and against summary.json.

The request (thread 101 of pid 100, [0, 100 ms]) runs 10 ms and is preempted for 90 ms on
CPU 0, during which other processes (pids 1000 + k, one thread each) hold the CPU for the
durations the mix draws, back to back: so the runnable part dominates the headline, and each
process's share of the wait is its duration over 90 ms, known by construction."""
import re

import numpy as np
import pytest

from fixtures import MS, make_run, occ, occupant, off, req, rq, task
from analyze.explain.attribute import df_bands
from analyze.explain.decompose import df_decompose
from analyze.explain.findings import Findings
from analyze.render.summary import summary_dict

WAIT_NS = 90 * MS
VICTIM, VICTIM_PID = 101, 100


def _mix(kind: str, rng) -> list[int]:
    """Durations (ns, summing to WAIT_NS) of the processes that held the CPU."""
    if kind == "dominant":   # one holds 60-95%, 2-11 others share the rest
        top, rest = rng.uniform(0.6, 0.95), rng.uniform(0.5, 1.5, rng.integers(2, 12))
        w = np.r_[top, (1 - top) * rest / rest.sum()]
    elif kind == "equal":
        w = np.ones(rng.integers(2, 6))
    else:   # many small, one a little larger
        w = np.r_[rng.uniform(3, 6), rng.uniform(0.5, 1.5, rng.integers(30, 80))]
    ns = np.floor(w / w.sum() * WAIT_NS).astype(np.int64)
    ns[-1] += WAIT_NS - ns.sum()
    return ns.tolist()


def _run(durations: list[int]):
    occs, t = [occ(0, 0, VICTIM, pid=VICTIM_PID)], 10 * MS
    for k, d in enumerate(durations):
        occs.append(occ(0, t, 1000 + k))
        t += d
    occs.append(occ(0, t, VICTIM, pid=VICTIM_PID))
    return make_run(
        requests=[req(1, VICTIM, 0, 100 * MS)],
        switches=[off(VICTIM, 10 * MS, 100 * MS, voluntary=False, pid=VICTIM_PID)],
        runq=[rq(VICTIM, 10 * MS, 100 * MS, "preempt", pid=VICTIM_PID)],
        tasks=[task(VICTIM, "victim", pid=VICTIM_PID)],
        occupancy=occs,
        occupants=[occupant(VICTIM, "victim", pid=VICTIM_PID)]
        + [occupant(1000 + k, f"proc{k}") for k in range(len(durations))],
        meta={"ncpus": 2, "cgroups": {"1": "/"}})


def _pct(text: str) -> float:
    return float(text) / 100


def _close(written: float, true: float) -> bool:
    """A share as the headline rounds it: to 1% from 10% up, to 0.1% below."""
    return abs(written - true) <= (0.005 if true >= 0.0995 else 0.0005) + 1e-9


CLASS = re.compile(r"(?:waited behind|were preempted by) (\d[\d,]*) processes for ([\d.]+)% of "
                   r"that time, the most (\S+) \(pid (\d+).*?\) for ([\d.]+)%")
ONE = re.compile(r"(?:waited behind|were preempted by) (\S+) \(pid (\d+).*?\) for ([\d.]+)% "
                 r"of that time")


@pytest.mark.parametrize("seed", range(24))
def test_every_share_in_the_headline_is_the_share_of_what_it_names(seed):
    rng = np.random.default_rng(seed)
    kind = ("dominant", "equal", "many")[seed % 3]
    durations = _mix(kind, rng)
    run = _run(durations)
    d = df_decompose(run)
    s = summary_dict(Findings(run, d, df_bands(d)))
    head = s["headline"]
    true = {1000 + k: ns / WAIT_NS for k, ns in enumerate(durations)}
    summary = s["antagonists"]["≥P99"]
    assert summary["by_class"]["other"] == pytest.approx(1.0)
    assert summary["processes"]["other"] == len(durations)
    for t in summary["top"]:
        if t["pid"] is not None:
            assert t["share"] == pytest.approx(true[t["pid"]]), t
    if m := CLASS.search(head):
        n, cls_share, name, pid, share = m.groups()
        assert int(n.replace(",", "")) == len(durations), head
        assert _close(_pct(cls_share), 1.0), head
        top = max(true, key=true.get)
        assert int(pid) == top and name == f"proc{top - 1000}", head
        assert _close(_pct(share), true[top]), head
    else:
        m = ONE.search(head)
        assert m, head
        name, pid, share = m.groups()
        assert name == f"proc{int(pid) - 1000}", head
        assert _close(_pct(share), true[int(pid)]), head
        # a process named alone holds at least half of the class's time
        assert true[int(pid)] >= 0.5, head
