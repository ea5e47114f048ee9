/* SPDX-License-Identifier: MIT */
/* Workers and their epoll loops. See server.h. */
#include "server.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "conn.h"
#include "listener.h"
#include "tt_clock.h"

#define EVENTS_PER_WAIT 256
#define ACCEPTS_PER_EVENT 64
#define TIMEOUT_SCAN_MS 250 /* timeouts are checked this often, at most */
#define SPARES_MAX 128      /* closed conns kept for reuse, per worker */

struct worker {
	struct server *srv;
	int index;
	int listen_fd;
	int epoll_fd;
	int err;                /* negative errno if the loop failed */
	struct tmo_lists open;  /* open connections, by timeout phase */
	struct conn *spare;     /* closed ones, reused (via spare_next) */
	int nspare;
	struct conn *again;     /* to drive again without an event (fairness) */
	struct conn_stats stats;
	uint64_t connections;
	uint64_t refused;       /* accepted and reset: --max-conns reached */
	uint64_t timed_out;     /* closed by the request or idle timeout */
	uint64_t now_ns;        /* CLOCK_MONOTONIC, read once per epoll_wait */
	uint64_t t_next_scan_ns;
	pthread_t thread;
	int started;
	char listen_tag, stop_tag; /* epoll data.ptr of the two special fds */
};

struct server {
	struct server_config cfg;
	uint16_t port;
	int stop_fd;
	atomic_bool stopping;
	atomic_int nconns;      /* open connections, all workers */
	int nworkers;
	struct worker *workers;
};

static struct conn *conn_of(struct tmo_node *n)
{
	return (struct conn *)((char *)n - offsetof(struct conn, tmo));
}

static void again_remove(struct worker *w, struct conn *c)
{
	struct conn **pp;

	for (pp = &w->again; *pp; pp = &(*pp)->again_next) {
		if (*pp == c) {
			*pp = c->again_next;
			break;
		}
	}
	c->queued = 0;
}

/* Recycle c, or free it when enough are kept already. */
static void conn_put(struct worker *w, struct conn *c)
{
	if (w->nspare >= SPARES_MAX) {
		conn_free(c);
		return;
	}
	c->spare_next = w->spare;
	w->spare = c;
	w->nspare++;
}

static void conn_close(struct worker *w, struct conn *c)
{
	if (c->queued)
		again_remove(w, c);
	tmo_remove(&w->open, &c->tmo);
	/* its place is free before its fd goes: whoever sees the fd gone and
	 * connects again is admitted (--max-conns) */
	atomic_fetch_sub_explicit(&w->srv->nconns, 1, memory_order_relaxed);
	close(c->fd); /* also removes it from the epoll set */
	c->fd = -1;
	conn_put(w, c);
}

static struct conn *conn_get(struct worker *w)
{
	struct conn *c = w->spare;

	if (c) {
		w->spare = c->spare_next;
		w->nspare--;
		return c;
	}
	return conn_new();
}

/* Count a new connection against --max-conns. 1: admitted, 0: over. */
static int worker_admit(struct worker *w)
{
	atomic_int *n = &w->srv->nconns;

	if (atomic_fetch_add_explicit(n, 1, memory_order_relaxed) < w->srv->cfg.max_conns)
		return 1;
	atomic_fetch_sub_explicit(n, 1, memory_order_relaxed);
	return 0;
}

/* Over --max-conns: reset at once (no TIME_WAIT kept, the client sees
 * ECONNRESET instead of waiting in the backlog). */
static void worker_refuse(struct worker *w, int fd)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(fd);
	w->refused++;
}

static void worker_add_conn(struct worker *w, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET };
	struct conn *c;

	if (!worker_admit(w)) {
		worker_refuse(w, fd);
		return;
	}
	c = conn_get(w);
	if (!c)
		goto fail;
	conn_reset(c, fd); /* TCP_NODELAY: inherited from the listener */
	ev.data.ptr = c;
	if (epoll_ctl(w->epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
		c->fd = -1;
		conn_put(w, c);
		goto fail;
	}
	tmo_insert(&w->open, &c->tmo, TMO_REQUEST, w->now_ns); /* its first request */
	w->connections++;
	return;
fail:
	atomic_fetch_sub_explicit(&w->srv->nconns, 1, memory_order_relaxed);
	close(fd);
}

static void worker_accept(struct worker *w)
{
	struct timespec pause = { .tv_nsec = 1000000 };
	int i, fd;

	for (i = 0; i < ACCEPTS_PER_EVENT; i++) {
		fd = accept4(w->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd >= 0) {
			worker_add_conn(w, fd);
			continue;
		}
		if (errno == EINTR || errno == ECONNABORTED)
			continue;
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
			nanosleep(&pause, NULL); /* out of fds: let others close */
		return;
	}
}

