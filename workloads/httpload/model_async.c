/* SPDX-License-Identifier: MIT */
/*
 * async: the libcurl multi interface on one event-loop thread ("async-loop"):
 * N transfer slots, each reusing its own easy handle (keep-alive). The loop
 * is the multi "socket" API on epoll: only sockets that are ready are
 * serviced (curl_multi_perform would walk every transfer on each wakeup). Closed
 * loop: a slot starts its next request as soon as one completes. Open loop:
 * a timerfd (ns precision) wakes the loop when the next request is due; due
 * requests
 * wait in FIFO order (ids next_assign..next_due-1) for a free slot.
 * tid of every record is the loop thread.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "http.h"
#include "models.h"
#include "tt_clock.h"

#define ASYNC_POLL_MAX_MS 100 /* notice the stop flag at least this often */
#define ASYNC_NO_DEADLINE UINT64_MAX
#define ASYNC_EVENTS 64

struct async_slot {
	struct hl_conn http;
	uint32_t index;
	uint64_t seq;          /* closed loop: requests claimed so far */
	struct tt_request rec; /* the request in flight */
};

struct async_model {
	struct hl_run *run;
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
	if (curl_multi_add_handle(m->multi, s->http.easy) != CURLM_OK) {
		s->rec.t_end_ns = s->rec.t_start_ns;
		s->rec.status = -(int32_t)CURLE_FAILED_INIT;
		recbuf_push(&m->rb, &s->rec);
		run_count_done(m->run);
		m->free_slots[m->nfree++] = s->index;
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
	curl_multi_remove_handle(m->multi, msg->easy_handle);
	recbuf_push(&m->rb, &s->rec);
	run_count_done(m->run);
	m->free_slots[m->nfree++] = s->index;
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
		m->next_due++;
	}
	if (run_stopped())
		return 0;
	while (m->nfree && m->next_assign < m->next_due) {
		async_start(m, async_pop_free(m), m->next_assign, run_due_ns(m->run, m->next_assign));
		m->next_assign++;
	}
	return m->sched_over || due <= now ? 0 : due;
}

/* CURLMOPT_SOCKETFUNCTION: watch what curl asks for on socket fd. */
static int async_on_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
	struct async_model *m = userp;
	struct epoll_event ev = { .data.fd = fd };

	if (what == CURL_POLL_REMOVE) {
		epoll_ctl(m->epfd, EPOLL_CTL_DEL, fd, NULL);
		return 0;
	}
	ev.events = (what & CURL_POLL_IN ? EPOLLIN : 0) | (what & CURL_POLL_OUT ? EPOLLOUT : 0);
	if (epoll_ctl(m->epfd, EPOLL_CTL_MOD, fd, &ev) && errno == ENOENT)
		epoll_ctl(m->epfd, EPOLL_CTL_ADD, fd, &ev);
	return 0;
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
	its.it_value.tv_sec = (time_t)(due_ns / 1000000000ull);
	its.it_value.tv_nsec = (long)(due_ns % 1000000000ull);
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

	run_begin(m->run);
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
	unsigned n = m->run->o->conns;

	m->tid = (uint32_t)gettid();
	m->timer_fd = m->run->o->rate > 0 ? timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC) : -1;
	m->epfd = epoll_create1(EPOLL_CLOEXEC);
	m->curl_deadline_ns = ASYNC_NO_DEADLINE;
	m->multi = curl_multi_init();
	m->slots = calloc(n, sizeof(*m->slots));
	m->free_slots = calloc(n, sizeof(*m->free_slots));
	if (m->epfd < 0 || !m->multi || !m->slots || !m->free_slots ||
	    recbuf_init(&m->rb, run_initial_cap(m->run, 1)))
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
		m->slots[i].index = i;
		if (http_conn_init(&m->slots[i].http, m->run->o))
			return -ENOMEM;
		m->slots[i].http.owner = &m->slots[i];
		m->free_slots[m->nfree++] = n - 1 - i; /* slot 0 is used first */
	}
	return 0;
}

static void *async_main(void *arg)
{
	struct async_model *m = arg;

	pthread_setname_np(pthread_self(), "async-loop");
	if (async_setup(m)) {
		fprintf(stderr, "httpload: async: cannot set up %u transfers (out of memory)\n",
			m->run->o->conns);
		m->rc = 1;
	} else {
		async_loop(m);
	}
	for (unsigned i = 0; m->slots && i < m->run->o->conns; i++)
		http_conn_cleanup(&m->slots[i].http);
	if (m->multi)
		curl_multi_cleanup(m->multi);
	if (m->timer_fd >= 0)
		close(m->timer_fd);
	if (m->epfd >= 0)
		close(m->epfd);
	return NULL;
}

/* --cpus for the loop thread: every listed CPU must be usable. */
static int async_affinity(const struct hl_opts *o, pthread_attr_t *attr)
{
	struct tp_system_topology *sys = calloc(1, sizeof(*sys));
	cpu_set_t set;
	int rc = 0;

	if (!sys || tp_topology_read(sys))
		rc = 1;
	CPU_ZERO(&set);
	for (size_t i = 0; !rc && i < o->ncpus; i++) {
		if (!tp_topology_usable(&sys->topo, o->cpus[i])) {
			fprintf(stderr, "httpload: --cpus: CPU %d is offline or outside this process's "
				"allowed CPUs: pick CPUs from `taskset -cp $$`\n", o->cpus[i]);
			rc = 2;
		}
		CPU_SET(o->cpus[i], &set);
	}
	if (!rc)
		rc = pthread_attr_setaffinity_np(attr, sizeof(set), &set) ? 1 : 0;
	free(sys);
	return rc;
}

int model_async_run(struct hl_run *r)
{
	struct async_model m = { .run = r, .timer_fd = -1, .epfd = -1 };
	struct hl_recbuf *rbp = &m.rb;
	pthread_attr_t attr;
	pthread_t th;
	int rc = 0;

	pthread_attr_init(&attr);
	if (r->o->ncpus)
		rc = async_affinity(r->o, &attr);
	if (!rc && (rc = pthread_create(&th, &attr, async_main, &m)) != 0) {
		fprintf(stderr, "httpload: cannot start the async-loop thread: %s\n", strerror(rc));
		rc = 1;
	}
	pthread_attr_destroy(&attr);
	if (rc)
		return rc;
	pthread_join(th, NULL);
	r->bufs = malloc(sizeof(*r->bufs));
	if (r->bufs) {
		r->bufs[0] = rbp;
		r->nthreads = 1;
	}
	if (!r->bufs || run_collect(r))
		m.rc = 1;
	free(m.slots);
	free(m.free_slots);
	return m.rc;
}
