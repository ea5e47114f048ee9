/* SPDX-License-Identifier: MIT */
/* Fixed workers over one FIFO queue (mutex + condvar); see threadpool.h. */
#include "threadpool.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tp_system.h"
#include "tt_clock.h"

#define TP_QUEUE_INITIAL 1024u
#define TP_SPIN_PAUSES 64u /* polls with a pause before the spinner yields between polls */
#define TP_TAKE_NS 250u    /* one take of a queued task beside a submitting thread: lock, pop, unlock */

struct tp_worker {
	struct tp_pool *pool;
	pthread_t thread;
	bool started;
	struct tp_worker_ctx ctx;
	uint64_t tasks_run; /* written by the worker, read with atomics */
	uint64_t busy_ns;
	uint64_t avg_task_ns; /* EWMA (1/8) of this worker's task run time */
	unsigned takes;       /* tasks it takes while a wakeup is under way (below) */
	unsigned counted;     /* what it adds to pool->awake_takes now */
	pid_t tid;
} __attribute__((aligned(64)));

struct tp_pool {
	/* The lock's line: what a submit and a take both update under it. */
	pthread_mutex_t lock;
	uint64_t head;        /* tasks popped so far (under lock); the next one is
			       * ring[head & (cap - 1)]: the watcher's progress mark */
	unsigned spinning;    /* idle workers polling count (0 or 1; atomics): they take
			       * the next task, so a submit need not wake anyone */
	unsigned awake_takes; /* sum of the awake workers' takes (atomics): takers
			       * too, while a watcher keeps watch */

	/* The queue's line, apart: a spinner polls count, and polling the
	 * lock's line would slow every lock and unlock (tp_bench, 1 worker:
	 * 6-7 M jobs/s on one line, 10-12 M apart). A submit reads the rest
	 * (2 workers: 9 M jobs/s; 6-7 M with idle..watcher on a third line). */
	uint64_t count __attribute__((aligned(64))); /* written under lock; spinners
						      * poll it without (atomics) */
	struct tp_task *ring; /* FIFO: ring[(head + i) & (cap - 1)] */
	uint64_t cap;
	unsigned idle;        /* workers waiting on nonempty: only they need a signal */
	unsigned signalled;   /* parked workers signalled, not yet back from the wait */
	bool watcher;         /* a parked worker waits with a timeout (under lock) */
	uint64_t wakeups;     /* parked workers signalled (under lock) */
	uint64_t takeovers;   /* stalled queues a watcher took over (under lock) */
	bool stopping, joined, numa;
	uint64_t spin_ns;     /* how long an idle worker polls before it parks */
	unsigned nworkers;
	struct tp_worker *workers;
	pthread_cond_t nonempty;
} __attribute__((aligned(64)));

_Static_assert(offsetof(struct tp_pool, count) == 64, "the lock's fields fill one line");

