#!/usr/bin/env bash
# Overhead of tracing on httpload throughput (default: naive model, 100
# connections, against one orders-server), alternating the modes in every
# round (A B C D, then D C B A, ...) so that drift on a shared machine hits
# them alike:
#   none       httpload alone
#   default    tailtrace with its default events (runq,switch,offcpu,cpu) -- httpload
#   fp, dwarf  the same with --user-stacks fp (frame pointers) or dwarf (copied stacks unwound
#              by call-frame information): what the walk costs, either way of the default
#   aggregate  tailtrace --aggregate -- httpload
#   listen     tailtrace --listen (the Prometheus exporter) -- httpload, scraped every second
#              (by one scraper process for the whole bench: start_scraper)
#   listencpu  the same with --events runq,switch,offcpu,cpu: run-queue wait by antagonist
#   perf       perf sched record -- httpload
#   runqlat    libbpf-tools' runqlat (system-wide run-queue latency histogram,
#              the leanest tracer of the same events) running during httpload
#   events=A+B tailtrace --events A,B -- httpload (e.g. events=runq+switch+offcpu+locks)
#   spanfloor  hook_floor --usdt (an empty program on httpload's request__span USDT
#              mark) -- tailtrace (default events) -- httpload: the floor under the
#              flight mode's spans (the trap and running any program there)
#   hooks      build/bench/hook_floor -- httpload: empty programs on the hooks
#              --aggregate uses (tp_btf sched_switch, sched_waking): the floor
#              that no tracer of these events goes below
#   spans      tailtrace --span on httpload's USDT request marks, to disk (the default
#              events and the spans, all recorded): the recorder's kernel side
#   flight     tailtrace --flight-recorder 30 with a trigger that never fires (latency>3600s),
#              httpload's USDT request mark as the spans (request__span, one a request):
#              the recorder's standing cost
#   flightpair the same with the pair of marks, request__start,request__done (two a request)
#   alt        $TAILTRACE_ALT (another tailtrace binary, e.g. an older build) -- httpload
#   altlisten  $TAILTRACE_ALT --listen -- httpload, scraped like listen
# Prints per mode (bench/ab_stats.py): median throughput, its ratio to `none`,
# the per-round ratios (each mode against the `none` run of the same round):
# their median and geometric mean with a 95 % confidence interval, and a
# verdict against the target (met / not met / unresolved: more rounds),
# tailtrace's own CPU share and the events it lost.
# Targets: default >= 0.95, aggregate and listen >= 0.97.
#
#   bench/overhead.sh [--requests N | --duration S] [--conns C] [--model M] [--repeats R]
#                     [--modes LIST] [--out DIR]
#   bench/overhead.sh --requests 2000 --conns 10 --repeats 1    # smoke test, a few seconds
#
# Run as root. Raw results: OUT/results.jsonl. The orders-server it starts is
# stopped on exit, Ctrl-C included.
set -euo pipefail
ME=overhead.sh
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$TOP/build}
REQUESTS=200000
DURATION=""
CONNS=100
MODEL=naive
REPEATS=5
MODES=none,default,aggregate,perf
SERVER_WORKERS=$(nproc)
OUT=""
SERVER_PID=""
MODE_NAMES=none,default,fp,dwarf,aggregate,listen,listencpu,spanfloor,spans,perf,runqlat,hooks,flight,flightpair,alt,altlisten # and events=A+B
TMP=$(mktemp -d)
. "$TOP/bench/tt_bench_lib.sh"

usage() {
	cat <<EOF
usage: bench/overhead.sh [options]
  --requests N   httpload requests per measurement (default $REQUESTS)
  --duration S   httpload runs S seconds per measurement instead (many short
                 rounds resolve a few per cent better than few long ones)
$(load_opts_help conns model)
  --repeats R    rounds; each round runs every mode once (default $REPEATS)
  --modes LIST   of $MODE_NAMES,events=A+B (default $MODES)
  --out DIR      raw results (default results/<UTC time>-bench-overhead)
  -h, --help     this help
EOF
}

