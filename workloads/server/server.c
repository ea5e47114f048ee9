/* SPDX-License-Identifier: MIT */
/* Workers and their epoll loops. See server.h. */
#include "server.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
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
#define LINGER_SCAN_MS 250

struct worker {
	struct server *srv;
	int index;
	int listen_fd;
	int epoll_fd;
	int lingering;          /* connections half-closed after an error */
	int err;                /* negative errno if the loop failed */
	struct conn *open;      /* open connections (doubly linked) */
	struct conn *spare;     /* closed ones, reused (singly linked via next) */
	struct conn *again;     /* to drive again without an event (fairness) */
	struct conn_stats stats;
	uint64_t connections;
	pthread_t thread;
	int started;
	char listen_tag, stop_tag; /* epoll data.ptr of the two special fds */
};

struct server {
	struct server_config cfg;
	uint16_t port;
	int stop_fd;
	atomic_bool stopping;
	int nworkers;
	struct worker *workers;
};

static void open_link(struct worker *w, struct conn *c)
{
	c->prev = NULL;
	c->next = w->open;
	if (w->open)
		w->open->prev = c;
	w->open = c;
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

static void conn_close(struct worker *w, struct conn *c)
{
	if (c->queued)
		again_remove(w, c);
	if (c->prev)
		c->prev->next = c->next;
	else
		w->open = c->next;
	if (c->next)
		c->next->prev = c->prev;
	w->lingering -= c->lingering;
	close(c->fd); /* also removes it from the epoll set */
	c->fd = -1;
	c->next = w->spare;
	w->spare = c;
}

static struct conn *conn_get(struct worker *w)
{
	struct conn *c = w->spare;

	if (c) {
		w->spare = c->next;
		return c;
	}
	return conn_new();
}

static void worker_add_conn(struct worker *w, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET };
	struct conn *c = conn_get(w);
	int one = 1;

	if (!c) {
		close(fd);
		return;
	}
	conn_reset(c, fd);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	ev.data.ptr = c;
	if (epoll_ctl(w->epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
		close(fd);
		c->fd = -1;
		c->next = w->spare;
		w->spare = c;
		return;
	}
	open_link(w, c);
	w->connections++;
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

static void worker_drive(struct worker *w, struct conn *c, uint32_t events)
{
	int was_lingering = c->lingering;
	enum conn_result res = conn_drive(c, events, &w->srv->cfg.orders, &w->stats);

	if (res == CONN_CLOSE) {
		conn_close(w, c);
		return;
	}
	w->lingering += c->lingering - was_lingering;
	if (res == CONN_AGAIN && !c->queued) {
		c->queued = 1;
		c->again_next = w->again;
		w->again = c;
	}
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

/* Close connections that lingered too long (clients that never close). */
static void worker_reap_lingering(struct worker *w)
{
	uint64_t now_ns = tt_now_ns();
	struct conn *c = w->open, *next;

	for (; c; c = next) {
		next = c->next;
		if (conn_linger_expired(c, now_ns))
			conn_close(w, c);
	}
}

static int worker_add_fd(struct worker *w, int fd, void *tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = tag };

	return epoll_ctl(w->epoll_fd, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

static int worker_loop(struct worker *w)
{
	struct epoll_event evs[EVENTS_PER_WAIT];
	int i, n, timeout_ms;

	for (;;) {
		timeout_ms = w->again ? 0 : w->lingering ? LINGER_SCAN_MS : -1;
		n = epoll_wait(w->epoll_fd, evs, EVENTS_PER_WAIT, timeout_ms);
		if (n < 0 && errno != EINTR)
			return -errno;
		for (i = 0; i < n; i++) {
			void *p = evs[i].data.ptr;

			if (p == &w->stop_tag)
				return 0;
			if (p == &w->listen_tag)
				worker_accept(w);
			else
				worker_drive(w, p, evs[i].events);
		}
		worker_drive_again(w);
		if (w->lingering)
			worker_reap_lingering(w);
	}
}

static void worker_cleanup(struct worker *w)
{
	struct conn *c;

	while (w->open)
		conn_close(w, w->open);
	while ((c = w->spare)) {
		w->spare = c->next;
		conn_free(c);
	}
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
	int rc;

	w->srv = s;
	w->index = index;
	w->listen_fd = listen_fd;
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
		if (w->err && !rc)
			rc = w->err;
	}
	server_free(s);
	return rc;
}
