#!/usr/bin/env bash
# What tracing costs a real service: PostgreSQL (Debian's, a private cluster on a Unix socket,
# synchronous_commit=off) driven by pgbench (TPC-B-like, -c CLIENTS -j 2, scale SCALE), its
# transactions per second under each mode, the modes alternating in every round (A B C, then
# C B A, ...):
#   none       pgbench alone
#   runqlat    libbpf-tools' runqlat (system-wide run-queue histogram) attached
#   default    tailtrace --cgroup (the cluster's cgroup: the postmaster and every backend it
#              forks), default events
#   fp, dwarf  default with --user-stacks fp or dwarf (how off-CPU user stacks are walked)
#   spans      the same with --span postgres:PortalRun (one span a statement)
#   bpftrace   bpftrace's uprobe + uretprobe latency histogram on PortalRun
#   alt        $TAILTRACE_ALT (another tailtrace binary, e.g. an older build) as default
# With --bpf-stats, tailtrace's runs keep the kernel's run-time statistics (--bpf-stats
# always), each row has the BPF ns a transaction and the switch program's ns a run, and
# their per-mode medians are printed at the end.
# Prints per mode (bench/ab_stats.py): median tps, its ratio to none, the per-round ratios'
# median and geometric mean with a 95 % confidence interval, tailtrace's own CPU share and the
# events it lost.
#
#   bench/pg_cost.sh [--rounds R] [--duration S] [--clients C] [--scale N] [--modes LIST]
#                    [--bpf-stats] [--out DIR]
#
# Run as root. Installs Debian's postgresql if it is missing (its system service stays off).
set -euo pipefail
ME=pg_cost.sh
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$TOP/build}
ROUNDS=12 DURATION=10 CLIENTS=16 SCALE=10 MODES=none,runqlat,default,spans,bpftrace OUT=""
MODE_NAMES=none,runqlat,default,fp,dwarf,spans,bpftrace,alt
STATS=()
TMP=$(mktemp -d)
. "$TOP/bench/tt_bench_lib.sh"
RUNQLAT=${RUNQLAT:-/usr/sbin/runqlat}
CG=""
PG=""

usage() {
	cat <<EOF
usage: bench/pg_cost.sh [options]
  --rounds R     rounds, each runs every mode once (default $ROUNDS)
  --duration S   pgbench -T, seconds a run (default $DURATION)
  --clients C    pgbench -c (default $CLIENTS)
  --scale N      pgbench -i -s (default $SCALE)
  --modes LIST   of $MODE_NAMES (default: all but alt; none is needed;
                 alt needs TAILTRACE_ALT=/path/to/another/tailtrace)
  --bpf-stats    tailtrace's BPF ns a transaction and switch ns a run in each row
  --out DIR      raw results (default results/<UTC time>-bench-pg)
EOF
}

while [ "$#" -gt 0 ]; do
	case $1 in
	--rounds) ROUNDS=$(num_arg "$1" "${2-}"); shift ;;
	--duration) DURATION=$(num_arg "$1" "${2-}"); shift ;;
	--clients) CLIENTS=$(num_arg "$1" "${2-}"); shift ;;
	--scale) SCALE=$(num_arg "$1" "${2-}"); shift ;;
	--modes) MODES=${2-}; shift ;;
	--bpf-stats) STATS=(--bpf-stats always) ;;
	--out) OUT=${2-}; shift ;;
	-h | --help) usage; exit 0 ;;
	*) die "unknown option '$1' (see --help)" ;;
	esac
	shift