/* After a drive: a changed phase, or a request answered, restarts the
 * connection's timeout clock. */
static void worker_mark(struct worker *w, struct conn *c, int answered)
{
	unsigned phase = conn_phase(c);

	if (answered || phase != c->tmo.phase)
		tmo_mark(&w->open, &c->tmo, phase, w->now_ns);
}

static void worker_queue_again(struct worker *w, struct conn *c)
{
	if (c->queued)
		return;
	c->queued = 1;
	c->again_next = w->again;
	w->again = c;
}

static void worker_drive(struct worker *w, struct conn *c, uint32_t events)
{
	uint64_t requests = w->stats.requests;
	enum conn_result res = conn_drive(c, events, &w->srv->cfg.orders, &w->stats);

	if (res == CONN_CLOSE) {
		conn_close(w, c);
		return;
	}
	worker_mark(w, c, w->stats.requests != requests);
	if (res == CONN_AGAIN)
		worker_queue_again(w, c);
}

/* Connections that used up their read budget: one more turn each. */
static void worker_drive_again(struct worker *w)
{
	struct conn *list = w->again, *c;

	w->again = NULL;
	while ((c = list)) {
		list = c->again_next;
		c->queued = 0;
		worker_drive(w, c, 0);
	}
}

/* One connection whose phase timed out: 408 for a partial request, else close. */
static void worker_expire_one(struct worker *w, struct conn *c)
{
	unsigned phase = c->tmo.phase;
	enum conn_result res;

	if (phase == TMO_LINGER) { /* a client that never closes */
		conn_close(w, c);
		return;
	}
	w->timed_out++;
	res = phase == TMO_REQUEST ? conn_expire(c, &w->srv->cfg.orders, &w->stats) : CONN_CLOSE;
	if (res == CONN_CLOSE) {
		conn_close(w, c);
		return;
	}
	tmo_mark(&w->open, &c->tmo, conn_phase(c), w->now_ns); /* lingering after the 408 */
	if (res == CONN_AGAIN)
		worker_queue_again(w, c);
}

/* At most every TIMEOUT_SCAN_MS: the expired run at each list's tail. */
static void worker_expire(struct worker *w)
{
	struct tmo_node *n;

	w->t_next_scan_ns = w->now_ns + TIMEOUT_SCAN_MS * 1000000ull;
	while ((n = tmo_expired(&w->open, w->now_ns)))
		worker_expire_one(w, conn_of(n));
}

