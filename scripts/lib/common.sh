# shellcheck shell=bash
# The shell library: messages, environment checks, build, ports, process groups,
# orders-server. Sourced by run.sh and by bench/tt_bench_lib.sh; every function
# returns a status or calls die (one line, exit TT_DIE_STATUS, default 1).

TT_ME=${TT_ME:-run.sh}
TT_T0=$(date +%s.%N)

log() { printf '%s: %s\n' "$TT_ME" "$*" >&2; }

# phase NAME: a plain progress line with the elapsed time since start.
phase() {
	local now
	now=$(date +%s.%N)
	printf '%s: [%6.1fs] %s\n' "$TT_ME" "$(awk -v a="$now" -v b="$TT_T0" 'BEGIN{print a-b}')" "$*" >&2
}

die() {
	printf '%s: error: %s\n' "$TT_ME" "$*" >&2
	exit "${TT_DIE_STATUS:-1}"
}

utc_stamp() { date -u +%Y%m%dT%H%M%SZ; }

# ---- environment -------------------------------------------------------------

env_require_root() {
	[ "$(id -u)" -eq 0 ] && return 0
	die "must run as root (tailtrace loads eBPF programs, perf samples the kernel): sudo $TT_SELF ${TT_ARGV[*]}"
}

# env_missing_tools: print the missing tool names (space separated).
env_missing_tools() {
	local t missing=()
	for t in cmake ninja clang bpftool perf python3 pkg-config; do
		command -v "$t" >/dev/null 2>&1 || missing+=("$t")
	done
	python3 -c 'import pandas, numpy, matplotlib' 2>/dev/null || missing+=("python3-pandas/numpy/matplotlib")
	pkg-config --exists libbpf 2>/dev/null || missing+=("libbpf-dev")
	pkg-config --exists libcurl 2>/dev/null || missing+=("libcurl4-openssl-dev")
	echo "${missing[*]:-}"
}

# env_check_tools INSTALL(0|1): exit 1 naming the install command, or install.
env_check_tools() {
	local install=$1 missing
	missing=$(env_missing_tools)
	[ -z "$missing" ] && return 0
	if [ "$install" = 1 ]; then
		log "installing missing tools ($missing)"
		bash "$TT_TOP/scripts/install-deps.sh" || die "install-deps.sh failed; see its output above"
		missing=$(env_missing_tools)
		[ -z "$missing" ] && return 0
		die "still missing after install-deps.sh: $missing"
	fi
	die "missing tools: $missing; install them with: bash scripts/install-deps.sh (or rerun with --install)"
}

# env_check_bpf: BTF and the bpf() syscall must be usable.
env_check_bpf() {
	[ -r /sys/kernel/btf/vmlinux ] ||
		die "this kernel has no BTF (/sys/kernel/btf/vmlinux); tailtrace needs a kernel built with CONFIG_DEBUG_INFO_BTF=y"
	bpftool prog show >/dev/null 2>&1 ||
		die "the bpf() syscall is not permitted here (container without CAP_BPF/CAP_SYS_ADMIN?); run on the host or with --privileged"
}

env_mount_tracefs() {
	mountpoint -q /sys/kernel/tracing 2>/dev/null && return 0
	mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null ||
		die "cannot mount tracefs on /sys/kernel/tracing; run: mount -t tracefs nodev /sys/kernel/tracing"
}

# env_qemu_major: the major version of qemu-system-x86_64 on PATH, or 0 when there is none.
# The kernel matrix wants 10 or newer (bookworm's 7.2 hung 6.1 guests: docs/kernels.md).
env_qemu_major() {
	local v
	v=$(qemu-system-x86_64 --version 2>/dev/null | sed -nE '1s/.*version ([0-9]+)[.].*/\1/p' || true)
	echo "${v:-0}"
}

# env_flame_tools: 0 when inferno is usable (it lives in ~/.cargo/bin).
env_flame_tools() {
	command -v inferno-flamegraph >/dev/null 2>&1 &&
		command -v inferno-collapse-perf >/dev/null 2>&1 &&
		command -v inferno-diff-folded >/dev/null 2>&1
}

# ---- build -------------------------------------------------------------------

