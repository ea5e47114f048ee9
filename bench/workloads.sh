#!/usr/bin/env bash
# Workload benchmarks, in one run on one orders-server, alternating A/B so that
# a noisy shared machine hits both sides alike:
#   1. httpload (naive / pool / async) vs wrk at the same connection count
#      (wrk posts the same kind of JSON order as httpload);
#   2. orders-server vs nginx under the same wrk load (-c100 -t2);
# then prints median ratios (orders-server/nginx, async/wrk, pool/wrk, naive/wrk)
# and the naive vs pool table at the largest connection count, with the
# pool's queue wait.
#
#   bench/workloads.sh [--duration S] [--repeats N] [--conns 10,50,100] ...
#   bench/workloads.sh --duration 1 --repeats 1 --conns 10 --warmup 0   # smoke, ~10 s
#
# Every process it starts (orders-server, nginx) is stopped on exit, Ctrl-C
# included. Raw results: OUT/results.jsonl, one JSON object per measurement.
set -euo pipefail
ME=workloads.sh
TOP=$(cd "$(dirname "$0")/.." && pwd)

DURATION_S=10
REPEATS=3
CONNS=10,50,100
MODELS=naive,pool,async
REQUESTS=0            # 0: httpload runs --duration like wrk
POOL_WORKERS=20
SERVER_WORKERS=$(nproc)
SERVER_SPIN_US=30    # a client-throughput bench: the server polls, so a slower client
                     # does not pay for waking it (docs/benchmarks.md, `--spin-us`)
WRK_THREADS=2
WARMUP_S=1
NGINX=1
BUILD=${BUILD:-$TOP/build}
OUT=""
. "$TOP/bench/tt_bench_lib.sh"

usage() {
	cat <<EOF
usage: bench/workloads.sh [options]
  --duration S        seconds per measurement, wrk and httpload alike (default $DURATION_S)
  --repeats N         A/B rounds; ratios are medians over rounds (default $REPEATS)
  --conns LIST        connection counts, comma-separated (default $CONNS)
  --models LIST       httpload models (default $MODELS)
  --requests R        httpload runs R requests instead of --duration (default: off)
  --pool-workers W    httpload --workers for the pool model (default $POOL_WORKERS)
  --server-workers N  orders-server --workers, and nginx worker_processes (default $SERVER_WORKERS)
  --server-spin-us U  orders-server --spin-us: its workers poll U us before sleeping
                      (default $SERVER_SPIN_US; 0 = the server's own default, sleep at once)
  --wrk-threads T     wrk -t (default $WRK_THREADS)
  --warmup S          wrk warm-up of each server before measuring, 0 = none (default $WARMUP_S)
  --no-nginx          skip the orders-server vs nginx comparison
  --out DIR           raw results (default results/<UTC time>-bench-workloads)
  -h, --help          this help
Full run: (models+1) x conns x repeats x duration + 2 x repeats x duration seconds
(defaults: ~6.5 min). Smoke test: --duration 1 --repeats 1 --conns 10 --warmup 0
EOF
}

while [ "$#" -gt 0 ]; do
	case $1 in
	--duration) DURATION_S=$(num_arg "$1" "${2-}"); shift ;;
	--repeats) REPEATS=$(num_arg "$1" "${2-}"); shift ;;
	--conns) CONNS=${2-}; shift ;;
	--models) MODELS=${2-}; shift ;;
	--requests) REQUESTS=$(num_arg "$1" "${2-}"); shift ;;
	--pool-workers) POOL_WORKERS=$(num_arg "$1" "${2-}"); shift ;;
	--server-workers) SERVER_WORKERS=$(num_arg "$1" "${2-}"); shift ;;
	--server-spin-us) SERVER_SPIN_US=$(num_arg "$1" "${2-}"); shift ;;
	--wrk-threads) WRK_THREADS=$(num_arg "$1" "${2-}"); shift ;;
	--warmup) WARMUP_S=$(num_arg "$1" "${2-}"); shift ;;
	--no-nginx) NGINX=0 ;;
	--out) OUT=${2-}; shift ;;
	-h | --help) usage; exit 0 ;;
	*) die "unknown option '$1' (see --help)" ;;
	esac
	shift
