/* SPDX-License-Identifier: MIT */
/*
 * async: the libcurl multi interface on L event-loop threads ("async-loopK",
 * --loops, default one per usable CPU): connection c belongs to loop c % L,
 * and each loop has its own multi handle, epoll set and records. Open loop:
 * loop k serves the request ids k, k + L, k + 2L, ... of the schedule.
 * Per loop: transfer slots, each reusing its own easy handle (keep-alive). The loop
 * is the multi "socket" API on epoll: only sockets that are ready are
 * serviced (curl_multi_perform would walk every transfer on each wakeup).
 * epoll_ctl only when a socket's registration must change (struct
 * async_fd): curl drops a kept-alive socket after every transfer and asks
 * for it again for the next one; it stays registered in between. Closed
 * loop: a slot starts its next request as soon as one completes. Open loop:
 * a timerfd (ns precision) wakes the loop when the next request is due; due
 * requests
 * wait in FIFO order (ids next_assign..next_due-1) for a free slot.
 * tid of every record is its loop's thread.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "grow.h"
#include "http.h"
#include "models.h"
#include "tt_clock.h"
#include "tt_usdt.h"

#define ASYNC_POLL_MAX_MS 100 /* notice the stop flag at least this often */
#define ASYNC_NO_DEADLINE UINT64_MAX
#define ASYNC_EVENTS 64

/* The loops set up their transfers, then wait until the main thread has
 * started the run's clock (run_begin) once for all of them. */
struct async_gate {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned ready;
	bool go;
};

static void gate_arrive_and_wait(struct async_gate *g)
{
	pthread_mutex_lock(&g->lock);
	g->ready++;
	pthread_cond_broadcast(&g->cond);
	while (!g->go)
		pthread_cond_wait(&g->cond, &g->lock);
	pthread_mutex_unlock(&g->lock);
}

/* Main thread: once n loops are set up, fn(arg), then let them go. */
static void gate_open(struct async_gate *g, unsigned n, void (*fn)(struct hl_run *), struct hl_run *arg)
{
	pthread_mutex_lock(&g->lock);
	while (g->ready < n)
		pthread_cond_wait(&g->cond, &g->lock);
	fn(arg);
	g->go = true;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
}

struct async_slot {
	struct hl_conn http;
	uint32_t index;        /* its connection (records' conn) */
	uint32_t local;        /* its place in this loop's slots[] */
	uint64_t seq;          /* closed loop: requests claimed so far */
	struct tt_request rec; /* the request in flight */
};

/* What this loop's epoll set holds for one fd, and what curl asks for. */
struct async_fd {
	uint32_t reg;  /* registered events; 0: not in the epoll set */
	uint32_t want; /* curl's (EPOLLIN / EPOLLOUT); 0: curl is not watching it */
};

struct async_model {
	struct hl_run *run;
	unsigned loop, nloops;       /* this loop's index, and how many there are */
	unsigned nslots;             /* connections loop, loop + nloops, ... */
	struct async_gate *gate;     /* set up -> run_begin (main thread) -> go */
	int cpu;                     /* --cpus: this loop's CPU, -1 unpinned */
	CURLM *multi;
	struct async_slot *slots;
	unsigned *free_slots, nfree; /* stack of idle slot indices */
	unsigned busy;
	uint32_t tid;
	struct hl_recbuf rb;
	uint64_t next_due, next_assign; /* open loop */
	bool sched_over;
	int timer_fd;                /* open loop: fires at the next due time */
	int epfd;                    /* curl's sockets + timer_fd */
	uint64_t curl_deadline_ns;   /* curl's timer (CURLMOPT_TIMERFUNCTION) */
	struct async_fd *fds;        /* by fd number */
	size_t nfds;
	int rc;
};

