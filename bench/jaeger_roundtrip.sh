#!/usr/bin/env bash
# A run's requests in a real Jaeger: builds Jaeger v1.76 once from the Go module proxy into
# $TT_JAEGER_CACHE (default /var/cache/tailtrace/jaeger), starts it (OTLP/HTTP on 4318, query
# API and UI on 16686, in-memory storage), exports the run with `python3 -m analyze export otlp`
# and compares what Jaeger's /api/traces returns with the run's own decomposition
# (bench/jaeger_check.py): every request found, durations equal to the microsecond, the
# tailtrace.*_ns tags equal to the request's parts and adding up to its duration.
# With a flight-recorder run, the same for `python3 -m analyze captures DIR --otlp URL`.
#
# Usage: bench/jaeger_roundtrip.sh [--keep] [RUN_DIR]
#   RUN_DIR  a run to export (default: a fresh ./run.sh --workload pool --conns 100)
#   --keep   leave Jaeger running afterwards (UI: http://127.0.0.1:16686)
set -euo pipefail
ME=jaeger_roundtrip.sh
BUILD=${BUILD:-build}
TMP=$(mktemp -d)
# shellcheck source=bench/tt_bench_lib.sh
. "$(dirname "$0")/tt_bench_lib.sh"
cd "$TT_TOP"

keep=0 run=""
while [ $# -gt 0 ]; do
	case $1 in
	--keep) keep=1; shift ;;
	-h | --help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	-*) die "unknown option $1 (see --help)" ;;
	*) run=$1; shift ;;
	esac
done

cache=${TT_JAEGER_CACHE:-/var/cache/tailtrace/jaeger}
JAEGER=$cache/jaeger
export PATH=$PATH:/usr/local/go/bin
jaeger_build() {
	[ -x "$JAEGER" ] && return 0
	command -v go >/dev/null || die "Go is needed to build Jaeger: run scripts/install-deps.sh"
	log "building Jaeger v1.76.0 into $cache (once; a few minutes)"
	mkdir -p "$cache/src"
	(
		cd "$cache/src"
		[ -f go.mod ] || go mod init tailtrace-jaeger-build >/dev/null 2>&1
		go get -tool github.com/jaegertracing/jaeger/cmd/jaeger@v1.76.0
		go build -o "$JAEGER" github.com/jaegertracing/jaeger/cmd/jaeger
	) >"$TMP/build.log" 2>&1 || die "Jaeger did not build: $(tail -3 "$TMP/build.log")"
}

jaeger_pid=""
cleanup() {
	[ "$keep" = 1 ] || stop_pid "$jaeger_pid"
	rm -rf "$TMP"
}
trap cleanup EXIT

jaeger_build
port_check_free 4318
port_check_free 16686
"$JAEGER" --config "$TT_TOP/bench/jaeger.yaml" >"$TMP/jaeger.log" 2>&1 &
jaeger_pid=$!
for _ in $(seq 200); do
	curl -sf http://127.0.0.1:16686/api/services >/dev/null 2>&1 && break
	kill -0 "$jaeger_pid" 2>/dev/null || die "Jaeger exited: $(tail -3 "$TMP/jaeger.log")"
	sleep 0.1
done
log "Jaeger $("$JAEGER" version 2>/dev/null | head -c 80 || true) on :4318 (OTLP) and :16686 (UI)"

if [ -z "$run" ]; then
	run=$TMP/pool-c100
	./run.sh --workload pool --conns 100 --duration 5 --out "$run" --no-flamegraph >"$TMP/run.log" 2>&1 ||
		die "run.sh failed: $(tail -3 "$TMP/run.log")"
fi
service=tt-$(date +%s%N | tail -c 9)
if [ -d "$run/captures" ]; then
	python3 -m analyze captures "$run" --no-plots --otlp http://127.0.0.1:4318/v1/traces >"$TMP/export.log"
	python3 bench/jaeger_check.py --captures "$run" --query http://127.0.0.1:16686
else
	python3 -m analyze export otlp "$run" --service "$service" >"$TMP/export.log"
	cat "$TMP/export.log"
	python3 bench/jaeger_check.py "$run" --service "$service" --query http://127.0.0.1:16686
fi
[ "$keep" = 0 ] || log "Jaeger left running (pid $jaeger_pid): http://127.0.0.1:16686/search?service=$service"
