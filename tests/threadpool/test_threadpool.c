/* Thread pool behaviour: FIFO, exactly-once, drain vs cancel, batch submit,
 * affinity seen from inside the workers, per-worker counters, NUMA no-op;
 * wakeups: tiny tasks cost none, and a task counted against an awake worker
 * whose task then blocks is still taken (the watcher). */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "threadpool.h"
#include "tt_clock.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); exit(1); } } while (0)

static struct tp_pool *pool_new(unsigned workers, enum tp_affinity aff, const int *cpus,
				size_t ncpus, bool numa, size_t mem)
{
	struct tp_config cfg = { .workers = workers, .name_prefix = "tpt", .affinity = aff,
				 .cpus = cpus, .ncpus = ncpus, .numa = numa, .worker_mem_bytes = mem };
	struct tp_pool *p;
	char err[200];

	if (tp_create(&p, &cfg, err, sizeof(err))) {
		fprintf(stderr, "tp_create: %s\n", err);
		exit(1);
	}
	return p;
}

/* ---- FIFO with one worker, single and batch submit --------------------- */
static unsigned order[20000], norder;

static void record_order(void *arg, struct tp_worker_ctx *w)
{
	order[norder++] = (unsigned)(uintptr_t)arg; /* one worker: no race */
}

static void test_fifo_one_worker(void)
{
	enum { N = 8000, BATCH = 3000 };
	struct tp_task *batch = calloc(BATCH, sizeof(*batch));
	struct tp_pool *p = pool_new(1, TP_AFFINITY_ROUND_ROBIN, NULL, 0, false, 0);
	unsigned id = 0;

	norder = 0;
	for (; id < 2500; id++)
		CHECK(tp_submit(p, record_order, (void *)(uintptr_t)id) == 0);
	for (unsigned i = 0; i < BATCH; i++) /* one batch larger than the initial ring */
		batch[i] = (struct tp_task){ record_order, (void *)(uintptr_t)id++ };
	CHECK(tp_submit_batch(p, batch, BATCH) == 0);
	for (; id < N; id++)
		CHECK(tp_submit(p, record_order, (void *)(uintptr_t)id) == 0);
	CHECK(tp_shutdown(p, TP_DRAIN) == 0);
	CHECK(norder == N);
	for (unsigned i = 0; i < N; i++)
		CHECK(order[i] == i);
	tp_destroy(p);
	free(batch);
}

/* ---- every task exactly once with N workers; counters add up ----------- */
static atomic_uint hits[100000];

static void hit(void *arg, struct tp_worker_ctx *w)
{
	atomic_fetch_add(&hits[(uintptr_t)arg], 1);
}

static void test_exactly_once(void)
{
	enum { N = 100000, W = 4, BATCH = 64 };
	struct tp_pool *p = pool_new(W, TP_AFFINITY_ROUND_ROBIN, NULL, 0, false, 0);
	struct tp_task batch[BATCH];
	uint64_t total = 0;
	pid_t tids[W];

	for (unsigned i = 0; i < N / 2; i++)
		CHECK(tp_submit(p, hit, (void *)(uintptr_t)i) == 0);
	for (unsigned i = N / 2; i < N; i += BATCH) {
		for (unsigned k = 0; k < BATCH; k++)
			batch[k] = (struct tp_task){ hit, (void *)(uintptr_t)(i + k) };
		CHECK(tp_submit_batch(p, batch, i + BATCH <= N ? BATCH : N - i) == 0);
	}
	CHECK(tp_shutdown(p, TP_DRAIN) == 0);
	for (unsigned i = 0; i < N; i++)
		CHECK(atomic_load(&hits[i]) == 1);
	for (unsigned i = 0; i < W; i++) {
		struct tp_worker_stats st;

		CHECK(tp_worker_stats(p, i, &st) == 0);
		total += st.tasks_run;
		tids[i] = st.tid;
		CHECK(st.tid > 0);
		for (unsigned j = 0; j < i; j++)
			CHECK(tids[j] != st.tid);
	}
	CHECK(total == N);
	CHECK(tp_worker_stats(p, W, &(struct tp_worker_stats){ 0 }) == -EINVAL);
	tp_destroy(p);
}

