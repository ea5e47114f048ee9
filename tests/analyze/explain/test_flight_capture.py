"""A flight-recorder capture explains each request as the whole recording does.

Property, over random windows, store chunk sizes, store lengths, ring-buffer poll
periods and capture times: the records of a synthetic pre-fork server
(synth_server.py: several processes, waits woken by other processes, a heavy tail)
go through the recorder's own store and capture code (tests/probes/flight_replay.c:
probes/flight/flight_store.c, probes/flight/flight_window.c), and the capture, analysed as a run
directory, must

  - hold only requests of the whole run, each once;
  - decompose every request that overlaps the trigger window and that its records
    can cover (started after the oldest record the store held, ended FLIGHT_ARRIVE
    before the capture was written), and give it the parts the whole run gives it;
  - give every request it decomposes the whole run's parts (within 1%);
  - have bands whose parts add up to their latency, no share above 100%.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from synth_server import write_server_run
from analyze.explain.attribute import df_bands
from analyze.explain.attribute import check_summary
from analyze.explain.decompose import PARTS, df_decompose
from analyze.load.load import load_run
from analyze.load.schema import load_schema

ROOT = Path(__file__).resolve().parents[3]
REPLAY = Path(os.environ.get("TT_BUILD", ROOT / "build")) / "tests" / "probes" / "flight_replay"
ARRIVE_NS = 300_000_000          # FLIGHT_ARRIVE_NS (probes/flight/flight_window.h)
WIDEN_MAX_NS = 10_000_000_000    # FLIGHT_WIDEN_MAX_NS
MARGIN_NS = 20_000_000           # --flight-margin-ms default
SEEDS = 3
CASES = 24
PART_COLS = [f"{p}_ns" for p in PARTS]
KEY = ["tid", "t_start_ns", "t_end_ns"]


@pytest.fixture(scope="module")
def wholes(tmp_path_factory):
    if not REPLAY.exists():
        pytest.fail(f"{REPLAY} not built: run cmake --build build")
    schema = load_schema()
    out = []
    for seed in range(SEEDS):
        d = write_server_run(tmp_path_factory.mktemp(f"whole{seed}"), schema, seed)
        out.append((d, df_decompose(load_run(d))))
    return out


def _capture(whole: Path, out: Path, t0: int, t1: int, now: int, chunk: int, keep: int,
             poll: int, seed: int) -> dict:
    """Replay the whole run into a capture of [t0, t1] written at now; the capture's
    meta.json and tasks.bin as the recorder's capture_write writes them."""
    out.mkdir()
    r = subprocess.run([str(REPLAY), str(whole), str(out), str(t0), str(t1), str(now),
                        str(chunk), str(keep), str(poll), str(seed)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    meta = json.loads((whole / "meta.json").read_text())
    meta.update(mono_start_ns=plan["r0"], mono_end_ns=plan["r1"],
                capture={"t0_ns": t0, "t1_ns": t1})
    (out / "meta.json").write_text(json.dumps(meta))
    for f in ("schema.json", "tasks.bin"):
        shutil.copy(whole / f, out / f)
    return plan


def _window(rng, d: pd.DataFrame) -> tuple[int, int]:
    """A trigger window: a slow request ± the margin, sometimes coalesced with a second."""
    slow = d[d["latency_ns"] >= d["latency_ns"].quantile(0.95)]
    a = slow.iloc[int(rng.integers(len(slow)))]
    t0, t1 = int(a["t_start_ns"]) - MARGIN_NS, int(a["t_end_ns"]) + MARGIN_NS
    if rng.random() < 0.3:
        b = slow.iloc[int(rng.integers(len(slow)))]
        t0, t1 = min(t0, int(b["t_start_ns"]) - MARGIN_NS), max(t1, int(b["t_end_ns"]) + MARGIN_NS)
    return t0, t1


@pytest.mark.parametrize("case", range(CASES))
def test_a_capture_gives_each_request_the_whole_runs_parts(wholes, tmp_path, case):
    rng = np.random.default_rng(7000 + case)
    whole_dir, whole = wholes[case % SEEDS]
    t0, t1 = _window(rng, whole)
    now = t1 + ARRIVE_NS + int(rng.choice([0, 50, 400, 2000])) * 1_000_000
    chunk = int(rng.choice([160, 333, 1024, 4096, 65536, 1 << 20]))
    keep = int(rng.choice([400, 1000, 5000, 60000])) * 1_000_000
    poll = int(rng.choice([1, 40, 150, 250])) * 1_000_000
    plan = _capture(whole_dir, tmp_path / "cap", t0, t1, now, chunk, keep, poll, case)
    cap = df_decompose(load_run(tmp_path / "cap"))

    # only the whole run's requests, each once
    joined = cap.merge(whole, on=KEY, how="left", suffixes=("", "_whole"), indicator=True)
    assert (joined["_merge"] == "both").all(), "the capture holds a request the run never had"
    assert not cap.duplicated(KEY).any()

    # every request of the trigger window that its records can cover is decomposed
    floor = max(plan["oldest_ns"] + 1, t0 - WIDEN_MAX_NS)
    ceil = min(now - ARRIVE_NS, t1 + WIDEN_MAX_NS)
    w = whole
    must = w[(w["t_end_ns"] >= t0) & (w["t_start_ns"] <= t1)
             & (w["t_start_ns"] >= floor) & (w["t_end_ns"] <= ceil)]
    got = must.merge(cap, on=KEY, how="left", suffixes=("_whole", ""))
    missing = got[got["check"].astype(object).ne("ok")]
    assert missing.empty, (f"{len(missing)} of {len(must)} requests of the window were not "
                           f"explained (window {t0}..{t1}, records {plan['r0']}..{plan['r1']}, "
                           f"checks {missing['check'].astype(object).tolist()[:5]})")

    # each request the capture decomposes has the whole run's parts
    ok = joined[joined["check"].astype(object) == "ok"]
    assert len(ok) >= len(must)
    for c in PART_COLS:
        np.testing.assert_allclose(ok[c].to_numpy(float), ok[f"{c}_whole"].to_numpy(float),
                                   rtol=0.01, atol=1000, err_msg=c)

    # its bands add up, no share above 100% (a store that no longer held the window
    # gives an empty capture)
    if not len(cap):
        assert must.empty
        return
    bands = df_bands(cap)
    chk = check_summary(cap, bands)
    assert all(chk["bands_add_up"].values()), chk["bands_add_up"]
    known = bands[bands["n"] > bands["n_unknown"]]      # a band of unknown parts only has none
    shares = known[[f"{p}_share" for p in PARTS] + ["runnable_share"]].to_numpy(float)
    assert np.nanmax(shares) <= 1.0 + 1e-9
    assert np.allclose(known["parts_share"].to_numpy(float), 1.0, atol=0.01)
