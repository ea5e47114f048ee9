#!/usr/bin/env bash
# Where a request's CPU goes: each client (wrk and the httpload models) drives one
# orders-server in turn, alternating over rounds; for each run it prints the client's
# CPU a request (user+system, /usr/bin/time), the server's (utime+stime from
# /proc/PID/stat, before and after) and the server's voluntary/involuntary switches a
# request. On a machine where client and server share the CPUs and both are busy,
# throughput is CPUs / (client + server CPU a request), so the last column, wrk's
# total over the client's, bounds what the client can reach as a fraction of wrk.
# The client "block" (bench/blocking_client, in --models) is a blocking client without
# libcurl: --pool-workers threads in blocking send/recv on keep-alive connections,
# pinned round robin like the pool's workers. Next to the pool it separates what
# sleeping and waking once a request costs from what libcurl costs.
#
#   bench/cpu_per_request.sh [--duration S] [--repeats N] [--conns C] [--models LIST]
#                            [--server-spin-us U] [--pool-workers W] [--server-nice N]
set -euo pipefail
ME=cpu_per_request.sh
TOP=$(cd "$(dirname "$0")/.." && pwd)
DURATION_S=3
REPEATS=3
CONNS=100
MODELS=pool,async
SERVER_SPIN_US=0
POOL_WORKERS=20
SERVER_NICE=0
BUILD=${BUILD:-$TOP/build}
. "$TOP/bench/tt_bench_lib.sh"

usage() {
	cat <<EOF
usage: bench/cpu_per_request.sh [options]
  --duration S        seconds per run (default $DURATION_S)
  --repeats N         rounds, each client once per round, order reversed every other round (default $REPEATS)
  --conns C           connections, wrk -c and httpload --conns (default $CONNS)
  --models LIST       clients besides wrk: httpload models naive, pool, async, and
                      block (bench/blocking_client) (default $MODELS)
  --server-spin-us U  orders-server --spin-us (default $SERVER_SPIN_US)
  --pool-workers W    httpload --workers for the pool model, and block's threads
                      (default $POOL_WORKERS)
  --server-nice N     renice orders-server's threads to N, -20..19 (default $SERVER_NICE)
  -h, --help          this help
EOF
}

while [ "$#" -gt 0 ]; do
	case $1 in
	--duration) DURATION_S=$(num_arg "$1" "${2-}"); shift ;;
	--repeats) REPEATS=$(num_arg "$1" "${2-}"); shift ;;
	--conns) CONNS=$(num_arg "$1" "${2-}"); shift ;;
	--models) MODELS=${2-}; shift ;;
	--server-spin-us) SERVER_SPIN_US=$(num_arg "$1" "${2-}"); shift ;;
	--pool-workers) POOL_WORKERS=$(num_arg "$1" "${2-}"); shift ;;
	--server-nice) SERVER_NICE=${2-}; shift ;;
	-h | --help) usage; exit 0 ;;
	*) die "unknown option '$1' (see --help)" ;;
	esac
	shift
done
[[ $MODELS =~ ^(naive|pool|async|block)(,(naive|pool|async|block))*$ ]] ||
	die "--models expects a list of naive,pool,async,block, got '$MODELS'"
[ "$DURATION_S" -ge 1 ] && [ "$REPEATS" -ge 1 ] && [ "$CONNS" -ge 1 ] ||
	die "--duration, --repeats and --conns must be >= 1"
[[ $SERVER_NICE =~ ^-?[0-9]+$ ]] && [ "$SERVER_NICE" -ge -20 ] && [ "$SERVER_NICE" -le 19 ] ||
	die "--server-nice expects a nice value from -20 to 19, got '$SERVER_NICE'"
command -v wrk >/dev/null || die "wrk missing: run scripts/install-deps.sh"
[ -x /usr/bin/time ] || die "/usr/bin/time missing: run scripts/install-deps.sh"
need_load_bins
BLOCKING_CLIENT=$BUILD/bench/blocking_client
[[ ,$MODELS, != *,block,* ]] || need_bin "$BLOCKING_CLIENT"
TMP=$(mktemp -d)
trap cleanup EXIT INT TERM
wrk_post_lua "$TMP/post.lua"

