#!/usr/bin/env bash
# Oracle for tailtrace's wakers: one httpload run (default naive model, 100
# connections, against orders-server) recorded at the same time by tailtrace
# (runq + switch) and by `perf record` of sched_waking,
# system-wide, on CLOCK_MONOTONIC (tailtrace's clock, so times line up). Every
# tailtrace wakeup that blames a task is matched to perf's sched_waking of the
# same thread; the task current at that event is the waker by perf's account.
# Acceptance: tailtrace's waker tid agrees on at least --min-agree of the
# matched wakeups (bench/oracle_wakers.py prints PASS/FAIL and sets the exit
# status).
#
#   bench/oracle_wakers.sh [--requests N] [--conns C] [--model M] [--min-agree F] [--out DIR]
#   bench/oracle_wakers.sh --requests 2000 --conns 10     # smoke test, a few seconds
#
# Run as root. The orders-server it starts is stopped on exit, Ctrl-C included.
set -euo pipefail
ME=oracle_wakers.sh
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$TOP/build}
REQUESTS=50000
CONNS=100
MODEL=naive
MIN_AGREE=0.99
SERVER_WORKERS=$(nproc)
OUT=""
SERVER_PID=""
TMP=$(mktemp -d)
. "$TOP/bench/tt_bench_lib.sh"

usage() {
	cat <<EOF
usage: bench/oracle_wakers.sh [options]
$(load_opts_help requests conns model)
  --min-agree F    share of matched wakeups whose waker must agree (default $MIN_AGREE)
  --out DIR        keep everything here (default results/<UTC time>-oracle-wakers)
  -h, --help       this help
EOF
}

while [ "$#" -gt 0 ]; do
	case $1 in
	--min-agree) MIN_AGREE=${2-}; shift ;;
	-h | --help) usage; exit 0 ;;
	*) load_opt "$1" "${2-}" || die "unknown option '$1' (see --help)"; shift ;;
	esac
	shift
done
check_model "$MODEL"
[[ $MIN_AGREE =~ ^(0(\.[0-9]+)?|1(\.0*)?)$ ]] ||
	die "--min-agree expects a share in [0, 1], got '$MIN_AGREE'"
[ "$(id -u)" -eq 0 ] || die "needs root (perf record -a and BPF): run it as root"
command -v perf >/dev/null || die "perf not found: apt-get install linux-perf"
need_load_bins
OUT=${OUT:-results/$(date -u +%Y%m%dT%H%M%SZ)-oracle-wakers}
mkdir -p "$OUT"

trap cleanup EXIT INT TERM

server_start "$TMP/server.log" --workers "$SERVER_WORKERS"
echo "$ME: orders-server on port $SERVER_PORT; httpload --model $MODEL --conns $CONNS --requests $REQUESTS"
# perf records system-wide; tailtrace follows only httpload's threads.
perf_record_load -a -k mono -m 64M -e sched:sched_waking -- runq,switch
# --show-lost-events: "PERF_RECORD_LOST lost N" lines, summed by oracle_wakers.py.
perf script -i "$OUT/perf.data" --ns --show-lost-events -F comm,tid,pid,cpu,time,event,trace \
	>"$OUT/perf_script.txt" 2>"$OUT/perf_script.err" ||
	die "perf script failed: $(tail -1 "$OUT/perf_script.err")"
echo "$ME: tailtrace lost events: $(json_get "$OUT/tailtrace/meta.json" 'd["lost_events"]')"
python3 "$TOP/bench/oracle_wakers.py" --run "$OUT/tailtrace" --perf-script "$OUT/perf_script.txt" \
	--min-agree "$MIN_AGREE"
