#!/usr/bin/env bash
# The Prometheus exporter left on a busy host: tailtrace --all --listen, scraped
# every second for --duration seconds while the host runs PROCS long-lived
# processes that wake up every --sleep-us (tt-sleeper) and starts CHURN
# short-lived processes a second (each exits at once: exited processes must be
# pruned, not pile up). Prints the scrape time (p50, p99, max; each over 50 ms split
# into connect, server, transfer), the exposition's size (samples), tailtrace's RSS,
# its CPU share, the processes it saw. Targets: scrape <= 50 ms, >= 1,000 samples; RSS <= 50 MB.
#
#   bench/exporter_soak.sh [--duration S] [--procs N] [--churn PER_S] [--top N] [--sleep-us U] [--out DIR]
#   bench/exporter_soak.sh --duration 3600          # the hour of docs/benchmarks.md
#   bench/exporter_soak.sh --duration 20            # smoke test
#
# Run as root. Raw samples: OUT/scrapes.tsv (t_s, total s, bytes, samples, connect s,
# first-byte s: curl's time_total, size_download, time_connect, time_starttransfer) and OUT/rss.tsv.
set -euo pipefail
ME=exporter_soak.sh
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$TOP/build}
TAILTRACE=$BUILD/probes/tailtrace
SLEEPER=$BUILD/tests/probes/tt-sleeper
DURATION=600
PROCS=40
CHURN=20
TOPN=40
SLEEP_US=1000
OUT=""
. "$TOP/bench/tt_bench_lib.sh"

usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
	case $1 in
	--duration) DURATION=$(num_arg "$1" "${2-}"); shift ;;
	--procs) PROCS=$(num_arg "$1" "${2-}"); shift ;;
	--churn) CHURN=$(num_arg "$1" "${2-}"); shift ;;
	--top) TOPN=$(num_arg "$1" "${2-}"); shift ;;
	--sleep-us) SLEEP_US=$(num_arg "$1" "${2-}"); shift ;;
	--out) OUT=${2-}; shift ;;
	-h | --help) usage; exit 0 ;;
	*) die "unknown option '$1' (see --help)" ;;
	esac
	shift
done
[ "$(id -u)" -eq 0 ] || die "loads BPF programs: run it as root"
need_bin "$TAILTRACE"
need_bin "$SLEEPER"
OUT=${OUT:-$TOP/results/exporter-soak-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
PORT=$(port_free)
PIDS=()
# scrape bodies go to memory: curl writing 408 KB a second to a disk file stalled now and
# then in writeback, and that time showed up as scrape time
SHM=$(mktemp -d /dev/shm/tt-soak.XXXXXX)
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$SHM"
}
trap cleanup EXIT INT TERM

# the busy host: long-lived sleepers, and a stream of short-lived processes
for _ in $(seq "$PROCS"); do
	"$SLEEPER" 1000000000 "$SLEEP_US" >/dev/null &
	PIDS+=($!)
done
if [ "$CHURN" -gt 0 ]; then
	(while :; do
		for _ in $(seq "$CHURN"); do /bin/true; done
		sleep 1
	done) &
	PIDS+=($!)
fi

"$TAILTRACE" --all --listen "127.0.0.1:$PORT" --top "$TOPN" --out "$OUT/run" \
	>"$OUT/tailtrace.out" 2>"$OUT/tailtrace.err" &
TT=$!
PIDS+=("$TT")
for _ in $(seq 100); do
	grep -q "serving metrics" "$OUT/tailtrace.err" 2>/dev/null && break
	sleep 0.1
done
grep -q "serving metrics" "$OUT/tailtrace.err" || die "tailtrace did not start: $(tail -2 "$OUT/tailtrace.err")"
echo "$ME: $PROCS sleepers (every $SLEEP_US us), $CHURN processes/s started; tailtrace --all" \
	"--top $TOPN scraped every second for $DURATION s; results in $OUT"

rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$TT/status"; }
: >"$OUT/scrapes.tsv"
echo "0	$(rss_kb)" >"$OUT/rss.tsv"
t0=$(date +%s)
while :; do
	now=$(($(date +%s) - t0))
	[ "$now" -lt "$DURATION" ] || break
	curl -s -o "$SHM/last.txt" \
		-w "$now	%{time_total}	%{size_download}	%{time_connect}	%{time_starttransfer}\n" \
		"http://127.0.0.1:$PORT/metrics" >"$SHM/scrape.tsv" || die "scrape failed at $now s"
	IFS='	' read -r t total size connect first <"$SHM/scrape.tsv"
	echo "$t	$total	$size	$(grep -vc '^#' "$SHM/last.txt")	$connect	$first" >>"$OUT/scrapes.tsv"
	[ $((now % 10)) -ne 0 ] || echo "$now	$(rss_kb)" >>"$OUT/rss.tsv"
	kill -0 "$TT" 2>/dev/null || die "tailtrace exited: $(tail -2 "$OUT/tailtrace.err")"
	sleep 1
done
echo "$DURATION	$(rss_kb)" >>"$OUT/rss.tsv"
cp "$SHM/last.txt" "$OUT/last.txt"
kill -INT "$TT"
wait "$TT" || die "tailtrace failed: $(tail -2 "$OUT/tailtrace.err")"

python3 - "$OUT" <<'PY'
import re, statistics, sys
out = sys.argv[1]
rows = [l.split("\t") for l in open(f"{out}/scrapes.tsv") if l.strip()]
t = sorted(float(r[1]) * 1000 for r in rows)
samples = [int(r[3]) for r in rows]
rss = [int(l.split("\t")[1]) / 1024 for l in open(f"{out}/rss.tsv") if l.strip()]
last = open(f"{out}/last.txt").read()
procs = {m: float(v) for m, v in re.findall(r'tailtrace_processes\{state="(\w+)"\} (\S+)', last)}
err = open(f"{out}/tailtrace.err").read()
cost = re.search(r"= ([0-9.]+)% of the machine", err)
p99 = t[min(len(t) - 1, int(0.99 * len(t)))]
print(f"scrapes: {len(t)}, samples per scrape: median {statistics.median(samples):.0f} "
      f"(max {max(samples)})")
p95 = t[min(len(t) - 1, int(0.95 * len(t)))]
slow = sum(x > 50 for x in t)
print(f"scrape time ms: p50 {statistics.median(t):.1f}  p95 {p95:.1f}  p99 {p99:.1f}  max {t[-1]:.1f};"
      f" {slow} of {len(t)} over 50 ms (target <= 50 ms) {'ok' if p99 <= 50 else 'ABOVE'}")
# where the slow ones went: connect, server (request sent -> first byte), transfer
for r in rows:
    if float(r[1]) > 0.05:
        c, f, tot = float(r[4]), float(r[5]), float(r[1])
        print(f"  slow scrape at {r[0]} s: {tot * 1000:.0f} ms = connect {c * 1000:.1f} + "
              f"server {(f - c) * 1000:.1f} + transfer {(tot - f) * 1000:.1f}")
print(f"tailtrace RSS MB: start {rss[0]:.1f}  max {max(rss):.1f}  end {rss[-1]:.1f}"
      f"  (target <= 50 MB) {'ok' if max(rss) <= 50 else 'ABOVE'}")
print(f"processes at the end: labelled {procs.get('labelled', 0):.0f}, folded "
      f"{procs.get('folded', 0):.0f}; tailtrace's own cost: {cost.group(1) if cost else '?'}% "
      "of the machine")
PY
