"""Loader under corrupted input (mutation tests): a run directory whose .bin files,
schema.json, meta.json or workload.json are truncated, bit-flipped or of the wrong
shape either loads (the damage is in record values the loader cannot judge) or
raises AnalysisError naming the damaged file. Never another exception (a traceback)."""
from __future__ import annotations

import json
import random
import shutil

import pytest

from fixtures import MS, lk, off, req, rq, span, task, write_run
from analyze.__main__ import main as analyze_main
from analyze.load.errors import AnalysisError
from analyze.load.load import load_run
from analyze.load.schema import load_schema

SEED = 20261123
CASES_PER_MUTATOR = 60


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    schema = load_schema()
    return write_run(
        tmp_path_factory.mktemp("pristine") / "run", schema,
        meta={"lost_events": {"runq": 3}, "ncpus": 2, "target": {"pid": 100}},
        workload={"model": "pool", "conns": 4},
        stacks=[{"stream": "switches", "id": 4, "kind": "kernel", "frames": ["schedule"]}],
        requests=[req(i, 11, i * MS, i * MS + 900_000) for i in range(20)],
        runq=[rq(11, 1 * MS, 2 * MS, "wakeup", cpu=1, waker=12), rq(11, 4 * MS, 7 * MS, "preempt")],
        switches=[off(11, 1 * MS, 2 * MS, kstack=4), off(11, 4 * MS, 7 * MS, voluntary=False)],
        locks=[lk(11, 0xdead0000beef, 1 * MS, 3 * MS, 4 * MS)],
        spans=[span(11, 0, 10 * MS, ret=7)],
        tasks=[task(11, "pool-w3"), task(12, "naive-c17")])


BIN_FILES = ["requests.bin", "runq.bin", "switches.bin", "locks.bin", "spans.bin", "tasks.bin"]
JSON_FILES = ["schema.json", "meta.json", "workload.json"]
WRONG_SHAPES = [b"[]", b"null", b"42", b'"text"', b"{}", b'{"records": 3}',
                b'{"lost_events": "many"}', b'{"lost_events": {"runq": "x"}}',
                b'{"lost_events": [1, 2]}', b'{"records": {"request": {"fields": 1}}}',
                b'{"magic": 7, "header_size": -1, "records": {}}', b"\xff\xfe\x00garbage"]


def truncate(rng, data: bytes) -> bytes:
    return data[:rng.randrange(len(data))] if data else data


def flip(rng, data: bytes, header_only=False) -> bytes:
    if not data:
        return data
    b = bytearray(data)
    span_ = min(len(b), 16) if header_only else len(b)
    for _ in range(rng.randint(1, 4)):
        b[rng.randrange(span_)] ^= 1 << rng.randrange(8)
    return bytes(b)


def json_schema_field(rng, data: bytes) -> bytes:
    """A well-formed schema.json with one record field's type, size or offset damaged."""
    s = json.loads(data)
    kind = rng.choice(sorted(s["records"]))
    rec = s["records"][kind]
    f = rng.choice(rec["fields"])
    what = rng.choice(["type", "offset", "count", "size", "drop", "type_id"])
    if what == "type":
        f["type"] = rng.choice(["u128", "", None, 3])
    elif what == "offset":
        f["offset"] = rng.choice([-8, 10 ** 6, "x"])
    elif what == "count":
        f["count"] = rng.choice([0, -1, 10 ** 9])
    elif what == "size":
        rec["size"] = rng.choice([0, 1, 7, 10 ** 6])
    elif what == "type_id":
        rec["type"] = rng.choice([0, 99, "request"])
    else:
        rec["fields"].remove(f)
    return json.dumps(s).encode()


MUTATORS = {
    "bin_truncate": (BIN_FILES, truncate),
    "bin_header_flip": (BIN_FILES, lambda rng, d: flip(rng, d, header_only=True)),
    "bin_any_flip": (BIN_FILES, flip),
    "json_truncate": (JSON_FILES, truncate),
    "json_flip": (JSON_FILES, flip),
    "json_wrong_shape": (JSON_FILES, lambda rng, d: rng.choice(WRONG_SHAPES)),
    "schema_field": (["schema.json"], json_schema_field),
}


def mutated_run(pristine, tmp_path, rng, files, mutate):
    run = tmp_path / "run"
    if run.exists():
        shutil.rmtree(run)
    shutil.copytree(pristine, run)
    name = rng.choice(files)
    path = run / name
    path.write_bytes(mutate(rng, path.read_bytes()))
    return run, path


@pytest.mark.parametrize("mutator", sorted(MUTATORS))
def test_corrupt_input_loads_or_names_the_file(pristine, tmp_path, mutator):
    files, mutate = MUTATORS[mutator]
    rng = random.Random(f"{SEED}-{mutator}")
    refused = 0
    for case in range(CASES_PER_MUTATOR):
        run, path = mutated_run(pristine, tmp_path, rng, files, mutate)
        try:
            load_run(run)
        except AnalysisError as e:
            refused += 1
            msg = str(e)
            assert "\n" not in msg, (case, msg)
            assert path.name in msg, f"case {case}: {path.name} damaged, message: {msg}"
        # any other exception fails the test with its traceback: that is the bug
    if mutator in ("bin_truncate", "bin_header_flip", "json_truncate"):
        assert refused >= CASES_PER_MUTATOR // 2, refused  # the damage is visible: mostly refused


@pytest.mark.parametrize("mutator", ["bin_any_flip", "json_wrong_shape", "schema_field"])
def test_corrupt_input_report_is_one_line_or_done(pristine, tmp_path, mutator, capsys):
    """The whole report on damaged input: done, or exit 2 with one `analyze:` line."""
    files, mutate = MUTATORS[mutator]
    rng = random.Random(f"{SEED}-report-{mutator}")
    for case in range(12):
        run, path = mutated_run(pristine, tmp_path, rng, files, mutate)
        rc = analyze_main(["report", str(run), "--no-plots"])
        err = capsys.readouterr().err.strip()
        assert rc in (0, 2), (case, rc)
        if rc == 2:
            assert err.startswith("analyze: ") and "\n" not in err, (case, err)
            assert path.name in err, (case, path.name, err)
