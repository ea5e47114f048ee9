#!/usr/bin/env bash
# The BPF programs' own cost, two tailtrace builds side by side: each round
# runs build A, then B (B then A in even rounds), as `tailtrace --listen
# --bpf-stats always -- httpload ...` against one orders-server, and reads the
# kernel's exact run-time statistics from meta.json: ns per run of the
# switch (sched) and wakeup (runq) programs, BPF ns per request, and the
# loader's own CPU (cost.loader_cpu_ns, ms a run). These
# move with the machine's state far less than throughput ratios do, so a
# change to the programs shows in a few rounds.
#
#   bench/bpf_cost_ab.sh --a OLD_TAILTRACE [--b NEW_TAILTRACE] [--rounds R]
#                        [--model M] [--conns C] [--duration S] [--mode MODE]
#                        [--a-args "ARGS"] [--b-args "ARGS"]
#
# --a-args/--b-args: options for one side only (one build against itself with
# --b-args "--user-stacks dwarf": what an option costs).
# MODE: records (the default events, records written), listen (default), aggregate, or flight
# (--flight-recorder 30 with a trigger that never fires and httpload's one-mark USDT spans: the
# recorder's standing cost). Prints one line per run, then the
# medians and the median of the per-round differences B - A. Run as root.
set -euo pipefail
ME=bpf_cost_ab.sh
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$TOP/build}
A="" B="" ROUNDS=8 MODEL=naive CONNS=100 DURATION=3 MODE=listen A_ARGS="" B_ARGS=""
TMP=$(mktemp -d)
. "$TOP/bench/tt_bench_lib.sh"

usage() {
	cat <<EOF
usage: bench/bpf_cost_ab.sh --a TAILTRACE [options]
  --a PATH       build A's tailtrace binary (e.g. an older build's)
  --b PATH       build B's (default $BUILD/probes/tailtrace)
  --rounds R     rounds, each runs A and B once (default $ROUNDS)
$(load_opts_help duration conns model)
  --mode MODE    records, listen, aggregate or flight (default $MODE)
  --a-args ARGS  more tailtrace options for A only (split at spaces)
  --b-args ARGS  more tailtrace options for B only
  -h, --help     this help
EOF
}

while [ "$#" -gt 0 ]; do
	case $1 in
	--a) A=${2-}; shift ;;
	--b) B=${2-}; shift ;;
	--rounds) ROUNDS=$(num_arg "$1" "${2-}"); shift ;;
	--mode) MODE=${2-}; shift ;;
	--a-args) A_ARGS=${2-}; shift ;;
	--b-args) B_ARGS=${2-}; shift ;;
	-h | --help) usage; exit 0 ;;
	*) load_opt "$1" "${2-}" || die "unknown option '$1' (see --help)"; shift ;;
	esac
	shift
done
need_load_bins
B=${B:-$TAILTRACE}
[ -n "$A" ] || die "--a TAILTRACE is required: the build to compare with (see --help)"
need_bin "$A"
need_bin "$B"
check_model "$MODEL"
[[ $MODE =~ ^(records|listen|aggregate|flight)$ ]] ||
	die "--mode expects records, listen, aggregate or flight, got '$MODE'"
[ "$(id -u)" = 0 ] || die "run as root (BPF)"
trap cleanup EXIT INT TERM
server_start "$TMP/server.log" --workers "$(nproc)"

run_one() { # label binary extra-args: one traced run, one JSON line appended to TMP/runs.jsonl
	local label=$1 bin=$2 out=$TMP/run-$1-$RANDOM mode_args=(--aggregate)
	local -a extra
	read -r -a extra <<<"$3"
	[ "$MODE" = listen ] && mode_args=(--listen 127.0.0.1:0)
	[ "$MODE" = records ] && mode_args=()
	[ "$MODE" = flight ] && mode_args=(--flight-recorder 30 --trigger 'latency>3600s'
		--span "usdt:$HTTPLOAD:httpload:request")
	"$bin" ${mode_args[@]+"${mode_args[@]}"} ${extra[@]+"${extra[@]}"} --bpf-stats always \
		-o "$out" -- "$HTTPLOAD" --model "$MODEL" \
		--conns "$CONNS" --duration "$DURATION" --json \
		--url "http://127.0.0.1:$SERVER_PORT/orders" >"$out.stdout" 2>"$out.stderr" ||
		die "$label: tailtrace failed: $(tail -1 "$out.stderr")"
	python3 - "$label" "$out" "$DURATION" >>"$TMP/runs.jsonl" <<'PY'
import json, sys
label, out, duration = sys.argv[1], sys.argv[2], float(sys.argv[3])
cost = json.load(open(out + "/meta.json"))["cost"]
bpf = cost["bpf"]
load = next(json.loads(l) for l in open(out + ".stdout") if l.startswith("{"))
req = load["requests"]
ns = lambda m: bpf[m]["run_time_ns"] / max(bpf[m]["run_cnt"], 1)
total = sum(v["run_time_ns"] for v in bpf.values() if isinstance(v, dict) and "run_time_ns" in v)
row = {"label": label, "rps": load["throughput_rps"], "switch_ns": ns("sched"),
       "waking_ns": ns("runq"), "bpf_ns_per_req": total / req,
       "loader_ms": cost["loader_cpu_ns"] / 1e6,
       "loader_ms_a_s": cost["loader_cpu_ns"] / 1e6 / duration}
print(json.dumps(row))
print(f"{label}: {row['rps']:.0f} req/s, switch {row['switch_ns']:.0f} ns/run, waking "
      f"{row['waking_ns']:.0f} ns/run, BPF {row['bpf_ns_per_req']:.0f} ns/request, loader "
      f"{row['loader_ms']:.1f} ms", file=sys.stderr)
PY
	rm -rf "$out" "$out.stdout" "$out.stderr"
}

for r in $(seq "$ROUNDS"); do
	for m in $(round_order "$r" A B); do
		if [ "$m" = A ]; then run_one A "$A" "$A_ARGS"; else run_one B "$B" "$B_ARGS"; fi
	done
done
python3 - "$TMP/runs.jsonl" <<'PY'
import json, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
a = [r for r in rows if r["label"] == "A"]
b = [r for r in rows if r["label"] == "B"]
for k in ("switch_ns", "waking_ns", "bpf_ns_per_req", "loader_ms", "loader_ms_a_s", "rps"):
    ma, mb = st.median(r[k] for r in a), st.median(r[k] for r in b)
    d = st.median(y[k] - x[k] for x, y in zip(a, b))
    lower = sum(y[k] < x[k] for x, y in zip(a, b))
    print(f"{k:15s} A {ma:9.1f}  B {mb:9.1f}  B/A {mb / ma:.3f}  per-round B-A median {d:+.1f}"
          f"  (B lower in {lower} of {len(a)})")
PY
