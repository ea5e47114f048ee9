# shellcheck shell=bash
# run.sh recording phases: orders-server, tailtrace around a command or a pid, perf.
# Sets the globals SERVER_PID / TT_PID / PERF_PID that run.sh's cleanup trap stops.

# server_args: this run's orders-server options (SERVER_ARGS) for server_start (common.sh).
server_args() {
	SERVER_ARGS=(--port "${PORT:-0}")
	[ -z "$SERVER_WORKERS" ] || SERVER_ARGS+=(--workers "$SERVER_WORKERS")
	[ -z "$SERVICE_US" ] || SERVER_ARGS+=(--service-us "$SERVICE_US")
	[ -z "$SLEEP_US" ] || SERVER_ARGS+=(--sleep-us "$SLEEP_US")
}

server_stop() {
	[ -n "$SERVER_PID" ] || return 0
	pg_stop "$SERVER_PID" TERM 5
	SERVER_PID=""
}

# httpload_args URL DIR: the httpload command line for this run.
httpload_args() {
	local url=$1 dir=$2
	HTTPLOAD_CMD=("$TT_HTTPLOAD" --model "$WORKLOAD" --conns "$CONNS" --url "$url" --out "$dir" --progress)
	[ -z "$WORKERS" ] || HTTPLOAD_CMD+=(--workers "$WORKERS")
	[ -z "$REQUESTS" ] || HTTPLOAD_CMD+=(--requests "$REQUESTS")
	[ -z "$DURATION" ] || HTTPLOAD_CMD+=(--duration "$DURATION")
	[ -z "$RATE" ] || HTTPLOAD_CMD+=(--rate "$RATE")
	[ -z "$CPUS" ] || HTTPLOAD_CMD+=(--cpus "$CPUS")
	[ -z "$NUMA" ] || HTTPLOAD_CMD+=(--numa "$NUMA")
	return 0
}

# tailtrace_args DIR: the tailtrace options shared by every mode (no target).
tailtrace_args() {
	local dir=$1 s
	TT_ARGS=("$TT_TAILTRACE" --out "$dir")
	[ -z "$EVENTS" ] || TT_ARGS+=(--events "$EVENTS")
	for s in "${SPANS[@]}"; do TT_ARGS+=(--span "$s"); done
	[ -z "$SPAN_EXIT" ] || TT_ARGS+=(--span-exit "$SPAN_EXIT")
	[ -z "$USER_STACKS" ] || TT_ARGS+=(--user-stacks "$USER_STACKS")
	[ -z "$RINGBUF_MB" ] || TT_ARGS+=(--ringbuf-mb "$RINGBUF_MB")
	if [ -n "$FLIGHT" ]; then
		TT_ARGS+=(--flight-recorder "$FLIGHT")
		[ -z "$TRIGGER" ] || TT_ARGS+=(--trigger "$TRIGGER")
		[ -z "$OTLP" ] || TT_ARGS+=(--otlp "$OTLP")
		# our workloads mark their requests: httpload's USDT probes are the spans
		[ "${#SPANS[@]}" -gt 0 ] || [ "$MODE" != workload ] ||
			TT_ARGS+=(--span "usdt:$TT_HTTPLOAD:httpload:request")
	fi
	return 0
}

# perf_start DIR: on-CPU profile (cpu-clock, 499 Hz, call graphs), started before the
# target so that nothing of it is missed. System-wide, filtered to the target's pids
# (DIR/perf.pids, see perf_pids) when the flame graph is made: attaching with -p after
# the target started would lose its first moments and its short-lived threads.
perf_start() {
	local dir=$1 ctl=$1/.perf.ctl ack=$1/.perf.ack ctl_fd ack_fd reply="" i
	[ "$PERF" = 1 ] || return 0
	# Start disabled and enable through perf's control fifo: its ack means it is recording
	# (perf -a can take seconds to set up on a busy machine).
	rm -f "$ctl" "$ack"
	mkfifo "$ctl" "$ack"
	pg_start "$dir/perf.log" perf record -a -e cpu-clock -F 499 -g -D -1 \
		--control "fifo:$ctl,$ack" -o "$dir/perf.data"
	PERF_PID=$PG_PID
	exec {ctl_fd}<>"$ctl" {ack_fd}<>"$ack"
	echo enable >&"$ctl_fd"
	for ((i = 0; i < 60; i++)); do
		reply=""
		read -r -d $'\n' -t 1 -u "$ack_fd" reply || true
		[ "${reply//[^a-z]/}" != ack ] || break
		kill -0 "$PERF_PID" 2>/dev/null || break
	done
	exec {ctl_fd}>&- {ack_fd}>&-
	rm -f "$ctl" "$ack"
	[ "${reply//[^a-z]/}" != ack ] || return 0
	log "perf did not start (reply '$reply', $(tail -1 "$dir/perf.log" 2>/dev/null)); no on-CPU profile"
	pg_stop "$PERF_PID" INT 5
	PERF_PID=""
	rm -f "$dir/perf.data"
}

