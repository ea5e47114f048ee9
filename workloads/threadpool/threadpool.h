/* SPDX-License-Identifier: MIT */
/*
 * threadpool: a fixed number of workers over one FIFO task queue
 * (mutex + condition variable).
 *
 *   struct tp_config cfg = { .workers = 4, .name_prefix = "tp" };
 *   struct tp_pool *pool;
 *   char err[160];
 *   if (tp_create(&pool, &cfg, err, sizeof(err))) { fprintf(stderr, "%s\n", err); ... }
 *   tp_submit(pool, fn, arg);              // fn(arg, worker_ctx) runs on a worker
 *   tp_shutdown(pool, TP_DRAIN);            // or TP_CANCEL: returns tasks dropped
 *   tp_worker_stats(pool, i, &st);          // tasks run, busy ns, tid, cpu, node
 *   tp_pool_stats(pool, &ps);               // wakeups, watcher takeovers
 *   tp_destroy(pool);
 *
 * Wakeups: a submit wakes a parked worker only for a task that no worker is
 * already about to take: an idle worker polls the queue for spin_us before it
 * parks (one at a time, so the machine pays at most one spinning CPU), and a
 * task it sees costs no wakeup; workers signalled before count too, and so do
 * awake workers whose tasks are short (one running tasks of avg ns counts as
 * the TP_WAKE_NS / (avg + ~250 ns) tasks it takes while a wakeup is under
 * way) while one parked worker keeps watch: its wait times out every
 * TP_WATCH_US, and a queue that did not move meanwhile is taken over. So a
 * stream of tiny tasks costs no wakeups, and a task waits at most about
 * TP_WATCH_US behind a short-task worker that blocked. Workers take one task
 * at a time (a task may block; one taken with it would wait).
 *
 * Workers are named "<prefix>-w<N>". Affinity (tp_topology.h): round robin
 * over the CPUs this process may use (default), an explicit CPU list, or
 * none. NUMA: workers spread over nodes, bound to their node's CPUs, and
 * their per-worker memory comes from numa_alloc_onnode(); on a one-node
 * machine or without libnuma support it is a no-op with a notice on stderr.
 * All functions return 0 (or a count) or a negative errno.
 */
#ifndef THREADPOOL_H
#define THREADPOOL_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tp_topology.h"

struct tp_pool;

/* What a task learns about the worker running it. */
struct tp_worker_ctx {
	unsigned index;   /* 0..workers-1 */
	int cpu;          /* home CPU, -1 when not pinned */
	int node;         /* NUMA node of cpu (0 without NUMA), -1 if unpinned */
	void *mem;        /* per-worker memory: worker_mem_bytes, zeroed, on node */
	size_t mem_bytes;
};

typedef void (*tp_task_fn)(void *arg, struct tp_worker_ctx *w);

struct tp_task {
	tp_task_fn fn;
	void *arg;
};

enum tp_affinity {
	TP_AFFINITY_ROUND_ROBIN = 0, /* over sched_getaffinity's CPUs */
	TP_AFFINITY_LIST,            /* over cfg.cpus, in that order */
	TP_AFFINITY_NONE,            /* no pinning (NUMA needs pinning) */
};

struct tp_config {
	unsigned workers;          /* >= 1 */
	const char *name_prefix;   /* NULL: "tp"; at most 9 chars kept */
	enum tp_affinity affinity;
	const int *cpus;           /* TP_AFFINITY_LIST */
	size_t ncpus;
	bool numa;
	size_t worker_mem_bytes;   /* per-worker memory; 0 for none */
	int spin_us;               /* idle spin before parking: 0 = TP_SPIN_US, < 0 = none */
};

#define TP_SPIN_US 20  /* default idle spin (a park + wakeup costs ~7 us on a VM) */
#define TP_WAKE_NS 5000  /* what waking a parked worker takes until it runs (~5-7 us on a VM) */
#define TP_WATCH_US 1000      /* the watcher's timeout: longest wait behind a blocked short task */

enum tp_stop {
	TP_DRAIN,  /* run every queued task, then stop */
	TP_CANCEL, /* drop queued tasks (running ones finish), then stop */
};

struct tp_pool_stats {
	uint64_t wakeups;   /* parked workers a submit (or a returning watcher) signalled */
	uint64_t takeovers; /* times the watcher found tasks queued and none taken for
			     * TP_WATCH_US, and took one (a short-task worker blocked) */
};

struct tp_worker_stats {
	uint64_t tasks_run;
	uint64_t busy_ns;  /* time inside task functions */
	pid_t tid;         /* 0 until the worker has started */
	int cpu;           /* home CPU, -1 when unpinned */
	int node;
};

/* Start the workers. On error *out is NULL and errbuf (if given) holds one
 * line naming the problem, e.g. a listed CPU this process may not use. */
int tp_create(struct tp_pool **out, const struct tp_config *cfg, char *errbuf, size_t errlen);

/* Queue one task / n tasks under one lock. -ESHUTDOWN after tp_shutdown. */
int tp_submit(struct tp_pool *pool, tp_task_fn fn, void *arg);
int tp_submit_batch(struct tp_pool *pool, const struct tp_task *tasks, size_t n);

/* Stop and join the workers. Returns the number of queued tasks dropped
 * (always 0 for TP_DRAIN). A second call returns 0. */
long tp_shutdown(struct tp_pool *pool, enum tp_stop how);

/* Drain-shutdown if still running, free everything. Safe on NULL. */
void tp_destroy(struct tp_pool *pool);

unsigned tp_workers(const struct tp_pool *pool);
bool tp_numa_active(const struct tp_pool *pool);
size_t tp_queue_len(struct tp_pool *pool);
/* Counters of worker i (exact once the pool is shut down). */
int tp_worker_stats(const struct tp_pool *pool, unsigned i, struct tp_worker_stats *st);
/* The pool's wakeup counters so far (under the lock: exact at any time). */
void tp_pool_stats(struct tp_pool *pool, struct tp_pool_stats *st);
/* Per-worker memory of worker i (e.g. to clean it up after shutdown). */
void *tp_worker_mem(const struct tp_pool *pool, unsigned i);

#endif