while [ "$#" -gt 0 ]; do
	case $1 in
	--repeats) REPEATS=$(num_arg "$1" "${2-}"); shift ;;
	--modes) MODES=${2-}; shift ;;
	-h | --help) usage; exit 0 ;;
	*) load_opt "$1" "${2-}" || die "unknown option '$1' (see --help)"; shift ;;
	esac
	shift
done
check_model "$MODEL"
mode_re="(${MODE_NAMES//,/|}|events=[a-z+]+)"
[[ $MODES =~ ^$mode_re(,$mode_re)*$ ]] ||
	die "--modes expects a list of $MODE_NAMES,events=A+B, got '$MODES'"
[[ ,$MODES, != *,alt,* && ,$MODES, != *,altlisten,* ]] || [ -x "${TAILTRACE_ALT:-}" ] ||
	die "modes alt and altlisten need TAILTRACE_ALT=/path/to/another/tailtrace"
[[ ,$MODES, == *,none,* ]] || die "--modes must include none (the baseline of every ratio)"
[ "$REPEATS" -ge 1 ] || die "--repeats must be at least 1"
[ "${DURATION:-1}" -ge 1 ] || die "--duration must be at least 1 second"
[ "$(id -u)" -eq 0 ] || die "needs root (BPF, perf): run it as root"
need_load_bins
[[ ,$MODES, != *,perf,* ]] || command -v perf >/dev/null || die "perf not found: apt-get install linux-perf"
RUNQLAT=${RUNQLAT:-/usr/sbin/runqlat}
[[ ,$MODES, != *,runqlat,* ]] || [ -x "$RUNQLAT" ] ||
	die "mode runqlat needs $RUNQLAT: apt-get install libbpf-tools (or RUNQLAT=/path/to/runqlat)"
HOOK_FLOOR=$BUILD/bench/hook_floor
[[ ,$MODES, != *,hooks,* && ,$MODES, != *,spanfloor,* ]] || need_bin "$HOOK_FLOOR"
OUT=${OUT:-results/$(date -u +%Y%m%dT%H%M%SZ)-bench-overhead}
mkdir -p "$OUT"
RESULTS=$OUT/results.jsonl
: >"$RESULTS"

trap cleanup EXIT INT TERM

LISTEN_PORT=$(port_free)

with_runqlat() { # CMD...: run CMD while libbpf-tools' runqlat traces the machine
	local rc=0
	start_tracer 5 "$TMP/runqlat.out" '^Tracing' stdbuf -oL "$RUNQLAT" # attached once it says so
	"$@" || rc=$?
	stop_tracer
	grep -q 'usecs' "$TMP/runqlat.out" || die "runqlat printed no histogram: $(tail -2 "$TMP/runqlat.out")"
	return "$rc"
}

