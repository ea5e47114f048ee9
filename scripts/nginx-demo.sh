#!/usr/bin/env bash
# A throw-away Debian nginx for the third-party demo and tests: config, logs and
# pid file in a temporary directory, listening on 127.0.0.1 on a free port.
#
#   scripts/nginx-demo.sh start [--port P] [--workers N] [--env]
#       prints: nginx-demo: listening on 127.0.0.1:P master=PID workers=PID[,PID] dir=DIR
#       or, with --env, shell assignments for eval:
#       NGINX_PORT=P NGINX_MASTER=PID NGINX_WORKERS=PID[,PID] NGINX_DIR=DIR
#   scripts/nginx-demo.sh stop DIR
set -euo pipefail
ME=nginx-demo
TT_ME=$ME TT_TOP=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/lib/common.sh
. "$TT_TOP/scripts/lib/common.sh"

write_conf() { # DIR PORT WORKERS: a 4 KiB index.html served from DIR/www
	local dir=$1 port=$2 workers=$3
	mkdir -p "$dir/www"
	head -c 4096 /dev/zero | tr '\0' 'x' >"$dir/www/index.html"
	nginx_conf "$dir" "$port" "$workers" "root $dir/www; index index.html;"
}

cmd_start() {
	local port="" workers=1 env=0 dir master pids i
	while [ "$#" -gt 0 ]; do
		case $1 in
		--port) port=$2; shift ;;
		--workers) workers=$2; shift ;;
		--env) env=1 ;;
		*) die "unknown option '$1'; usage: $0 start [--port P] [--workers N] [--env]" ;;
		esac
		shift
	done
	command -v nginx >/dev/null 2>&1 || die "nginx is not installed; run: bash scripts/install-deps.sh"
	[ -n "$port" ] || port=$(port_free)
	dir=$(mktemp -d /tmp/tailtrace-nginx.XXXXXX)
	write_conf "$dir" "$port" "$workers"
	nginx -q -p "$dir" -e "$dir/error.log" -c "$dir/nginx.conf" ||
		die "nginx failed to start (port $port busy?): $(tail -1 "$dir/error.log" 2>/dev/null)"
	for ((i = 0; i < 100; i++)); do
		[ -s "$dir/nginx.pid" ] && master=$(cat "$dir/nginx.pid") &&
			pids=$(pgrep -d, -P "$master" -x nginx) && [ "$(echo "$pids" | tr ',' '\n' | wc -l)" -ge "$workers" ] && break
		sleep 0.05
	done
	[ -n "${pids:-}" ] || die "nginx started but no worker appeared (see $dir/error.log)"
	if [ "$env" = 1 ]; then
		echo "NGINX_PORT=$port NGINX_MASTER=$master NGINX_WORKERS=$pids NGINX_DIR=$dir"
		echo "$ME: listening on 127.0.0.1:$port master=$master workers=$pids dir=$dir" >&2
	else
		echo "$ME: listening on 127.0.0.1:$port master=$master workers=$pids dir=$dir"
	fi
}

# stop_wait PID TENTHS: wait up to TENTHS/10 s for PID to exit.
stop_wait() {
	local pid=$1 i
	for ((i = 0; i < $2; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	return 1
}

cmd_stop() {
	local dir=${1:?usage: $0 stop DIR} master workers w
	[ -s "$dir/nginx.pid" ] || die "no nginx.pid in $dir (already stopped?)"
	master=$(cat "$dir/nginx.pid")
	workers=$(pgrep -P "$master" 2>/dev/null | tr '\n' ' ' || true)
	kill -QUIT "$master" 2>/dev/null || true
	stop_wait "$master" 30 || { kill -TERM "$master" 2>/dev/null || true; stop_wait "$master" 20; } ||
		kill -KILL "$master" $workers 2>/dev/null || true
	for w in $workers; do
		[ "$(cat "/proc/$w/comm" 2>/dev/null)" != nginx ] || kill -KILL "$w" 2>/dev/null || true
	done
	case $dir in /tmp/tailtrace-nginx.*) rm -rf "$dir" ;; esac
}

case ${1:-} in
start) shift; cmd_start "$@" ;;
stop) shift; cmd_stop "$@" ;;
*) die "usage: $0 start [--port P] [--workers N] [--env] | stop DIR" ;;
esac
