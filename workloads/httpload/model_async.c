/* SPDX-License-Identifier: MIT */
/*
 * async: the libcurl multi interface on one event-loop thread ("async-loop"):
 * N transfer slots, each reusing its own easy handle (keep-alive). Closed
 * loop: a slot starts its next request as soon as one completes. Open loop:
 * a timerfd (an extra fd of curl_multi_poll, ns precision) wakes the loop
 * when the next request is due; due requests
 * wait in FIFO order (ids next_assign..next_due-1) for a free slot.
 * tid of every record is the loop thread.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "http.h"
#include "models.h"
#include "tt_clock.h"

#define ASYNC_POLL_MAX_MS 100 /* notice the stop flag at least this often */

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

/* Sleep in curl_multi_poll until a socket is ready, curl's own timer, the
 * next due time (timerfd), or ASYNC_POLL_MAX_MS. */
static void async_wait(struct async_model *m, uint64_t due_ns)
{
	struct curl_waitfd wfd = { .fd = m->timer_fd, .events = CURL_WAIT_POLLIN };
	struct itimerspec its = { 0 };
	uint64_t expirations;

	if (due_ns && m->timer_fd >= 0) {
		its.it_value.tv_sec = (time_t)(due_ns / 1000000000ull);
		its.it_value.tv_nsec = (long)(due_ns % 1000000000ull);
		timerfd_settime(m->timer_fd, TFD_TIMER_ABSTIME, &its, NULL);
	}
	curl_multi_poll(m->multi, m->timer_fd >= 0 ? &wfd : NULL, m->timer_fd >= 0 ? 1 : 0,
			ASYNC_POLL_MAX_MS, NULL);
	if (m->timer_fd >= 0 && read(m->timer_fd, &expirations, sizeof(expirations)) < 0)
		expirations = 0; /* not fired yet: EAGAIN */
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
	int running, left;
	CURLMsg *msg;

	run_begin(m->run);
	for (;;) {
		uint64_t due_ns = 0;

		if (open)
			due_ns = async_fill_open(m);
		else
			async_fill_closed(m);
		if (async_over(m, open))
			break;
		curl_multi_perform(m->multi, &running);
		while ((msg = curl_multi_info_read(m->multi, &left)))
			if (msg->msg == CURLMSG_DONE)
				async_finish(m, msg);
		if (async_over(m, open))
			break;
		if (m->nfree && (!open || m->next_assign < m->next_due))
			continue; /* a slot is free and work is waiting: no sleep */
		async_wait(m, due_ns);
	}
}

static int async_setup(struct async_model *m)
{
	unsigned n = m->run->o->conns;

	m->tid = (uint32_t)gettid();
	m->timer_fd = m->run->o->rate > 0 ? timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC) : -1;
	m->multi = curl_multi_init();
	m->slots = calloc(n, sizeof(*m->slots));
	m->free_slots = calloc(n, sizeof(*m->free_slots));
	if (!m->multi || !m->slots || !m->free_slots ||
	    recbuf_init(&m->rb, run_initial_cap(m->run, 1)))
		return -ENOMEM;
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
	struct async_model m = { .run = r, .timer_fd = -1 };
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