static int worker_add_fd(struct worker *w, int fd, void *tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = tag };

	return epoll_ctl(w->epoll_fd, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

/* The next events: with --spin-us, polled (the CPU yielded between polls,
 * so a runnable client on this CPU goes first) for up to spin_us before the
 * worker sleeps. A request that arrives meanwhile costs its client no wakeup
 * of a sleeping worker, and the worker no switch back in (docs/workloads.md). */
static int worker_wait(struct worker *w, struct epoll_event *evs, int timeout_ms)
{
	uint64_t spin_ns = (uint64_t)w->srv->cfg.spin_us * 1000, t0;
	int n;

	if (timeout_ms && spin_ns) {
		t0 = tt_now_ns();
		do {
			n = epoll_wait(w->epoll_fd, evs, EVENTS_PER_WAIT, 0);
			if (n)
				return n;
			sched_yield();
		} while (tt_now_ns() - t0 < spin_ns);
	}
	return epoll_wait(w->epoll_fd, evs, EVENTS_PER_WAIT, timeout_ms);
}

static int worker_loop(struct worker *w)
{
	struct epoll_event evs[EVENTS_PER_WAIT];
	int i, n, timeout_ms, accept_ready;

	for (;;) {
		timeout_ms = w->again ? 0 : tmo_armed(&w->open) ? TIMEOUT_SCAN_MS : -1;
		n = worker_wait(w, evs, timeout_ms);
		if (n < 0 && errno != EINTR)
			return -errno;
		w->now_ns = tt_now_ns();
		accept_ready = 0;
		for (i = 0; i < n; i++) {
			void *p = evs[i].data.ptr;

			if (p == &w->stop_tag)
				return 0;
			if (p == &w->listen_tag)
				accept_ready = 1;
			else
				worker_drive(w, p, evs[i].events);
		}
		if (accept_ready) /* requests in hand before new connections */
			worker_accept(w);
		worker_drive_again(w);
		if (w->now_ns >= w->t_next_scan_ns)
			worker_expire(w);
	}
}

static void worker_cleanup(struct worker *w)
{
	struct tmo_node *n;
	struct conn *c;

	while ((n = tmo_any(&w->open)))
		conn_close(w, conn_of(n));
	while ((c = w->spare)) {
		w->spare = c->spare_next;
		conn_free(c);
	}
	w->nspare = 0;
	if (w->epoll_fd >= 0)
		close(w->epoll_fd);
	w->epoll_fd = -1;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	w->err = worker_loop(w);
	worker_cleanup(w);
	return NULL;
}

static int worker_prepare(struct server *s, struct worker *w, int index, int listen_fd)
{
	const struct server_config *cfg = &s->cfg;
	const uint32_t timeout_ms[TMO_PHASES] = {
		[TMO_REQUEST] = cfg->request_timeout_ms,
		[TMO_IDLE] = cfg->idle_timeout_ms,
		[TMO_LINGER] = CONN_LINGER_MS,
	};
	int rc;

	w->srv = s;
	w->index = index;
	w->listen_fd = listen_fd;
	tmo_init(&w->open, timeout_ms);
	w->now_ns = tt_now_ns();
	w->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (w->epoll_fd < 0)
		return -errno;
	rc = worker_add_fd(w, listen_fd, &w->listen_tag);
	if (rc == 0)
		rc = worker_add_fd(w, s->stop_fd, &w->stop_tag);
	return rc;
}

static void server_free(struct server *s)
{
	int i;

	for (i = 0; i < s->nworkers; i++) {
		struct worker *w = &s->workers[i];

		if (w->started)
			pthread_join(w->thread, NULL);
		worker_cleanup(w);
		if (w->listen_fd >= 0)
			close(w->listen_fd);
	}
	if (s->stop_fd >= 0)
		close(s->stop_fd);
	free(s->workers);
	free(s);
}

static int server_signal_stop(struct server *s)
{
	uint64_t one = 1;

	atomic_store(&s->stopping, true);
	return write(s->stop_fd, &one, sizeof(one)) == sizeof(one) ? 0 : -errno;
}

static int server_spawn(struct server *s, const char **what)
{
	char name[16];
	int *fds, i, rc;

	fds = calloc((size_t)s->nworkers, sizeof(*fds));
	if (!fds)
		return -ENOMEM;
	rc = listener_open(s->cfg.bind_addr, s->cfg.port, s->cfg.backlog, s->nworkers,
			   fds, &s->port, what);
	for (i = 0; i < s->nworkers; i++) {
		s->workers[i].listen_fd = rc == 0 ? fds[i] : -1;
		s->workers[i].epoll_fd = -1;
	}
	free(fds);
	for (i = 0; rc == 0 && i < s->nworkers; i++) {
		*what = "epoll";
		rc = worker_prepare(s, &s->workers[i], i, s->workers[i].listen_fd);
	}
	for (i = 0; rc == 0 && i < s->nworkers; i++) {
		*what = "pthread_create";
		rc = -pthread_create(&s->workers[i].thread, NULL, worker_main, &s->workers[i]);
		s->workers[i].started = rc == 0;
		if (rc == 0) { /* named before the server reports ready */
			snprintf(name, sizeof(name), "orders-w%hu", (unsigned short)i);
			pthread_setname_np(s->workers[i].thread, name);
		}
	}
	return rc;
}

int server_start(const struct server_config *cfg, struct server **out, const char **what)
{
	struct server *s = calloc(1, sizeof(*s));
	int rc;

	*what = "memory";
	if (!s)
		return -ENOMEM;
	s->cfg = *cfg;
	s->nworkers = cfg->workers;
	s->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	s->workers = calloc((size_t)cfg->workers, sizeof(*s->workers));
	if (s->stop_fd < 0 || !s->workers) {
		*what = s->stop_fd < 0 ? "eventfd" : "memory";
		rc = s->stop_fd < 0 ? -errno : -ENOMEM;
		s->nworkers = 0;
		server_free(s);
		return rc;
	}
	s->cfg.orders.stop_fd = s->stop_fd;
	s->cfg.orders.stopping = &s->stopping;
	rc = server_spawn(s, what);
	if (rc != 0) {
		server_signal_stop(s);
		server_free(s);
		return rc;
	}
	*out = s;
	return 0;
}

uint16_t server_port(const struct server *s)
{
	return s->port;
}

int server_stop(struct server *s, struct server_stats *stats)
{
	int i, rc = server_signal_stop(s);

	memset(stats, 0, sizeof(*stats));
	for (i = 0; i < s->nworkers; i++) {
		struct worker *w = &s->workers[i];

		if (w->started)
			pthread_join(w->thread, NULL);
		w->started = 0;
		stats->connections += w->connections;
		stats->requests += w->stats.requests;
		stats->errors += w->stats.errors;
		stats->refused += w->refused;
		stats->timed_out += w->timed_out;
		if (w->err && !rc)
			rc = w->err;
	}
	server_free(s);
	return rc;
}
