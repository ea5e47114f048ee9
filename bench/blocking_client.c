/* SPDX-License-Identifier: MIT */
/*
 * blocking_client: the floor of a blocking client on this machine. T threads, each
 * with one keep-alive connection, send POST /orders and block in recv() for the
 * reply, back to back, for S seconds: httpload's pool without libcurl and without
 * the task queue. bench/cpu_per_request.sh runs it next to wrk and the httpload
 * models, so what a sleep and a wakeup per request cost here is measured apart from
 * what libcurl costs.
 *
 *   blocking_client --port P [--threads T] [--duration S] [--path PATH] [--pin]
 *
 * Prints "requests N errors E elapsed_s X" on stdout. Exit 0 when every reply was
 * a 2xx, 1 when any was not or a connection failed, 2 on bad arguments.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BC_MAX_THREADS 1024
#define BC_REPLY_BYTES 8192

struct bc_opts {
	uint16_t port;
	unsigned threads, duration_s;
	const char *path;
	bool pin;
};

struct bc_thread {
	const struct bc_opts *o;
	unsigned index;
	pthread_t thread;
	uint64_t requests, errors;
	const char *failed; /* the call that ended this connection early */
	int err;
};

static atomic_bool bc_stop;
static atomic_uint bc_live; /* threads still sending */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int conn_open(const struct bc_opts *o)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(o->port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0 ||
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

/* The same body shape as httpload's requests. */
static int request_format(char *buf, size_t len, const struct bc_opts *o, unsigned conn, uint64_t id)
{
	char body[160];
	int nb = snprintf(body, sizeof(body),
			  "{\"customer\":%u,\"item\":\"widget-%llu\",\"qty\":%llu,\"request\":%llu}",
			  conn, (unsigned long long)(id % 97), (unsigned long long)(1 + id % 5),
			  (unsigned long long)id);

	return snprintf(buf, len,
			"POST %s HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n"
			"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			o->path, o->port, nb, body);
}

/* Bytes the whole reply takes once its header is in buf, 0 while it is not,
 * -1 when the header has no Content-Length. */
static long reply_size(const char *buf, size_t got)
{
	const char *end = memmem(buf, got, "\r\n\r\n", 4), *p;

	if (!end)
		return 0;
	for (p = buf; p && p < end; p = memchr(p, '\n', (size_t)(end - p))) {
		p += *p == '\n';
		if (strncasecmp(p, "Content-Length:", 15) == 0)
			return (long)(end + 4 - buf) + strtol(p + 15, NULL, 10);
	}
	return -1;
}

/* Read one reply (blocking); its status code, or -errno / -EPROTO. */
static int reply_read(int fd, char *buf)
{
	size_t got = 0;
	long need = 0;

	while (need == 0 || (long)got < need) {
		ssize_t n;

		if (got == BC_REPLY_BYTES - 1) /* a header that does not end */
			return -EPROTO;
		n = recv(fd, buf + got, BC_REPLY_BYTES - 1 - got, 0);
		if (n <= 0)
			return n == 0 ? -ECONNRESET : -errno;
		got += (size_t)n;
		if (need == 0)
			need = reply_size(buf, got);
		if (need < 0 || need >= BC_REPLY_BYTES)
			return -EPROTO;
	}
	if ((long)got != need) /* a reply we did not ask for */
		return -EPROTO;
	return strncmp(buf, "HTTP/1.1 ", 9) == 0 ? atoi(buf + 9) : -EPROTO;
}

static int send_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

static void *thread_main(void *arg)
{
	struct bc_thread *t = arg;
	char req[512], reply[BC_REPLY_BYTES];
	int fd = conn_open(t->o);

	if (fd < 0) {
		t->failed = "connect";
		t->err = -fd;
		atomic_fetch_sub(&bc_live, 1);
		return NULL;
	}
	for (uint64_t id = t->index; !atomic_load_explicit(&bc_stop, memory_order_relaxed);
	     id += t->o->threads) {
		int n = request_format(req, sizeof(req), t->o, t->index, id), status;

		if (send_all(fd, req, (size_t)n)) {
			t->failed = "send";
			t->err = errno;
			break;
		}
		status = reply_read(fd, reply);
		if (status < 0) {
			t->failed = "recv";
			t->err = -status;
			break;
		}
		t->requests++;
		t->errors += status < 200 || status > 299;
	}
	close(fd);
	atomic_fetch_sub(&bc_live, 1);
	return NULL;
}

/* Until S seconds after t0, or until no thread is left sending. */
static void run_wait(uint64_t t0_ns, unsigned duration_s)
{
	uint64_t end_ns = t0_ns + duration_s * 1000000000ull, now;

	while ((now = now_ns()) < end_ns && atomic_load(&bc_live) > 0) {
		uint64_t step_ns = end_ns - now < 50000000ull ? end_ns - now : 50000000ull;
		struct timespec ts = { 0, (long)step_ns };

		nanosleep(&ts, NULL);
	}
}

/* The k-th CPU this process may run on, counting round robin. */
static int cpu_nth(const cpu_set_t *allowed, unsigned k)
{
	int n = CPU_COUNT(allowed), cpu = 0;

	k %= (unsigned)(n > 0 ? n : 1);
	for (; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET(cpu, allowed) && k-- == 0)
			return cpu;
	return 0;
}

static int thread_start(struct bc_thread *t, const cpu_set_t *allowed)
{
	pthread_attr_t attr;
	cpu_set_t mask;
	int err;

	pthread_attr_init(&attr);
	if (t->o->pin) { /* round robin over the allowed CPUs, as httpload's pool by default */
		CPU_ZERO(&mask);
		CPU_SET(cpu_nth(allowed, t->index), &mask);
		pthread_attr_setaffinity_np(&attr, sizeof(mask), &mask);
	}
	err = pthread_create(&t->thread, &attr, thread_main, t);
	pthread_attr_destroy(&attr);
	return err;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: blocking_client --port P [--threads T] [--duration S] [--path PATH] [--pin]\n"
		   "  --port P       orders-server's port on 127.0.0.1 (required)\n"
		   "  --threads T    threads, one keep-alive connection each, 1..%d (default 20)\n"
		   "  --duration S   seconds, 1..3600 (default 3)\n"
		   "  --path PATH    request path (default /orders)\n"
		   "  --pin          pin thread k to CPU k mod CPUs (default: unpinned)\n",
		BC_MAX_THREADS);
}

static long num_arg(const char *name, const char *s, long lo, long hi)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || end == s || v < lo || v > hi) {
		fprintf(stderr, "blocking_client: %s expects an integer in %ld..%ld, got '%s' (see --help)\n",
			name, lo, hi, s);
		exit(2);
	}
	return v;
}

