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

#define DEFAULT_PORT 8080
#define DEFAULT_BACKLOG 1024
#define DEFAULT_MAX_BODY_BYTES 65536
#define MAX_WORKERS 1024

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
		"  -h, --help          this help\n"
		"Routes: POST /orders (JSON object body), GET /health.\n",
		DEFAULT_PORT, MAX_WORKERS, DEFAULT_BACKLOG, DEFAULT_MAX_BODY_BYTES);
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
		case 'h': usage(stdout); exit(0);
		case ':': die_usage("%s needs a value%s", argv[optind - 1], "");
		/* fallthrough */
		default: die_usage("unknown option '%s'%s", argv[optind - 1], "");
		}
	}
	if (optind < argc)
		die_usage("unexpected argument '%s'%s", argv[optind], "");
}

/* Let the process hold as many sockets as the hard limit allows. */
static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

int main(int argc, char **argv)
{
	struct server_config cfg = {
		.bind_addr = "127.0.0.1",
		.port = DEFAULT_PORT,
		.workers = cpus_allowed(),
		.backlog = DEFAULT_BACKLOG,
		.orders = { .max_body_bytes = DEFAULT_MAX_BODY_BYTES, .stop_fd = -1, .stopping = NULL },
	};
	struct server_stats stats;
	struct server *srv;
	const char *what = "";
	sigset_t stop_sigs;
	int rc, sig;

	parse_args(argc, argv, &cfg);
	raise_fd_limit();
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
	fprintf(stderr, "orders-server: stopped on %s: %llu connections, %llu requests (%llu errors)\n",
		sig > 0 ? strsignal(sig) : "error", (unsigned long long)stats.connections,
		(unsigned long long)stats.requests, (unsigned long long)stats.errors);
	if (rc) {
		fprintf(stderr, "orders-server: a worker failed: %s\n", strerror(-rc));
		return 1;
	}
	return 0;
}
