#!/usr/bin/env bash
# What tracing costs real services: nginx under wrk and Redis under redis-benchmark, each
# with a span on a request function, against bpftrace measuring the same function
# (docs/benchmarks.md, "Third-party services").
#
#   bench/third_party_cost.sh [--rounds R] [--seconds S] [--services nginx,redis]
#
# Modes, alternating in every round (ABC, CBA, ...), each against a fresh server:
#   none      the service alone
#   span      tailtrace --pid PID --span BIN:FUNC (default events + the span)
#   bpftrace  bpftrace -p PID: uprobe + uretprobe on FUNC, a latency histogram
# nginx: one worker, wrk -t2 -c32 for S seconds, span /usr/sbin/nginx:ngx_http_process_request.
# Redis: redis-benchmark -c 16 -P 1 -t get,set for S seconds (-n by a first calibration run),
# span redis-server:call. Prints per service and mode the median throughput, its ratio to none
# and, for tailtrace, the loader's CPU per span record and its BPF time per event.
set -euo pipefail
ME=third_party_cost.sh
top=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$top/build}
TMP=$(mktemp -d)
# shellcheck source=bench/tt_bench_lib.sh
. "$top/bench/tt_bench_lib.sh"
NGINX_DIR="" REDIS_PID="" BT="" PORT="" SVC_PID="" SVC_BIN="" SVC_FN=""
cleanup() {
	stop_tracer
	[ -z "$BT" ] || { kill -INT "$BT" 2>/dev/null || true; wait "$BT" 2>/dev/null || true; }
	[ -z "$NGINX_DIR" ] || "$top/scripts/nginx-demo.sh" stop "$NGINX_DIR" >/dev/null 2>&1 || true
	stop_pid "$REDIS_PID"
	rm -rf "$TMP"
}
trap cleanup EXIT

ROUNDS=5 SECONDS_=5 SERVICES=nginx,redis
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) ROUNDS=$(num_arg "$1" "${2-}"); shift 2 ;;
	--seconds) SECONDS_=$(num_arg "$1" "${2-}"); shift 2 ;;
	--services) SERVICES=${2-}; shift 2 ;;
	-h | --help) sed -n '2,17p' "$0"; exit 0 ;;
	*) die "unknown option $1 (see --help)" ;;
	esac
done
TT=$BUILD/probes/tailtrace
need_bin "$TT"
[ "$(id -u)" -eq 0 ] || die "needs root (BPF): run it as root"
command -v bpftrace >/dev/null || die "bpftrace not found: bash scripts/install-deps.sh"

service_start() { # service: sets SVC_PID SVC_BIN SVC_FN PORT (in this shell)
	case $1 in
	nginx)
		eval "$("$top/scripts/nginx-demo.sh" start --workers 1 --env 2>/dev/null)"
		PORT=$NGINX_PORT SVC_PID=$NGINX_WORKERS SVC_BIN=/usr/sbin/nginx
		SVC_FN=ngx_http_process_request ;;
	redis)
		PORT=$(port_free)
		redis-server --port "$PORT" --bind 127.0.0.1 --save "" --appendonly no \
			--daemonize no >/dev/null 2>&1 </dev/null &
		REDIS_PID=$!
		for _ in $(seq 50); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.05; done
		SVC_PID=$REDIS_PID SVC_BIN=$(readlink -f "$(command -v redis-server)") SVC_FN=call ;;
	esac
}

service_stop() {
	case $1 in
	nginx) "$top/scripts/nginx-demo.sh" stop "$NGINX_DIR" >/dev/null; NGINX_DIR="" ;;
	redis) stop_pid "$REDIS_PID"; REDIS_PID="" ;;
	esac
}