/* Start request id on slot s (taken off the free stack by the caller). */
static void async_start(struct async_model *m, struct async_slot *s, uint64_t id,
			uint64_t t_enqueue_ns)
{
	s->rec = (struct tt_request){ .id = id, .conn = s->index, .tid = m->tid,
				      .pid = (uint32_t)m->run->pid, .t_enqueue_ns = t_enqueue_ns };
	http_prepare(&s->http, id, s->index);
	s->rec.t_start_ns = tt_now_ns();
	TT_USDT2(httpload, request__start, id, s->index);
	if (curl_multi_add_handle(m->multi, s->http.easy) != CURLM_OK) {
		s->rec.t_end_ns = s->rec.t_start_ns;
		s->rec.status = -(int32_t)CURLE_FAILED_INIT;
		TT_USDT2(httpload, request__done, id, s->rec.status);
		TT_USDT3(httpload, request__span, id, s->rec.t_start_ns, s->rec.status);
		recbuf_push(&m->rb, &s->rec);
		run_count_done(m->run);
		m->free_slots[m->nfree++] = s->local;
		return;
	}
	m->busy++;
}

static struct async_slot *async_pop_free(struct async_model *m)
{
	return &m->slots[m->free_slots[--m->nfree]];
}

static void async_finish(struct async_model *m, CURLMsg *msg)
{
	struct hl_conn *c = NULL;
	struct async_slot *s;

	curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&c);
	s = c->owner;
	s->rec.t_end_ns = tt_now_ns();
	http_complete(c, msg->data.result, &s->rec);
	TT_USDT2(httpload, request__done, s->rec.id, s->rec.status);
	TT_USDT3(httpload, request__span, s->rec.id, s->rec.t_start_ns, s->rec.status);
	curl_multi_remove_handle(m->multi, msg->easy_handle);
	recbuf_push(&m->rb, &s->rec);
	run_count_done(m->run);
	m->free_slots[m->nfree++] = s->local;
	m->busy--;
}

/* Closed loop: every free slot starts its connection's next request; a
 * slot whose share is done retires (is not put back). */
static void async_fill_closed(struct async_model *m)
{
	while (m->nfree) {
		struct async_slot *s = async_pop_free(m);
		uint64_t id;

		if (run_claim(m->run, s->index, &s->seq, &id))
			async_start(m, s, id, tt_now_ns());
	}
}

/* Open loop: mark requests due up to now, start the oldest on free slots.
 * Returns the due time of the next request not yet due, 0 if none. */
static uint64_t async_fill_open(struct async_model *m)
{
	uint64_t now = tt_now_ns(), due = 0;

	while (!m->sched_over) {
		if (!run_open_has(m->run, m->next_due)) {
			m->sched_over = true;
			break;
		}
		due = run_due_ns(m->run, m->next_due);
		if (due > now)
			break;
		m->next_due += m->nloops;
	}
	if (run_stopped())
		return 0;
	while (m->nfree && m->next_assign < m->next_due) {
		async_start(m, async_pop_free(m), m->next_assign, run_due_ns(m->run, m->next_assign));
		m->next_assign += m->nloops;
	}
	return m->sched_over || due <= now ? 0 : due;
}

/* fd's entry (zeroed when new), or NULL when out of memory. */
static struct async_fd *async_fd_of(struct async_model *m, int fd)
{
	while ((size_t)fd >= m->nfds) {
		size_t old = m->nfds;

		if (TT_GROW(m->fds, m->nfds, m->nfds, 64))
			return NULL;
		memset(m->fds + old, 0, (m->nfds - old) * sizeof(*m->fds));
	}
	return &m->fds[fd];
}

/* Register fd for events (level-triggered), or for none (edge-triggered:
 * a hang-up is still reported once), unless it already is. */
static void async_fd_register(struct async_model *m, int fd, struct async_fd *f, uint32_t events)
{
	struct epoll_event ev = { .events = events ? events : EPOLLET, .data.fd = fd };

	if (f->reg == ev.events)
		return;
	if (epoll_ctl(m->epfd, f->reg ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &ev) && errno == ENOENT)
		epoll_ctl(m->epfd, EPOLL_CTL_ADD, fd, &ev);
	f->reg = ev.events;
}

/* CURLMOPT_SOCKETFUNCTION: watch what curl asks for on socket fd. When curl
 * lets go of a kept-alive socket (CURL_POLL_REMOVE after every transfer)
 * its registration stays: an idle socket reports nothing, and it is parked
 * (async_fd_unwanted) only if it does. */
