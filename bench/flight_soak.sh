#!/usr/bin/env bash
# The flight recorder for a long time (docs/benchmarks.md, "Flight recorder"):
#
#   bench/flight_soak.sh [--minutes M] [--rate R] [--out DIR]
#
# httpload (pool, 20 connections) at R requests/s open loop against orders-server for M
# minutes under tailtrace --flight-recorder 60 --trigger p99.9 --listen, the exporter
# scraped every second (OpenMetrics). Every minute: the loader's RSS (VmRSS) and the
# recorder's memory and captures from the scrape. Prints the RSS series, its growth from
# the second minute to the end, captures a minute against the budget, and lost events.
set -euo pipefail
ME=flight_soak.sh
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$TOP/build}
MINUTES=60 RATE=2000 OUT=""
TMP=$(mktemp -d)
. "$TOP/bench/tt_bench_lib.sh"
trap cleanup EXIT INT TERM
while [ $# -gt 0 ]; do
	case $1 in
	--minutes) MINUTES=$(num_arg "$1" "${2-}"); shift 2 ;;
	--rate) RATE=$(num_arg "$1" "${2-}"); shift 2 ;;
	--out) OUT=$2; shift 2 ;;
	-h | --help) sed -n '2,11p' "$0"; exit 0 ;;
	*) die "unknown option $1 (see --help)" ;;
	esac
done
[ "$(id -u)" = 0 ] || die "run as root (BPF)"
need_load_bins
OUT=${OUT:-$TOP/results/$(date -u +%Y%m%dT%H%M%SZ)-bench-flight-soak}
mkdir -p "$OUT"
server_start "$TMP/server.log" --workers 4 --sleep-us 500
PORT=$(port_free)
"$TAILTRACE" --flight-recorder 60 --trigger p99.9 --listen "127.0.0.1:$PORT" \
	--span "usdt:$HTTPLOAD:httpload:request" --out "$OUT/run" -- \
	"$HTTPLOAD" --model pool --conns 20 --rate "$RATE" --duration "$((MINUTES * 60))" \
	--url "http://127.0.0.1:$SERVER_PORT/orders" >"$OUT/tailtrace.out" 2>"$OUT/tailtrace.err" &
TT=$!
echo "$ME: $MINUTES min at $RATE req/s; scraping http://127.0.0.1:$PORT/metrics every second"
: >"$OUT/series.tsv"
next_min=$(( $(date +%s) + 60 ))
scrapes=0 failed=0
while kill -0 "$TT" 2>/dev/null; do
	if curl -s -m 2 -H 'Accept: application/openmetrics-text; version=1.0.0' \
		"http://127.0.0.1:$PORT/metrics" -o "$TMP/m"; then
		scrapes=$((scrapes + 1))
	else
		failed=$((failed + 1))
	fi
	if [ "$(date +%s)" -ge "$next_min" ] && [ -s "$TMP/m" ]; then
		rss=$(awk '/^VmRSS/ { print $2 }' "/proc/$TT/status" 2>/dev/null || echo 0)
		mem=$(awk '/^tailtrace_flight_memory_bytes / { print $2 }' "$TMP/m")
		caps=$(awk '/^tailtrace_flight_captures_total/ { s += $2 } END { print s + 0 }' "$TMP/m")
		printf '%s\t%s\t%s\t%s\n' "$(( (next_min - 60) ))" "$rss" "$mem" "$caps" >>"$OUT/series.tsv"
		next_min=$((next_min + 60))
	fi
	sleep 1
done
wait "$TT" || die "tailtrace failed: $(tail -2 "$OUT/tailtrace.err")"
python3 - "$OUT" "$scrapes" "$failed" <<'PY'
import json, sys
out, scrapes, failed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rows = [l.split("\t") for l in open(out + "/series.tsv") if l.strip()]
rss = [int(r[1]) / 1024 for r in rows]
mem = [float(r[2]) / 2**20 for r in rows]
caps = [int(r[3]) for r in rows]
meta = json.load(open(out + "/run/meta.json"))
fl = meta["flight"]
print("minute  RSS MB  recorder MB  captures")
for i, (a, b, c) in enumerate(zip(rss, mem, caps), 1):
    print(f"{i:6d} {a:7.1f} {b:12.1f} {c:9d}")
if len(rss) > 2:
    print(f"RSS from minute 2 to the end: {rss[1]:.1f} -> {rss[-1]:.1f} MB "
          f"({rss[-1] - rss[1]:+.1f} MB); most {max(rss):.1f} MB")
per_min = [b - a for a, b in zip(caps, caps[1:])]
if per_min:
    print(f"captures a minute: at most {max(per_min)} (budget {fl['max_captures_per_min']})")
print(f"scrapes {scrapes}, failed {failed}; spans {fl['spans']}, triggers {fl['triggers']}, "
      f"captures {fl['captures']}, disk {fl['disk_bytes'] / 2**20:.1f} MB; "
      f"lost {meta['lost_events']}")
PY
