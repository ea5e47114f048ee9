#!/usr/bin/env bash
# Requests of a Node.js server as the kernel sees them (--span tcp), against wrk's own count and
# latency; and what tracing them costs (docs/benchmarks.md, "TCP spans").
#
#   bench/tcp_spans.sh [--server node|orders] [--rounds R] [--seconds S] [--conns C]
#                      [--modes LIST] [--out DIR]
#
# bench/third_party/node_server.js (warmed up first: the JIT has compiled the handler), or
# orders-server (--server orders: GET /health), under wrk -t2 -cC --latency for S seconds.
# Modes (default: none,default,tcp), alternating in every round (ABC, CBA, ...):
#   none     the server alone
#   default  tailtrace --pid PID, the default events
#   tcp      tailtrace --pid PID --span tcp: the default events and each request on the port
#            it listens on; attached before wrk starts and stopped after it ends
#   traceparent  as tcp, each request with a traceparent of its own (bench/traceparent.lua)
#   tracestate   as traceparent, with a tracestate of two members beside it (TT_TRACESTATE=1)
#   usdt     orders-server only: --span usdt:orders-server:orders:request (its one mark),
#            each request with a traceparent and a tracestate as in tracestate mode
#   usdtcontext  as usdt, the span reading them from the mark's arguments
#            (request,traceparent=arg3,tracestate=arg4)
# Prints per round wrk's requests and median latency beside the spans' count and median and the
# spans programs' BPF time a run (meta.json cost.bpf.spans), then the medians of those over the
# rounds, and the A/B throughput summary (bench/ab_stats.py).
set -euo pipefail
ME=tcp_spans.sh
top=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$top/build}
TMP=$(mktemp -d)
# shellcheck source=bench/tt_bench_lib.sh
. "$top/bench/tt_bench_lib.sh"
NODE_PID=""
cleanup() {
	stop_tracer
	stop_pid "$NODE_PID"
	rm -rf "$TMP"
}
trap cleanup EXIT

ROUNDS=6 SECONDS_=6 CONNS=32 OUT="" MODES=none,default,tcp SERVER=node
while [ $# -gt 0 ]; do
	case $1 in
	--server) SERVER=${2-}; shift 2 ;;
	--rounds) ROUNDS=$(num_arg "$1" "${2-}"); shift 2 ;;
	--seconds) SECONDS_=$(num_arg "$1" "${2-}"); shift 2 ;;
	--conns) CONNS=$(num_arg "$1" "${2-}"); shift 2 ;;
	--modes) MODES=${2-}; shift 2 ;;
	--out) OUT=${2-}; shift 2 ;;
	-h | --help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown option $1 (see --help)" ;;
	esac
done
modes_re='(none|default|tcp|traceparent|tracestate|usdt|usdtcontext)'
[[ $MODES =~ ^$modes_re(,$modes_re)*$ ]] ||
	die "--modes expects a list of none,default,tcp,traceparent,tracestate,usdt,usdtcontext, got '$MODES'"
case $SERVER in node | orders) ;; *) die "--server expects node or orders, got '$SERVER'" ;; esac
[[ $SERVER = orders || ,$MODES, != *,usdt* ]] || die "the usdt modes need --server orders"
[[ ,$MODES, == *,none,* ]] || die "--modes must include none (the baseline of every ratio)"
[ "$(id -u)" -eq 0 ] || die "needs root (BPF): run it as root"
[ "$ROUNDS" -ge 1 ] && [ "$SECONDS_" -ge 2 ] && [ "$CONNS" -ge 1 ] ||
	die "--rounds and --conns must be at least 1, --seconds at least 2"
TAILTRACE=$BUILD/probes/tailtrace
need_bin "$TAILTRACE"
[ "$SERVER" = orders ] || command -v node >/dev/null || die "needs node: apt-get install nodejs"
command -v wrk >/dev/null || die "needs wrk: apt-get install wrk"
OUT=${OUT:-results/$(date -u +%Y%m%dT%H%M%SZ)-bench-tcp-spans}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd) # the rounds run from the top directory (python3 imports analyze/)
RESULTS=$OUT/results.jsonl
: >"$RESULTS"

PORT=$(port_free)
ORDERS=$BUILD/workloads/server/orders-server
if [ "$SERVER" = orders ]; then
	need_bin "$ORDERS"
	"$ORDERS" --port "$PORT" --workers 2 >"$TMP/node.log" 2>&1 &
	NODE_PID=$! URL=http://127.0.0.1:$PORT/health READY="listening on"
else
	node "$top/bench/third_party/node_server.js" "$PORT" "$TMP/audit.log" >"$TMP/node.log" 2>&1 &
	NODE_PID=$! URL=http://127.0.0.1:$PORT/ READY="port $PORT"
fi
for _ in $(seq 100); do grep -q "$READY" "$TMP/node.log" && break; sleep 0.1; done
grep -q "$READY" "$TMP/node.log" || die "$SERVER did not start: $(tail -2 "$TMP/node.log")"
wrk -t2 -c"$CONNS" -d3s "$URL" >/dev/null # warm up: the JIT compiles the handler