/* ---- drain vs cancel: exact counts --------------------------------------
 * Task 0 blocks on a gate, so everything after it is queued. A helper thread
 * keeps submitting probe tasks until the pool refuses (-ESHUTDOWN: shutdown
 * has begun) and only then opens the gate. So at shutdown 99 + probes tasks
 * were queued, by construction. */
static sem_t gate_started, gate_open;
static atomic_uint ran;

static void gate_task(void *arg, struct tp_worker_ctx *w)
{
	atomic_fetch_add(&ran, 1);
	sem_post(&gate_started);
	sem_wait(&gate_open);
}

static void count_task(void *arg, struct tp_worker_ctx *w)
{
	atomic_fetch_add(&ran, 1);
}

struct prober {
	struct tp_pool *pool;
	unsigned probes;
};

static void *prober_main(void *arg)
{
	struct prober *pr = arg;
	int err;

	while ((err = tp_submit(pr->pool, count_task, NULL)) == 0) {
		pr->probes++;
		usleep(200);
	}
	CHECK(err == -ESHUTDOWN);
	sem_post(&gate_open);
	return NULL;
}

static void run_gated(enum tp_stop how, long *dropped, unsigned *probes)
{
	struct tp_pool *p = pool_new(1, TP_AFFINITY_ROUND_ROBIN, NULL, 0, false, 0);
	struct prober pr = { .pool = p };
	struct tp_worker_stats st;
	pthread_t th;

	atomic_store(&ran, 0);
	sem_init(&gate_started, 0, 0);
	sem_init(&gate_open, 0, 0);
	CHECK(tp_submit(p, gate_task, NULL) == 0);
	sem_wait(&gate_started);
	for (int i = 0; i < 99; i++)
		CHECK(tp_submit(p, count_task, NULL) == 0);
	CHECK(tp_queue_len(p) == 99);
	CHECK(pthread_create(&th, NULL, prober_main, &pr) == 0);
	usleep(2000); /* let a few probes queue up too (not required) */
	*dropped = tp_shutdown(p, how);
	pthread_join(th, NULL);
	*probes = pr.probes;
	CHECK(tp_submit(p, count_task, NULL) == -ESHUTDOWN);
	CHECK(tp_shutdown(p, how) == 0); /* second call: nothing left */
	CHECK(tp_worker_stats(p, 0, &st) == 0 && st.tasks_run == atomic_load(&ran));
	tp_destroy(p);
}

static void test_drain_cancel(void)
{
	unsigned probes;
	long dropped;

	run_gated(TP_DRAIN, &dropped, &probes);
	CHECK(dropped == 0);
	CHECK(atomic_load(&ran) == 1 + 99 + probes);
	run_gated(TP_CANCEL, &dropped, &probes);
	CHECK(dropped == 99 + (long)probes);
	CHECK(atomic_load(&ran) == 1);
}

/* ---- affinity, names, per-worker memory, seen from inside -------------- */
struct seen {
	int cpu_planned, cpu_now, node;
	cpu_set_t mask;
	char name[16];
	void *mem;
	size_t mem_bytes;
	int mem_zero;
};
static struct seen seen[64];
static pthread_barrier_t all_in;

/* Every worker takes exactly one of W such tasks: each blocks in a W-barrier. */
static void inspect(void *arg, struct tp_worker_ctx *w)
{
	struct seen *s = &seen[w->index];
	unsigned char *m = w->mem;

	pthread_barrier_wait(&all_in);
	s->cpu_planned = w->cpu;
	s->node = w->node;
	s->cpu_now = sched_getcpu();
	pthread_getaffinity_np(pthread_self(), sizeof(s->mask), &s->mask);
	pthread_getname_np(pthread_self(), s->name, sizeof(s->name));
	s->mem = w->mem;
	s->mem_bytes = w->mem_bytes;
	s->mem_zero = 1;
	for (size_t i = 0; i < w->mem_bytes; i++)
		s->mem_zero &= m[i] == 0;
	if (m)
		memset(m, 0xab, w->mem_bytes);
}