# perf_pids DIR PIDS: the processes (a,b,c) whose samples make the on-CPU flame graph.
perf_pids() {
	[ "$PERF" = 1 ] && [ -n "$2" ] || return 0
	echo "$2" >"$1/perf.pids"
}

perf_stop() {
	[ -n "$PERF_PID" ] || return 0
	pg_stop "$PERF_PID" INT 20
	PERF_PID=""
	grep -v -e '^\[ perf record: \(Woken\|Captured\)' -e '^Events \(dis\|en\)abled' -e '^$' \
		"$1/perf.log" >&2 2>/dev/null || true
}

# wait_attached_child TIMEOUT_S: the pid of tailtrace's child once it exec'd the command.
wait_attached_child() {
	local timeout_s=$1 i self child
	# tailtrace's binary, not /proc/$TT_PID/exe: right after pg_start that can still be
	# bash or setsid, and tailtrace's held (not yet exec'd) child would look exec'd.
	self=$(readlink -f "$TT_TAILTRACE")
	for ((i = 0; i < timeout_s * 20; i++)); do
		child=$(child_exec_pid "$TT_PID" "$self") && { echo "$child"; return 0; }
		kill -0 "$TT_PID" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}

# record_command DIR CMD...: tailtrace -- CMD, perf on CMD once it runs. Returns CMD's status.
record_command() {
	local dir=$1 child="" rc=0
	shift
	tailtrace_args "$dir"
	# The server we started is traced too (scheduler events only): when the client's tail
	# is blocked on the network, the report can show whether the server was waiting for a CPU.
	[ -z "$SERVER_PID" ] || [ "$EVENTS" = none ] || TT_ARGS+=(--also-pid "$SERVER_PID")
	perf_start "$dir"
	pg_start - "${TT_ARGS[@]}" -- "$@"
	TT_PID=$PG_PID
	if child=$(wait_attached_child 60); then
		perf_pids "$dir" "$child${SERVER_PID:+,$SERVER_PID}"
	fi
	pg_wait "$TT_PID" || rc=$?
	TT_PID=""
	perf_stop "$dir"
	[ -n "$child" ] || [ -s "$dir/meta.json" ] ||
		die "tailtrace stopped before it ran $1 (its message is above: fix that and rerun)"
	# Missed the exec (slow machine)? tailtrace's meta.json names the target.
	[ "$PERF" = 0 ] || [ -s "$dir/perf.pids" ] || perf_pids "$dir" "$(python3 -c \
		'import json, sys; print(json.load(open(sys.argv[1]))["target"]["pid"])' "$dir/meta.json" 2>/dev/null)"
	return "$rc"
}

# record_pid DIR PIDS: tailtrace on running processes for DURATION seconds.
record_pid() {
	local dir=$1 pids=$2 rc=0
	tailtrace_args "$dir"
	if [ -n "$TARGET_COMM" ]; then
		TT_ARGS+=(--comm "$TARGET_COMM")
	else
		TT_ARGS+=(--pid "$pids")
	fi
	perf_start "$dir"
	pg_start - "${TT_ARGS[@]}" --duration "$DURATION"
	TT_PID=$PG_PID
	progress_wait "$TT_PID" "$DURATION"
	# the flame graph's processes: with --pid, its descendants too (a pre-fork server's workers)
	[ -n "$TARGET_COMM" ] || pids=$(tree_pids "$pids")
	perf_pids "$dir" "$pids"
	pg_wait "$TT_PID" || rc=$?
	TT_PID=""
	perf_stop "$dir"
	return "$rc"
}

# progress_wait PID TOTAL_S: elapsed / total while PID runs; a live line on a terminal,
# a plain line every 5 s otherwise.
progress_wait() {
	local pid=$1 total_s=$2 t0 el_s
	t0=$(date +%s)
	while kill -0 "$pid" 2>/dev/null; do
		sleep 1
		el_s=$(($(date +%s) - t0))
		if [ -t 2 ]; then
			printf '\r%s: %ds elapsed (traces %ss once attached) ' "$TT_ME" "$el_s" "$total_s" >&2
		elif ((el_s % 5 == 0)); then
			log "${el_s}s elapsed (traces ${total_s}s once attached)"
		fi
	done
	if [ -t 2 ]; then printf '\n' >&2; fi
}
