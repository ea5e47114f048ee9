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
 * Prints "requests N errors E elapsed_s X" on stdout (E: replies that were not 2xx).
 * A reply must carry Content-Length; "Connection: close" opens a new connection.
 * A thread still waiting for a reply BC_GRACE_MS after the end is cut off, so a
 * stalled server cannot hold the run. Exit 0 when every reply was a 2xx, 1 when any
 * was not or a connection failed, 2 on bad arguments.
 */
#include <arpa/inet.h>
#include <ctype.h>
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

#include "order_body.h" /* workloads/httpload */
#include "tt_clock.h"

#define BC_MAX_THREADS 1024
#define BC_REQUEST_BYTES 512
#define BC_REPLY_BYTES 8192 /* header and body of one reply */
#define BC_GRACE_MS 2000    /* after the end, for replies still on their way */

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
	atomic_int fd; /* closed by main after the join */
	uint64_t requests, errors;
	int first_bad_status;
	const char *failed; /* the step that ended this thread early */
	int err;
};

static atomic_bool bc_stop, bc_cut;
static atomic_uint bc_live; /* threads still sending */

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

/* httpload's request: its body, and the headers libcurl sends with it. */
static int request_format(char *buf, size_t len, const struct bc_opts *o, unsigned conn, uint64_t id)
{
	char body[HL_ORDER_BODY_BYTES];
	int nb = hl_order_body(body, sizeof(body), conn, id);

	return snprintf(buf, len,
			"POST %s HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n"
			"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			o->path, o->port, nb, body);
}

/* The value of a "Content-Length:" line: digits up to the line's end, at most max. */
static long content_length(const char *v, long max)
{
	long n = 0;

	while (*v == ' ' || *v == '\t')
		v++;
	if (!isdigit((unsigned char)*v))
		return -1;
	for (; isdigit((unsigned char)*v); v++)
		if ((n = n * 10 + (*v - '0')) > max)
			return -1;
	while (*v == ' ' || *v == '\t')
		v++;
	return *v == '\r' ? n : -1;
}

/* Once buf (NUL-terminated at got) holds the whole header: the bytes the reply
 * takes, and whether the server closes the connection after it. 0 while the header
 * is incomplete; -1 when it has no valid Content-Length. */
static long reply_size(const char *buf, size_t got, bool *close)
{
	const char *end = memmem(buf, got, "\r\n\r\n", 4), *line;
	long body = -1, hdr;

	if (!end)
		return 0;
	hdr = (long)(end + 4 - buf);
	*close = false;
	for (line = buf; (line = memchr(line, '\n', (size_t)(end - line))); ) {
		line++; /* a header line: its text runs up to a '\r' at or before end */
		if (strncasecmp(line, "Content-Length:", 15) == 0)
			body = content_length(line + 15, BC_REPLY_BYTES - 1 - hdr);
		else if (strncasecmp(line, "Connection:", 11) == 0)
			*close = strncasecmp(line + 11 + strspn(line + 11, " \t"), "close", 5) == 0;
	}
	return body < 0 ? -1 : hdr + body;
}

/* Read one reply (blocking): its status code, or -errno (-EPROTO: not a reply we
 * can frame, or more than we asked for). */
static int reply_read(int fd, char *buf, bool *close)
{
	size_t got = 0;
	long need = 0;

	while (need == 0 || (long)got < need) {
		ssize_t n;

		if (got == BC_REPLY_BYTES - 1) /* a header that does not end */
			return -EPROTO;
		n = recv(fd, buf + got, BC_REPLY_BYTES - 1 - got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n == 0 ? -ECONNRESET : -errno;
		got += (size_t)n;
		buf[got] = '\0';
		if (need == 0)
			need = reply_size(buf, got, close);
		if (need < 0)
			return -EPROTO;
	}
	if ((long)got != need)
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
			return n == 0 ? -EPIPE : -errno;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* One request and its reply; 0, or -errno with t->failed set. */
static int thread_request(struct bc_thread *t, uint64_t id, char *req, char *reply)
{
	int fd = atomic_load(&t->fd), n = request_format(req, BC_REQUEST_BYTES, t->o, t->index, id), rc;
	bool close_after = false;

	rc = send_all(fd, req, (size_t)n);
	if (rc) {
		t->failed = "send";
		return rc;
	}
	rc = reply_read(fd, reply, &close_after);
	if (rc < 0) {
		t->failed = atomic_load(&bc_cut) ? "reply (none within the grace after the end)" : "recv";
		return atomic_load(&bc_cut) ? -ETIMEDOUT : rc;
	}
	t->requests++;
	if ((rc < 200 || rc > 299) && !t->errors++)
		t->first_bad_status = rc;
	if (close_after && !atomic_load(&bc_stop)) { /* the server is done with it: a new one */
		int nfd = conn_open(t->o);

		if (nfd < 0) {
			t->failed = "connect";
			return nfd;
		}
		close(atomic_exchange(&t->fd, nfd));
	}
	return 0;
}

static void *thread_main(void *arg)
{
	struct bc_thread *t = arg;
	char req[BC_REQUEST_BYTES], reply[BC_REPLY_BYTES];
	int fd = conn_open(t->o);

	if (fd < 0) {
		t->failed = "connect";
		t->err = -fd;
	} else {
		atomic_store(&t->fd, fd);
		for (uint64_t id = t->index; !atomic_load_explicit(&bc_stop, memory_order_relaxed);
		     id += t->o->threads) {
			int rc = thread_request(t, id, req, reply);

			if (rc) {
				t->err = -rc;
				break;
			}
		}
	}
	atomic_fetch_sub(&bc_live, 1);
	return NULL;
}

/* Until end_ns, or until no thread is left sending. */
static void live_wait(uint64_t end_ns)
{
	uint64_t now;

	while ((now = tt_now_ns()) < end_ns && atomic_load(&bc_live) > 0) {
		struct timespec ts = tt_timespec_of_ns(end_ns - now < 10000000ull ? end_ns - now : 10000000ull);

		nanosleep(&ts, NULL);
	}
}

/* Stop at the end of the run; threads still waiting for a reply BC_GRACE_MS later
 * are cut off (their sockets shut down), so a stalled server cannot hold the run. */
static void run_finish(struct bc_thread *ts, unsigned n)
{
	atomic_store(&bc_stop, true);
	live_wait(tt_now_ns() + BC_GRACE_MS * 1000000ull);
	if (atomic_load(&bc_live) == 0)
		return;
	atomic_store(&bc_cut, true);
	for (unsigned i = 0; i < n; i++) {
		int fd = atomic_load(&ts[i].fd);

		if (fd >= 0)
			shutdown(fd, SHUT_RDWR);
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
		   "  --pin          pin thread k to the k-th CPU it may use, round robin\n"
		   "                 (default: unpinned)\n",
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

/* What went wrong, one stderr line each kind; the totals on stdout; the exit status. */
static int run_report(const struct bc_thread *ts, unsigned started, unsigned wanted, uint64_t t0_ns)
{
	const struct bc_thread *ff = NULL, *fe = NULL;
	uint64_t requests = 0, errors = 0;
	unsigned failed = 0;

	for (unsigned i = 0; i < started; i++) {
		requests += ts[i].requests;
		errors += ts[i].errors;
		if (ts[i].failed && !failed++)
			ff = &ts[i];
		if (ts[i].errors && !fe)
			fe = &ts[i];
	}
	if (failed)
		fprintf(stderr, "blocking_client: %u of %u connections ended early, the first (thread %u) in %s: %s%s\n",
			failed, started, ff->index, ff->failed, strerror(ff->err),
			strcmp(ff->failed, "connect") ? "" : " (is orders-server listening on 127.0.0.1 at that port?)");
	if (errors)
		fprintf(stderr, "blocking_client: %llu of %llu replies were not 2xx (the first: %d; check --path)\n",
			(unsigned long long)errors, (unsigned long long)requests, fe->first_bad_status);
	printf("requests %llu errors %llu elapsed_s %.3f\n", (unsigned long long)requests,
	       (unsigned long long)errors, (double)(tt_now_ns() - t0_ns) / 1e9);
	return started < wanted || failed || errors ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct bc_opts o;
	struct bc_thread *ts;
	uint64_t t0_ns;
	unsigned started = 0;
	cpu_set_t allowed;
	int rc;

	opts_parse(argc, argv, &o);
	if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
		fprintf(stderr, "blocking_client: sched_getaffinity: %s\n", strerror(errno));
		return 1;
	}
	ts = calloc(o.threads, sizeof(*ts));
	if (!ts) {
		fprintf(stderr, "blocking_client: out of memory\n");
		return 1;
	}
	t0_ns = tt_now_ns();
	for (; started < o.threads; started++) {
		ts[started] = (struct bc_thread){ .o = &o, .index = started, .fd = -1 };
		atomic_fetch_add(&bc_live, 1);
		rc = thread_start(&ts[started], &allowed);
		if (rc) {
			atomic_fetch_sub(&bc_live, 1);
			fprintf(stderr, "blocking_client: cannot start thread %u: %s\n", started, strerror(rc));
			break;
		}
	}
	if (started == o.threads)
		live_wait(t0_ns + o.duration_s * 1000000000ull);
	run_finish(ts, started);
	for (unsigned i = 0; i < started; i++) {
		pthread_join(ts[i].thread, NULL);
		if (ts[i].fd >= 0)
			close(ts[i].fd);
	}
	rc = run_report(ts, started, o.threads, t0_ns);
	free(ts);
	return rc;
}
