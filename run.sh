#!/usr/bin/env bash
# tailtrace front door: build, run a workload (or attach to a process) under tailtrace
# and perf, draw flame graphs, run the analysis and print where the tail latency went.
# ./run.sh --help lists every option. Results land in results/<UTC time>-<label>/.
set -euo pipefail

TT_ME=${TT_ME:-run.sh}
TT_SELF=$0
TT_TOP=$(cd "$(dirname "$0")" && pwd)
TT_BUILD=${TT_BUILD:-$TT_TOP/build}
TT_SERVER=$TT_BUILD/workloads/server/orders-server
TT_HTTPLOAD=$TT_BUILD/workloads/httpload/httpload
TT_TAILTRACE=$TT_BUILD/probes/tailtrace
export PATH="$HOME/.cargo/bin:$PATH"
export PYTHONPATH="$TT_TOP${PYTHONPATH:+:$PYTHONPATH}"

# shellcheck source=scripts/lib/common.sh
. "$TT_TOP/scripts/lib/common.sh"
# shellcheck source=scripts/lib/record.sh
. "$TT_TOP/scripts/lib/record.sh"
# shellcheck source=scripts/lib/flame.sh
. "$TT_TOP/scripts/lib/flame.sh"
# shellcheck source=scripts/lib/modes.sh
. "$TT_TOP/scripts/lib/modes.sh"

