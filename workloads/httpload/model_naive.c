/* SPDX-License-Identifier: MIT */
/*
 * naive: one pthread per connection ("naive-c<N>"), each with its own easy
 * handle, issuing requests back to back (closed loop) or taking due requests
 * from the dispatcher's queue (open loop). No pinning: the seed's original.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dueq.h"
#include "http.h"
#include "models.h"
#include "tt_clock.h"

struct naive_conn {
	struct hl_run *run;
	struct hl_dueq *dueq; /* open loop, else NULL */
	unsigned index;
	uint64_t seq; /* requests claimed so far */
	pthread_t thread;
	struct hl_recbuf rb;
	struct hl_conn http;
};

/* Next request for this connection: claimed (closed) or due (open). */
static bool naive_next(struct naive_conn *c, uint64_t *id, uint64_t *t_enqueue)
{
	if (!c->dueq) {
		if (!run_claim(c->run, c->index, &c->seq, id))
			return false;
		*t_enqueue = tt_now_ns();
		return true;
	}
	if (!dueq_pop(c->dueq, id, &hl_stop))
		return false;
	*t_enqueue = run_due_ns(c->run, *id);
	return true;
}

static void *naive_main(void *arg)
{
	struct naive_conn *c = arg;
	struct tt_request rec = { .conn = c->index, .tid = (uint32_t)gettid(), .pid = (uint32_t)c->run->pid };
	uint64_t id, t_enqueue_ns;
	char name[16];

	snprintf(name, sizeof(name), "naive-c%u", c->index);
	pthread_setname_np(pthread_self(), name);
	recbuf_init(&c->rb, run_initial_cap(c->run, c->run->o->conns));
	http_conn_init(&c->http, c->run->o);
	while (naive_next(c, &id, &t_enqueue_ns)) {
		rec.id = id;
		rec.t_enqueue_ns = t_enqueue_ns;
		http_execute(&c->http, &rec);
		recbuf_push(&c->rb, &rec);
		run_count_done(c->run);
	}
	http_conn_cleanup(&c->http);
	return NULL;
}

static void naive_dispatch(uint64_t id, uint64_t due_ns, void *arg)
{
	dueq_push(arg, id);
}

int model_naive_run(struct hl_run *r)
{
	unsigned n = r->o->conns, started = 0;
	struct naive_conn *conns = calloc(n, sizeof(*conns));
	struct hl_dueq q;
	bool open = r->o->rate > 0;
	int err = 0;

	r->bufs = calloc(n, sizeof(*r->bufs));
	if (!conns || !r->bufs || (open && dueq_init(&q))) {
		fprintf(stderr, "httpload: out of memory for %u connections\n", n);
		free(conns);
		return 1;
	}
	r->nthreads = n;
	if (!open)
		run_begin(r); /* closed loop: connections claim as soon as they start */
	for (; started < n; started++) {
		struct naive_conn *c = &conns[started];

		*c = (struct naive_conn){ .run = r, .dueq = open ? &q : NULL, .index = started };
		r->bufs[started] = &c->rb;
		err = pthread_create(&c->thread, NULL, naive_main, c);
		if (err) {
			fprintf(stderr, "httpload: cannot start connection thread %u: %s\n",
				started, strerror(err));
			atomic_store(&hl_stop, 1); /* let the started ones finish, keep their records */
			break;
		}
	}
	if (open)
		run_begin(r); /* open loop: request 0 is due once every connection is up */
	if (open && started == n)
		run_dispatch(r, naive_dispatch, &q);
	if (open)
		dueq_close(&q);
	for (unsigned i = 0; i < started; i++)
		pthread_join(conns[i].thread, NULL);
	if (open)
		dueq_destroy(&q);
	if (run_collect(r))
		err = -1;
	free(conns);
	return err ? 1 : 0;
}
