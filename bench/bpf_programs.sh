#!/usr/bin/env bash
# Where the BPF time goes, program by program, beside libbpf-tools' runqlat on the same load:
# each round runs httpload once under tailtrace for each --events set (--bpf-stats always: the
# kernel's run_cnt and run_time_ns of each of its programs that ran, meta.json cost.programs)
# and once under runqlat (the same counters read with bpftool while it is attached,
# kernel.bpf_stats_enabled on for the run), in alternating order. Prints per program and run
# the runs per request, the ns per run and the BPF µs per request (medians over the rounds),
# and the requests/s of each.
# Several --events sets show what each event adds to the same programs.
#
#   bench/bpf_programs.sh [--rounds R] [--model M] [--conns C] [--duration S] [--events SETS]
#
# SETS: event lists separated by '/', e.g. default/runq,switch/switch ('default': none given);
# a list may end in ':' and --debug features, e.g. default:skip=occ-emit,skip=occ-note leaves
# steps of the switch program out (tailtrace --help, --debug skip=STEP) to show what each costs.
#
# Run as root; needs /usr/sbin/runqlat (libbpf-tools) and bpftool.
set -euo pipefail
ME=bpf_programs.sh
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$TOP/build}
ROUNDS=6 MODEL=naive CONNS=100 DURATION=5 EVENTS=default
TMP=$(mktemp -d)
. "$TOP/bench/tt_bench_lib.sh"
RUNQLAT=${RUNQLAT:-/usr/sbin/runqlat}
STATS=/proc/sys/kernel/bpf_stats_enabled

usage() {
	cat <<EOF
usage: bench/bpf_programs.sh [options]
  --rounds R     rounds, each runs tailtrace and runqlat once (default $ROUNDS)
$(load_opts_help duration conns model)
  --events SETS  tailtrace --events lists, '/' between them (default: default, its own);
                 EVENTS:DEBUG adds --debug DEBUG (e.g. default:skip=occ-emit)
EOF
}

while [ "$#" -gt 0 ]; do
	case $1 in
	--rounds) ROUNDS=$(num_arg "$1" "${2-}"); shift ;;
	--events) EVENTS=${2-}; shift ;;
	-h | --help) usage; exit 0 ;;
	*) load_opt "$1" "${2-}" || die "unknown option '$1' (see --help)"; shift ;;
	esac
	shift
done
check_model "$MODEL"
[ "$(id -u)" -eq 0 ] || die "needs root (BPF): run it as root"
[ "$ROUNDS" -ge 1 ] || die "--rounds must be at least 1"
need_load_bins
[ -x "$RUNQLAT" ] || die "needs $RUNQLAT: apt-get install libbpf-tools (or RUNQLAT=/path/to/runqlat)"
command -v bpftool >/dev/null || die "needs bpftool: apt-get install bpftool"
STATS_BEFORE=$(cat "$STATS")
restore() { echo "$STATS_BEFORE" >"$STATS"; cleanup; }
trap restore EXIT INT TERM

server_start "$TMP/server.log" --workers 2
RESULTS=$TMP/results.jsonl
: >"$RESULTS"
load=("$HTTPLOAD" --model "$MODEL" --conns "$CONNS" --duration "$DURATION"
	--url "http://127.0.0.1:$SERVER_PORT/orders" --json)
IFS=/ read -r -a SETS <<<"$EVENTS"
[ "${#SETS[@]}" -ge 1 ] || die "--events needs at least one list"

progs() { # the loaded BPF programs' id, name, run_cnt, run_time_ns as JSON
	bpftool prog show -j
}