static int async_on_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
	struct async_model *m = userp;
	struct async_fd unknown = { .reg = ~0u }, *f = async_fd_of(m, fd);

	if (!f) /* out of memory: registered afresh at every call, parked at once when let go */
		f = &unknown;
	f->want = what == CURL_POLL_REMOVE ? 0 :
		  (what & CURL_POLL_IN ? EPOLLIN : 0) | (what & CURL_POLL_OUT ? EPOLLOUT : 0);
	if (f->want || f == &unknown)
		async_fd_register(m, fd, f, f->want);
	return 0;
}

/* An event on a socket curl is not watching (a kept-alive one the server
 * closed): park it, edge-triggered with no events, so it does not report
 * again and again; curl finds it dead when it next takes the connection. */
static void async_fd_unwanted(struct async_model *m, int fd)
{
	struct async_fd *f = (size_t)fd < m->nfds ? &m->fds[fd] : NULL;

	if (f && !f->want)
		async_fd_register(m, fd, f, 0);
}

/* CURLOPT_OPENSOCKETFUNCTION: a new socket starts unregistered, whatever an
 * earlier fd of that number left behind. */
static curl_socket_t async_on_open(void *clientp, curlsocktype purpose, struct curl_sockaddr *a)
{
	struct async_model *m = clientp;
	curl_socket_t fd = socket(a->family, a->socktype, a->protocol);

	if (fd >= 0 && (size_t)fd < m->nfds)
		m->fds[fd] = (struct async_fd){ 0 };
	return fd;
}

/* CURLOPT_CLOSESOCKETFUNCTION: the fd leaves the epoll set as it closes; a
 * later socket may get its number. */
static int async_on_close(void *clientp, curl_socket_t fd)
{
	struct async_model *m = clientp;

	if ((size_t)fd < m->nfds)
		m->fds[fd] = (struct async_fd){ 0 };
	return close(fd);
}

/* CURLMOPT_TIMERFUNCTION: curl wants a call after timeout_ms (-1: none). */
static int async_on_timer(CURLM *multi, long timeout_ms, void *userp)
{
	struct async_model *m = userp;

	m->curl_deadline_ns = timeout_ms < 0 ? ASYNC_NO_DEADLINE
					     : tt_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	return 0;
}

static void async_arm_due(struct async_model *m, uint64_t due_ns)
{
	struct itimerspec its = { 0 };

	if (!due_ns || m->timer_fd < 0)
		return;
	its.it_value = tt_timespec_of_ns(due_ns);
	timerfd_settime(m->timer_fd, TFD_TIMER_ABSTIME, &its, NULL);
}

static int async_wait_ms(const struct async_model *m)
{
	uint64_t now = tt_now_ns();

	if (m->curl_deadline_ns == ASYNC_NO_DEADLINE)
		return ASYNC_POLL_MAX_MS;
	if (m->curl_deadline_ns <= now)
		return 0;
	return (m->curl_deadline_ns - now + 999999) / 1000000 < ASYNC_POLL_MAX_MS
		       ? (int)((m->curl_deadline_ns - now + 999999) / 1000000) : ASYNC_POLL_MAX_MS;
}

/* Wait for ready sockets, curl's timer, the next due time (timerfd) or
 * ASYNC_POLL_MAX_MS; hand what happened to curl. */
