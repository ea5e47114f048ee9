/* SPDX-License-Identifier: MIT */
/*
 * orders-server: a small epoll HTTP/1.1 service for tailtrace experiments.
 * Options in usage() below. When ready it prints one line to stdout:
 *   orders-server: listening on ADDR:PORT workers=N
 * and runs until SIGINT/SIGTERM (then exits 0 after joining its workers).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "server.h"
#include "stall.h"

#define DEFAULT_PORT 8080
#define DEFAULT_BACKLOG 1024
#define DEFAULT_MAX_BODY_BYTES 65536
#define DEFAULT_MAX_CONNS 4096
#define DEFAULT_REQUEST_TIMEOUT_MS 10000
#define DEFAULT_IDLE_TIMEOUT_MS 60000
#define MAX_TIMEOUT_MS 86400000 /* a day */
#define MAX_SPIN_US 1000
#define MAX_WORKERS 1024
#define FDS_PER_WORKER 2 /* its listener and epoll */
#define FDS_SPARE 16     /* stdio, the eventfd, whatever a library opens */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: orders-server [options]\n"
		"  --port N            TCP port; 0 = ephemeral (default %d)\n"
		"  --bind ADDR         numeric IPv4/IPv6 address (default 127.0.0.1)\n"
		"  --workers N         worker threads, 1..%d (default: CPUs this process may use)\n"
		"  --service-us N      CPU work per POST /orders, microseconds (default 0)\n"
		"  --sleep-us N        blocking wait per POST /orders, microseconds (default 0)\n"
		"  --backlog N         listen backlog per worker (default %d)\n"
		"  --max-body-bytes N  larger request bodies get 413 (default %d)\n"
		"  --max-conns N       open connections in all; more are reset (default %d;\n"
		"                      lower if the open-file limit leaves less room)\n"
		"  --request-timeout-ms N  a request must arrive in N ms (default %d; 0 = off),\n"
		"                      counted from its first byte (the first one: from connect);\n"
		"                      late: 408 and close, or just close if nothing came\n"
		"  --idle-timeout-ms N close keep-alive connections idle N ms (default %d; 0 = off)\n"
		"  --spin-us N         after handling events, poll N us more (yielding the CPU\n"
		"                      between polls) before sleeping, so a client's next request\n"
		"                      does not have to wake a worker (default 0: sleep at once;\n"
		"                      max %d)\n"
		"  --stall-every-ms E, --stall-ms S  an injected stall: every order takes a ledger\n"
		"                      lock, which the orders-ledger thread holds S ms every E ms\n"
		"                      (default: off, no lock); --stall-log FILE lists them\n"
		"                      (\"stall T_START_NS T_END_NS\", CLOCK_MONOTONIC; default stderr)\n"
		"  -h, --help          this help\n"
		"Routes: POST /orders (JSON object body), GET /health.\n",
		DEFAULT_PORT, MAX_WORKERS, DEFAULT_BACKLOG, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_CONNS,
		DEFAULT_REQUEST_TIMEOUT_MS, DEFAULT_IDLE_TIMEOUT_MS, MAX_SPIN_US);
}

/* Bad command line: one line naming the fix, exit 2. */
static void die_usage(const char *fmt, const char *a, const char *b)
{
	fprintf(stderr, "orders-server: ");
	fprintf(stderr, fmt, a, b);
	fprintf(stderr, " (see --help)\n");
	exit(2);
}

static long long parse_num(const char *opt, const char *arg, long long lo, long long hi)
{
	char *end, range[64];
	long long v;

	errno = 0;
	v = strtoll(arg, &end, 10);
	if (errno || end == arg || *end || v < lo || v > hi) {
		snprintf(range, sizeof(range), "%lld..%lld", lo, hi);
		fprintf(stderr, "orders-server: %s: expected an integer in %s, got '%s' (see --help)\n",
			opt, range, arg);
		exit(2);
	}
	return v;
}