static void opts_parse(int argc, char **argv, struct bc_opts *o)
{
	static const struct option lo[] = {
		{ "port", required_argument, NULL, 'p' }, { "threads", required_argument, NULL, 't' },
		{ "duration", required_argument, NULL, 'd' }, { "path", required_argument, NULL, 'P' },
		{ "pin", no_argument, NULL, 'n' }, { "help", no_argument, NULL, 'h' }, { 0 },
	};
	int c;

	*o = (struct bc_opts){ .threads = 20, .duration_s = 3, .path = "/orders" };
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 'p': o->port = (uint16_t)num_arg("--port", optarg, 1, 65535); break;
		case 't': o->threads = (unsigned)num_arg("--threads", optarg, 1, BC_MAX_THREADS); break;
		case 'd': o->duration_s = (unsigned)num_arg("--duration", optarg, 1, 3600); break;
		case 'P': o->path = optarg; break;
		case 'n': o->pin = true; break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); exit(2);
		}
	}
	if (optind < argc || !o->port) {
		fprintf(stderr, "blocking_client: %s (see --help)\n",
			optind < argc ? "unexpected argument" : "--port is required");
		exit(2);
	}
	if (o->path[0] != '/' || strlen(o->path) > 200 || strpbrk(o->path, " \r\n")) {
		fprintf(stderr, "blocking_client: --path must start with / and hold no space or line break (see --help)\n");
		exit(2);
	}
}

int main(int argc, char **argv)
{
	struct bc_opts o;
	struct bc_thread *ts;
	uint64_t t0_ns, requests = 0, errors = 0;
	unsigned started = 0, failed = 0;
	const char *first_failed = NULL;
	int first_err = 0;
	cpu_set_t allowed;

	opts_parse(argc, argv, &o);
	if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
		CPU_ZERO(&allowed);
		CPU_SET(0, &allowed);
	}
	ts = calloc(o.threads, sizeof(*ts));
	if (!ts) {
		fprintf(stderr, "blocking_client: out of memory\n");
		return 1;
	}
	t0_ns = now_ns();
	for (; started < o.threads; started++) {
		ts[started] = (struct bc_thread){ .o = &o, .index = started };
		atomic_fetch_add(&bc_live, 1);
		if (thread_start(&ts[started], &allowed)) {
			atomic_fetch_sub(&bc_live, 1);
			fprintf(stderr, "blocking_client: cannot start thread %u\n", started);
			break;
		}
	}
	if (started == o.threads)
		run_wait(t0_ns, o.duration_s);
	atomic_store(&bc_stop, true);
	for (unsigned i = 0; i < started; i++) {
		pthread_join(ts[i].thread, NULL);
		requests += ts[i].requests;
		errors += ts[i].errors;
		if (ts[i].failed && !failed++) {
			first_failed = ts[i].failed;
			first_err = ts[i].err;
		}
	}
	if (failed)
		fprintf(stderr, "blocking_client: %u of %u connections ended early, the first in %s: %s "
			"(is orders-server listening on port %u?)\n",
			failed, started, first_failed, strerror(first_err), o.port);
	printf("requests %llu errors %llu elapsed_s %.3f\n", (unsigned long long)requests,
	       (unsigned long long)errors, (double)(now_ns() - t0_ns) / 1e9);
	free(ts);
	return started < o.threads || failed || errors ? 1 : 0;
}
