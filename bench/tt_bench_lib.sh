# Shared by the bench/*.sh scripts (sourced, not run), on top of the project's shell
# library (scripts/lib/common.sh: die, port_free, pg_start, server_start, ...).
# Needs: ME (script name), BUILD, TMP (for cleanup and the server's log). Sets
# SERVER_PID, SERVER_PORT (server_start); start_tracer sets TRACER; need_load_bins sets
# TAILTRACE, HTTPLOAD and TT_SERVER; wrk_post_lua writes the wrk script both workload
# benches post orders with.

TT_ME=$ME TT_DIE_STATUS=2 TT_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib/common.sh
. "$TT_TOP/scripts/lib/common.sh"
TT_SERVER=$BUILD/workloads/server/orders-server

num_arg() { # option value: a non-negative integer
	[[ $2 =~ ^[0-9]+$ ]] || die "$1 expects a non-negative integer, got '$2' (see --help)"
	echo "$2"
}

need_bin() { # path what-builds-it
	[ -x "$1" ] || die "$1 missing: build first (cmake -S . -B build -G Ninja && cmake --build build)"
}

stop_pid() { # pid: TERM, then KILL after 5 s; reaps it
	local pid=$1 i
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
	kill -TERM "$pid" 2>/dev/null || true
	for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}

start_tracer() { # timeout_s log pattern CMD...: CMD in the background (TRACER) until log has pattern
	local timeout_s=$1 log=$2 pattern=$3 i
	shift 3
	"$@" >"$log" 2>&1 &
	TRACER=$!
	for i in $(seq $((timeout_s * 20))); do
		grep -q "$pattern" "$log" 2>/dev/null && return 0
		kill -0 "$TRACER" 2>/dev/null || die "$* failed: $(tail -2 "$log")"
		sleep 0.05
	done
	die "$* did not attach within $timeout_s s: $(tail -2 "$log")"
}

stop_tracer() { # SIGINT to the tracer start_tracer started (it prints its summary), then reap it
	[ -n "${TRACER-}" ] || return 0
	kill -INT "$TRACER" 2>/dev/null || true
	wait "$TRACER" 2>/dev/null || true
	TRACER=""
}

round_order() { # round mode...: the modes in order in odd rounds, reversed in even ones (ABCD, DCBA, ...)
	local round=$1 i
	shift
	if ((round % 2)); then
		printf '%s\n' "$@"
	else
		for ((i = $#; i >= 1; i--)); do printf '%s\n' "${!i}"; done
	fi
}

ab_rounds() { # rounds modes-csv results: `measure MODE ROUND` (the caller's) for every mode of
	# every round in round_order, then the A/B summary of results (bench/ab_stats.py)
	local round mode modes order
	IFS=, read -r -a modes <<<"$2"
	for round in $(seq "$1"); do
		mapfile -t order < <(round_order "$round" "${modes[@]}")
		for mode in "${order[@]}"; do measure "$mode" "$round"; done
	done
	echo
	python3 "$TT_TOP/bench/ab_stats.py" "$3"
	echo "$ME: raw results in $3"
}

need_load_bins() { # tailtrace, httpload and orders-server, all built
	TAILTRACE=$BUILD/probes/tailtrace
	HTTPLOAD=$BUILD/workloads/httpload/httpload
	need_bin "$TAILTRACE"
	need_bin "$HTTPLOAD"
	need_bin "$TT_SERVER"
}

# load_opt OPTION VALUE: an httpload option every load bench takes (--requests,
# --duration, --conns, --model, --out) into REQUESTS, DURATION, CONNS, MODEL, OUT;
# status 1 when OPTION is none of them. A bad value ends the script (num_arg).
load_opt() {
	case $1 in
	--requests) REQUESTS=$(num_arg "$1" "$2") || exit 2 ;;
	--duration) DURATION=$(num_arg "$1" "$2") || exit 2 ;;
	--conns) CONNS=$(num_arg "$1" "$2") || exit 2 ;;
	--model) MODEL=$2 ;;
	--out) OUT=$2 ;;
	*) return 1 ;;
	esac
}

