/* SPDX-License-Identifier: MIT */
/*
 * pool: the requests of N logical connections are tasks for a thread pool of
 * W workers ("pool-w<N>"), each worker reusing its own easy handle kept in
 * its per-worker memory (on its NUMA node with --numa on).
 *
 * Closed loop: a connection's next request is enqueued (t_enqueue_ns) when
 * its previous one completes; a worker takes it later (t_start_ns). The
 * difference is queue wait, recorded, not hidden. Open loop: the dispatcher
 * enqueues request i at its due time; whichever worker is free runs it, and
 * conn is that worker's index (its keep-alive connection).
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "http.h"
#include "models.h"
#include "threadpool.h"
#include "tt_clock.h"

struct pool_model;

/* Per-worker memory (threadpool worker_mem). */
struct pool_worker {
	struct pool_model *m;
	bool ready;
	uint32_t tid;
	struct hl_conn http;
	struct hl_recbuf rb;
};

struct pool_conn {
	struct pool_model *m;
	uint32_t index;
	uint64_t seq; /* requests claimed so far */
	uint64_t id, t_enqueue_ns;
};

struct pool_model {
	struct hl_run *run;
	struct tp_pool *pool;
	pthread_mutex_t lock;
	pthread_cond_t all_done;
	unsigned active; /* logical connections still issuing */
};

static struct pool_worker *pool_worker_of(struct tp_worker_ctx *w)
{
	struct pool_worker *pw = w->mem;

	if (!pw->ready) { /* first task on this worker: its thread, its node */
		pw->tid = (uint32_t)gettid();
		recbuf_init(&pw->rb, run_initial_cap(pw->m->run, tp_workers(pw->m->pool)));
		http_conn_init(&pw->http, pw->m->run->o);
		pw->ready = true;
	}
	return pw;
}

static void pool_execute(struct pool_worker *pw, struct tt_request *rec)
{
	rec->tid = pw->tid;
	rec->pid = (uint32_t)pw->m->run->pid;
	http_execute(&pw->http, rec);
	recbuf_push(&pw->rb, rec);
	run_count_done(pw->m->run);
}

static void pool_conn_finished(struct pool_model *m)
{
	pthread_mutex_lock(&m->lock);
	if (--m->active == 0)
		pthread_cond_signal(&m->all_done);
	pthread_mutex_unlock(&m->lock);
}

static void pool_closed_task(void *arg, struct tp_worker_ctx *w)
{
	struct pool_conn *pc = arg;
	struct pool_worker *pw = pool_worker_of(w);
	struct tt_request rec = { .id = pc->id, .conn = pc->index, .t_enqueue_ns = pc->t_enqueue_ns };

	pool_execute(pw, &rec);
	if (run_claim(pc->m->run, pc->index, &pc->seq, &pc->id)) {
		pc->t_enqueue_ns = tt_now_ns();
		if (tp_submit(pc->m->pool, pool_closed_task, pc) == 0)
			return;
	}
	pool_conn_finished(pc->m);
}

static void pool_open_task(void *arg, struct tp_worker_ctx *w)
{
	struct pool_worker *pw = pool_worker_of(w);
	uint64_t id = (uint64_t)(uintptr_t)arg;
	struct tt_request rec = { .id = id, .conn = w->index,
				  .t_enqueue_ns = run_due_ns(pw->m->run, id) };

	if (run_stopped()) /* stopping: not issued, so not recorded */
		return;
	pool_execute(pw, &rec);
}

static void pool_dispatch(uint64_t id, uint64_t due_ns, void *arg)
{
	struct pool_model *m = arg;

	tp_submit(m->pool, pool_open_task, (void *)(uintptr_t)id);
}

static int pool_run_closed(struct pool_model *m, struct pool_conn *conns, unsigned n)
{
	struct tp_task *tasks = calloc(n, sizeof(*tasks));
	unsigned k = 0;

	if (!tasks)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		conns[i] = (struct pool_conn){ .m = m, .index = i };
		if (!run_claim(m->run, i, &conns[i].seq, &conns[i].id))
			continue;
		conns[i].t_enqueue_ns = tt_now_ns();
		tasks[k++] = (struct tp_task){ pool_closed_task, &conns[i] };
	}
	m->active = k;
	tp_submit_batch(m->pool, tasks, k); /* one lock for all first requests */
	free(tasks);
	pthread_mutex_lock(&m->lock);
	while (m->active > 0)
		pthread_cond_wait(&m->all_done, &m->lock);
	pthread_mutex_unlock(&m->lock);
	return 0;
}

static int pool_start(struct pool_model *m, const struct hl_opts *o)
{
	struct tp_config cfg = {
		.workers = o->workers,
		.name_prefix = "pool",
		.affinity = o->ncpus ? TP_AFFINITY_LIST : TP_AFFINITY_ROUND_ROBIN,
		.cpus = o->cpus,
		.ncpus = o->ncpus,
		.numa = o->numa,
		.worker_mem_bytes = sizeof(struct pool_worker),
	};
	char err[256];
	int rc = tp_create(&m->pool, &cfg, err, sizeof(err));

	if (rc) {
		fprintf(stderr, "httpload: %s\n", err);
		return rc == -EINVAL ? 2 : 1;
	}
	return 0;
}

int model_pool_run(struct hl_run *r)
{
	struct pool_model m = { .run = r };
	struct pool_conn *conns = calloc(r->o->conns, sizeof(*conns));
	unsigned nw = r->o->workers;
	int rc;

	r->bufs = calloc(nw, sizeof(*r->bufs));
	if (!conns || !r->bufs) {
		fprintf(stderr, "httpload: out of memory\n");
		free(conns);
		return 1;
	}
	rc = pool_start(&m, r->o);
	if (rc) {
		free(conns);
		return rc;
	}
	pthread_mutex_init(&m.lock, NULL);
	pthread_cond_init(&m.all_done, NULL);
	r->nthreads = nw;
	r->numa_active = tp_numa_active(m.pool);
	for (unsigned i = 0; i < nw; i++) {
		struct pool_worker *pw = tp_worker_mem(m.pool, i);

		pw->m = &m;
		r->bufs[i] = &pw->rb;
	}
	run_begin(r);
	if (r->o->rate > 0)
		run_dispatch(r, pool_dispatch, &m);
	else if (pool_run_closed(&m, conns, r->o->conns))
		fprintf(stderr, "httpload: out of memory\n");
	tp_shutdown(m.pool, run_stopped() ? TP_CANCEL : TP_DRAIN);
	rc = run_collect(r) ? 1 : 0;
	for (unsigned i = 0; i < nw; i++)
		http_conn_cleanup(&((struct pool_worker *)tp_worker_mem(m.pool, i))->http);
	tp_destroy(m.pool);
	pthread_cond_destroy(&m.all_done);
	pthread_mutex_destroy(&m.lock);
	free(conns);
	return rc;
}