# build_if_stale: (re)build when a binary is missing or a source is newer than the last build.
build_if_stale() {
	local stamp="$TT_BUILD/.run-sh-built" need=0 bin
	for bin in "$TT_SERVER" "$TT_HTTPLOAD" "$TT_TAILTRACE"; do
		[ -x "$bin" ] || need=1
	done
	if [ "$need" = 0 ] && [ -e "$stamp" ]; then
		[ -n "$(find "$TT_TOP/CMakeLists.txt" "$TT_TOP/common" "$TT_TOP/include" \
			"$TT_TOP/workloads" "$TT_TOP/probes" -newer "$stamp" \
			\( -name '*.c' -o -name '*.h' -o -name 'CMakeLists.txt' \) -print -quit 2>/dev/null)" ] || return 0
	fi
	phase "building in $TT_BUILD (sources changed)"
	# configure only a new build directory: one made by `cmake -S . -B build` (Unix
	# Makefiles) or any other generator is built as it is (-G Ninja would refuse it)
	if [ ! -f "$TT_BUILD/CMakeCache.txt" ]; then
		local log
		log=$(mktemp)
		cmake -S "$TT_TOP" -B "$TT_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$log" 2>&1 ||
			{ tail -20 "$log" >&2; rm -f "$log"; die "cmake configure failed (log above); fix the error and rerun"; }
		rm -f "$log"
	fi
	cmake --build "$TT_BUILD" -j"$(nproc)" >&2 || die "build failed (errors above); fix them and rerun"
	for bin in "$TT_SERVER" "$TT_HTTPLOAD" "$TT_TAILTRACE"; do
		[ -x "$bin" ] || die "build finished but $bin is missing; run: cmake --build $TT_BUILD"
	done
	touch "$stamp"
}

# ---- ports -------------------------------------------------------------------

# port_free: a loopback TCP port free now (for programs that cannot take port 0).
port_free() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# port_check_free PORT: die with the owner when something already listens there.
port_check_free() {
	local port=$1 owner
	python3 - "$port" <<-'EOF' && return 0
	import socket, sys
	s = socket.socket()
	s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
	try:
	    s.bind(("127.0.0.1", int(sys.argv[1])))
	except OSError:
	    sys.exit(1)
	EOF
	owner=$(ss -Hltnp "sport = :$port" 2>/dev/null | grep -o 'users:(([^)]*' | head -1 | sed 's/users:((//')
	die "port $port is busy${owner:+ (used by $owner)}; pick another with --port P or omit --port to use a free one"
}

# ---- process groups ------------------------------------------------------------
# Every child runs in its own session/process group (setsid), so that a Ctrl-C on
# the terminal reaches run.sh only and run.sh stops each one in order.

TT_PGIDS=()

# pg_start LOGFILE|- CMD...: start CMD in a new process group; sets PG_PID.
pg_start() {
	local out=$1
	shift
	if [ "$out" = - ]; then
		setsid "$@" </dev/null &
	else
		setsid "$@" </dev/null >"$out" 2>&1 &
	fi
	PG_PID=$!
	TT_PGIDS+=("$PG_PID")
	# pids.txt: what run.sh started, so that a test can check nothing was left behind.
	[ -z "${RUN_DIR:-}" ] || echo "$PG_PID $(basename "$1")" >>"$RUN_DIR/pids.txt"
}

# pid_running PID: the process exists and is not a zombie.
pid_running() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	stat=${stat##*) }
	[ "${stat%% *}" != Z ]
}

