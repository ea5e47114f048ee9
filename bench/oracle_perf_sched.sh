#!/usr/bin/env bash
# Oracle for tailtrace's run-queue latency: one httpload run (default naive
# model, 100 connections, against orders-server) recorded at the same time by
# tailtrace (runq + switch) and by perf (the scheduler tracepoints `perf sched`
# reads, without sched_waking: see below); bench/oracle_compare.py rebuilds
# every runnable interval from perf's raw events, matches it to tailtrace's
# (runq.bin) by switch-in, and sums both per thread for the 10 busiest
# threads, over the intervals perf saw whole (perf drops events silently on
# this VM). Acceptance: every thread within 2%, and perf saw at least 70% of
# each thread's intervals whole (oracle_compare.py prints PASS, FAIL or
# INCONCLUSIVE and sets the exit status: 0, 1, or 3 when every thread agrees
# but perf dropped too much of one to vouch for it).
#
# With --antagonists, tailtrace also records its cpu event and bench/oracle_antagonists.py
# compares who held the CPU during each runnable interval with perf's switches (PASS when
# the same task held it in both for >= 99% of the runnable time perf vouches for).
#
#   bench/oracle_perf_sched.sh [--requests N] [--conns C] [--model M] [--top K] [--tol F]
#                              [--antagonists] [--out DIR]
#   bench/oracle_perf_sched.sh --requests 2000 --conns 10     # smoke test, a few seconds
#
# Run as root. The orders-server it starts is stopped on exit, Ctrl-C included.
set -euo pipefail
ME=oracle_perf_sched.sh
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$TOP/build}
REQUESTS=200000
CONNS=100
MODEL=naive
TOPN=10
TOL=0.02
SERVER_WORKERS=$(nproc)
OUT=""
ANTAGONISTS=0
SERVER_PID=""
TMP=$(mktemp -d)
. "$TOP/bench/tt_bench_lib.sh"

usage() {
	cat <<EOF
usage: bench/oracle_perf_sched.sh [options]
$(load_opts_help requests conns model)
  --top K        busiest threads compared (default $TOPN)
  --tol F        relative tolerance (default $TOL)
  --antagonists  also compare who held the CPU (tailtrace's cpu event) with perf
  --out DIR      keep everything here (default results/<UTC time>-oracle-perf-sched)
  -h, --help     this help
EOF
}

while [ "$#" -gt 0 ]; do
	case $1 in
	--top) TOPN=$(num_arg "$1" "${2-}"); shift ;;
	--tol) TOL=${2-}; shift ;;
	--antagonists) ANTAGONISTS=1 ;;
	-h | --help) usage; exit 0 ;;
	*) load_opt "$1" "${2-}" || die "unknown option '$1' (see --help)"; shift ;;
	esac
	shift
done
check_model "$MODEL"
[ "$(id -u)" -eq 0 ] || die "needs root (perf sched record and BPF): run it as root"
command -v perf >/dev/null || die "perf not found: apt-get install linux-perf"
need_load_bins
OUT=${OUT:-results/$(date -u +%Y%m%dT%H%M%SZ)-oracle-perf-sched}
mkdir -p "$OUT"

trap cleanup EXIT INT TERM

server_start "$TMP/server.log" --workers "$SERVER_WORKERS"
echo "$ME: orders-server on port $SERVER_PORT; httpload --model $MODEL --conns $CONNS --requests $REQUESTS"
# perf record is system-wide; tailtrace follows only httpload's threads. The events are
# perf sched record's: a wait opens at sched_waking, as in tailtrace and perf sched.
# -k mono: perf's default clock is the per-CPU sched_clock, and a wakeup and its switch-in
# are often on different vCPUs; tailtrace's CLOCK_MONOTONIC is one clock (without it some
# threads differed by 14-19 %).
perf_record_load -a -R -c 1 -m 64M -k mono -e sched:sched_switch -e sched:sched_waking \
	-e sched:sched_wakeup_new -- "runq,switch$([ "$ANTAGONISTS" = 1 ] && echo ,cpu)"
perf script --ns -F cpu,time,event,trace -i "$OUT/perf.data" >"$OUT/perf-script.txt" \
	2>"$OUT/perf-script.err" || die "perf script failed: $(tail -1 "$OUT/perf-script.err")"
grep -i 'lost' "$OUT/perf-script.err" || true
echo "$ME: tailtrace lost events: $(json_get "$OUT/tailtrace/meta.json" 'd["lost_events"]')"
rc=0
python3 "$TOP/bench/oracle_compare.py" --run "$OUT/tailtrace" --perf-script "$OUT/perf-script.txt" \
	--top "$TOPN" --tol "$TOL" || rc=$?
if [ "$ANTAGONISTS" = 1 ]; then
	python3 "$TOP/bench/oracle_antagonists.py" --run "$OUT/tailtrace" \
		--perf-script "$OUT/perf-script.txt" || rc=$((rc ? rc : $?))
fi
exit "$rc"