done
[[ $MODES =~ ^(${MODE_NAMES//,/|})(,(${MODE_NAMES//,/|}))*$ ]] ||
	die "--modes expects a list of $MODE_NAMES, got '$MODES'"
[[ ,$MODES, == *,none,* ]] || die "--modes must include none (the baseline of every ratio)"
[ "$(id -u)" -eq 0 ] || die "needs root (BPF): run it as root"
[ "$ROUNDS" -ge 1 ] && [ "$DURATION" -ge 2 ] && [ "$CLIENTS" -ge 1 ] && [ "$SCALE" -ge 1 ] ||
	die "--rounds, --clients and --scale must be at least 1, --duration at least 2"
TAILTRACE=$BUILD/probes/tailtrace
need_bin "$TAILTRACE"
[[ ,$MODES, != *,runqlat,* ]] || [ -x "$RUNQLAT" ] ||
	die "mode runqlat needs $RUNQLAT: apt-get install libbpf-tools (or RUNQLAT=/path/to/runqlat)"
[[ ,$MODES, != *,alt,* ]] || [ -x "${TAILTRACE_ALT:-}" ] ||
	die "mode alt needs TAILTRACE_ALT=/path/to/another/tailtrace"
[[ ,$MODES, != *,bpftrace,* ]] || command -v bpftrace >/dev/null ||
	die "mode bpftrace needs bpftrace: apt-get install bpftrace"

if ! compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null; then
	echo "$ME: installing Debian's postgresql" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >/dev/null ||
		die "cannot install postgresql: apt-get install postgresql"
	systemctl disable --now postgresql >/dev/null 2>&1 || true
fi
PGBIN=$(dirname "$(compgen -G "/usr/lib/postgresql/*/bin/postgres" | sort -V | tail -1)")
command -v runuser >/dev/null || die "needs runuser: apt-get install util-linux"
as_pg() { runuser -u postgres -- "$@"; }

cleanup_pg() {
	stop_tracer
	[ -z "$PG" ] || as_pg "$PGBIN/pg_ctl" -D "$PG/data" -m immediate stop >/dev/null 2>&1 || true
	[ -z "$CG" ] || rmdir "$CG" 2>/dev/null || true
	[ -z "$PG" ] || rm -rf "$PG"
	cleanup
}
trap cleanup_pg EXIT INT TERM

OUT=${OUT:-results/$(date -u +%Y%m%dT%H%M%SZ)-bench-pg}
mkdir -p "$OUT"
RESULTS=$OUT/results.jsonl
: >"$RESULTS"

# The cluster, started from inside its own cgroup: every backend it forks is in it.
CGROOT=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
[ -n "$CGROOT" ] || die "no cgroup2 mount: mount -t cgroup2 none /sys/fs/cgroup"
CG=$CGROOT/tt-pgbench-$$
mkdir "$CG"
PG=$(mktemp -d /tmp/tt-pg-XXXXXX)
chmod 755 "$PG"
chown postgres "$PG"
PORT=$(port_free)
as_pg "$PGBIN/initdb" -D "$PG/data" -A trust >"$TMP/initdb.log" 2>&1 ||
	die "initdb failed: $(tail -2 "$TMP/initdb.log")"
sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$CG" runuser -u postgres -- \
	"$PGBIN/pg_ctl" -D "$PG/data" -l "$PG/log" -w -o "-c listen_addresses='' \
-c unix_socket_directories=$PG -p $PORT -c synchronous_commit=off -c max_connections=$((CLIENTS + 10))" \
	start >"$TMP/pg_ctl.log" 2>&1 || die "postgres did not start: $(tail -3 "$PG/log")"
as_pg "$PGBIN/pgbench" -h "$PG" -p "$PORT" -i -s "$SCALE" -q postgres >"$TMP/init.log" 2>&1 ||
	die "pgbench -i failed: $(tail -2 "$TMP/init.log")"

pgbench_tps() { # pgbench's tps, without the connection time
	as_pg "$PGBIN/pgbench" -h "$PG" -p "$PORT" -c "$CLIENTS" -j 2 -T "$DURATION" postgres \
		>"$TMP/pgbench.out" 2>&1 || die "pgbench failed: $(tail -2 "$TMP/pgbench.out")"
	sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$TMP/pgbench.out" | head -1
}

measure() { # mode round: one pgbench run under that mode; appends a JSON line
	local mode=$1 round=$2 run="$TMP/tt" tps meta=null
	rm -rf "$run"
	case $mode in
	none) ;;
	runqlat) start_tracer 10 "$TMP/tracer.log" '^Tracing' stdbuf -oL "$RUNQLAT" ;;
	default | alt)
		start_tracer 20 "$TMP/tracer.log" 'attached to' \
			"$([ "$mode" = alt ] && echo "$TAILTRACE_ALT" || echo "$TAILTRACE")" \
			--cgroup "$CG" "${STATS[@]}" --out "$run" ;;
	fp | dwarf) start_tracer 20 "$TMP/tracer.log" 'attached to' "$TAILTRACE" --cgroup "$CG" \
		"${STATS[@]}" --user-stacks "$mode" --out "$run" ;;
	spans) start_tracer 20 "$TMP/tracer.log" 'attached to' "$TAILTRACE" --cgroup "$CG" \
		"${STATS[@]}" --span "$PGBIN/postgres:PortalRun" --out "$run" ;;
	bpftrace) start_tracer 20 "$TMP/tracer.log" '^Attaching' bpftrace -e "
uprobe:$PGBIN/postgres:PortalRun { @t[tid] = nsecs; }
uretprobe:$PGBIN/postgres:PortalRun /@t[tid]/ { @us = hist((nsecs - @t[tid]) / 1000); delete(@t[tid]); }" ;;
	esac
	tps=$(pgbench_tps)
	stop_tracer
	[ ! -f "$run/meta.json" ] || meta=$run/meta.json
	python3 - "$mode" "$round" "$tps" "$meta" "$DURATION" >>"$RESULTS" <<'PY'
import json, sys
mode, rnd, tps, meta, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], float(sys.argv[5])
row = {"mode": mode, "round": rnd, "rps": tps}
if meta != "null":
    m = json.load(open(meta))
    cost = m.get("cost") or {}
    row["lost"] = m.get("lost_events")
    row["cpu_share"] = cost.get("cpu_share_of_machine")
    bpf = cost.get("bpf") or {}
    if bpf and tps > 0:  # --bpf-stats: the kernel's exact run-time statistics
        row["bpf_ns_per_tx"] = cost["bpf_total_ns"] / (tps * secs)
        row["switch_ns_per_run"] = (bpf.get("sched") or {}).get("ns_per_run")
print(json.dumps(row))
PY
	printf '%s: round %d %-9s %10.1f tps\n' "$ME" "$round" "$mode" "$tps"
}

echo "$ME: PostgreSQL $(basename "$(dirname "$PGBIN")"), pgbench -c $CLIENTS -j 2 -T $DURATION," \
	"scale $SCALE; $ROUNDS rounds of $MODES"
ab_rounds "$ROUNDS" "$MODES" "$RESULTS"
[ "${#STATS[@]}" = 0 ] || python3 - "$RESULTS" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"{'mode':10} {'BPF ns/tx':>10} {'switch ns/run':>14}   (medians, --bpf-stats)")
for mode in dict.fromkeys(r["mode"] for r in rows):
    rs = [r for r in rows if r["mode"] == mode and r.get("bpf_ns_per_tx")]
    if rs:
        print(f"{mode:10} {statistics.median(r['bpf_ns_per_tx'] for r in rs):10.0f} "
              f"{statistics.median(r['switch_ns_per_run'] or 0 for r in rs):14.0f}")
PY