static void set_err(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!buf || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

/* ---- queue (caller holds pool->lock) ---------------------------------- */

static int queue_reserve(struct tp_pool *p, size_t extra)
{
	size_t cap = p->cap;
	struct tp_task *ring;

	while (cap - p->count < extra)
		cap *= 2;
	if (cap == p->cap)
		return 0;
	ring = malloc(cap * sizeof(*ring));
	if (!ring)
		return -ENOMEM;
	for (uint64_t i = p->head; i < p->head + p->count; i++)
		ring[i & (cap - 1)] = p->ring[i & (p->cap - 1)];
	free(p->ring);
	p->ring = ring;
	p->cap = cap;
	return 0;
}

static void queue_push(struct tp_pool *p, const struct tp_task *t)
{
	p->ring[(p->head + p->count) & (p->cap - 1)] = *t;
	__atomic_store_n(&p->count, p->count + 1, __ATOMIC_RELEASE);
}

/* One task per take: a task may block (an HTTP request, a barrier), and a
 * second one taken with it would wait behind it while other workers idle. */
static struct tp_task queue_pop(struct tp_pool *p)
{
	struct tp_task t = p->ring[p->head & (p->cap - 1)];

	p->head++;
	__atomic_store_n(&p->count, p->count - 1, __ATOMIC_RELEASE);
	return t;
}

/* ---- workers ----------------------------------------------------------
 *
 * A worker is awake (running a task, or on its way to the lock for the next
 * one), spinning (polling an empty queue, one worker at a time) or parked
 * (waiting on nonempty). A submit wakes a parked worker only for a task no
 * other worker is about to take: the spinner, the workers signalled before,
 * and the awake workers whose tasks are short. Those look at the queue again
 * before they sleep, and while a wakeup is under way (TP_WAKE_NS) a worker
 * whose tasks average avg ns takes about TP_WAKE_NS / (avg + TP_TAKE_NS) of
 * them: it counts as that many takers (its `takes`, a power of two, at most
 * 64; 0 for tasks near TP_WAKE_NS or longer). So a stream of tiny tasks costs no
 * wakeups, and a queue that grows faster than the awake workers drain it
 * still wakes the parked ones.
 *
 * A task may block, though, and then a task counted against its worker would
 * wait. So awake workers count only while a watcher keeps watch: one parked
 * worker whose wait times out every TP_WATCH_US. If the queue holds tasks and
 * none was taken since it parked, it takes one and wakes parked workers for
 * the rest without counting the awake ones. A task waits at most about
 * TP_WATCH_US behind a blocked short-task worker; long tasks never count. */

/* Keep pool->awake_takes in step with this worker's state. */
static void worker_count(struct tp_worker *w, bool awake)
{
	unsigned c = awake ? w->takes : 0;

	if (c == w->counted)
		return;
	__atomic_fetch_add(&w->pool->awake_takes, c - w->counted, __ATOMIC_SEQ_CST);
	w->counted = c;
}

/* How many queued tasks a worker whose tasks average avg_ns takes while a
 * wakeup is under way: TP_WAKE_NS / (avg_ns + TP_TAKE_NS), rounded down to a
 * power of two, at most 64; 0 for a worker of long tasks. */
static unsigned takes_for(uint64_t avg_ns)
{
	uint64_t per_task = avg_ns + TP_TAKE_NS;
	unsigned k = 1;

	if (per_task > TP_WAKE_NS)
		return 0;
	while (k < 64 && 2 * k * per_task <= TP_WAKE_NS)
		k *= 2;
	return k;
}

static void worker_run_task(struct tp_worker *w, const struct tp_task *t)
{
	uint64_t t0 = tt_now_ns(), d;
	unsigned takes;

	t->fn(t->arg, &w->ctx);
	d = tt_now_ns() - t0;
	__atomic_store_n(&w->busy_ns, w->busy_ns + d, __ATOMIC_RELAXED);
	__atomic_store_n(&w->tasks_run, w->tasks_run + 1, __ATOMIC_RELAXED);
	w->avg_task_ns = w->avg_task_ns - w->avg_task_ns / 8 + d / 8;
	/* takes moves slowly: every 16th task (batch: +5 %), and at once after a
	 * task as long as a wakeup, so a worker turning to long tasks stops
	 * counting before the next one. */
	if ((w->tasks_run & 15) && d < TP_WAKE_NS)
		return;
	takes = takes_for(w->avg_task_ns);
	if (takes != w->takes) {
		w->takes = takes;
		worker_count(w, true);
	}
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* Called without the lock when the queue looked empty after a task: unless
 * another worker is spinning already, poll the queue for spin_ns (a park and
 * a wakeup cost ~7 us on a VM, a submit seen while spinning costs nothing).
 * The spinner stays counted as awake: it takes what comes as fast.
 *
 * A worker of short tasks yields between polls after TP_SPIN_PAUSES: with
 * more threads than CPUs the submitter may be waiting for this very CPU, and
 * a spinner holding it waits for a task that cannot come (tp_bench, 2
 * workers on 2 CPUs: 4-5 M jobs/s without the yields, 8-9 M with). A worker
 * of long tasks does not: there the yields cost the requests (httpload
 * pool/10: P99 0.45 -> 0.7 ms, its >=P99 requests' runnable time after
 * wakeups doubled; EEVDF pushes a yielding task's deadline out). */
static void worker_spin(struct tp_worker *w)
{
	struct tp_pool *p = w->pool;
	unsigned none = 0;
	uint64_t until;

	if (!p->spin_ns || !__atomic_compare_exchange_n(&p->spinning, &none, 1, false,
							  __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
		worker_count(w, false); /* on its way to park */
		return;
	}
	until = tt_now_ns() + p->spin_ns;
	for (unsigned i = 0;; i++) {
		if (__atomic_load_n(&p->count, __ATOMIC_ACQUIRE) ||
		    __atomic_load_n(&p->stopping, __ATOMIC_ACQUIRE))
			break;
		if (i < TP_SPIN_PAUSES || !w->takes) {
			cpu_relax();
			if ((i & 63) != 63)
				continue; /* the clock every 64 pauses */
		} else {
			sched_yield(); /* may cost a time slice: the clock after each */
		}
		if (tt_now_ns() >= until)
			break;
	}
	/* Before taking the lock: a submit that still saw us spinning pushed
	 * under the lock, so our check of the queue under it sees that task; a
	 * submit after this store sees no spinner and signals if we park. */
	__atomic_store_n(&p->spinning, 0, __ATOMIC_SEQ_CST);
}

/* Parked workers to wake (caller holds the lock, tasks pushed): one per
 * queued task that no worker is already on its way to take (see above). */
static unsigned wakeups_for(struct tp_pool *p)
{
	size_t takers = __atomic_load_n(&p->spinning, __ATOMIC_SEQ_CST) + p->signalled +
			(p->watcher ? __atomic_load_n(&p->awake_takes, __ATOMIC_SEQ_CST) : 0);
	size_t want = p->count > takers ? p->count - takers : 0;
	unsigned parked = p->idle - p->signalled;

	want = want < parked ? want : parked;
	p->signalled += (unsigned)want;
	p->wakeups += want;
	return (unsigned)want;
}

static void wake_workers(struct tp_pool *p, unsigned wake, unsigned idle)
{
	if (wake > 1 && wake == idle)
		pthread_cond_broadcast(&p->nonempty);
	else
		for (unsigned i = 0; i < wake; i++)
			pthread_cond_signal(&p->nonempty);
}

/* Only tasks counted against awake workers need a watcher (a spinner does
 * not block, and counts on its own), so a pool of long tasks has none. */
static bool pool_may_watch(struct tp_pool *p)
{
	return !p->watcher && __atomic_load_n(&p->awake_takes, __ATOMIC_SEQ_CST);
}

enum park_end { PARK_WOKEN, PARK_WATCH_WOKEN, PARK_WATCH_TIMEOUT };

/* Park once (lock held). The first worker to park while short-task workers
 * are awake keeps watch: its wait times out after TP_WATCH_US. */
static enum park_end worker_park(struct tp_worker *w)
{
	struct tp_pool *p = w->pool;
	bool watch;
	int rc;

	worker_count(w, false); /* parked: not a taker, nor a reason to watch */
	/* A worker that parks with tasks queued (a watcher watching on) always
	 * times out: whether awake workers still count may have changed since
	 * worker_wait looked, and a plain wait here could leave counted tasks
	 * with nobody to take them. */
	watch = pool_may_watch(p) || (!p->watcher && p->count);
	p->idle++;
	if (watch) {
		struct timespec ts = tt_timespec_of_ns(tt_now_ns() + TP_WATCH_US * 1000ull);

		p->watcher = true;
		rc = pthread_cond_timedwait(&p->nonempty, &p->lock, &ts);
		p->watcher = false;
	} else {
		rc = pthread_cond_wait(&p->nonempty, &p->lock);
	}
	p->idle--;
	/* Any return, a timeout too, uses up a signal if one is counted: a
	 * timed-out waiter may have taken it, and a count that stays too high
	 * would hold back a wake for good; one too low only wakes one more. */
	if (p->signalled)
		p->signalled--;
	if (!watch)
		return PARK_WOKEN;
	return rc == ETIMEDOUT ? PARK_WATCH_TIMEOUT : PARK_WATCH_WOKEN;
}

/* Lock held: wait until there is a task to take or the pool stops. A
 * watcher whose timeout finds the queue moving (tasks taken since it parked)
 * watches on; one that finds it stalled takes a task. Returns true when the
 * worker comes back from watching: tasks queued meanwhile were counted
 * against awake workers, so the taker wakes parked workers for the rest. */
static bool worker_wait(struct tp_worker *w)
{
	struct tp_pool *p = w->pool;
	enum park_end end = PARK_WOKEN;
	uint64_t taken = 0;

	while (!p->stopping) {
		if (p->count) {
			bool stalled = end == PARK_WATCH_TIMEOUT && p->head == taken;

			p->takeovers += stalled;
			if (end != PARK_WATCH_TIMEOUT || stalled || !pool_may_watch(p))
				break;
		}
		taken = p->head;
		end = worker_park(w);
	}
	return end != PARK_WOKEN;
}

static void *worker_main(void *arg)
{
	struct tp_worker *w = arg;
	struct tp_pool *p = w->pool;

	__atomic_store_n(&w->tid, gettid(), __ATOMIC_RELEASE);
	for (;;) {
		unsigned wake = 0, idle = 0;
		bool backlog;
		struct tp_task t;

		if (!__atomic_load_n(&p->count, __ATOMIC_ACQUIRE))
			worker_spin(w);
		pthread_mutex_lock(&p->lock);
		backlog = worker_wait(w);
		if (p->count == 0) { /* stopping and nothing left */
			pthread_mutex_unlock(&p->lock);
			break;
		}
		t = queue_pop(p);
		worker_count(w, true);
		if (backlog) {
			idle = p->idle;
			wake = wakeups_for(p);
		}
		pthread_mutex_unlock(&p->lock);
		wake_workers(p, wake, idle);
		worker_run_task(w, &t);
	}
	worker_count(w, false);
	return NULL;
}

/* ---- placement -------------------------------------------------------- */

static int pool_plan(struct tp_pool *p, const struct tp_config *cfg,
		     struct tp_system_topology *sys, struct tp_placement *place,
		     struct tp_plan *plan, struct tp_plan_opts *opts, char *eb, size_t el)
{
	int err = tp_topology_read(sys);

	if (err) {
		set_err(eb, el, "threadpool: sched_getaffinity: %s", strerror(-err));
		return err;
	}
	opts->cpus = cfg->affinity == TP_AFFINITY_LIST ? cfg->cpus : NULL;
	opts->ncpus = cfg->affinity == TP_AFFINITY_LIST ? cfg->ncpus : 0;
	opts->numa = cfg->numa && sys->numa_ok;
	if (cfg->affinity == TP_AFFINITY_LIST && (!cfg->cpus || !cfg->ncpus)) {
		set_err(eb, el, "threadpool: empty CPU list: give at least one CPU");
		return -EINVAL;
	}
	err = tp_plan_workers(&sys->topo, opts, cfg->workers, place, plan);
	if (err == -EINVAL)
		set_err(eb, el, "threadpool: CPU %d is offline or outside this process's "
			"allowed CPUs: pick CPUs from `taskset -cp $$`", plan->bad_cpu);
	else if (err)
		set_err(eb, el, "threadpool: no usable CPU in this process's affinity mask");
	if (!err && cfg->numa && !plan->numa)
		fprintf(stderr, "threadpool: NUMA requested but %s: NUMA placement is a no-op\n",
			sys->numa_ok ? "the workers' CPUs are on one node" : "libnuma reports no NUMA support");
	p->numa = plan->numa;
	return err;
}

static int worker_start(struct tp_pool *p, struct tp_worker *w, const cpu_set_t *mask,
			const char *prefix)
{
	pthread_attr_t attr;
	char name[16];
	int err;

	pthread_attr_init(&attr);
	err = mask ? pthread_attr_setaffinity_np(&attr, sizeof(*mask), mask) : 0;
	if (!err)
		err = pthread_create(&w->thread, &attr, worker_main, w);
	pthread_attr_destroy(&attr);
	if (err)
		return -err;
	w->started = true;
	snprintf(name, sizeof(name), "%.9s-w%u", prefix, w->ctx.index);
	pthread_setname_np(w->thread, name);
	return 0;
}

static int pool_start_workers(struct tp_pool *p, const struct tp_config *cfg, char *eb, size_t el)
{
	struct tp_system_topology *sys = calloc(1, sizeof(*sys));
	struct tp_placement *place = calloc(cfg->workers, sizeof(*place));
	bool pin = cfg->affinity != TP_AFFINITY_NONE;
	struct tp_plan_opts opts = { 0 };
	struct tp_plan plan = { 0 };
	int err = sys && place ? 0 : -ENOMEM;

	if (!err && pin)
		err = pool_plan(p, cfg, sys, place, &plan, &opts, eb, el);
	for (unsigned i = 0; !err && i < cfg->workers; i++) {
		struct tp_worker *w = &p->workers[i];
		int bind[TP_MAX_CPUS];
		size_t nb = pin ? tp_plan_binding(&sys->topo, &opts, &plan, &place[i], bind, TP_MAX_CPUS) : 0;
		cpu_set_t mask;

		w->ctx.cpu = pin ? place[i].cpu : -1;
		w->ctx.node = pin ? place[i].node : -1;
		w->ctx.mem_bytes = cfg->worker_mem_bytes;
		w->ctx.mem = tp_mem_alloc(cfg->worker_mem_bytes, w->ctx.node, p->numa);
		if (cfg->worker_mem_bytes && !w->ctx.mem) {
			set_err(eb, el, "threadpool: out of memory for per-worker memory");
			err = -ENOMEM;
			break;
		}
		CPU_ZERO(&mask);
		for (size_t k = 0; k < nb; k++)
			CPU_SET(bind[k], &mask);
		err = worker_start(p, w, pin ? &mask : NULL, cfg->name_prefix ? cfg->name_prefix : "tp");
		if (err)
			set_err(eb, el, "threadpool: starting worker %u: %s", i, strerror(-err));
	}
	free(sys);
	free(place);
	return err;
}

int tp_create(struct tp_pool **out, const struct tp_config *cfg, char *eb, size_t el)
{
	struct tp_pool *p;
	pthread_mutexattr_t ma;
	pthread_condattr_t ca;
	int err;

	*out = NULL;
	if (cfg->workers == 0 || cfg->workers > 4096) {
		set_err(eb, el, "threadpool: worker count must be 1..4096");
		return -EINVAL;
	}
	p = aligned_alloc(64, sizeof(*p));
	if (!p)
		return -ENOMEM;
	memset(p, 0, sizeof(*p));
	p->cap = TP_QUEUE_INITIAL;
	p->spin_ns = cfg->spin_us < 0 ? 0 : (uint64_t)(cfg->spin_us ? cfg->spin_us : TP_SPIN_US) * 1000;
	p->ring = malloc(p->cap * sizeof(*p->ring));
	p->nworkers = cfg->workers;
	p->workers = aligned_alloc(64, cfg->workers * sizeof(*p->workers));
	if (!p->ring || !p->workers) {
		free(p->ring);
		free(p->workers);
		free(p);
		return -ENOMEM;
	}
	memset(p->workers, 0, cfg->workers * sizeof(*p->workers));
	for (unsigned i = 0; i < cfg->workers; i++) {
		p->workers[i].pool = p;
		p->workers[i].ctx.index = i;
		p->workers[i].avg_task_ns = 8 * TP_WAKE_NS; /* long until shown short */
	}
	pthread_mutexattr_init(&ma); /* adaptive: spins a little before it sleeps */
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ADAPTIVE_NP);
	pthread_mutex_init(&p->lock, &ma);
	pthread_mutexattr_destroy(&ma);
	pthread_condattr_init(&ca); /* the watcher's timeout: CLOCK_MONOTONIC */
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->nonempty, &ca);
	pthread_condattr_destroy(&ca);
	err = pool_start_workers(p, cfg, eb, el);
	if (err) {
		tp_destroy(p);
		return err;
	}
	*out = p;
	return 0;
}

int tp_submit(struct tp_pool *p, tp_task_fn fn, void *arg)
{
	struct tp_task t = { .fn = fn, .arg = arg };

	return tp_submit_batch(p, &t, 1);
}

int tp_submit_batch(struct tp_pool *p, const struct tp_task *tasks, size_t n)
{
	unsigned wake, idle;
	int err;

	if (n == 0)
		return 0;
	pthread_mutex_lock(&p->lock);
	err = p->stopping ? -ESHUTDOWN : queue_reserve(p, n);
	for (size_t i = 0; !err && i < n; i++)
		queue_push(p, &tasks[i]);
	idle = p->idle;
	wake = err ? 0 : wakeups_for(p);
	pthread_mutex_unlock(&p->lock);
	if (err)
		return err;
	wake_workers(p, wake, idle);
	return 0;
}

long tp_shutdown(struct tp_pool *p, enum tp_stop how)
{
	long dropped = 0;

	pthread_mutex_lock(&p->lock);
	if (p->joined) {
		pthread_mutex_unlock(&p->lock);
		return 0;
	}
	if (how == TP_CANCEL) {
		dropped = (long)p->count;
		__atomic_store_n(&p->count, 0, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&p->stopping, true, __ATOMIC_RELEASE);
	p->joined = true;
	pthread_cond_broadcast(&p->nonempty);
	pthread_mutex_unlock(&p->lock);
	for (unsigned i = 0; i < p->nworkers; i++)
		if (p->workers[i].started)
			pthread_join(p->workers[i].thread, NULL);
	return dropped;
}

void tp_destroy(struct tp_pool *p)
{
	if (!p)
		return;
	tp_shutdown(p, TP_DRAIN);
	for (unsigned i = 0; i < p->nworkers; i++)
		tp_mem_free(p->workers[i].ctx.mem, p->workers[i].ctx.mem_bytes, p->numa);
	pthread_cond_destroy(&p->nonempty);
	pthread_mutex_destroy(&p->lock);
	free(p->ring);
	free(p->workers);
	free(p);
}

unsigned tp_workers(const struct tp_pool *p)
{
	return p->nworkers;
}

bool tp_numa_active(const struct tp_pool *p)
{
	return p->numa;
}

size_t tp_queue_len(struct tp_pool *p)
{
	size_t n;

	pthread_mutex_lock(&p->lock);
	n = p->count;
	pthread_mutex_unlock(&p->lock);
	return n;
}

void tp_pool_stats(struct tp_pool *p, struct tp_pool_stats *st)
{
	pthread_mutex_lock(&p->lock);
	st->wakeups = p->wakeups;
	st->takeovers = p->takeovers;
	pthread_mutex_unlock(&p->lock);
}

int tp_worker_stats(const struct tp_pool *p, unsigned i, struct tp_worker_stats *st)
{
	const struct tp_worker *w;

	if (i >= p->nworkers)
		return -EINVAL;
	w = &p->workers[i];
	st->tasks_run = __atomic_load_n(&w->tasks_run, __ATOMIC_RELAXED);
	st->busy_ns = __atomic_load_n(&w->busy_ns, __ATOMIC_RELAXED);
	st->tid = __atomic_load_n(&w->tid, __ATOMIC_ACQUIRE);
	st->cpu = w->ctx.cpu;
	st->node = w->ctx.node;
	return 0;
}

void *tp_worker_mem(const struct tp_pool *p, unsigned i)
{
	return i < p->nworkers ? p->workers[i].ctx.mem : NULL;
}