measure() { # mode round: one wrk run under that mode; appends a JSON line
	local mode=$1 round=$2 run="$TMP/tt" script=()
	rm -rf "$run"
	case $mode in
	none) ;;
	default) start_tracer 20 "$TMP/tracer.log" 'attached to' "$TAILTRACE" --pid "$NODE_PID" \
		--out "$run" ;;
	tcp | traceparent | tracestate) start_tracer 20 "$TMP/tracer.log" 'attached to' "$TAILTRACE" \
		--pid "$NODE_PID" --span tcp --out "$run" ;;
	usdt | usdtcontext) start_tracer 20 "$TMP/tracer.log" 'attached to' "$TAILTRACE" \
		--pid "$NODE_PID" --span "usdt:$ORDERS:orders:request$(
			[ "$mode" = usdtcontext ] && echo ,traceparent=arg3,tracestate=arg4)" --out "$run" ;;
	esac
	case $mode in traceparent | tracestate | usdt*) script=(-s "$top/bench/traceparent.lua") ;; esac
	state=0
	case $mode in tracestate | usdt*) state=1 ;; esac
	TT_TRACESTATE=$state TT_TRACEPARENT_LOG=$TMP/sent TT_TRACEPARENT_PATH=${URL#http://*/} \
		wrk -t2 -c"$CONNS" -d"${SECONDS_}s" \
		--latency "${script[@]}" \
		"$URL" >"$TMP/wrk.out" 2>&1 ||
		die "wrk failed: $(tail -2 "$TMP/wrk.out")"
	stop_tracer
	python3 - "$mode" "$round" "$TMP/wrk.out" "$run" >>"$RESULTS" <<'PY'
import json, re, sys
from pathlib import Path
mode, rnd, wrk, run = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]).read_text(), Path(sys.argv[4])
UNIT = {"us": 1e-3, "ms": 1.0, "s": 1e3}
p50 = re.search(r"^\s*50%\s+([\d.]+)(us|ms|s)\s*$", wrk, re.M)
row = {"mode": mode, "round": rnd,
       "rps": float(re.search(r"^Requests/sec:\s+([\d.]+)", wrk, re.M)[1]),
       "wrk_requests": int(re.search(r"^\s*(\d+) requests in", wrk, re.M)[1]),
       "wrk_p50_ms": float(p50[1]) * UNIT[p50[2]]}
if (run / "meta.json").exists():
    m = json.loads((run / "meta.json").read_text())
    row["lost"] = m.get("lost_events")
    row["cpu_share"] = (m.get("cost") or {}).get("cpu_share_of_machine")
    spans_bpf = ((m.get("cost") or {}).get("bpf") or {}).get("spans")
    if spans_bpf:
        row["spans_ns_per_run"] = spans_bpf.get("ns_per_run")
if (run / "spans.bin").exists():
    import numpy as np
    from analyze.load.schema import load_schema, read_records
    s = read_records(run / "spans.bin", load_schema(run), "span")
    row["spans"] = int(len(s))
    row["span_p50_ms"] = float(np.median(s["t_end_ns"] - s["t_start_ns"]) / 1e6) if len(s) else None
print(json.dumps(row))
PY
	python3 - "$ME" "$RESULTS" <<'PY'
import json, sys
r = json.loads(open(sys.argv[2]).readlines()[-1])
extra = ""
if "spans" in r:
    extra = (f"  spans {r['spans']} ({r['spans'] / r['wrk_requests']:.4f} of wrk), span P50 "
             f"{r['span_p50_ms']:.3f} ms ({r['span_p50_ms'] / r['wrk_p50_ms']:.3f} of wrk)")
if r.get("spans_ns_per_run"):
    extra += f", spans BPF {r['spans_ns_per_run'] / 1000:.2f} us a run"
print(f"{sys.argv[1]}: round {r['round']} {r['mode']:<5} {r['rps']:9.0f} req/s, wrk "
      f"{r['wrk_requests']} requests, P50 {r['wrk_p50_ms']:.3f} ms{extra}")
PY
}

WHAT=orders-server
[ "$SERVER" = node ] && WHAT="node $(node --version)"
echo "$ME: $WHAT $URL, wrk -t2 -c$CONNS -d${SECONDS_}s; $ROUNDS rounds of $MODES"
cd "$top"
ab_rounds "$ROUNDS" "$MODES" "$RESULTS"
python3 - "$RESULTS" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"spans"' in l]
if not rows:
    sys.exit(0)
count = [r["spans"] / r["wrk_requests"] for r in rows]
p50 = [r["span_p50_ms"] / r["wrk_p50_ms"] for r in rows if r["span_p50_ms"]]
print(f"spans per wrk request: median {statistics.median(count):.4f} "
      f"(rounds {min(count):.4f}..{max(count):.4f})")
print(f"span P50 / wrk P50:    median {statistics.median(p50):.3f} "
      f"(rounds {min(p50):.3f}..{max(p50):.3f})")
for mode in sorted({r["mode"] for r in rows}):
    ns = [r["spans_ns_per_run"] for r in rows if r["mode"] == mode and r.get("spans_ns_per_run")]
    if ns:
        print(f"spans BPF a run, {mode}: median {statistics.median(ns) / 1000:.2f} us "
              f"(rounds {min(ns) / 1000:.2f}..{max(ns) / 1000:.2f})")
PY
