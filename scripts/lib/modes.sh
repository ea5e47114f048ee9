# shellcheck shell=bash
# run.sh modes: workload, sweep, third-party (--pid/--comm, -- CMD), diff.

# prepare: tools, root, BPF, tracefs, build (skipped by --diff, which only reads runs).
prepare() {
	env_require_root
	env_check_tools "$INSTALL"
	env_check_bpf
	env_mount_tracefs
	if [ "$BUILD" = 1 ]; then build_if_stale; fi
	[ "$EVENTS" = none ] || [ -x "$TT_TAILTRACE" ] || die "$TT_TAILTRACE is missing; build it: cmake --build $TT_BUILD"
}

# results_dir: results/ (created, and kept out of git) — prints its path.
results_dir() {
	mkdir -p "$TT_TOP/results" || die "cannot create $TT_TOP/results; pass --out DIR"
	[ -e "$TT_TOP/results/.gitignore" ] || echo '*' >"$TT_TOP/results/.gitignore"
	echo "$TT_TOP/results"
}

# run_dir_make LABEL: create the run directory; sets RUN_DIR.
run_dir_make() {
	local label=$1
	if [ -n "$OUT" ]; then
		RUN_DIR=$OUT
		[ -z "$(ls -A "$RUN_DIR" 2>/dev/null)" ] ||
			die "--out $RUN_DIR is not empty (old records would mix with new ones); pass a new directory"
	else
		RUN_DIR=$(results_dir)/$(utc_stamp)-$label
	fi
	mkdir -p "$RUN_DIR" || die "cannot create $RUN_DIR; pass a writable --out DIR"
	RUN_DIR=$(cd "$RUN_DIR" && pwd)
	python3 "$TT_TOP/scripts/lib/runinfo.py" write-run "$RUN_DIR" "$label" "$TT_SELF" "${TT_ARGV[@]}"
}

# analyze_run DIR: the analysis (report.html, summary.json, ...) and its headline; a
# flight-recorder run: every capture's, and captures.html.
analyze_run() {
	local dir=$1
	if [ -n "$FLIGHT" ]; then
		phase "analysis: python3 -m analyze captures $dir"
		python3 -m analyze captures "$dir" || {
			log "the analysis failed on $dir (error above); the captures are kept there"
			return 1
		}
		log "captures: $dir/captures.html"
		return 0
	fi
	phase "analysis: python3 -m analyze report $dir"
	if ! python3 -m analyze report "$dir"; then
		log "the analysis failed on $dir (error above); the recorded data is kept there"
		return 1
	fi
	if [ ! -e "$dir/requests.bin" ] && [ ! -e "$dir/spans.bin" ]; then
		log "scheduler-only report: no requests in this run; add --span BIN:SYMBOL to make a" \
			"function's calls the requests (e.g. --span /usr/sbin/nginx:ngx_http_process_request)"
	fi
}

# finish_run DIR TITLE: flame graphs, analysis, summary table and report path.
finish_run() {
	local dir=$1 title=$2 rc=0
	RECORDED=1 # from here on, an interruption does not make the recording incomplete
	flame_all "$dir" "$title"
	analyze_run "$dir" || rc=1
	[ ! -f "$dir/report.html" ] || log "report: $dir/report.html"
	return "$rc"
}

label_default() {
	if [ -n "$LABEL" ]; then echo "$LABEL"; else echo "$1"; fi
}

# The built-in workloads are traced with the tracepoint probes only unless --events says
# otherwise: the pool model's queue mutex takes ~60k lock calls/s, and the locks uprobes
# halve its throughput (docs/benchmarks.md, "Uprobe costs"), which would turn the comparison
# the report is about upside down. tailtrace's own default is the same set now
# (lock waits come from the wait reasons at sched_switch); third-party modes use that default.
WORKLOAD_EVENTS_DEFAULT=runq,switch,offcpu,cpu

mode_workload() {
	local label url rc=0
	prepare
	[ -n "$EVENTS" ] || EVENTS=$WORKLOAD_EVENTS_DEFAULT
	label=$(label_default "$WORKLOAD-c$CONNS")
	[ -x "$TT_SERVER" ] && [ -x "$TT_HTTPLOAD" ] || die "workload binaries missing in $TT_BUILD; build: cmake --build $TT_BUILD"
	[ -n "$URL" ] || [ -z "$PORT" ] || port_check_free "$PORT"
	run_dir_make "$label"
	if [ -n "$URL" ]; then
		url=$URL
	else
		server_args
		server_start "$RUN_DIR/server.log" "${SERVER_ARGS[@]}"
		phase "orders-server on 127.0.0.1:$SERVER_PORT"
		url=http://127.0.0.1:$SERVER_PORT/orders
	fi
	httpload_args "$url" "$RUN_DIR"
	if [ "$EVENTS" = none ]; then
		phase "recording (no probes): ${HTTPLOAD_CMD[*]}"
		record_plain "$RUN_DIR" "${HTTPLOAD_CMD[@]}" || rc=$?
	else
		phase "recording: tailtrace -- ${HTTPLOAD_CMD[*]}"
		record_command "$RUN_DIR" "${HTTPLOAD_CMD[@]}" || rc=$?
	fi
	if [ -n "$SERVER_PID" ] && ! pid_running "$SERVER_PID"; then
		die "orders-server exited during the run ($(tail -1 "$RUN_DIR/server.log" 2>/dev/null)); see $RUN_DIR/server.log"
	fi
	server_stop
	[ "$rc" = 0 ] || die "the workload failed (httpload/tailtrace exit $rc, messages above); partial data in $RUN_DIR"
	phase "recorded into $RUN_DIR"
	finish_run "$RUN_DIR" "$label"
}

