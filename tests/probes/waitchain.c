// SPDX-License-Identifier: MIT
/*
 * waitchain MODE ROUNDS WORK_MS: ground truth for "who ended my wait"
 * (critical path) analysis. Each round one thread blocks, and what ends its
 * wait is known by construction:
 *   pipe   wc-requester (CPU 0) writes a byte to pipe A, then blocks in read()
 *          on pipe B; wc-answerer (CPU 1), blocked in read() on A, wakes,
 *          burns WORK_MS of its own CPU time (CLOCK_THREAD_CPUTIME_ID) and
 *          writes a byte to B: the answerer ends the requester's wait.
 *   mutex  wc-holder (CPU 1) locks a default pthread mutex, raises the
 *          round's flag, burns WORK_MS of its own CPU time and unlocks;
 *          wc-waiter (CPU 0) spins until it sees the flag, then blocks in
 *          pthread_mutex_lock (a futex wait) until the holder's unlock wakes
 *          it, and unlocks at once. Between rounds the holder spins, not
 *          holding the lock, until the waiter is done.
 *   timer  wc-sleeper (CPU 1) sleeps WORK_MS (relative clock_nanosleep,
 *          1 ns timer slack) ROUNDS times while wc-spin0 spins on CPU 1:
 *          the hrtimer interrupt ends each wait, usually interrupting the
 *          spinner, which never wakes the sleeper itself.
 * In pipe and mutex modes wc-spin0 and wc-spin1 spin on CPU 1 as well. All
 * threads are SCHED_OTHER at the same nice, so the answerer/holder gets ~1/3
 * of CPU 1: each wait lasts ~3 x WORK_MS, and the worker is runnable but not
 * running ~2/3 of it. That needs WORK_MS well above a scheduler slice (use
 * >= 10): a shorter work can end within the worker's first slice after its
 * wakeup. The spinners start 50 ms before round 1 and stop after the last round.
 * Prints JSON lines on stdout (flushed): before round 1 the mode, pid, tids by
 * role (and in mutex mode the mutex's address); at the end the window covering
 * all rounds, each round's wait as the waiting thread saw it (just before and
 * just after the blocking call; the first 1000 rounds), the sum of all waits,
 * and the CPU time the answerer/holder burned. CLOCK_MONOTONIC ns throughout.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <tt_clock.h>

#define MAX_WAITS 1000
#define MAX_ROLES 4

#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ volatile("yield" ::: "memory")
#else
#define cpu_relax() __asm__ volatile("" ::: "memory")
#endif

struct role {
	const char *key;  /* its key in "tids" */
	const char *name; /* thread name */
	int cpu;
	void (*fn)(void);
	int spinner;
	pthread_t th;
	int tid;
};

static long rounds;
static uint64_t work_ns;
static pthread_barrier_t ready, go;
static atomic_int stop;
static uint64_t waits[MAX_WAITS][2];
static uint64_t wait_sum_ns;
static uint64_t work_cpu_ns;
static int pipe_a[2], pipe_b[2];
static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static atomic_long held, done; /* mutex mode: last round locked / finished */