server_cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$SERVER_PID/stat"; }
server_switches() { # voluntary involuntary, summed over the server's threads
	cat "/proc/$SERVER_PID/task/"*/status | awk '/^voluntary_ctxt/ { v += $2 } /^nonvoluntary_ctxt/ { n += $2 } END { print v, n }'
}

run_client() { # client -> "requests user_s sys_s"
	local url=http://127.0.0.1:$SERVER_PORT/orders
	if [ "$1" = wrk ]; then
		/usr/bin/time -o "$TMP/time" -f "%U %S" wrk -t2 -c"$CONNS" -d"${DURATION_S}s" \
			-s "$TMP/post.lua" "$url" >"$TMP/out"
		awk '/requests in/ { print $1 }' "$TMP/out"
	elif [ "$1" = block ]; then
		/usr/bin/time -o "$TMP/time" -f "%U %S" "$BLOCKING_CLIENT" --port "$SERVER_PORT" \
			--threads "$POOL_WORKERS" --duration "$DURATION_S" --pin >"$TMP/out" 2>"$TMP/err" ||
			sed "s/^/$ME: block: /" "$TMP/err" >&2 # as wrk's and httpload's errors: said, then counted
		awk '{ print $2 }' "$TMP/out"
	else
		/usr/bin/time -o "$TMP/time" -f "%U %S" "$HTTPLOAD" --model "$1" --conns "$CONNS" \
			--workers "$POOL_WORKERS" --duration "$DURATION_S" --url "$url" --json >"$TMP/out" 2>/dev/null
		json_get "$TMP/out" 'd["requests"]'
	fi | tr '\n' ' '
	cat "$TMP/time"
}

server_start "$TMP/server.log" --workers "$(nproc)" --spin-us "$SERVER_SPIN_US"
for t in "/proc/$SERVER_PID/task/"*; do # its workers exist once it printed its ready line
	renice -n "$SERVER_NICE" -p "${t##*/}" >/dev/null
done
hz=$(getconf CLK_TCK)
echo "$ME: orders-server workers=$(nproc) spin-us=$SERVER_SPIN_US nice=$SERVER_NICE, $CONNS connections, pool workers $POOL_WORKERS, ${DURATION_S}s x $REPEATS rounds"
printf '%-6s %5s %9s %10s %10s %10s %8s %8s\n' client round requests client_us server_us total_us srv_vol srv_invol
for r in $(seq "$REPEATS"); do
	for c in $(round_order "$r" wrk ${MODELS//,/ }); do
		t0=$(server_cpu_ticks)
		read -r v0 n0 < <(server_switches)
		read -r n user sys < <(run_client "$c")
		t1=$(server_cpu_ticks)
		read -r v1 n1 < <(server_switches)
		[ "${n:-0}" -gt 0 ] || die "$c completed no request (see orders-server: $TMP/server.log)"
		python3 -c 'import sys
c, r, n, u, s, t0, t1, hz, v, iv = sys.argv[1:]
n = int(n); cl = (float(u) + float(s)) / n * 1e6; sv = (int(t1) - int(t0)) / int(hz) / n * 1e6
print(f"{c:<6} {r:>5} {n:>9} {cl:>10.2f} {sv:>10.2f} {cl + sv:>10.2f} {int(v) / n:>8.3f} {int(iv) / n:>8.3f}")' \
			"$c" "$r" "$n" "$user" "$sys" "$t0" "$t1" "$hz" $((v1 - v0)) $((n1 - n0)) | tee -a "$TMP/rows"
	done
done
python3 -c 'import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
med = {c: st.median(float(r[5]) for r in rows if r[0] == c) for c in dict.fromkeys(r[0] for r in rows)}
print("medians of total CPU a request (client + server), and wrk total / client total:")
w = med["wrk"]
for c, t in med.items():
    print(f"  {c:<6} {t:7.2f} us   bound {w / t:.3f}x wrk")' "$TMP/rows"