static void run_inspect(struct tp_pool *p, unsigned w)
{
	memset(seen, 0, sizeof(seen));
	pthread_barrier_init(&all_in, NULL, w);
	for (unsigned i = 0; i < w; i++)
		CHECK(tp_submit(p, inspect, NULL) == 0);
	CHECK(tp_shutdown(p, TP_DRAIN) == 0);
	pthread_barrier_destroy(&all_in);
}

static int allowed_cpus(int *cpus)
{
	cpu_set_t set;
	int n = 0;

	CHECK(sched_getaffinity(0, sizeof(set), &set) == 0);
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set))
			cpus[n++] = c;
	return n;
}

static void check_pinned(unsigned w, const int *expect_cpu)
{
	for (unsigned i = 0; i < w; i++) {
		char name[16];

		snprintf(name, sizeof(name), "tpt-w%u", i);
		CHECK(!strcmp(seen[i].name, name));
		CHECK(seen[i].cpu_planned == expect_cpu[i]);
		CHECK(CPU_COUNT(&seen[i].mask) == 1 && CPU_ISSET(expect_cpu[i], &seen[i].mask));
		CHECK(seen[i].cpu_now == expect_cpu[i]);
	}
}

static void test_affinity_round_robin(void)
{
	int cpus[CPU_SETSIZE], expect[64];
	int n = allowed_cpus(cpus);
	unsigned w = (unsigned)(2 * n + 1) < 64 ? (unsigned)(2 * n + 1) : 64;
	struct tp_pool *p = pool_new(w, TP_AFFINITY_ROUND_ROBIN, NULL, 0, false, 4096);

	run_inspect(p, w);
	for (unsigned i = 0; i < w; i++)
		expect[i] = cpus[i % (unsigned)n];
	check_pinned(w, expect);
	for (unsigned i = 0; i < w; i++) { /* per-worker memory: own, zeroed, aligned */
		CHECK(seen[i].mem && seen[i].mem_bytes == 4096 && seen[i].mem_zero);
		CHECK(((uintptr_t)seen[i].mem & 63) == 0);
		CHECK(tp_worker_mem(p, i) == seen[i].mem);
		for (unsigned j = 0; j < i; j++)
			CHECK(seen[j].mem != seen[i].mem);
	}
	tp_destroy(p);
}

static void test_affinity_list_and_cpuset(void)
{
	int cpus[CPU_SETSIZE], n = allowed_cpus(cpus), last = cpus[n - 1];
	struct tp_config cfg = { .workers = 2, .affinity = TP_AFFINITY_LIST, .ncpus = 1 };
	struct tp_pool *p = pool_new(3, TP_AFFINITY_LIST, &last, 1, false, 0);
	cpu_set_t saved, only0;
	char err[200];

	run_inspect(p, 3);
	check_pinned(3, (int[]){ last, last, last });
	tp_destroy(p);

	cfg.cpus = (int[]){ 1000 };
	CHECK(tp_create(&p, &cfg, err, sizeof(err)) == -EINVAL && !p);
	CHECK(strstr(err, "CPU 1000"));
	if (n < 2) {
		printf("test_threadpool: one allowed CPU, cpuset restriction not tested\n");
		return;
	}
	/* Restrict our own cpuset to the first CPU: round robin must skip the
	 * others, and listing another one must be refused. */
	CHECK(sched_getaffinity(0, sizeof(saved), &saved) == 0);
	CPU_ZERO(&only0);
	CPU_SET(cpus[0], &only0);
	CHECK(sched_setaffinity(0, sizeof(only0), &only0) == 0);
	p = pool_new(3, TP_AFFINITY_ROUND_ROBIN, NULL, 0, false, 0);
	run_inspect(p, 3);
	check_pinned(3, (int[]){ cpus[0], cpus[0], cpus[0] });
	tp_destroy(p);
	cfg.cpus = &cpus[1];
	CHECK(tp_create(&p, &cfg, err, sizeof(err)) == -EINVAL && !p);
	CHECK(sched_setaffinity(0, sizeof(saved), &saved) == 0);
}