static void async_wait(struct async_model *m, uint64_t due_ns)
{
	struct epoll_event evs[ASYNC_EVENTS];
	int n, running;

	async_arm_due(m, due_ns);
	n = epoll_wait(m->epfd, evs, ASYNC_EVENTS, async_wait_ms(m));
	for (int i = 0; i < n; i++) {
		uint32_t e = evs[i].events;
		uint64_t expirations;

		if (evs[i].data.fd == m->timer_fd) {
			if (read(m->timer_fd, &expirations, sizeof(expirations)) < 0)
				expirations = 0;
			continue;
		}
		async_fd_unwanted(m, evs[i].data.fd);
		curl_multi_socket_action(m->multi, evs[i].data.fd,
					 (e & EPOLLIN ? CURL_CSELECT_IN : 0) |
					 (e & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
					 (e & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR : 0), &running);
	}
	if (m->curl_deadline_ns <= tt_now_ns()) {
		m->curl_deadline_ns = ASYNC_NO_DEADLINE;
		curl_multi_socket_action(m->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	}
}

static void async_drain_done(struct async_model *m)
{
	CURLMsg *msg;
	int left;

	while ((msg = curl_multi_info_read(m->multi, &left)))
		if (msg->msg == CURLMSG_DONE)
			async_finish(m, msg);
}

static bool async_over(const struct async_model *m, bool open)
{
	if (m->busy)
		return false;
	if (run_stopped())
		return true;
	return open ? m->sched_over && m->next_assign == m->next_due : m->nfree == 0;
}

static void async_loop(struct async_model *m)
{
	bool open = m->run->o->rate > 0;

	m->next_due = m->next_assign = m->loop;
	for (;;) {
		uint64_t due_ns = 0;

		if (open)
			due_ns = async_fill_open(m);
		else
			async_fill_closed(m);
		if (async_over(m, open))
			break;
		async_wait(m, due_ns);
		async_drain_done(m);
	}
}

static int async_setup(struct async_model *m)
{
	unsigned n = m->nslots;

	m->tid = (uint32_t)gettid();
	m->timer_fd = m->run->o->rate > 0 ? timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC) : -1;
	m->epfd = epoll_create1(EPOLL_CLOEXEC);
	m->curl_deadline_ns = ASYNC_NO_DEADLINE;
	m->multi = curl_multi_init();
	m->slots = calloc(n, sizeof(*m->slots));
	m->free_slots = calloc(n, sizeof(*m->free_slots));
	if (m->epfd < 0 || !m->multi || !m->slots || !m->free_slots ||
	    recbuf_init(&m->rb, run_initial_cap(m->run, m->nloops)))
		return -ENOMEM;
	if (m->timer_fd >= 0) {
		struct epoll_event ev = { .events = EPOLLIN, .data.fd = m->timer_fd };

		epoll_ctl(m->epfd, EPOLL_CTL_ADD, m->timer_fd, &ev);
	}
	curl_multi_setopt(m->multi, CURLMOPT_SOCKETFUNCTION, async_on_socket);
	curl_multi_setopt(m->multi, CURLMOPT_SOCKETDATA, m);
	curl_multi_setopt(m->multi, CURLMOPT_TIMERFUNCTION, async_on_timer);
	curl_multi_setopt(m->multi, CURLMOPT_TIMERDATA, m);
	for (unsigned i = 0; i < n; i++) {
		m->slots[i].index = m->loop + i * m->nloops; /* its connection */
		m->slots[i].local = i;
		if (http_conn_init(&m->slots[i].http, m->run->o))
			return -ENOMEM;
		m->slots[i].http.owner = &m->slots[i];
		curl_easy_setopt(m->slots[i].http.easy, CURLOPT_OPENSOCKETFUNCTION, async_on_open);
		curl_easy_setopt(m->slots[i].http.easy, CURLOPT_OPENSOCKETDATA, m);
		curl_easy_setopt(m->slots[i].http.easy, CURLOPT_CLOSESOCKETFUNCTION, async_on_close);
		curl_easy_setopt(m->slots[i].http.easy, CURLOPT_CLOSESOCKETDATA, m);
		m->free_slots[m->nfree++] = n - 1 - i; /* slot 0 is used first */
	}
	return 0;
}

static void *async_main(void *arg)
{
	struct async_model *m = arg;
	char name[16];

	snprintf(name, sizeof(name), "async-loop%u", m->loop);
	pthread_setname_np(pthread_self(), name);
	if (async_setup(m)) {
		fprintf(stderr, "httpload: async: cannot set up %u transfers (out of memory)\n",
			m->nslots);
		m->rc = 1;
	}
	gate_arrive_and_wait(m->gate); /* all set up: the main thread starts the clock */
	if (!m->rc)
		async_loop(m);
	for (unsigned i = 0; m->slots && i < m->nslots; i++)
		http_conn_cleanup(&m->slots[i].http);
	if (m->multi)
		curl_multi_cleanup(m->multi);
	if (m->timer_fd >= 0)
		close(m->timer_fd);
	if (m->epfd >= 0)
		close(m->epfd);
	free(m->fds);
	return NULL;
}

/* --cpus: every listed CPU must be usable; loop k runs on cpus[k % ncpus]. */
static int async_check_cpus(const struct hl_opts *o)
{
	struct tp_system_topology *sys = calloc(1, sizeof(*sys));
	int rc = 0;

	if (!sys || tp_topology_read(sys))
		rc = 1;
	for (size_t i = 0; !rc && i < o->ncpus; i++)
		if (!tp_topology_usable(&sys->topo, o->cpus[i])) {
			fprintf(stderr, "httpload: --cpus: CPU %d is offline or outside this process's "
				"allowed CPUs: pick CPUs from `taskset -cp $$`\n", o->cpus[i]);
			rc = 2;
		}
	free(sys);
	return rc;
}

/* --loops, or one loop per usable CPU; never more loops than connections. */
static unsigned async_nloops(const struct hl_opts *o)
{
	cpu_set_t set;
	unsigned n = o->loops;

	if (!n)
		n = sched_getaffinity(0, sizeof(set), &set) ? 1 : (unsigned)CPU_COUNT(&set);
	return n < 1 ? 1 : n > o->conns ? o->conns : n;
}

static int async_start_loop(struct async_model *m, pthread_t *th)
{
	pthread_attr_t attr;
	cpu_set_t set;
	int rc;

	pthread_attr_init(&attr);
	if (m->cpu >= 0) {
		CPU_ZERO(&set);
		CPU_SET(m->cpu, &set);
		pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
	}
	rc = pthread_create(th, &attr, async_main, m);
	pthread_attr_destroy(&attr);
	if (rc)
		fprintf(stderr, "httpload: cannot start event loop %u: %s\n", m->loop, strerror(rc));
	return rc;
}

int model_async_run(struct hl_run *r)
{
	unsigned nloops = async_nloops(r->o), started = 0;
	struct async_model *m = calloc(nloops, sizeof(*m));
	pthread_t *th = calloc(nloops, sizeof(*th));
	struct async_gate gate = { .lock = PTHREAD_MUTEX_INITIALIZER,
				   .cond = PTHREAD_COND_INITIALIZER };
	int rc = r->o->ncpus ? async_check_cpus(r->o) : 0;

	if (!rc && (!m || !th))
		rc = 1;
	if (rc) {
		free(m);
		free(th);
		return rc;
	}
	for (unsigned k = 0; k < nloops; k++) {
		m[k] = (struct async_model){ .run = r, .loop = k, .nloops = nloops, .gate = &gate,
					     .nslots = (r->o->conns - k + nloops - 1) / nloops,
					     .cpu = r->o->ncpus ? r->o->cpus[k % r->o->ncpus] : -1,
					     .timer_fd = -1, .epfd = -1 };
		if (async_start_loop(&m[k], &th[k]))
			break;
		started++;
	}
	if (started < nloops) { /* the loops that did start send nothing */
		atomic_store(&hl_stop, 1);
		rc = 1;
	}
	gate_open(&gate, started, run_begin, r);
	for (unsigned k = 0; k < started; k++)
		pthread_join(th[k], NULL);
	r->bufs = malloc(nloops * sizeof(*r->bufs));
	if (r->bufs) {
		for (unsigned k = 0; k < nloops; k++)
			r->bufs[k] = &m[k].rb;
		r->nthreads = nloops;
	}
	for (unsigned k = 0; k < nloops; k++)
		rc = rc ?: m[k].rc;
	if (!r->bufs || run_collect(r))
		rc = 1;
	for (unsigned k = 0; k < nloops; k++) {
		free(m[k].slots);
		free(m[k].free_slots);
	}
	free(m);
	free(th);
	return rc;
}