# any_pid_running PID,PID,...: is one of them running?
any_pid_running() {
	local p
	for p in ${1//,/ }; do pid_running "$p" && return 0; done
	return 1
}

# tree_pids PID,PID,...: those processes and their descendants now, comma-separated (as
# tailtrace follows them, probes/core/tree.h): every process whose parent is in the set.
tree_pids() {
	local -A in=() parent=()
	local stat pid ppid added=1 p out
	for p in ${1//,/ }; do in[$p]=1; done
	for stat in /proc/[0-9]*/stat; do
		read -r pid _ < "$stat" 2>/dev/null || continue
		ppid=$(sed 's/.*) [A-Za-z] \([0-9]*\) .*/\1/' "$stat" 2>/dev/null) || continue
		parent[$pid]=$ppid
	done
	while [ "$added" = 1 ]; do
		added=0
		for pid in "${!parent[@]}"; do
			if [ -z "${in[$pid]-}" ] && [ -n "${in[${parent[$pid]}]-}" ]; then
				in[$pid]=1 added=1
			fi
		done
	done
	out=$(printf '%s\n' "${!in[@]}" | sort -n | paste -sd, -)
	echo "$out"
}

pg_alive() { kill -0 -- "-$1" 2>/dev/null; }

# pg_stop PGID SIGNAL TIMEOUT_S: signal the group, wait, then SIGKILL what remains.
pg_stop() {
	local pgid=$1 sig=$2 timeout_s=$3 i
	pg_alive "$pgid" || { wait "$pgid" 2>/dev/null || true; return 0; }
	kill -s "$sig" -- "-$pgid" 2>/dev/null || true
	for ((i = 0; i < timeout_s * 10; i++)); do
		pg_alive "$pgid" || break
		sleep 0.1
	done
	if pg_alive "$pgid"; then
		log "process group $pgid ignored SIG$sig for ${timeout_s}s; killing it"
		kill -KILL -- "-$pgid" 2>/dev/null || true
	fi
	wait "$pgid" 2>/dev/null || true
}

# pg_wait PID: wait for a child, returning its status even when a trapped signal
# interrupts the wait (the trap runs, then we keep waiting).
pg_wait() {
	local pid=$1 rc
	while :; do
		rc=0
		wait "$pid" 2>/dev/null || rc=$?
		if [ "$rc" -gt 128 ] && kill -0 "$pid" 2>/dev/null; then
			continue
		fi
		return "$rc"
	done
}

# child_exec_pid PARENT EXE_NOT: the child of PARENT once it exec'd something else.
child_exec_pid() {
	local parent=$1 not_exe=$2 c exe
	for c in $(pgrep -P "$parent" 2>/dev/null); do
		# A child that exits before it exec'd (tailtrace refused to attach and killed it) is
		# a zombie without an exe link: that is no exec. tailtrace starts no other child
		# (it reads the loader cache itself: an `ldconfig -p` child was once taken for it).
		exe=$(readlink "/proc/$c/exe" 2>/dev/null) || continue
		exe=${exe% (deleted)} # the held child of a tailtrace rebuilt since it started
		[ -n "$exe" ] && [ "$exe" != "$not_exe" ] && { echo "$c"; return 0; }
	done
	return 1
}

# ---- orders-server ---------------------------------------------------------------

# server_start LOG [orders-server options...]: orders-server ($TT_SERVER) in its own
# process group, on the --port given or else on port 0: the kernel picks a free port,
# which no other process can take between the choice and the bind. Waits for its ready
# line ("orders-server: listening on ADDR:PORT workers=N"); sets SERVER_PID, SERVER_PORT.
server_start() {
	local log=$1 i
	shift
	[[ " $* " == *" --port "* ]] || set -- --port 0 "$@"
	pg_start "$log" "$TT_SERVER" "$@"
	SERVER_PID=$PG_PID SERVER_PORT=""
	for ((i = 0; i < 200; i++)); do
		# the log may not exist yet (the shell that redirects into it has not run):
		# sed's failure then must not end a `set -e` caller
		SERVER_PORT=$(sed -n 's/^orders-server: listening on .*:\([0-9]*\) workers=.*/\1/p' \
			"$log" 2>/dev/null || true)
		[ -z "$SERVER_PORT" ] || return 0
		pid_running "$SERVER_PID" ||
			die "orders-server exited during start-up: $(tail -1 "$log" 2>/dev/null); fix that (see $log) and rerun"
		sleep 0.05
	done
	die "orders-server did not report 'listening' within 10 s (see $log); is the machine overloaded?"
}

# ---- nginx -----------------------------------------------------------------------

# nginx_conf DIR PORT WORKERS LOCATION: DIR/nginx.conf for a throw-away nginx (pid file,
# logs and temp files under DIR; workers run as root so they can read it) listening
# on 127.0.0.1:PORT, serving `location / { LOCATION }`, with keep-alive as orders-server.
nginx_conf() {
	local dir=$1 port=$2 workers=$3 location=$4
	mkdir -p "$dir/tmp"
	cat >"$dir/nginx.conf" <<EOF
user root;
worker_processes $workers;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    client_body_temp_path $dir/tmp/body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;
    server {
        listen 127.0.0.1:$port;
        location / { $location }
    }
}
EOF
}

# json_mark_incomplete RUN_DIR REASON: meta.json gets "incomplete": true.
json_mark_incomplete() {
	local dir=$1 reason=$2
	[ -d "$dir" ] || return 0
	python3 "$TT_TOP/scripts/lib/runinfo.py" mark-incomplete "$dir" "$reason" ||
		log "could not mark $dir/meta.json incomplete"
}