# load_opts_help NAME...: the --help lines of those load_opt options (requests,
# duration, conns, model), with the defaults set now.
load_opts_help() {
	local o
	for o in "$@"; do
		case $o in
		requests) echo "  --requests N   httpload requests (default $REQUESTS)" ;;
		duration) echo "  --duration S   httpload seconds per run (default $DURATION)" ;;
		conns) echo "  --conns C      httpload connections (default $CONNS)" ;;
		model) echo "  --model M      httpload model: naive, pool or async (default $MODEL)" ;;
		esac
	done
}

# perf_record_load PERF_ARGS... -- EVENTS: `perf record PERF_ARGS` (system-wide) around
# tailtrace --events EVENTS around httpload (MODEL, CONNS, REQUESTS) against the server
# server_start started. OUT gets perf.data, tailtrace/, httpload/, httpload.txt and
# record.err; a failed run ends the script.
perf_record_load() {
	local args=() rc
	while [ "$1" != -- ]; do args+=("$1"); shift; done
	shift
	perf record "${args[@]}" -o "$OUT/perf.data" -- \
		"$TAILTRACE" --events "$1" --out "$OUT/tailtrace" -- \
		"$HTTPLOAD" --model "$MODEL" --conns "$CONNS" --requests "$REQUESTS" \
		--url "http://127.0.0.1:$SERVER_PORT/orders" --out "$OUT/httpload" \
		>"$OUT/httpload.txt" 2>"$OUT/record.err" || {
		rc=$?
		cat "$OUT/record.err" >&2
		die "the recorded run failed with exit status $rc (see $OUT/record.err)"
	}
	grep '^tailtrace: events written' "$OUT/record.err" || true
	grep -i 'lost' "$OUT/record.err" | grep -v '^tailtrace' || true
}

check_model() { # httpload --model value
	[[ $1 =~ ^(naive|pool|async)$ ]] || die "--model expects naive, pool or async, got '$1'"
}

cleanup() { # trap handler: stop the servers we started, remove TMP, keep the exit status
	local rc=$?
	trap - EXIT INT TERM
	stop_tracer
	stop_pid "${SCRAPER_PID-}"
	stop_pid "${SERVER_PID-}"
	stop_pid "${NGINX_PID-}"
	rm -rf "$TMP"
	exit "$rc"
}

wrk_post_lua() { # file: a wrk script posting one JSON order shaped like httpload's
	cat >"$1" <<'EOF'
wrk.method = "POST"
wrk.body = '{"customer":1,"item":"widget-1","qty":1,"request":1}'
wrk.headers["Content-Type"] = "application/json"
EOF
}

json_get() { # file python-expression-on-d
	python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"
}

# A Prometheus for --listen runs: one process for the whole bench that GETs
# http://127.0.0.1:$LISTEN_PORT/metrics every second (refused while no
# exporter runs; OUT/scrapes.txt: time and size of each one answered), as a
# Prometheus scraping from elsewhere costs the host only the exporter's own work. A `curl` started per scrape cost ~7 ms of CPU each
# (0.35 % of this machine), charged to the listen runs, not to tailtrace.
# Needs LISTEN_PORT and OUT; cleanup stops it.
start_scraper() {
	python3 -c 'import socket, sys, time
addr, log = ("127.0.0.1", int(sys.argv[1])), open(sys.argv[2], "a", buffering=1)
while True:
    time.sleep(1)
    try:
        n = 0
        with socket.create_connection(addr, timeout=5) as s:
            s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            while b := s.recv(65536):
                n += len(b)
        log.write(f"{time.monotonic():.3f} {n}\n")
    except OSError:
        pass' "$LISTEN_PORT" "$OUT/scrapes.txt" &
	SCRAPER_PID=$!
}