usage() {
	cat <<'EOF'
usage: ./run.sh [OPTIONS]                      run a workload against orders-server
       ./run.sh --sweep [--workloads L] [--conns L] [OPTIONS]
       ./run.sh --diff RUN_A RUN_B            differential flame graphs (into RUN_B)
       ./run.sh --pid PID[,PID] | --comm NAME [--duration S] [--span BIN:SYMBOL]...
       ./run.sh [--span BIN:SYMBOL]... -- CMD ARGS...

Workload (default mode):
  --workload naive|pool|async  client concurrency model              [pool]
  --conns N                    connections (a list with --sweep)     [20; sweep 10,50,100]
  --workers W                  pool worker threads (pool model only) [20, httpload's]
                               with --sweep a list (2,4,8,20,50): one pool run per count,
                               P99 and throughput vs workers in compare.html, knee named
  --requests N                 requests to send                      [20000]
  --duration S                 run for S seconds instead of --requests
  --rate R                     open loop at R requests/s             [closed loop]
  --url URL                    target URL; no orders-server started  [own orders-server]
  --port P                     orders-server port                    [a free port]
  --server-workers N           orders-server worker threads          [usable CPUs]
  --service-us U               orders-server CPU work per request µs [0]
  --sleep-us U                 orders-server sleep per request µs    [0]
  --cpus LIST                  pin pool workers / async loops (0-1,3) [pool: round robin, async: none]
  --numa on|off                spread pool workers over NUMA nodes   [off]

Recording:
  --events LIST|none           tailtrace events (runq,switch,offcpu,cpu,irq,locks,spans) or none
                               for a baseline without tailtrace (old spelling: --probes)
                               [runq,switch,offcpu,cpu: tracepoints only; lock waits, wait
                               reasons, wakers and who held the CPU come from them]. Add locks for exact mutex hold times
                               and lock chains, at a cost: ~0.5 us per uprobe hit, three a
                               lock/unlock pair (httpload pool/100: 84.8k req/s untraced, 44.3k
                               with locks). tailtrace warns when uprobes take > 5% of a CPU.
  --span BIN:SYMBOL            a function call becomes a request (repeatable)  [none; with
                               --pid of a server listening on TCP: --span tcp]
  --span usdt:BIN:PROV:NAME    or the time from USDT probe NAME__start to NAME__done
  --span tcp[:PORT]            or each request on the target's TCP port, first byte in to
                               its answer's last byte out (any runtime: Node, Java)
  --span none                  no requests: the scheduler-only report, even for a server
  --span-exit auto|uretprobe|ret  how spans end (tailtrace --span-exit; docs/third-party.md)  [auto]
  --user-stacks dwarf[,BYTES]|fp  how off-CPU user stacks are walked: copied and unwound by
                               call-frame information, through code without frame pointers
                               (Debian's libc, python3), or by frame pointer  [dwarf]
  --ringbuf-mb N               ring buffer per stream in MiB, 0 to 2048 (tailtrace
                               --ringbuf-mb; bigger when the report says events were lost)  [32]
  --flight-recorder SECONDS    flight recorder (tailtrace's option; --flight is the same):
                               keep the last SECONDS in memory, write a
                               capture of each request slower than --trigger (with our
                               workloads, httpload's USDT request marks are the spans);
                               no perf profile; analysed by python3 -m analyze captures
  --trigger EXPR               latency>5ms, p99 or p99.9 of the last minute     [p99.9]
  --otlp URL                   send each capture's slow requests, explained, as OTLP spans
                               to URL (http://HOST:4318/v1/traces) as it is written
  --no-perf                    no perf on-CPU profile                [perf record -F 499 -g]
  --no-flamegraph              skip flame graphs                     [draw them if inferno exists]
  --out DIR                    run directory                         [results/<UTC time>-<label>]
  --label NAME                 label in the run directory name       [<workload>-c<conns>, <comm>-pid<PID>, <cmd>]

Sweep:
  --sweep                      run every --workloads x --conns combination, then compare
  --workloads LIST             models for the sweep                  [naive,pool,async]

Third-party processes:
  --pid PID[,PID]              attach to running processes, all their threads and descendant
                               processes (a pre-fork server: its master's pid); a process
                               listening on TCP gets --span tcp, otherwise without --span
                               the report is scheduler-only (no requests to decompose)
  --comm NAME                  attach to every process named NAME (e.g. nginx workers)
  --duration S                 how long to trace with --pid/--comm   [10]
  -- CMD ARGS...               run CMD under tailtrace and perf

Other:
  --diff RUN_A RUN_B           diff-<A>-vs-<B>.svg (on-CPU) and diff-offcpu-<A>-vs-<B>.svg in RUN_B
  --install                    install missing tools (scripts/install-deps.sh) instead of failing
  --no-build                   do not rebuild when sources changed
  -h, --help                   this help
Environment: TT_BUILD (build directory) [./build].
EOF
}

# Defaults (one place; --help mirrors them).
set_defaults() {
	MODE=workload WORKLOAD=pool CONNS=20 WORKERS="" REQUESTS="" DURATION="" RATE="" URL=""
	PORT="" SERVER_WORKERS="" SERVICE_US="" SLEEP_US="" CPUS="" NUMA=""
	EVENTS="" SPANS=() SPAN_EXIT="" USER_STACKS="" RINGBUF_MB="" PERF=1 FLAME=1 OUT="" LABEL="" WORKLOADS=naive,pool,async
	SWEEP_CONNS=10,50,100 SPAN_NONE=0 TARGET_PID="" TARGET_COMM="" DIFF_A="" DIFF_B="" INSTALL=0
	BUILD=1 CMD=() CONNS_SET=0 FLIGHT="" TRIGGER="" OTLP=""
}

need_arg() { [ "$#" -ge 2 ] && [ -n "$2" ] || die "option $1 needs a value; see ./run.sh --help"; }

need_uint() {
	[[ $2 =~ ^[0-9]+$ ]] && [ "$2" -gt 0 ] || die "$1 wants a positive integer, got '$2'; see ./run.sh --help"
}

need_pid_list() {
	[[ $2 =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || die "$1 wants a process id or a list (PID,PID,...), got '$2'; see ./run.sh --help"
}

need_num() {
	[[ $2 =~ ^[0-9]+([.][0-9]+)?$ ]] || die "$1 wants a number, got '$2'; see ./run.sh --help"
}

need_pos_num() {
	need_num "$1" "$2"
	[[ $2 =~ [1-9] ]] || die "$1 wants a number above 0, got '$2'; see ./run.sh --help"
}

# need_cpus OPT LIST: LIST (0-3,6) names only CPUs this process may run on, so that
# httpload does not refuse it after orders-server and tailtrace have started.
need_cpus() {
	local allowed part a b
	[[ $2 =~ ^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$ ]] ||
		die "$1 wants a CPU list like 0-1,3, got '$2'"
	allowed=$(taskset -cp $$ 2>/dev/null | sed 's/.*: //')
	[ -n "$allowed" ] || return 0
	for part in ${2//,/ }; do
		a=${part%-*} b=${part#*-}
		for ((; a <= b; a++)); do
			cpu_allowed "$a" "$allowed" ||
				die "$1: CPU $a is offline or outside this process's allowed CPUs ($allowed): pick CPUs from \`taskset -cp \$\$\`"
		done
	done
}

cpu_allowed() { # CPU LIST (0-3,6): true if CPU is in LIST
	local part
	for part in ${2//,/ }; do
		[ "$1" -ge "${part%-*}" ] && [ "$1" -le "${part#*-}" ] && return 0
	done
	return 1
}

parse_args() {
	while [ "$#" -gt 0 ]; do
		case $1 in
		--workload) need_arg "$@"; WORKLOAD=$2; shift ;;
		--conns) need_arg "$@"; CONNS=$2; CONNS_SET=1; shift ;;
		--workers) need_arg "$@"; WORKERS=$2; shift ;;
		--requests) need_arg "$@"; need_uint "$1" "$2"; REQUESTS=$2; shift ;;
		--duration) need_arg "$@"; need_pos_num "$1" "$2"; DURATION=$2; shift ;;
		--rate) need_arg "$@"; need_pos_num "$1" "$2"; RATE=$2; shift ;;
		--url) need_arg "$@"; URL=$2; shift ;;
		--port) need_arg "$@"; need_uint "$1" "$2"; PORT=$2; shift ;;
		--server-workers) need_arg "$@"; need_uint "$1" "$2"; SERVER_WORKERS=$2; shift ;;
		--service-us) need_arg "$@"; need_num "$1" "$2"; SERVICE_US=$2; shift ;;
		--sleep-us) need_arg "$@"; need_num "$1" "$2"; SLEEP_US=$2; shift ;;
		--cpus) need_arg "$@"; need_cpus "$1" "$2"; CPUS=$2; shift ;;
		--numa) need_arg "$@"; NUMA=$2; shift ;;
		--events | --probes) need_arg "$@"; EVENTS=$2; shift ;;
		--span) need_arg "$@"; [[ $2 == *:* || $2 == tcp || $2 == none ]] || die "--span wants BIN:SYMBOL (e.g. libcurl.so.4:curl_easy_perform), usdt:BIN:PROVIDER:NAME, tcp[:PORT] or none, got '$2'"
			if [ "$2" = none ]; then SPAN_NONE=1; else SPANS+=("$2"); fi
			shift ;;
		--span-exit) need_arg "$@"; [[ $2 =~ ^(auto|uretprobe|ret)$ ]] || die "--span-exit wants auto, uretprobe or ret, got '$2'"
			SPAN_EXIT=$2; shift ;;
		--user-stacks) need_arg "$@"; [[ $2 =~ ^(fp|dwarf(,[0-9]+)?)$ ]] || die "--user-stacks wants dwarf, dwarf,BYTES or fp, got '$2'"
			USER_STACKS=$2; shift ;;
		--ringbuf-mb) need_arg "$@"; [[ $2 =~ ^[0-9]+$ ]] && [ "$2" -le 2048 ] || die "--ringbuf-mb wants MiB from 0 to 2048, got '$2'"
			RINGBUF_MB=$2; shift ;;
		--flight-recorder|--flight) need_arg "$@"; need_pos_num "$1" "$2"; FLIGHT=$2; shift ;;
		--trigger) need_arg "$@"; TRIGGER=$2; shift ;;
		--otlp) need_arg "$@"; OTLP=$2; shift ;;
		--no-perf) PERF=0 ;;
		--no-flamegraph) FLAME=0 ;;
		--out) need_arg "$@"; OUT=$2; shift ;;
		--label) need_arg "$@"; LABEL=$2; shift ;;
		--sweep) MODE=sweep ;;
		--workloads) need_arg "$@"; WORKLOADS=$2; shift ;;
		--pid) need_arg "$@"; need_pid_list "$1" "$2"; TARGET_PID=$2; MODE=pid; shift ;;
		--comm) need_arg "$@"; TARGET_COMM=$2; MODE=pid; shift ;;
		--diff) [ "$#" -ge 3 ] || die "--diff needs two run directories: ./run.sh --diff RUN_A RUN_B"
			DIFF_A=$2 DIFF_B=$3 MODE=diff; shift 2 ;;
		--install) INSTALL=1 ;;
		--no-build) BUILD=0 ;;
		-h | --help) usage; exit 0 ;;
		--) shift; [ "$#" -gt 0 ] || die "-- needs a command: ./run.sh -- CMD ARGS"
			CMD=("$@"); MODE=cmd; break ;;
		*) die "unknown option '$1'; see ./run.sh --help" ;;
		esac
		shift
	done
}