done
[[ $CONNS =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--conns expects numbers like 10,50,100, got '$CONNS'"
[[ $MODELS =~ ^(naive|pool|async)(,(naive|pool|async))*$ ]] ||
	die "--models expects a list of naive,pool,async, got '$MODELS'"
if [ "$DURATION_S" -lt 1 ] || [ "$REPEATS" -lt 1 ]; then
	die "--duration and --repeats must be >= 1"
fi
IFS=, read -r -a CONN_LIST <<<"$CONNS"
IFS=, read -r -a MODEL_LIST <<<"$MODELS"

SERVER_BIN=$BUILD/workloads/server/orders-server
HTTPLOAD_BIN=$BUILD/workloads/httpload/httpload
need_bin "$SERVER_BIN"
need_bin "$HTTPLOAD_BIN"
command -v wrk >/dev/null || die "wrk is not installed: run bash scripts/install-deps.sh"
[ "$NGINX" = 0 ] || command -v nginx >/dev/null || die "nginx is not installed: run bash scripts/install-deps.sh (or pass --no-nginx)"
for c in "${CONN_LIST[@]}"; do
	[ "$c" -ge "$WRK_THREADS" ] || die "--conns $c is below --wrk-threads $WRK_THREADS (wrk needs a connection per thread)"
done

[ -n "$OUT" ] || OUT=$TOP/results/$(date -u +%Y%m%dT%H%M%SZ)-bench-workloads
mkdir -p "$OUT" || die "cannot create --out $OUT"
RESULTS=$OUT/results.jsonl
: >"$RESULTS"
TMP=$(mktemp -d /tmp/tt-bench-workloads.XXXXXX)

# ---- processes we own: stopped on any exit ---------------------------------
SERVER_PID="" NGINX_PID=""
trap cleanup EXIT
trap 'echo "$ME: interrupted; partial results in $RESULTS" >&2; exit 130' INT TERM

# ---- servers ---------------------------------------------------------------
start_nginx() {
	local dir=$TMP/nginx i
	NGINX_PORT=$(port_free)
	# the same reply size as orders-server: a fixed JSON order
	nginx_conf "$dir" "$NGINX_PORT" "$SERVER_WORKERS" \
		"default_type application/json; return 200 '{\"order_id\":1,\"status\":\"accepted\"}';"
	nginx -q -p "$dir" -e "$dir/error.log" -c "$dir/nginx.conf" -g "daemon off;" &
	NGINX_PID=$!
	for ((i = 0; i < 100; i++)); do
		(exec 3<>"/dev/tcp/127.0.0.1/$NGINX_PORT") 2>/dev/null && return 0
		kill -0 "$NGINX_PID" 2>/dev/null || die "nginx failed: $(tail -1 "$dir/error.log" 2>/dev/null)"
		sleep 0.05
	done
	die "nginx did not listen on 127.0.0.1:$NGINX_PORT within 5 s"
}

# ---- measurements: each appends one JSON line to RESULTS ------------------
# wrk posts a JSON order shaped like httpload's and reports through done().
wrk_post_lua "$TMP/post.lua"
cat >>"$TMP/post.lua" <<'EOF'

function done(summary, latency, requests)
	local s = summary.duration / 1e6
	local e = summary.errors
	io.write(string.format(
		'{"requests": %d, "throughput_rps": %.3f, "non2xx": %d, "socket_errors": %d, ' ..
		'"latency_ms": {"avg": %.6f, "p50": %.6f, "p90": %.6f, "p99": %.6f, "p999": %.6f, "max": %.6f}}\n',
		summary.requests, summary.requests / s, e.status, e.connect + e.read + e.write + e.timeout,
		latency.mean / 1e3, latency:percentile(50) / 1e3, latency:percentile(90) / 1e3,
		latency:percentile(99) / 1e3, latency:percentile(99.9) / 1e3, latency.max / 1e3))
end
EOF

record() { # kind label conns round json
	printf '{"kind": "%s", "label": "%s", "conns": %s, "round": %s, "result": %s}\n' \
		"$1" "$2" "$3" "$4" "$5" >>"$RESULTS"
}

run_wrk() { # label port conns round
	local out
	out=$(wrk -t"$WRK_THREADS" -c"$3" -d"${DURATION_S}s" -s "$TMP/post.lua" \
		"http://127.0.0.1:$2/orders" | tail -1)
	[[ $out == \{* ]] || die "wrk against $1 printed no result: $out"
	record wrk "$1" "$3" "$4" "$out"
	echo "  wrk      ${1#pair:} c=$3: $(sed -n 's/.*"throughput_rps": \([0-9.]*\).*/\1/p' <<<"$out") req/s"
}

run_httpload() { # model conns round
	local out len=(--duration "$DURATION_S")
	[ "$REQUESTS" = 0 ] || len=(--requests "$REQUESTS")
	out=$("$HTTPLOAD_BIN" --model "$1" --conns "$2" --workers "$POOL_WORKERS" "${len[@]}" \
		--url "http://127.0.0.1:$SERVER_PORT/orders" --json 2>"$TMP/httpload.err") ||
		die "httpload --model $1 --conns $2 failed: $(tail -1 "$TMP/httpload.err")"
	record httpload "$1" "$2" "$3" "$out"
	echo "  httpload $1 c=$2: $(sed -n 's/.*"throughput_rps": \([0-9.]*\).*/\1/p' <<<"$out") req/s"
}

warm_up() { # port
	[ "$WARMUP_S" = 0 ] || wrk -t"$WRK_THREADS" -c100 -d"${WARMUP_S}s" -s "$TMP/post.lua" \
		"http://127.0.0.1:$1/orders" >/dev/null
}

# ---- the run ---------------------------------------------------------------
server_start "$TMP/server.log" --workers "$SERVER_WORKERS" --spin-us "$SERVER_SPIN_US"
[ "$NGINX" = 0 ] || start_nginx
{
	echo "bench/workloads.sh $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "  $(uname -sr), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "  duration ${DURATION_S}s x $REPEATS rounds, conns $CONNS, models $MODELS, pool workers $POOL_WORKERS"
	echo "  orders-server workers=$SERVER_WORKERS spin-us=$SERVER_SPIN_US port $SERVER_PORT; wrk -t$WRK_THREADS; nginx: $([ "$NGINX" = 1 ] && echo "port $NGINX_PORT" || echo skipped)"
	echo "  raw results: $RESULTS"
} | tee "$OUT/run.txt"
warm_up "$SERVER_PORT"
[ "$NGINX" = 0 ] || warm_up "$NGINX_PORT"

for ((round = 1; round <= REPEATS; round++)); do
	echo "round $round/$REPEATS"
	# Alternate which side goes first each round (ABBA...).
	for c in "${CONN_LIST[@]}"; do
		for m in "${MODEL_LIST[@]}"; do
			# Each httpload run gets its own adjacent wrk run (label
			# "pair:MODEL"), so a ratio compares neighbours in time.
			if ((round % 2)); then
				run_httpload "$m" "$c" "$round"
				run_wrk "pair:$m" "$SERVER_PORT" "$c" "$round"
			else
				run_wrk "pair:$m" "$SERVER_PORT" "$c" "$round"
				run_httpload "$m" "$c" "$round"
			fi
		done
	done
	if [ "$NGINX" = 1 ]; then
		if ((round % 2)); then
			run_wrk orders-server-vs-nginx:orders-server "$SERVER_PORT" 100 "$round"
			run_wrk orders-server-vs-nginx:nginx "$NGINX_PORT" 100 "$round"
		else
			run_wrk orders-server-vs-nginx:nginx "$NGINX_PORT" 100 "$round"
			run_wrk orders-server-vs-nginx:orders-server "$SERVER_PORT" 100 "$round"
		fi
	fi
done

# ---- report: medians over rounds of per-round (adjacent A/B) ratios --------
python3 - "$RESULTS" <<'EOF' | tee "$OUT/report.txt"
import json, statistics, sys
from collections import defaultdict

rows = [json.loads(line) for line in open(sys.argv[1])]
med = statistics.median


def span(xs):
    return f"{med(xs):.3f} (min {min(xs):.3f}, max {max(xs):.3f}, n={len(xs)})"


# The wrk run paired with each httpload run: same model, conns and round.
wrk = {(r["label"][5:], r["conns"], r["round"]): r["result"] for r in rows
       if r["kind"] == "wrk" and r["label"].startswith("pair:")}
load = defaultdict(list)
for r in rows:
    if r["kind"] == "httpload":
        load[(r["label"], r["conns"])].append(r)

print("\nhttpload vs wrk (same orders-server, same connections), throughput ratio per round, median:")
print(f"  {'model':6} {'conns':>5} {'httpload req/s':>15} {'wrk req/s':>10}  ratio")
for (model, conns), runs in sorted(load.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    pairs = [(r["result"], wrk[(model, conns, r["round"])]) for r in runs
             if (model, conns, r["round"]) in wrk]
    if not pairs:
        continue
    ratios = [h["throughput_rps"] / w["throughput_rps"] for h, w in pairs]
    tl = med([h["throughput_rps"] for h, _ in pairs])
    tw = med([w["throughput_rps"] for _, w in pairs])
    print(f"  {model:6} {conns:>5} {tl:>15.0f} {tw:>10.0f}  {model}/wrk = {span(ratios)}")

ours = {r["round"]: r["result"] for r in rows if r["label"] == "orders-server-vs-nginx:orders-server"}
ngx = {r["round"]: r["result"] for r in rows if r["label"] == "orders-server-vs-nginx:nginx"}
if ours and ngx:
    rounds = sorted(set(ours) & set(ngx))
    ratios = [ours[k]["throughput_rps"] / ngx[k]["throughput_rps"] for k in rounds]
    print("\norders-server vs nginx, wrk -c100 (alternating A/B):")
    print(f"  orders-server {med([ours[k]['throughput_rps'] for k in rounds]):.0f} req/s, "
          f"nginx {med([ngx[k]['throughput_rps'] for k in rounds]):.0f} req/s (medians)")
    print(f"  orders-server/nginx = {span(ratios)}")
    bad = sum(ours[k]["non2xx"] + ours[k]["socket_errors"] for k in rounds)
    if bad:
        print(f"  WARNING: orders-server had {bad} non-2xx replies or socket errors")

top = max(c for _, c in load) if load else None
print(f"\nnaive vs pool at {top} connections (medians over rounds, ms):")
print(f"  {'model':6} {'req/s':>8} {'p50':>8} {'p99':>8} {'p99.9':>8} {'e2e p99':>8} "
      f"{'queue p50':>9} {'queue p99':>9}")
for model in ("naive", "pool", "async"):
    runs = load.get((model, top))
    if not runs:
        continue
    res = [r["result"] for r in runs]
    m = lambda f: med([f(x) for x in res])  # noqa: E731
    print(f"  {model:6} {m(lambda x: x['throughput_rps']):>8.0f} "
          f"{m(lambda x: x['latency_ms']['p50']):>8.3f} {m(lambda x: x['latency_ms']['p99']):>8.3f} "
          f"{m(lambda x: x['latency_ms']['p999']):>8.3f} {m(lambda x: x['e2e_ms']['p99']):>8.3f} "
          f"{m(lambda x: x['queue_wait_ms']['p50']):>9.3f} {m(lambda x: x['queue_wait_ms']['p99']):>9.3f}")
print("  (latency = t_end - t_start; e2e = t_end - t_enqueue = queue wait + latency)")
EOF
stop_pid "$SERVER_PID"
SERVER_PID=""
tail -1 "$TMP/server.log" | tee -a "$OUT/report.txt"