static const char *check_addr(const char *arg)
{
	unsigned char buf[sizeof(struct in6_addr)];

	if (inet_pton(AF_INET, arg, buf) != 1 && inet_pton(AF_INET6, arg, buf) != 1)
		die_usage("--bind: expected a numeric IPv4 or IPv6 address, got '%s'%s", arg, "");
	return arg;
}

static int cpus_allowed(void)
{
	cpu_set_t set;
	int n;

	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return 1;
	n = CPU_COUNT(&set);
	return n > 0 ? n : 1;
}

static struct stall_config stall;

static void parse_args(int argc, char **argv, struct server_config *cfg)
{
	static const struct option opts[] = {
		{ "port", required_argument, NULL, 'p' },
		{ "bind", required_argument, NULL, 'b' },
		{ "workers", required_argument, NULL, 'w' },
		{ "service-us", required_argument, NULL, 's' },
		{ "sleep-us", required_argument, NULL, 'S' },
		{ "backlog", required_argument, NULL, 'B' },
		{ "max-body-bytes", required_argument, NULL, 'M' },
		{ "max-conns", required_argument, NULL, 'C' },
		{ "request-timeout-ms", required_argument, NULL, 'R' },
		{ "idle-timeout-ms", required_argument, NULL, 'I' },
		{ "spin-us", required_argument, NULL, 'P' },
		{ "stall-every-ms", required_argument, NULL, 'E' },
		{ "stall-ms", required_argument, NULL, 'L' },
		{ "stall-log", required_argument, NULL, 'G' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c, idx;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, &idx)) != -1) {
		switch (c) {
		case 'p': cfg->port = (uint16_t)parse_num("--port", optarg, 0, 65535); break;
		case 'b': cfg->bind_addr = check_addr(optarg); break;
		case 'w': cfg->workers = (int)parse_num("--workers", optarg, 1, MAX_WORKERS); break;
		case 's': cfg->orders.service_us = (uint32_t)parse_num("--service-us", optarg, 0, 10000000); break;
		case 'S': cfg->orders.sleep_us = (uint32_t)parse_num("--sleep-us", optarg, 0, 60000000); break;
		case 'B': cfg->backlog = (int)parse_num("--backlog", optarg, 1, INT_MAX); break;
		case 'M': cfg->orders.max_body_bytes = (uint64_t)parse_num("--max-body-bytes", optarg, 0, 1 << 30); break;
		case 'C': cfg->max_conns = (int)parse_num("--max-conns", optarg, 1, 1 << 24); break;
		case 'R': cfg->request_timeout_ms = (uint32_t)parse_num("--request-timeout-ms", optarg, 0, MAX_TIMEOUT_MS); break;
		case 'I': cfg->idle_timeout_ms = (uint32_t)parse_num("--idle-timeout-ms", optarg, 0, MAX_TIMEOUT_MS); break;
		case 'P': cfg->spin_us = (uint32_t)parse_num("--spin-us", optarg, 0, MAX_SPIN_US); break;
		case 'E': stall.every_ms = (uint32_t)parse_num("--stall-every-ms", optarg, 1, 3600000); break;
		case 'L': stall.hold_ms = (uint32_t)parse_num("--stall-ms", optarg, 0, 60000); break;
		case 'G': stall.log_path = optarg; break;
		case 'h': usage(stdout); exit(0);
		case ':': die_usage("%s needs a value%s", argv[optind - 1], "");
		/* fallthrough */
		default: die_usage("unknown option '%s'%s", argv[optind - 1], "");
		}
	}
	if (optind < argc)
		die_usage("unexpected argument '%s'%s", argv[optind], "");
	if (stall.hold_ms && !stall.every_ms)
		die_usage("--stall-ms needs --stall-every-ms (how often)%s%s", "", "");
	if (stall.hold_ms && stall.hold_ms >= stall.every_ms)
		die_usage("--stall-ms must be shorter than --stall-every-ms%s%s", "", "");
}

/* Let the process hold as many sockets as the hard limit allows; returns
 * how many connections that leaves room for. */
static long long raise_fd_limit(int workers)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return INT_MAX;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > INT_MAX)
		return INT_MAX;
	return (long long)rl.rlim_cur - (long long)workers * FDS_PER_WORKER - FDS_SPARE;
}

