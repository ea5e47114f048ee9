#!/usr/bin/env bash
# Overhead of tracing on httpload throughput, measured inside each workload
# run: tailtrace --toggle-ms P attaches and detaches every program in turn
# (P ms each) while httpload (default naive/100 against one orders-server)
# records its requests; bench/interleave_stats.py then compares the
# completion rate of attached and detached windows, on-off-on triplets of
# neighbouring windows. bench/overhead.sh compares separate runs, seconds
# apart, and this machine's throughput drifts by ~10 % from one run to the
# next: a 1 % question needs hundreds of its rounds. Here both halves share
# every second of the machine's state.
#
# What it leaves out: tailtrace's loader runs in both halves (its CPU share
# is printed beside the ratio and subtracted in "with it"), and the programs
# start each attached window without the state of the detached one (the
# first switches of every thread are unmatched), as at any attach.
#
#   bench/overhead_interleave.sh [--mode listen|aggregate|default] [--period-ms P]
#                                [--duration S] [--repeats R] [--model M] [--conns C]
#                                [--guard-ms G] [--out DIR]
#
# Run as root. Raw results: OUT/run<K>/ (tailtrace) and OUT/run<K>/hl/ (httpload).
set -euo pipefail
ME=overhead_interleave.sh
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$TOP/build}
MODE=listen PERIOD_MS=500 DURATION=30 REPEATS=3 MODEL=naive CONNS=100 GUARD_MS=50 OUT=""
TMP=$(mktemp -d)
. "$TOP/bench/tt_bench_lib.sh"

usage() {
	cat <<EOF
usage: bench/overhead_interleave.sh [options]
  --mode MODE     listen (the exporter, scraped every second), aggregate or
                  default (records) (default $MODE)
  --period-ms P   attached P ms, detached P ms, ... (default $PERIOD_MS)
  --duration S    seconds per httpload run (default $DURATION)
  --repeats R     runs (default $REPEATS)
$(load_opts_help conns model)
  --guard-ms G    left out at the start of every window (default $GUARD_MS)
  --out DIR       raw results (default results/<UTC time>-bench-overhead-interleave)
  -h, --help      this help
EOF
}

while [ "$#" -gt 0 ]; do
	case $1 in
	--mode) MODE=${2-}; shift ;;
	--period-ms) PERIOD_MS=$(num_arg "$1" "${2-}"); shift ;;
	--repeats) REPEATS=$(num_arg "$1" "${2-}"); shift ;;
	--guard-ms) GUARD_MS=$(num_arg "$1" "${2-}"); shift ;;
	-h | --help) usage; exit 0 ;;
	*) load_opt "$1" "${2-}" || die "unknown option '$1' (see --help)"; shift ;;
	esac
	shift
done
need_load_bins
check_model "$MODEL"
[[ $MODE =~ ^(listen|aggregate|default)$ ]] || die "--mode expects listen, aggregate or default, got '$MODE'"
[ "$PERIOD_MS" -ge 50 ] || die "--period-ms must be at least 50 (each change patches the kernel)"
[ "$(id -u)" = 0 ] || die "run as root (BPF)"
OUT=${OUT:-results/$(date -u +%Y%m%dT%H%M%SZ)-bench-overhead-interleave}
mkdir -p "$OUT"
trap cleanup EXIT INT TERM
server_start "$TMP/server.log" --workers "$(nproc)"
LISTEN_PORT=$(port_free)
case $MODE in
listen) mode_args=(--listen "127.0.0.1:$LISTEN_PORT"); start_scraper ;;
aggregate) mode_args=(--aggregate) ;;
default) mode_args=() ;;
esac
echo "$ME: orders-server on port $SERVER_PORT; httpload --model $MODEL --conns $CONNS" \
	"--duration $DURATION; tailtrace ${mode_args[*]} --toggle-ms $PERIOD_MS; $REPEATS runs"
dirs=()
for k in $(seq "$REPEATS"); do
	run=$OUT/run$k
	rm -rf "$run"
	"$TAILTRACE" "${mode_args[@]}" --toggle-ms "$PERIOD_MS" --out "$run" -- \
		"$HTTPLOAD" --model "$MODEL" --conns "$CONNS" --duration "$DURATION" \
		--url "http://127.0.0.1:$SERVER_PORT/orders" --out "$run/hl" --json \
		>"$TMP/out" 2>"$TMP/err" || die "run $k failed: $(grep -v '^\[' "$TMP/err" | tail -2)"
	echo "$ME: run $k: $(grep '^{' "$TMP/out" | tail -1 | python3 -c \
		'import json,sys; print(round(json.load(sys.stdin)["throughput_rps"]), "req/s")')"
	dirs+=("$run" "$run/hl")
done
python3 "$TOP/bench/interleave_stats.py" --guard-ms "$GUARD_MS" "${dirs[@]}"
echo "$ME: raw results in $OUT"