static void test_no_affinity_and_numa(void)
{
	int cpus[CPU_SETSIZE], n = allowed_cpus(cpus);
	struct tp_pool *p = pool_new(2, TP_AFFINITY_NONE, NULL, 0, false, 0);

	run_inspect(p, 2);
	for (unsigned i = 0; i < 2; i++)
		CHECK(seen[i].cpu_planned == -1 && CPU_COUNT(&seen[i].mask) == n);
	tp_destroy(p);

	/* NUMA requested: on a multi-node machine workers sit on their node's
	 * CPUs; on one node it is a no-op (notice on stderr) and pinning stays. */
	p = pool_new(2, TP_AFFINITY_ROUND_ROBIN, NULL, 0, true, 8192);
	run_inspect(p, 2);
	for (unsigned i = 0; i < 2; i++) {
		CHECK(seen[i].mem && seen[i].mem_zero);
		CHECK(CPU_ISSET(seen[i].cpu_now, &seen[i].mask));
		if (!tp_numa_active(p))
			CHECK(CPU_COUNT(&seen[i].mask) == 1 && seen[i].cpu_now == seen[i].cpu_planned);
	}
	printf("test_threadpool: NUMA %s on this machine\n", tp_numa_active(p) ? "active" : "a no-op");
	tp_destroy(p);
}

/* ---- busy time: tasks that spin a known time --------------------------- */
static void spin_200us(void *arg, struct tp_worker_ctx *w)
{
	uint64_t end = tt_now_ns() + 200000;

	while (tt_now_ns() < end)
		;
}

static void test_busy_counters(void)
{
	enum { N = 60, W = 2 };
	struct tp_pool *p = pool_new(W, TP_AFFINITY_NONE, NULL, 0, false, 0);
	uint64_t t0 = tt_now_ns(), busy = 0, tasks = 0;

	for (unsigned i = 0; i < N; i++)
		CHECK(tp_submit(p, spin_200us, NULL) == 0);
	CHECK(tp_shutdown(p, TP_DRAIN) == 0);
	for (unsigned i = 0; i < W; i++) {
		struct tp_worker_stats st;

		CHECK(tp_worker_stats(p, i, &st) == 0);
		busy += st.busy_ns;
		tasks += st.tasks_run;
	}
	CHECK(tasks == N);
	CHECK(busy >= N * 200000ull);                /* each task spun >= 200 us */
	CHECK(busy <= W * (tt_now_ns() - t0));       /* and no worker > wall time */
	tp_destroy(p);
}

/* ---- wakeups: tiny tasks, and short-task workers that block ------------ */
static atomic_uint tiny_done;

static void tiny(void *arg, struct tp_worker_ctx *w)
{
	atomic_fetch_add(&tiny_done, 1);
}

/* voluntary_ctxt_switches of one of our threads: each is a sleep (futex). */
static long thread_sleeps(pid_t tid)
{
	char path[64], line[128];
	long n = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/status", (int)tid);
	f = fopen(path, "r");
	CHECK(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "voluntary_ctxt_switches: %ld", &n) == 1)
			break;
	fclose(f);
	CHECK(n >= 0);
	return n;
}

static long pool_sleeps(struct tp_pool *p)
{
	long n = 0;

	for (unsigned i = 0; i < tp_workers(p); i++) {
		struct tp_worker_stats st;

		CHECK(tp_worker_stats(p, i, &st) == 0);
		while (st.tid == 0) { /* not started yet */
			sched_yield();
			CHECK(tp_worker_stats(p, i, &st) == 0);
		}
		n += thread_sleeps(st.tid);
	}
	return n;
}

/* Submit n tiny tasks one by one, reading the clock three times between
 * submits (a producer a little slower than the worker, as tp_bench's, which
 * times each submit: the queue empties between tasks), and wait until they
 * ran. */
