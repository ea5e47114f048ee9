#!/usr/bin/env bash
# What a span costs the spanned program, by how it ends (docs/benchmarks.md, "Span exits").
#
#   bench/span_exit_cost.sh [--rounds R] [--calls N] [--go-seconds S]
#
# Part 1, per call: tests/probes/span_target calls tt_span_work(i, 0) N times and times
# the calls itself (outer_sum_ns). Modes, alternating in every round (ABCD, DCBA, ...):
#   none       untraced
#   uretprobe  tailtrace --span-exit uretprobe (entry uprobe + uretprobe)
#   ret        tailtrace --span-exit ret (entry uprobe + a uprobe on each ret)
#   usdt       tailtrace --span usdt:span_target:span_target:work (the 5-byte-nop USDT
#              probes around each call: what tailtrace's own workloads carry)
#   bpftrace   uprobe + uretprobe counting calls: the reference a user knows
# Prints each mode's median ns a call and its cost over none.
# Part 2 (S > 0, needs wrk and the gohttp test server): a Go net/http server under
# wrk -c20 for S seconds, untraced and with --span on its handler (goroutine spans,
# return-instruction uprobes), alternating: requests/s and their ratio.
set -euo pipefail
ME=span_exit_cost.sh
top=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$top/build}
TMP=$(mktemp -d)
# shellcheck source=bench/tt_bench_lib.sh
. "$top/bench/tt_bench_lib.sh"
trap 'stop_pid "${SERVER_PID-}"; rm -rf "$TMP"' EXIT

ROUNDS=5 CALLS=100000 GO_S=5
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) ROUNDS=$(num_arg "$1" "${2-}"); shift 2 ;;
	--calls) CALLS=$(num_arg "$1" "${2-}"); shift 2 ;;
	--go-seconds) GO_S=$(num_arg "$1" "${2-}"); shift 2 ;;
	-h | --help) sed -n '2,17p' "$0"; exit 0 ;;
	*) die "unknown option $1 (see --help)" ;;
	esac
done
TT=$BUILD/probes/tailtrace
TARGET=$BUILD/tests/probes/span_target
need_bin "$TT"
need_bin "$TARGET"
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing

ns_per_call() { # output of span_target work N 0 -> ns a call
	sed -n 's/.*outer_sum_ns=\([0-9]*\).*/\1/p' | awk -v n="$CALLS" '{ printf "%.1f\n", $1 / n }'
}

run_mode() { # mode -> ns a call
	case $1 in
	none) "$TARGET" work "$CALLS" 0 ;;
	uretprobe | ret)
		"$TT" --out "$TMP/run-$1" --events spans --span-exit "$1" \
			--span "$TARGET:tt_span_work" -- "$TARGET" work "$CALLS" 0 2>/dev/null ;;
	usdt)
		"$TT" --out "$TMP/run-$1" --events spans --span "usdt:$TARGET:span_target:work" \
			-- "$TARGET" work "$CALLS" 0 2>/dev/null ;;
	bpftrace)
		bpftrace -q -e "uprobe:$TARGET:tt_span_work { @s[tid] = nsecs; }
			uretprobe:$TARGET:tt_span_work /@s[tid]/ { @n = count(); delete(@s[tid]); }" \
			-c "$TARGET work $CALLS 0" 2>/dev/null ;;
	esac | ns_per_call
}

modes=(none uretprobe ret usdt)
command -v bpftrace >/dev/null && modes+=(bpftrace)
for m in "${modes[@]}"; do : >"$TMP/$m"; done
echo "# part 1: $CALLS calls of tt_span_work(i, 0) a run, $ROUNDS rounds, modes alternating"
for r in $(seq "$ROUNDS"); do
	for m in $(round_order "$r" "${modes[@]}"); do
		v=$(run_mode "$m")
		echo "$v" >>"$TMP/$m"
		echo "round $r $m ${v} ns/call"
	done
done
median() { sort -n "$1" | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
base=$(median "$TMP/none")
printf '%-10s %12s %16s\n' mode "ns/call" "cost/call (ns)"
for m in "${modes[@]}"; do
	v=$(median "$TMP/$m")
	printf '%-10s %12.1f %16.1f\n' "$m" "$v" "$(awk -v a="$v" -v b="$base" 'BEGIN { print a - b }')"
done
u=$(median "$TMP/uretprobe") x=$(median "$TMP/ret")
awk -v u="$u" -v x="$x" -v b="$base" 'BEGIN { printf "ret/uretprobe cost ratio: %.1f\n", (x - b) / (u - b) }'

GOHTTP=$BUILD/tests/probes/gohttp
if [ "$GO_S" -gt 0 ] && [ -x "$GOHTTP" ] && command -v wrk >/dev/null; then
	echo "# part 2: Go net/http server under wrk -t2 -c20 for $GO_S s, untraced and spanned"
	: >"$TMP/go-none" && : >"$TMP/go-span"
	for r in $(seq "$ROUNDS"); do
		for m in $(round_order "$r" none span); do
			"$GOHTTP" 127.0.0.1:0 >"$TMP/gohttp.out" &
			SERVER_PID=$!
			for _ in $(seq 50); do grep -q listening "$TMP/gohttp.out" && break; sleep 0.05; done
			url="http://$(sed -n 's/^listening //p' "$TMP/gohttp.out")/"
			if [ "$m" = span ]; then
				start_tracer 10 "$TMP/tt.log" "attached to" "$TT" --out "$TMP/run-go" \
					--pid "$SERVER_PID" --events spans --span "$GOHTTP:main.handler"
			fi
			rps=$(wrk -t2 -c20 -d"${GO_S}s" "$url" | awk '/Requests\/sec/ { print $2 }')
			stop_tracer
			stop_pid "$SERVER_PID"
			SERVER_PID=
			echo "$rps" >>"$TMP/go-$m"
			echo "round $r go-$m $rps req/s"
		done
	done
	n=$(median "$TMP/go-none") s=$(median "$TMP/go-span")
	awk -v n="$n" -v s="$s" 'BEGIN { printf "go: untraced %.0f req/s, spanned %.0f req/s: %.3fx\n", n, s, s / n }'
fi
