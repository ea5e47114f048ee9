#!/usr/bin/env bash
# What the cpu event (who held the CPU) costs a machine whose traced target is quiet while
# an unrelated process is busy (docs/benchmarks.md, "Who held the CPU").
#
#   bench/occupancy_cost.sh [--rounds R] [--pingpong N]
#
# The neighbour: tests/probes/tt-pingpong N 2 (two pairs of threads passing a byte back and
# forth: tens of thousands of context switches a second), never traced. The target:
# tt-sleeper, one thread that sleeps 1 ms at a time. Modes, alternating in every round:
#   none   the neighbour beside the sleeper, untraced
#   base   tailtrace --events runq,switch,offcpu -- sleeper, beside the neighbour
#   cpu    tailtrace --events runq,switch,offcpu,cpu -- sleeper (every switch on the machine
#          is noted; records only around the sleeper's waits)
# Prints per mode: the neighbour's median switches a second and its ratio to none;
# tailtrace's BPF time and loader CPU a second; the cpu records it wrote.
set -euo pipefail
ME=occupancy_cost.sh
top=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$top/build}
TMP=$(mktemp -d)
# shellcheck source=bench/tt_bench_lib.sh
. "$top/bench/tt_bench_lib.sh"
SLEEPER=""
trap 'stop_tracer; stop_pid "$SLEEPER"; rm -rf "$TMP"' EXIT

ROUNDS=5 PINGPONG=200000
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) ROUNDS=$(num_arg "$1" "${2-}"); shift 2 ;;
	--pingpong) PINGPONG=$(num_arg "$1" "${2-}"); shift 2 ;;
	-h | --help) sed -n '2,16p' "$0"; exit 0 ;;
	*) die "unknown option $1 (see --help)" ;;
	esac
done
TT=$BUILD/probes/tailtrace
need_bin "$TT"
need_bin "$BUILD/tests/probes/tt-pingpong"
need_bin "$BUILD/tests/probes/tt-sleeper"

run_mode() { # mode round -> "switches/s bpf_ms/s loader_ms/s cpu_records"
	local mode=$1 out=$TMP/run-$1-$2 t0 t1 ev
	case $mode in
	base) ev=runq,switch,offcpu ;;
	cpu) ev=runq,switch,offcpu,cpu ;;
	esac
	if [ "$mode" != none ]; then
		start_tracer 10 "$TMP/tt.log" "attached to" "$TT" --out "$out" --bpf-stats always \
			--events "$ev" -- "$BUILD/tests/probes/tt-sleeper" 1000000 1000
	else # the same sleeper, untraced: it keeps the CPUs out of deep idle alike
		"$BUILD/tests/probes/tt-sleeper" 1000000 1000 >/dev/null &
		SLEEPER=$!
	fi
	t0=$(date +%s%N)
	"$BUILD/tests/probes/tt-pingpong" "$PINGPONG" 2 >/dev/null
	t1=$(date +%s%N)
	stop_tracer
	[ "$mode" != none ] || stop_pid "$SLEEPER"
	python3 - "$out" "$PINGPONG" "$t0" "$t1" <<'EOF'
import json, sys, os
out, rounds, t0, t1 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
sw = 2 * 2 * rounds / ((t1 - t0) / 1e9)     # each round blocks both threads of each pair
if not os.path.exists(f"{out}/meta.json"):
    print(f"{sw:.0f} 0 0 0")
else:
    m = json.load(open(f"{out}/meta.json"))
    c, d = m["cost"], m["duration_s"]
    print(f"{sw:.0f} {c['bpf_total_ns'] / 1e6 / d:.2f} {c['loader_cpu_ns'] / 1e6 / d:.2f} "
          f"{m['events'].get('cpu', 0)}")
EOF
}

modes=(none base cpu)
for m in "${modes[@]}"; do : >"$TMP/$m"; done
for r in $(seq "$ROUNDS"); do
	for m in $(round_order "$r" "${modes[@]}"); do
		v=$(run_mode "$m" "$r")
		echo "$v" >>"$TMP/$m"
		echo "round $r $m: switches/s bpf_ms/s loader_ms/s cpu_records = $v"
	done
done
python3 - "$TMP" "${modes[@]}" <<'EOF'
import statistics, sys
tmp, modes = sys.argv[1], sys.argv[2:]
rows = {m: [list(map(float, l.split())) for l in open(f"{tmp}/{m}")] for m in modes}
base = statistics.median(r[0] for r in rows["none"])
print(f"{'mode':6} {'neighbour switches/s':>21} {'ratio':>6} {'BPF ms/s':>9} {'loader ms/s':>12} {'cpu records':>12}")
for m in modes:
    med = lambda i: statistics.median(r[i] for r in rows[m])
    print(f"{m:6} {med(0):21,.0f} {med(0) / base:6.3f} {med(1):9.2f} {med(2):12.2f} {med(3):12,.0f}")
EOF