run_tailtrace() { # round EVENTS[:DEBUG]
	local events=() set=${2%%:*}
	[ "$set" = default ] || events=(--events "$set")
	[ "$set" = "$2" ] || events+=(--debug "${2#*:}")
	rm -rf "$TMP/tt"
	"$TAILTRACE" --bpf-stats always "${events[@]}" --out "$TMP/tt" -- "${load[@]}" \
		>"$TMP/out" 2>"$TMP/err" || die "tailtrace --events $2 run $1 failed: $(tail -2 "$TMP/err")"
	python3 - "$TMP/tt/meta.json" "$TMP/out" "$1" "$2" >>"$RESULTS" <<'PY'
import json, sys
meta, out, rnd, events = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
m = json.load(open(meta))
s = [json.loads(l) for l in open(out) if l.startswith("{")][-1]
progs = {q["name"]: {"run_cnt": q["run_cnt"], "run_time_ns": q["run_time_ns"]}
         for q in m["cost"].get("programs") or [] if q["run_cnt"]}
print(json.dumps({"tool": f"tailtrace {events}", "round": rnd, "requests": s["requests"],
                  "rate": s.get("throughput_rps"),
                  "progs": progs}))
PY
}

run_runqlat() { # round: runqlat attached around the load; its programs' counters from bpftool
	echo 1 >"$STATS"
	progs >"$TMP/loaded.json"
	start_tracer 10 "$TMP/runqlat.out" '^Tracing' stdbuf -oL "$RUNQLAT"
	progs >"$TMP/before.json"
	"${load[@]}" >"$TMP/out" 2>"$TMP/err" || die "httpload under runqlat failed: $(tail -2 "$TMP/err")"
	progs >"$TMP/after.json"
	stop_tracer
	echo "$STATS_BEFORE" >"$STATS"
	python3 - "$TMP/loaded.json" "$TMP/before.json" "$TMP/after.json" "$TMP/out" "$1" \
		>>"$RESULTS" <<'PY'
import json, sys
loaded, before, after, out, rnd = sys.argv[1:5] + [int(sys.argv[5])]
old = {p["id"] for p in json.load(open(loaded))}     # runqlat's programs: loaded since
b = {p["id"]: p for p in json.load(open(before))}
progs = {}
for p in json.load(open(after)):
    if p["id"] in old or p["id"] not in b:
        continue
    name = p.get("name", str(p["id"]))
    progs[name] = {"run_cnt": p.get("run_cnt", 0) - b[p["id"]].get("run_cnt", 0),
                   "run_time_ns": p.get("run_time_ns", 0) - b[p["id"]].get("run_time_ns", 0)}
s = [json.loads(l) for l in open(out) if l.startswith("{")][-1]
print(json.dumps({"tool": "runqlat", "round": rnd, "requests": s["requests"],
                  "rate": s.get("throughput_rps"),
                  "progs": progs}))
PY
}

echo "$ME: orders-server on port $SERVER_PORT; httpload --model $MODEL --conns $CONNS --duration $DURATION; $ROUNDS rounds" >&2
for round in $(seq "$ROUNDS"); do
	for run in $(round_order "$round" "${SETS[@]/#/tailtrace:}" runqlat); do
		if [ "$run" = runqlat ]; then run_runqlat "$round"; else run_tailtrace "$round" "${run#tailtrace:}"; fi
		echo "$ME: round $round $run: $(tail -1 "$RESULTS" | cut -c1-160)" >&2
	done
done

python3 - "$RESULTS" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
med = statistics.median
print(f"{'run':36} {'program':22} {'runs/request':>12} {'ns/run':>8} {'BPF µs/request':>15}")
for tool in dict.fromkeys(r["tool"] for r in rows):
    rs = [r for r in rows if r["tool"] == tool]
    names = sorted({n for r in rs for n in r["progs"]})
    total = []
    for n in names:
        per = [(r["progs"][n]["run_cnt"] / r["requests"], r["progs"][n]["run_time_ns"]
                / max(r["progs"][n]["run_cnt"], 1), r["progs"][n]["run_time_ns"] / r["requests"] / 1e3)
               for r in rs if n in r["progs"] and r["requests"]]
        if per:
            print(f"{tool:36} {n:22} {med(p[0] for p in per):12.2f} {med(p[1] for p in per):8.0f} "
                  f"{med(p[2] for p in per):15.3f}")
    tot = [sum(p["run_time_ns"] for p in r["progs"].values()) / r["requests"] / 1e3
           for r in rs if r["requests"]]
    rate = [r["rate"] for r in rs if r["rate"]]
    print(f"{tool:36} {'all programs':22} {'':>12} {'':>8} {med(tot):15.3f}"
          + (f"   ({med(rate):,.0f} requests/s)" if rate else ""))
PY
