#!/usr/bin/env bash
# trace.perfetto-trace against the run's records and against trace.json: reads the native
# trace back (analyze/render/pftrace.py check_against_records) and prints how many of the
# run's switch, run-queue and request records it holds, beside meta.json's counts, and the
# bytes per event of both trace files; then writes it again into a scratch file and prints
# how long write_perfetto_trace took (the run analysed first, not counted).
#
# Usage: bench/perfetto_trace.sh [RUN_DIR]
#   RUN_DIR  an analysed run (default: a fresh ./run.sh --workload naive --conns 100 --duration 30)
set -euo pipefail
ME=perfetto_trace.sh
BUILD=${BUILD:-build}
# shellcheck source=bench/tt_bench_lib.sh
. "$(dirname "$0")/tt_bench_lib.sh"
cd "$TT_TOP"

case ${1:-} in
-h | --help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
run=${1:-}
if [ -z "$run" ]; then
	run=$(mktemp -d)/naive-c100
	log "recording ./run.sh --workload naive --conns 100 --duration 30 into $run"
	./run.sh --workload naive --conns 100 --duration 30 --out "$run" >/dev/null
fi
[ -f "$run/trace.perfetto-trace" ] || die "$run has no trace.perfetto-trace: python3 -m analyze report $run"
python3 - "$run" <<'PY'
import json, sys, time
from pathlib import Path
from analyze.load.load import load_run
import tempfile
from analyze.pipeline import analyse
from analyze.render.pftrace import check_against_records, write_perfetto_trace
run_dir = Path(sys.argv[1])
t = time.monotonic()
c = check_against_records(load_run(run_dir), run_dir / "trace.perfetto-trace")
ev = json.loads((run_dir / "meta.json").read_text())["events"]
tr = json.loads((run_dir / "summary.json").read_text())["trace"]
native_events = c["switches_in_trace"] + c["wakings_in_trace"] + 2 * c["request_slices"]
nb, jb = (run_dir / "trace.perfetto-trace").stat().st_size, (run_dir / "trace.json").stat().st_size
print(f"switch records: {c['switch_records']:,} + {c['gap_records']:,} gaps = meta.json {ev['switch']:,}; "
      f"switch-ins found {c['switch_ins_found']:,}, switch-outs found {c['switch_outs_found']:,}")
print(f"runq records: {c['runq_records']:,} (meta.json {ev['runq']:,}): wakeups {c['wakeups']:,}, "
      f"found {c['wakeups_found']:,}; preemptions {c['preemptions']:,}, found {c['preemptions_found']:,}")
print(f"request slices: {c['request_slices']:,}")
print(f"trace.perfetto-trace: {nb/1e6:.1f} MB, {native_events:,} events (switches, wakings, "
      f"request begin/end), {nb/native_events:.1f} B/event")
print(f"trace.json: {jb/1e6:.1f} MB, {tr['events']:,} events{' (capped)' if tr['truncated'] else ''}, "
      f"{jb/tr['events']:.1f} B/event")
print(f"ratio of bytes per event: {(nb/native_events)/(jb/tr['events']):.3f}  (checked in {time.monotonic()-t:.1f} s)")
findings = analyse(load_run(run_dir))["findings"]
with tempfile.TemporaryDirectory() as tmp:
    t = time.monotonic()
    write_perfetto_trace(findings, Path(tmp) / "trace.perfetto-trace")
    print(f"write_perfetto_trace: {time.monotonic() - t:.1f} s")
PY