static void run_tiny(struct tp_pool *p, unsigned n)
{
	unsigned base = atomic_load(&tiny_done);
	volatile uint64_t sink = 0;

	for (unsigned i = 0; i < n; i++) {
		sink += tt_now_ns() + tt_now_ns() + tt_now_ns();
		CHECK(tp_submit(p, tiny, NULL) == 0);
	}
	while (atomic_load(&tiny_done) - base < n)
		sched_yield();
}

/* Timing-shaped bounds do not hold under a sanitizer (gcc's macros, clang's
 * __has_feature). */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define TP_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define TP_TEST_SANITIZED 1
#endif
#endif
#ifndef TP_TEST_SANITIZED
#define TP_TEST_SANITIZED 0
#endif

/* A stream of tiny tasks on 2 workers: an awake worker takes them faster
 * than a woken one would arrive, so workers do not sleep per task. Measured
 * over 25 runs of 300,000 tasks each: the pool before this design slept
 * 7,000-30,000 times (median 12,900: its second worker, woken for tasks the
 * first then took), this one 24-2,800 (median 158: the watcher's timeouts,
 * lock waits, and runs where the machine stalls the producer). The best of
 * five rounds must stay under 1 in 100 tasks (plus one a ms, plus 100). */
static void test_tiny_tasks_cost_no_wakeups(void)
{
	enum { N = 300000, ROUNDS = 5 };
	struct tp_pool *p = pool_new(2, TP_AFFINITY_ROUND_ROBIN, NULL, 0, false, 0);
	bool passed = false;

	run_tiny(p, 1000); /* warm up: workers learn their tasks are short */
	for (int r = 0; r < ROUNDS && !passed; r++) {
		long before = pool_sleeps(p), sleeps;
		uint64_t t0 = tt_now_ns(), ms;

		run_tiny(p, N);
		sleeps = pool_sleeps(p) - before;
		ms = (tt_now_ns() - t0) / 1000000;
		printf("test_threadpool: %d tiny tasks in %llu ms, workers slept %ld times\n", N,
		       (unsigned long long)ms, sleeps);
		passed = sleeps <= N / 100 + (long)ms + 100; /* one round within: enough */
	}
	if (TP_TEST_SANITIZED)
		printf("test_threadpool: (sanitizer: sleeps not asserted)\n");
	CHECK(TP_TEST_SANITIZED || passed);
	tp_destroy(p);
}

static sem_t blocker_in, blocker_go, follower_done;

static void blocker(void *arg, struct tp_worker_ctx *w)
{
	sem_post(&blocker_in);
	sem_wait(&blocker_go);
}

static void follower(void *arg, struct tp_worker_ctx *w)
{
	__atomic_store_n((uint64_t *)arg, tt_now_ns(), __ATOMIC_RELEASE);
	sem_post(&follower_done);
}

static void wait_sem_s(sem_t *s, int seconds)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += seconds;
	CHECK(sem_clockwait(s, CLOCK_MONOTONIC, &ts) == 0);
}

/* One tiny task every gap_ns for dur_ns: one worker keeps up with the stream,
 * awake on short tasks, and the other parks. */
static void run_paced(struct tp_pool *p, uint64_t gap_ns, uint64_t dur_ns)
{
	uint64_t end = tt_now_ns() + dur_ns;

	for (uint64_t t = tt_now_ns(); t < end; t = tt_now_ns()) {
		CHECK(tp_submit(p, tiny, NULL) == 0);
		while (tt_now_ns() < t + gap_ns)
			;
	}
}

/* Workers awake on tiny tasks count as takers, so the task submitted right
 * after one that blocks is counted against the blocked worker while the
 * other worker is parked. It must still run while that worker stays blocked:
 * the parked watcher takes it after ~TP_WATCH_US without progress. (Counting
 * awake workers without a watcher deadlocks here: the follower waits for the
 * blocker, which waits for the follower.) At least 20 rounds, until the
 * watcher took over in 3 (or 60 rounds). */