/* --max-conns must fit the open-file limit: an accept that fails with
 * EMFILE leaves the client hanging in the backlog. The default shrinks to
 * fit; an explicit value that does not fit is an error. */
static void fit_max_conns(struct server_config *cfg, int explicit_max)
{
	long long room = raise_fd_limit(cfg->workers);
	char got[24], fits[24];

	if (cfg->max_conns <= room)
		return;
	if (!explicit_max) {
		cfg->max_conns = room < 1 ? 1 : (int)room;
		return;
	}
	snprintf(got, sizeof(got), "%d", cfg->max_conns);
	snprintf(fits, sizeof(fits), "%lld", room);
	die_usage("--max-conns: %s is more than the open-file limit leaves room for (%s; "
		  "raise ulimit -n or lower it)", got, fits);
}

int main(int argc, char **argv)
{
	struct server_config cfg = {
		.bind_addr = "127.0.0.1",
		.port = DEFAULT_PORT,
		.workers = cpus_allowed(),
		.backlog = DEFAULT_BACKLOG,
		.max_conns = -1,
		.request_timeout_ms = DEFAULT_REQUEST_TIMEOUT_MS,
		.idle_timeout_ms = DEFAULT_IDLE_TIMEOUT_MS,
		.orders = { .max_body_bytes = DEFAULT_MAX_BODY_BYTES, .stop_fd = -1, .stopping = NULL },
	};
	struct server_stats stats;
	struct server *srv;
	const char *what = "";
	sigset_t stop_sigs;
	int rc, sig, explicit_max;

	parse_args(argc, argv, &cfg);
	explicit_max = cfg.max_conns > 0;
	if (!explicit_max)
		cfg.max_conns = DEFAULT_MAX_CONNS;
	fit_max_conns(&cfg, explicit_max);
	signal(SIGPIPE, SIG_IGN);
	/* A shell starts background jobs with SIGINT ignored; POSIX allows an
	 * ignored signal to be discarded even while blocked (Linux queues it
	 * for sigwaitinfo anyway): take both back to be sure. */
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	/* Workers inherit this mask: only the main thread takes the signals. */
	sigemptyset(&stop_sigs);
	sigaddset(&stop_sigs, SIGINT);
	sigaddset(&stop_sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &stop_sigs, NULL);

	rc = stall_start(&stall);
	if (rc) {
		fprintf(stderr, "orders-server: --stall-log %s: %s\n", stall.log_path, strerror(-rc));
		return 1;
	}
	rc = server_start(&cfg, &srv, &what);
	if (rc) {
		fprintf(stderr, "orders-server: cannot listen on %s:%u: %s: %s%s\n", cfg.bind_addr,
			cfg.port, what, strerror(-rc),
			rc == -EADDRINUSE ? " (pick another --port, or 0 for an ephemeral one)" :
			rc == -EADDRNOTAVAIL ? " (--bind must be an address of this machine)" : "");
		return 1;
	}
	printf("orders-server: listening on %s%s%s:%u workers=%d\n",
	       strchr(cfg.bind_addr, ':') ? "[" : "", cfg.bind_addr,
	       strchr(cfg.bind_addr, ':') ? "]" : "", server_port(srv), cfg.workers);
	fflush(stdout);

	do
		sig = sigwaitinfo(&stop_sigs, NULL);
	while (sig < 0 && errno == EINTR);

	rc = server_stop(srv, &stats);
	stall_stop();
	fprintf(stderr, "orders-server: stopped on %s: %llu connections, %llu requests (%llu errors), "
		"%llu refused, %llu timed out\n",
		sig > 0 ? strsignal(sig) : "error", (unsigned long long)stats.connections,
		(unsigned long long)stats.requests, (unsigned long long)stats.errors,
		(unsigned long long)stats.refused, (unsigned long long)stats.timed_out);
	if (rc) {
		fprintf(stderr, "orders-server: a worker failed: %s\n", strerror(-rc));
		return 1;
	}
	return 0;
}