validate_args() {
	case $WORKLOAD in naive | pool | async) ;; *) die "--workload must be naive, pool or async, got '$WORKLOAD'" ;; esac
	[ -z "$NUMA" ] || [ "$NUMA" = on ] || [ "$NUMA" = off ] || die "--numa must be on or off, got '$NUMA'"
	[ -z "$REQUESTS" ] || [ -z "$DURATION" ] || [ "$MODE" != workload ] ||
		die "--requests and --duration exclude each other; pass one"
	[ -z "$TARGET_PID" ] || [ -z "$TARGET_COMM" ] || die "--pid and --comm exclude each other; pass one"
	[ "$MODE" = sweep ] || [ -z "$WORKERS" ] || [[ $WORKERS =~ ^[1-9][0-9]*$ ]] ||
		die "--workers wants a positive count, got '$WORKERS' (a list only with --sweep)"
	if [ "$MODE" = sweep ]; then
		[ -z "$WORKERS" ] || [[ $WORKERS =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] ||
			die "--workers wants a count or, with --sweep, a list like 2,4,8,20,50; got '$WORKERS'"
		[ "$CONNS_SET" = 1 ] && SWEEP_CONNS=$CONNS
		[[ $SWEEP_CONNS =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--conns wants a list like 10,50,100, got '$SWEEP_CONNS'"
		[[ $WORKLOADS =~ ^(naive|pool|async)(,(naive|pool|async))*$ ]] ||
			die "--workloads wants a list of naive,pool,async, got '$WORKLOADS'"
	elif [ "$MODE" = workload ]; then
		need_uint --conns "$CONNS"
	fi
	if [ "$MODE" = workload ] && [ -z "$REQUESTS" ] && [ -z "$DURATION" ]; then REQUESTS=20000; fi
	[ "$MODE" != pid ] || [ -n "$DURATION" ] || DURATION=10
	[ -z "$TRIGGER" ] || [ -n "$FLIGHT" ] || die "--trigger goes with --flight-recorder SECONDS"
	[ -z "$OTLP" ] || [ -n "$FLIGHT" ] || die "--otlp goes with --flight-recorder SECONDS (a whole run: python3 -m analyze export otlp RUN_DIR)"
	if [ -n "$FLIGHT" ]; then
		[ "$MODE" != sweep ] && [ "$MODE" != diff ] || die "--flight-recorder records one run: not with --sweep or --diff"
		[ "$EVENTS" != none ] || die "--flight-recorder needs the probes: drop --events none"
		PERF=0 FLAME=0 # a long run: no whole-run profile; each capture has its own stacks
	fi
}

# ---- cleanup: the one trap ------------------------------------------------------
INTERRUPTED="" RUN_DIR="" RECORDED=0 TT_PID="" PERF_PID="" SERVER_PID="" SWEEP_CHILD=""

on_signal() {
	INTERRUPTED=$1
	log "SIG$1: stopping (what was recorded so far is kept)"
	exit 130
}

cleanup() {
	local rc=$?
	trap '' INT TERM
	if [ -n "$SWEEP_CHILD" ]; then
		# TERM, not INT: a background job of a script starts with SIGINT ignored.
		kill -TERM "$SWEEP_CHILD" 2>/dev/null || true
		wait "$SWEEP_CHILD" 2>/dev/null || true
	fi
	# Order: tailtrace first (it flushes and stops its child), then perf, then the server.
	[ -z "$TT_PID" ] || pg_stop "$TT_PID" INT 15
	[ -z "$PERF_PID" ] || pg_stop "$PERF_PID" INT 15
	[ -z "$SERVER_PID" ] || pg_stop "$SERVER_PID" TERM 5
	local g
	for g in "${TT_PGIDS[@]}"; do pg_stop "$g" TERM 5; done
	[ -z "$RUN_DIR" ] || rm -f "$RUN_DIR/.perf.ctl" "$RUN_DIR/.perf.ack"
	if [ -n "$INTERRUPTED" ] && [ -n "$RUN_DIR" ]; then
		if [ "$RECORDED" = 0 ]; then
			json_mark_incomplete "$RUN_DIR" "interrupted by SIG$INTERRUPTED"
			log "partial run kept in $RUN_DIR (meta.json: incomplete); analyse it with: python3 -m analyze report $RUN_DIR"
		else
			log "stopped after the recording had finished; the run is complete: python3 -m analyze report $RUN_DIR"
		fi
	fi
	exit "$rc"
}

main() {
	TT_ARGV=("$@")
	set_defaults
	parse_args "$@"
	validate_args
	trap cleanup EXIT
	trap 'on_signal INT' INT
	trap 'on_signal TERM' TERM
	case $MODE in
	diff) mode_diff "$DIFF_A" "$DIFF_B" ;;
	sweep) mode_sweep ;;
	workload) mode_workload ;;
	pid | cmd) mode_thirdparty ;;
	esac
}

main "$@"
