#!/usr/bin/env bash
# Does the flight recorder catch rare stalls and explain them? (docs/benchmarks.md,
# "Flight recorder")
#
#   bench/flight_stalls.sh [--minutes M] [--variants cpu,lock] [--rate R]
#                          [--every-ms E] [--stall-ms S] [--out DIR]
#
# httpload (pool, 50 connections) sends R requests/s, open loop, to an orders-server
# with 16 workers whose requests each wait 2 ms (so a few are always in flight), for M
# minutes under tailtrace --flight-recorder 30 --trigger p99.9 --max-captures-per-min 30,
# the server traced too (--also-pid), httpload's USDT request marks as the spans. Every E
# ms a stall of S ms is injected, logged with its CLOCK_MONOTONIC times:
#   cpu   tests/probes/tt-stall: SCHED_FIFO spinners on every CPU (nothing else runs)
#   lock  orders-server --stall-every-ms/--stall-ms: its orders-ledger thread holds the
#         lock every order takes
# The injection starts 20 s in (the p99.9 trigger's warm-up). bench/flight_eval.py then
# prints, per variant: stalls captured (a capture window overlaps the stall), captures
# whose headline names the stall's cause (tt-stall; orders-ledger), the captured requests'
# decomposition closure, the live threshold against the true P99.9 of the last minute of
# httpload's own requests.bin at every 10 s sample, and the recorder's cost.
set -euo pipefail
ME=flight_stalls.sh
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$TOP/build}
MINUTES=10 VARIANTS=cpu,lock RATE=3000 EVERY_MS=5000 STALL_MS=30 OUT="" WARMUP_S=20
TMP=$(mktemp -d)
. "$TOP/bench/tt_bench_lib.sh"
trap cleanup EXIT INT TERM

while [ $# -gt 0 ]; do
	case $1 in
	--minutes) MINUTES=$2; shift 2 ;;
	--variants) VARIANTS=$2; shift 2 ;;
	--rate) RATE=$(num_arg "$1" "${2-}"); shift 2 ;;
	--every-ms) EVERY_MS=$(num_arg "$1" "${2-}"); shift 2 ;;
	--stall-ms) STALL_MS=$(num_arg "$1" "${2-}"); shift 2 ;;
	--out) OUT=$2; shift 2 ;;
	-h | --help) sed -n '2,21p' "$0"; exit 0 ;;
	*) die "unknown option $1 (see --help)" ;;
	esac
done
[[ $VARIANTS =~ ^(cpu|lock)(,(cpu|lock))*$ ]] || die "--variants wants cpu, lock or cpu,lock"
[ "$(id -u)" = 0 ] || die "run as root (BPF, SCHED_FIFO)"
need_load_bins
STALL=$BUILD/tests/probes/tt-stall
need_bin "$STALL"
OUT=${OUT:-$TOP/results/$(date -u +%Y%m%dT%H%M%SZ)-bench-flight}
mkdir -p "$OUT"
DURATION=$(python3 -c "print(int(float('$MINUTES') * 60))")

run_variant() { # cpu|lock
	local v=$1 dir=$OUT/$1 server_args=() inj=""
	mkdir -p "$dir"
	[ "$v" = lock ] && server_args=(--stall-every-ms "$EVERY_MS" --stall-ms "$STALL_MS"
		--stall-log "$dir/stalls.txt")
	# the lock stalls start with the server: hold them back by the warm-up too
	server_start "$TMP/server.log" --workers 16 --sleep-us 2000 "${server_args[@]}"
	if [ "$v" = cpu ]; then
		(sleep "$WARMUP_S"; exec "$STALL" "$EVERY_MS" "$STALL_MS" \
			"$((DURATION - WARMUP_S))" "$dir/stalls.txt") &
		inj=$!
	fi
	echo "$ME: $v: $MINUTES min at $RATE req/s, a $STALL_MS ms stall every $EVERY_MS ms"
	"$TAILTRACE" --flight-recorder 30 --trigger p99.9 --max-captures-per-min 30 \
		--also-pid "$SERVER_PID" --span "usdt:$HTTPLOAD:httpload:request" --out "$dir/run" -- \
		"$HTTPLOAD" --model pool --conns 50 --rate "$RATE" --duration "$DURATION" \
		--url "http://127.0.0.1:$SERVER_PORT/orders" --out "$dir/run" \
		>"$dir/tailtrace.out" 2>"$dir/tailtrace.err" || die "$v: tailtrace failed: $(tail -2 "$dir/tailtrace.err")"
	[ -z "$inj" ] || wait "$inj"
	stop_pid "$SERVER_PID"
	SERVER_PID=""
	grep -h "flight recorder: [0-9]" "$dir/tailtrace.err" || true
	python3 -m analyze captures "$dir/run" --no-plots >"$dir/captures.txt" 2>&1 ||
		die "$v: analyze captures failed: $(tail -2 "$dir/captures.txt")"
	python3 "$TOP/bench/flight_eval.py" --variant "$v" --warmup-s "$WARMUP_S" "$dir"
}

IFS=, read -r -a vs <<<"$VARIANTS"
for v in "${vs[@]}"; do run_variant "$v"; done
echo "$ME: runs in $OUT"