# record_plain DIR CMD...: baseline without tailtrace (perf only).
record_plain() {
	local dir=$1 rc=0
	shift
	perf_start "$dir"
	pg_start - "$@"
	TT_PID=$PG_PID
	perf_pids "$dir" "$TT_PID${SERVER_PID:+,$SERVER_PID}"
	pg_wait "$TT_PID" || rc=$?
	TT_PID=""
	perf_stop "$dir"
	return "$rc"
}

# mode_sweep: one run per (workload, conns), each in its own directory under the sweep's;
# with a --workers list, one pool run per worker count (w<N> in its name).
mode_sweep() {
	local sweep_dir w c k runs=() failed=() sub args rc name counts what
	prepare
	BUILD=0
	[ -n "$OUT" ] || OUT=$(results_dir)/$(utc_stamp)-$(label_default sweep)
	mkdir -p "$OUT"
	sweep_dir=$(cd "$OUT" && pwd)
	for w in ${WORKLOADS//,/ }; do
		counts=-
		[ "$w" != pool ] || [ -z "$WORKERS" ] || counts=${WORKERS//,/ }
		for c in ${SWEEP_CONNS//,/ }; do
			for k in $counts; do
				name=$w-c$c
				[ "$k" = - ] || [[ $WORKERS != *,* ]] || name=$w-c$c-w$k
				sub=$sweep_dir/$name
				args=(--workload "$w" --conns "$c" --out "$sub" --no-build --label "$name")
				sweep_passthrough_args
				[ "$k" = - ] || PASS+=(--workers "$k")
				what="$w, $c connections"
				[ "$k" = - ] || what+=", $k workers"
				phase "sweep run $((${#runs[@]} + ${#failed[@]} + 1)): $what"
				rc=0
				TT_ME="run.sh[$name]" "$TT_SELF" "${args[@]}" "${PASS[@]}" &
				SWEEP_CHILD=$!
				pg_wait "$SWEEP_CHILD" || rc=$?
				SWEEP_CHILD=""
				if [ -f "$sub/summary.json" ]; then runs+=("$sub"); else failed+=("$name (exit $rc)"); fi
			done
		done
	done
	[ "${#runs[@]}" -gt 0 ] || die "every sweep run failed: ${failed[*]}"
	# analyze compare prints the seed's table: throughput, avg, P99, max, runnable share of >=P99.
	phase "comparison: python3 -m analyze compare ${runs[*]##*/} --out $sweep_dir"
	python3 -m analyze compare "${runs[@]}" --out "$sweep_dir" ||
		die "analyze compare failed (error above); each run's report is in its directory under $sweep_dir"
	[ ! -f "$sweep_dir/compare.html" ] || log "comparison report: $sweep_dir/compare.html"
	[ "${#failed[@]}" = 0 ] || die "some sweep runs failed: ${failed[*]}"
}

# PASS: the options a sweep hands to each of its runs.
sweep_passthrough_args() {
	PASS=() # --workers: per run, by mode_sweep
	[ -z "$REQUESTS" ] || PASS+=(--requests "$REQUESTS")
	[ -z "$DURATION" ] || PASS+=(--duration "$DURATION")
	[ -z "$RATE" ] || PASS+=(--rate "$RATE")
	[ -z "$URL" ] || PASS+=(--url "$URL")
	[ -z "$SERVER_WORKERS" ] || PASS+=(--server-workers "$SERVER_WORKERS")
	[ -z "$SERVICE_US" ] || PASS+=(--service-us "$SERVICE_US")
	[ -z "$SLEEP_US" ] || PASS+=(--sleep-us "$SLEEP_US")
	[ -z "$CPUS" ] || PASS+=(--cpus "$CPUS")
	[ -z "$NUMA" ] || PASS+=(--numa "$NUMA")
	[ -z "$EVENTS" ] || PASS+=(--events "$EVENTS")
	[ "$PERF" = 1 ] || PASS+=(--no-perf)
	[ "$FLAME" = 1 ] || PASS+=(--no-flamegraph)
	return 0
}

# mode_thirdparty: --pid PID / --comm NAME for DURATION, or -- CMD ARGS.
mode_thirdparty() {
	local label pids rc=0 comm
	prepare
	if [ "$MODE" = cmd ]; then
		command -v "${CMD[0]}" >/dev/null 2>&1 || die "command not found: ${CMD[0]}; give a path or install it"
		label=$(label_default "$(basename "${CMD[0]}")")
		run_dir_make "$label"
		phase "recording: tailtrace -- ${CMD[*]}"
		record_command "$RUN_DIR" "${CMD[@]}" || rc=$?
		[ "$rc" = 0 ] || log "${CMD[0]} exited with status $rc; analysing what was recorded"
		finish_run "$RUN_DIR" "$label ${CMD[*]}" || true
		return "$rc"
	fi
	if [ -n "$TARGET_COMM" ]; then
		pids=$(pgrep -d, -x "$TARGET_COMM") ||
			die "no running process is named '$TARGET_COMM' (check with: pgrep -a $TARGET_COMM); start it first"
		label=$(label_default "$TARGET_COMM")
	else
		local p first=${TARGET_PID%%,*}
		for p in ${TARGET_PID//,/ }; do
			pid_running "$p" || die "no process $p (check with: ps -p $p); give a running PID"
		done
		pids=$TARGET_PID
		comm=$(cat "/proc/$first/comm" 2>/dev/null || echo proc)
		label=$(label_default "$comm-pid$first")
	fi
	[ -z "$TARGET_PID" ] || span_tcp_default "${TARGET_PID%%,*}"
	run_dir_make "$label"
	phase "recording: tailtrace on pid(s) $pids${TARGET_PID:+ and their descendants} for ${DURATION}s"
	record_pid "$RUN_DIR" "$pids" || rc=$?
	[ "$rc" = 0 ] || die "tailtrace failed (exit $rc, message above); partial data in $RUN_DIR"
	if [ -n "$TARGET_PID" ] && ! any_pid_running "$TARGET_PID"; then
		json_mark_incomplete "$RUN_DIR" "target exited before --duration"
		finish_run "$RUN_DIR" "$label" || true
		die "target $TARGET_PID exited during the ${DURATION}s; the run holds only what happened before:" \
			"to trace a short-lived program from its start, run it as: ./run.sh -- CMD ARGS"
	fi
	finish_run "$RUN_DIR" "$label"
}

# listen_ports PID: the TCP ports PID listens on (its sockets in LISTEN state), one a line.
listen_ports() {
	local pid=$1 fd link inode port st rest
	local -A mine=()
	for fd in /proc/"$pid"/fd/*; do
		link=$(readlink "$fd" 2>/dev/null) || continue
		if [[ $link =~ ^socket:\[([0-9]+)\]$ ]]; then mine[${BASH_REMATCH[1]}]=1; fi
	done
	[ "${#mine[@]}" -gt 0 ] || return 0
	# sl local:port remote:port st tx:rx tr:when retrnsmt uid timeout inode
	cat /proc/"$pid"/net/tcp /proc/"$pid"/net/tcp6 2>/dev/null |
		while read -r _ port _ st _ _ _ _ _ inode rest; do
			if [ "$st" = 0A ] && [ -n "${mine[$inode]-}" ]; then echo $((16#${port##*:})); fi
		done | sort -un
	return 0
}

# span_tcp_default PID: a --pid run without --span (nor --span none) of a process listening on
# TCP gets its requests from the kernel (--span tcp): a report with requests, not scheduler-only.
span_tcp_default() {
	local ports
	[ "${#SPANS[@]}" = 0 ] && [ "$SPAN_NONE" = 0 ] || return 0
	ports=$(listen_ports "$1" | paste -sd, -)
	[ -n "$ports" ] || return 0
	SPANS=(tcp)
	log "pid $1 listens on TCP port(s) $ports: each request there is one (--span tcp; --span" \
		"none for the scheduler only, --span BIN:SYMBOL for a function)"
}

# mode_diff A B: differential flame graphs of B against A, written into B.
mode_diff() {
	local a=$1 b=$2 na nb made=0
	[ -d "$a" ] || die "--diff: $a is not a run directory"
	[ -d "$b" ] || die "--diff: $b is not a run directory"
	env_flame_tools || die "--diff needs inferno (inferno-diff-folded): cargo install inferno --locked"
	a=$(cd "$a" && pwd) b=$(cd "$b" && pwd)
	na=$(basename "$a") nb=$(basename "$b")
	[ -s "$a/oncpu.folded" ] || [ ! -s "$a/perf.data" ] || flame_oncpu "$a" "$na" >/dev/null
	[ -s "$b/oncpu.folded" ] || [ ! -s "$b/perf.data" ] || flame_oncpu "$b" "$nb" >/dev/null
	flame_diff "$a" "$b" oncpu.folded "diff-$na-vs-$nb.svg" "on-CPU: $nb vs $na (red: more in $nb)" && made=1
	flame_diff "$a" "$b" offcpu.folded "diff-offcpu-$na-vs-$nb.svg" "off-CPU: $nb vs $na (red: more in $nb)" && made=1
	[ "$made" = 1 ] || die "no differential flame graph: neither oncpu.folded nor offcpu.folded is in both runs"
	if [ -f "$b/summary.json" ]; then
		python3 -m analyze report "$b" >/dev/null || log "could not refresh $b/report.html"
		log "report with the diff: $b/report.html"
	fi
}