measure() { # mode round: one httpload run under that mode; appends a JSON line
	local mode=$1 round=$2 run="$TMP/tt" lost="null" share="null" line disk=0 rss="null"
	local load=("$HTTPLOAD" --model "$MODEL" --conns "$CONNS" "${AMOUNT[@]}"
		--url "http://127.0.0.1:$SERVER_PORT/orders" --json)
	rm -rf "$run"
	case $mode in
	none) "${load[@]}" >"$TMP/out" 2>"$TMP/err" ;;
	default) "$TAILTRACE" --out "$run" -- "${load[@]}" >"$TMP/out" 2>"$TMP/err" ;;
	fp | dwarf) "$TAILTRACE" --user-stacks "$mode" --out "$run" -- "${load[@]}" \
		>"$TMP/out" 2>"$TMP/err" ;;
	aggregate) "$TAILTRACE" --aggregate --out "$run" -- "${load[@]}" >"$TMP/out" 2>"$TMP/err" ;;
	listen) "$TAILTRACE" --listen "127.0.0.1:$LISTEN_PORT" --out "$run" -- "${load[@]}" \
		>"$TMP/out" 2>"$TMP/err" ;;
	listencpu) "$TAILTRACE" --listen "127.0.0.1:$LISTEN_PORT" --events runq,switch,offcpu,cpu \
		--out "$run" -- "${load[@]}" >"$TMP/out" 2>"$TMP/err" ;;
	events=*) "$TAILTRACE" --events "$(tr + , <<<"${mode#events=}")" --out "$run" -- "${load[@]}" \
		>"$TMP/out" 2>"$TMP/err" ;;
	hooks) "$HOOK_FLOOR" -- "${load[@]}" >"$TMP/out" 2>"$TMP/err" ;;
	spanfloor) "$HOOK_FLOOR" --usdt "$HTTPLOAD:httpload:request__span" \
		-- "$TAILTRACE" --out "$run" -- "${load[@]}" \
		>"$TMP/out" 2>"$TMP/err" ;;
	spans) "$TAILTRACE" --out "$run" --span "usdt:$HTTPLOAD:httpload:request" -- "${load[@]}" \
		>"$TMP/out" 2>"$TMP/err" ;;
	flight) "$TAILTRACE" --flight-recorder 30 --trigger 'latency>3600s' --out "$run" \
		--span "usdt:$HTTPLOAD:httpload:request" -- "${load[@]}" >"$TMP/out" 2>"$TMP/err" ;;
	flightpair) "$TAILTRACE" --flight-recorder 30 --trigger 'latency>3600s' --out "$run" \
		--span "usdt:$HTTPLOAD:httpload:request__start,request__done" -- "${load[@]}" \
		>"$TMP/out" 2>"$TMP/err" ;;
	alt) "$TAILTRACE_ALT" --out "$run" -- "${load[@]}" >"$TMP/out" 2>"$TMP/err" ;;
	altlisten) "$TAILTRACE_ALT" --listen "127.0.0.1:$LISTEN_PORT" --out "$run" -- "${load[@]}" \
		>"$TMP/out" 2>"$TMP/err" ;;
	perf) perf sched record -o "$TMP/perf.data" -- "${load[@]}" >"$TMP/out" 2>"$TMP/err" ;;
	runqlat) with_runqlat "${load[@]}" >"$TMP/out" 2>"$TMP/err" ;;
	esac || die "$mode run $round failed: $(grep -v '^\[' "$TMP/err" | tail -2)"
	line=$(grep '^{' "$TMP/out" | tail -1)
	[ -n "$line" ] || die "$mode run $round: httpload printed no JSON summary"
	if [ -f "$run/meta.json" ]; then
		lost=$(json_get "$run/meta.json" 'json.dumps(d["lost_events"])')
		share=$(json_get "$run/meta.json" 'json.dumps(d.get("cost", {}).get("cpu_share_of_machine"))')
		rss=$(json_get "$run/meta.json" 'json.dumps(d.get("cost", {}).get("loader_max_rss_kb"))')
		disk=$(du -sb "$run" | cut -f1)
	fi
	python3 -c 'import json,sys
s = json.loads(sys.argv[3])
print(json.dumps({"mode": sys.argv[1], "round": int(sys.argv[2]), "rps": s["throughput_rps"],
                  "errors": s["errors"], "requests": s["requests"], "lost": json.loads(sys.argv[4]),
                  "cpu_share": json.loads(sys.argv[5]), "disk_bytes": int(sys.argv[6]),
                  "loader_max_rss_kb": json.loads(sys.argv[7])}))' \
		"$mode" "$round" "$line" "$lost" "$share" "$disk" "$rss" >>"$RESULTS"
	rm -f "$TMP/perf.data"
	printf '%s: round %d %-9s %10.1f req/s  lost %s\n' "$ME" "$round" "$mode" \
		"$(json_get <(echo "$line") 'd["throughput_rps"]')" "$lost"
}

AMOUNT=(--requests "$REQUESTS")
[ -z "$DURATION" ] || AMOUNT=(--duration "$DURATION")
server_start "$TMP/server.log" --workers "$SERVER_WORKERS"
[[ ,$MODES, != *,listen,* && ,$MODES, != *,altlisten,* && ,$MODES, != *,listencpu,* ]] ||
	start_scraper
echo "$ME: orders-server on port $SERVER_PORT; httpload --model $MODEL --conns $CONNS" \
	"${AMOUNT[*]}; $REPEATS rounds of $MODES"
ab_rounds "$REPEATS" "$MODES" "$RESULTS"