static void test_blocked_short_task_does_not_hold_the_queue(void)
{
	struct tp_pool *p = pool_new(2, TP_AFFINITY_ROUND_ROBIN, NULL, 0, false, 0);
	struct tp_pool_stats ps;
	uint64_t worst_ns = 0;
	int rounds;

	sem_init(&blocker_in, 0, 0);
	sem_init(&blocker_go, 0, 0);
	sem_init(&follower_done, 0, 0);
	for (rounds = 0; rounds < 60; rounds++) {
		uint64_t t_submit, t_ran = 0;

		tp_pool_stats(p, &ps);
		if (rounds >= 20 && ps.takeovers >= 3)
			break;

		run_paced(p, 2000, 2000000);
		CHECK(tp_submit(p, blocker, NULL) == 0);
		t_submit = tt_now_ns();
		CHECK(tp_submit(p, follower, &t_ran) == 0);
		wait_sem_s(&follower_done, 5); /* the blocker still holds its worker */
		wait_sem_s(&blocker_in, 5);
		t_ran = __atomic_load_n(&t_ran, __ATOMIC_ACQUIRE);
		if (t_ran - t_submit > worst_ns)
			worst_ns = t_ran - t_submit;
		sem_post(&blocker_go);
	}
	tp_pool_stats(p, &ps);
	printf("test_threadpool: follower of a blocked short-task worker waited at most %.2f ms "
	       "(watch %d us); the watcher took over in %llu of %d rounds\n", (double)worst_ns / 1e6,
	       TP_WATCH_US, (unsigned long long)ps.takeovers, rounds);
	CHECK(worst_ns < 200ull * 1000000); /* ~TP_WATCH_US by design; bound for loaded CI */
	/* The case the watcher exists for happened (a follower counted against
	 * the blocked worker; ~1 round in 3): else this test shows nothing. Its
	 * odds are timing's: under TSan beside a CPU hog, 0 of 60 rounds. */
	CHECK((ps.takeovers >= 1 || TP_TEST_SANITIZED) && ps.takeovers <= (uint64_t)rounds);
	tp_destroy(p);
	sem_destroy(&blocker_in);
	sem_destroy(&blocker_go);
	sem_destroy(&follower_done);
}

/* W tasks that each wait in a W-barrier, submitted one by one right after a
 * stream of tiny tasks: each must reach a different worker, and all W must
 * pass the barrier before anything else happens (a shutdown would wake every
 * parked worker and hide a lost wakeup). */
static pthread_barrier_t tiny_barrier;
static sem_t barrier_passed;

static void barrier_task(void *arg, struct tp_worker_ctx *w)
{
	pthread_barrier_wait(&tiny_barrier);
	sem_post(&barrier_passed);
}

static void test_barrier_after_tiny_tasks(void)
{
	int cpus[CPU_SETSIZE], n = allowed_cpus(cpus);
	unsigned w = (unsigned)(2 * n + 1) < 64 ? (unsigned)(2 * n + 1) : 64;
	struct tp_pool *p = pool_new(w, TP_AFFINITY_ROUND_ROBIN, NULL, 0, false, 0);

	pthread_barrier_init(&tiny_barrier, NULL, w);
	sem_init(&barrier_passed, 0, 0);
	for (int round = 0; round < 5; round++) {
		run_paced(p, 2000, 2000000);
		for (unsigned i = 0; i < w; i++)
			CHECK(tp_submit(p, barrier_task, NULL) == 0);
		for (unsigned i = 0; i < w; i++)
			wait_sem_s(&barrier_passed, 5);
	}
	tp_destroy(p);
	pthread_barrier_destroy(&tiny_barrier);
	sem_destroy(&barrier_passed);
}

int main(void)
{
	test_fifo_one_worker();
	test_exactly_once();
	test_drain_cancel();
	test_affinity_round_robin();
	test_affinity_list_and_cpuset();
	test_no_affinity_and_numa();
	test_busy_counters();
	test_tiny_tasks_cost_no_wakeups();
	test_blocked_short_task_does_not_hold_the_queue();
	test_barrier_after_tiny_tasks();
	printf("test_threadpool: ok\n");
	return 0;
}
