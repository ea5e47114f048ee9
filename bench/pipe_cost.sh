#!/usr/bin/env bash
# Per-event cost of a tracer, from the scheduler's own hot path: `perf bench
# sched pipe` pinned to one CPU (each op: two context switches, two wakeups),
# with nothing attached, with libbpf-tools' runqlat, and with tailtrace in the
# given modes, all system-wide and alternating in every round. Prints the
# median usecs/op of each and what each tracer adds to an op. Much steadier
# than a throughput A/B (overhead.sh): no network stack, no 100-thread
# scheduling lottery; what it leaves out is cache pressure from a large
# working set.
#
#   bench/pipe_cost.sh [--rounds R] [--loops N] [--modes LIST]
#     LIST of none,runqlat,aggregate,default,alt (default: the first four);
#     alt: $TAILTRACE_ALT --all (another tailtrace build, e.g. before a change)
#
# Run as root.
set -euo pipefail
ME=pipe_cost.sh
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$TOP/build}
ROUNDS=8
LOOPS=200000
MODES=none,runqlat,aggregate,default
TMP=$(mktemp -d)
. "$TOP/bench/tt_bench_lib.sh"

usage() {
	sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
}

while [ "$#" -gt 0 ]; do
	case $1 in
	--rounds) ROUNDS=$(num_arg "$1" "${2-}"); shift ;;
	--loops) LOOPS=$(num_arg "$1" "${2-}"); shift ;;
	--modes) MODES=${2-}; shift ;;
	-h | --help) usage; exit 0 ;;
	*) die "unknown option '$1' (see --help)" ;;
	esac
	shift
done
mode_re='(none|runqlat|aggregate|default|alt)'
[[ $MODES =~ ^$mode_re(,$mode_re)*$ ]] || die "--modes expects a list of none,runqlat,aggregate,default,alt, got '$MODES'"
[[ ,$MODES, == *,none,* ]] || die "--modes must include none (the baseline)"
[[ ,$MODES, != *,alt,* ]] || [ -x "${TAILTRACE_ALT:-}" ] ||
	die "mode alt needs TAILTRACE_ALT=/path/to/another/tailtrace"
[ "$ROUNDS" -ge 1 ] || die "--rounds must be at least 1"
[ "$(id -u)" -eq 0 ] || die "needs root (BPF): run it as root"
command -v perf >/dev/null || die "perf not found: apt-get install linux-perf"
RUNQLAT=${RUNQLAT:-/usr/sbin/runqlat}
[[ ,$MODES, != *,runqlat,* ]] || [ -x "$RUNQLAT" ] ||
	die "mode runqlat needs $RUNQLAT: apt-get install libbpf-tools (or RUNQLAT=/path/to/runqlat)"
TAILTRACE=$BUILD/probes/tailtrace
need_bin "$TAILTRACE"

trap cleanup EXIT INT TERM

pipe_op_us() {
	taskset -c 1 perf bench sched pipe -T -l "$LOOPS" 2>&1 | awk '/usecs\/op/ {print $1}'
}

measure() { # mode: one pipe run under it; prints usecs/op
	case $1 in
	none) ;;
	runqlat) start_tracer 10 "$TMP/log" '^Tracing' stdbuf -oL "$RUNQLAT" ;;
	aggregate) start_tracer 10 "$TMP/log" 'attached' "$TAILTRACE" --aggregate --all --out "$TMP/tt" ;;
	default) start_tracer 10 "$TMP/log" 'attached' "$TAILTRACE" --all --out "$TMP/tt" ;;
	alt) start_tracer 10 "$TMP/log" 'attached' "$TAILTRACE_ALT" --all --out "$TMP/tt" ;;
	esac
	local us
	us=$(pipe_op_us)
	stop_tracer
	rm -rf "$TMP/tt"
	[ -n "$us" ] || die "perf bench sched pipe printed no usecs/op under $1"
	echo "$us"
}

IFS=, read -r -a modes <<<"$MODES"
: >"$TMP/results"
echo "$ME: taskset -c 1 perf bench sched pipe -T -l $LOOPS; $ROUNDS rounds of $MODES"
for round in $(seq "$ROUNDS"); do
	mapfile -t order < <(round_order "$round" "${modes[@]}")
	for mode in "${order[@]}"; do
		us=$(measure "$mode")
		echo "$mode $us" >>"$TMP/results"
		printf '%s: round %d %-9s %8.3f usecs/op\n' "$ME" "$round" "$mode" "$us"
	done
done
python3 - "$TMP/results" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    mode, us = line.split()
    runs.setdefault(mode, []).append(float(us))
base = statistics.median(runs["none"])
print(f"\n{'mode':10} {'usecs/op':>9} {'added':>7}  (median of {len(runs['none'])} runs)")
for mode, v in runs.items():
    m = statistics.median(v)
    print(f"{mode:10} {m:9.3f} {m - base:+7.3f}")
PY