REDIS_N=""
load() { # service -> requests/s
	case $1 in
	nginx) wrk -t2 -c32 -d"${SECONDS_}s" "http://127.0.0.1:$PORT/" | awk '/Requests\/sec/ { print $2 }' ;;
	redis)
		redis-benchmark -p "$PORT" -c 16 -t get,set -n "$REDIS_N" -q 2>/dev/null | tr '\r' '\n' |
			awk '{ for (i = 2; i < NF; i++) if ($i == "requests" && $(i + 1) == "per") { s += $(i - 1); n++ } }
			     END { if (n) printf "%.1f\n", s / n }' ;;
	esac
}

run_mode() { # service mode round -> "rps loader_us_per_span bpf_us_per_event"
	local svc=$1 mode=$2 out=$TMP/run-$1-$2-$3 rps
	service_start "$svc"
	case $mode in
	span) start_tracer 15 "$TMP/tt.log" "attached to" "$TT" --out "$out" --pid "$SVC_PID" \
		--span "$SVC_BIN:$SVC_FN" ;;
	bpftrace)
		bpftrace -p "$SVC_PID" -e "uprobe:$SVC_BIN:$SVC_FN { @s[tid] = nsecs; }
			uretprobe:$SVC_BIN:$SVC_FN /@s[tid]/ { @us = hist((nsecs - @s[tid]) / 1000);
			delete(@s[tid]); }" >"$TMP/bt.log" 2>&1 </dev/null &
		BT=$!
		for _ in $(seq 100); do grep -q "Attaching" "$TMP/bt.log" && break; sleep 0.05; done
		sleep 0.3 ;;
	esac
	rps=$(load "$svc")
	stop_tracer
	if [ -n "$BT" ]; then kill -INT "$BT"; wait "$BT" 2>/dev/null || true; BT=""; fi
	service_stop "$svc"
	python3 - "$out" "$rps" <<'EOF'
import json, os, sys
out, rps = sys.argv[1], float(sys.argv[2] or 0)
if os.path.exists(f"{out}/meta.json"):
    m = json.load(open(f"{out}/meta.json"))
    spans = m["events"].get("spans", 0)
    events = sum(m["events"].values())
    c = m["cost"]
    print(f"{rps:.1f} {c['loader_cpu_ns'] / 1e3 / max(spans, 1):.3f} "
          f"{c['bpf_total_ns'] / 1e3 / max(events, 1):.3f}")
else:
    print(f"{rps:.1f} 0 0")
EOF
}

modes=(none span bpftrace)
for svc in ${SERVICES//,/ }; do
	if [ "$svc" = redis ]; then # requests for ~SECONDS_ s untraced
		service_start redis
		REDIS_N=20000
		rps=$(load redis)
		REDIS_N=$(python3 -c "print(max(20000, int($rps * $SECONDS_)))")
		service_stop redis
	fi
	for m in "${modes[@]}"; do : >"$TMP/$svc-$m"; done
	for r in $(seq "$ROUNDS"); do
		for m in $(round_order "$r" "${modes[@]}"); do
			v=$(run_mode "$svc" "$m" "$r")
			echo "$v" >>"$TMP/$svc-$m"
			echo "round $r $svc $m: req/s loader_us/span bpf_us/event = $v"
		done
	done
done
python3 - "$TMP" "$SERVICES" "${modes[@]}" <<'EOF'
import statistics, sys
tmp, services, modes = sys.argv[1], sys.argv[2].split(","), sys.argv[3:]
print(f"{'service':8} {'mode':9} {'median req/s':>13} {'ratio':>6} {'per-round':>9} "
      f"{'loader us/span':>15} {'BPF us/event':>13}")
for svc in services:
    rows = {m: [list(map(float, l.split())) for l in open(f"{tmp}/{svc}-{m}")] for m in modes}
    base = statistics.median(r[0] for r in rows["none"])
    for m in modes:
        med = lambda i: statistics.median(r[i] for r in rows[m])
        per = statistics.median(a[0] / b[0] for a, b in zip(rows[m], rows["none"]))
        print(f"{svc:8} {m:9} {med(0):13,.0f} {med(0) / base:6.3f} {per:9.3f} "
              f"{med(1):15.3f} {med(2):13.3f}")
EOF