static void fail(const char *what, int err)
{
	fprintf(stderr, "tt-waitchain: %s: %s\n", what, strerror(err));
	exit(1);
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void burn_cpu(void)
{
	uint64_t c0 = thread_cpu_ns(), c;

	while ((c = thread_cpu_ns()) - c0 < work_ns)
		;
	work_cpu_ns += c - c0;
}

static void record_wait(long i, uint64_t t0, uint64_t t1)
{
	if (i < MAX_WAITS) {
		waits[i][0] = t0;
		waits[i][1] = t1;
	}
	wait_sum_ns += t1 - t0;
}

static void spinner(void)
{
	while (!atomic_load_explicit(&stop, memory_order_relaxed))
		cpu_relax();
}

static void requester(void)
{
	char c = 'q';

	for (long i = 0; i < rounds; i++) {
		if (write(pipe_a[1], &c, 1) != 1)
			fail("write pipe A", errno);
		uint64_t t0 = tt_now_ns();
		ssize_t n = read(pipe_b[0], &c, 1);
		uint64_t t1 = tt_now_ns();

		if (n != 1)
			fail("read pipe B", n < 0 ? errno : EIO);
		record_wait(i, t0, t1);
	}
}

static void answerer(void)
{
	char c;

	for (long i = 0; i < rounds; i++) {
		ssize_t n = read(pipe_a[0], &c, 1);

		if (n != 1)
			fail("read pipe A", n < 0 ? errno : EIO);
		burn_cpu();
		if (write(pipe_b[1], &c, 1) != 1)
			fail("write pipe B", errno);
	}
}

static void holder(void)
{
	for (long i = 1; i <= rounds; i++) {
		pthread_mutex_lock(&mutex);
		atomic_store(&held, i);
		burn_cpu();
		pthread_mutex_unlock(&mutex);
		while (atomic_load(&done) != i) /* not holding the lock */
			cpu_relax();
	}
}

static void waiter(void)
{
	for (long i = 1; i <= rounds; i++) {
		while (atomic_load(&held) != i)
			cpu_relax();
		uint64_t t0 = tt_now_ns();

		pthread_mutex_lock(&mutex); /* blocks until the holder unlocks */
		uint64_t t1 = tt_now_ns();

		pthread_mutex_unlock(&mutex);
		atomic_store(&done, i);
		record_wait(i - 1, t0, t1);
	}
}

static void sleeper(void)
{
	struct timespec ts = {
		.tv_sec = (time_t)(work_ns / 1000000000ull),
		.tv_nsec = (long)(work_ns % 1000000000ull),
	};

	for (long i = 0; i < rounds; i++) {
		uint64_t t0 = tt_now_ns();
		int err = clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
		uint64_t t1 = tt_now_ns();

		if (err)
			fail("clock_nanosleep", err);
		record_wait(i, t0, t1);
	}
}

static void *role_main(void *arg)
{
	struct role *r = arg;
	int err;

	r->tid = gettid();
	if ((err = pthread_setname_np(pthread_self(), r->name)))
		fail("pthread_setname_np", err);
	if (r->fn == sleeper)
		prctl(PR_SET_TIMERSLACK, 1UL); /* the timer fires at the deadline */
	pthread_barrier_wait(&ready);
	if (!r->spinner)
		pthread_barrier_wait(&go);
	r->fn();
	return NULL;
}

/* Pinned to r->cpu and SCHED_OTHER from its first instruction. */
static void start_role(struct role *r)
{
	struct sched_param sp = { .sched_priority = 0 };
	pthread_attr_t attr;
	cpu_set_t set;
	int err;

	CPU_ZERO(&set);
	CPU_SET(r->cpu, &set);
	pthread_attr_init(&attr);
	pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
	pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
	pthread_attr_setschedpolicy(&attr, SCHED_OTHER);
	pthread_attr_setschedparam(&attr, &sp);
	if ((err = pthread_create(&r->th, &attr, role_main, r))) {
		fprintf(stderr, "tt-waitchain: start %s on CPU %d: %s\n", r->name, r->cpu,
			strerror(err));
		exit(1);
	}
	pthread_attr_destroy(&attr);
}

/* The roles of MODE, workers first; returns how many, 0 if MODE is unknown. */
static int mode_roles(const char *mode, struct role *r)
{
	static const struct role spin0 = { .key = "spin0", .name = "wc-spin0", .cpu = 1,
					   .fn = spinner, .spinner = 1 };
	static const struct role spin1 = { .key = "spin1", .name = "wc-spin1", .cpu = 1,
					   .fn = spinner, .spinner = 1 };

	if (!strcmp(mode, "pipe")) {
		r[0] = (struct role){ .key = "requester", .name = "wc-requester", .cpu = 0, .fn = requester };
		r[1] = (struct role){ .key = "answerer", .name = "wc-answerer", .cpu = 1, .fn = answerer };
	} else if (!strcmp(mode, "mutex")) {
		r[0] = (struct role){ .key = "holder", .name = "wc-holder", .cpu = 1, .fn = holder };
		r[1] = (struct role){ .key = "waiter", .name = "wc-waiter", .cpu = 0, .fn = waiter };
	} else if (!strcmp(mode, "timer")) {
		r[0] = (struct role){ .key = "sleeper", .name = "wc-sleeper", .cpu = 1, .fn = sleeper };
		r[1] = spin0;
		return 2;
	} else {
		return 0;
	}
	r[2] = spin0;
	r[3] = spin1;
	return 4;
}

static void print_header(const char *mode, const struct role *r, int n)
{
	printf("{\"mode\": \"%s\", \"pid\": %d, \"rounds\": %ld, \"work_ns\": %llu, \"tids\": {",
	       mode, getpid(), rounds, (unsigned long long)work_ns);
	for (int i = 0; i < n; i++)
		printf("%s\"%s\": %d", i ? ", " : "", r[i].key, r[i].tid);
	printf("}");
	if (!strcmp(mode, "mutex"))
		printf(", \"mutex\": \"%p\", \"mutex_addr\": %llu", (void *)&mutex,
		       (unsigned long long)(uintptr_t)&mutex);
	printf("}\n");
	fflush(stdout);
}

static void print_result(uint64_t t_start, uint64_t t_end)
{
	long listed = rounds < MAX_WAITS ? rounds : MAX_WAITS;

	printf("{\"rounds\": %ld, \"window\": [%llu, %llu], \"waits\": [", rounds,
	       (unsigned long long)t_start, (unsigned long long)t_end);
	for (long i = 0; i < listed; i++)
		printf("%s[%llu, %llu]", i ? ", " : "", (unsigned long long)waits[i][0],
		       (unsigned long long)waits[i][1]);
	printf("], \"wait_sum_ns\": %llu, \"work_cpu_ns\": %llu}\n",
	       (unsigned long long)wait_sum_ns, (unsigned long long)work_cpu_ns);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	struct role r[MAX_ROLES];
	uint64_t t_start, t_end;
	double work_ms = 0;
	char *end = NULL;
	int n = 0, nworkers = 0;

	if (argc == 4) {
		n = mode_roles(argv[1], r);
		rounds = strtol(argv[2], &end, 10);
		if (*end)
			rounds = 0;
		work_ms = strtod(argv[3], &end);
		if (*end)
			work_ms = 0;
	}
	if (!n || rounds < 1 || !(work_ms > 0)) {
		fprintf(stderr, "usage: tt-waitchain pipe|mutex|timer ROUNDS WORK_MS\n");
		return 2;
	}
	work_ns = (uint64_t)(work_ms * 1e6);
	while (nworkers < n && !r[nworkers].spinner)
		nworkers++;
	if (!strcmp(argv[1], "pipe") && (pipe(pipe_a) || pipe(pipe_b)))
		fail("pipe", errno);
	pthread_barrier_init(&ready, NULL, (unsigned)n + 1);
	pthread_barrier_init(&go, NULL, (unsigned)nworkers + 1);
	for (int i = 0; i < n; i++)
		start_role(&r[i]);
	pthread_barrier_wait(&ready); /* tids known; the spinners spin */
	print_header(argv[1], r, n);
	tt_sleep_until_ns(tt_now_ns() + 50000000ull); /* spinners in steady state */
	t_start = tt_now_ns();
	pthread_barrier_wait(&go);
	for (int i = 0; i < nworkers; i++)
		pthread_join(r[i].th, NULL);
	t_end = tt_now_ns();
	atomic_store(&stop, 1);
	for (int i = nworkers; i < n; i++)
		pthread_join(r[i].th, NULL);
	print_result(t_start, t_end);
	return 0;
}
