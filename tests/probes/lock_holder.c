// SPDX-License-Identifier: MIT
/*
 * Ground truth for the locks probe. Known by construction:
 *   phase 1  holder thread: HOLDS x (lock, hold HOLD_MS, unlock) on mutex A;
 *            contender thread: lock/unlock A in a loop with 200 us pauses
 *            until the holder is done (it mostly waits for the holder).
 *   phase 2  main: recursive mutex R, 10 x (lock, lock, lock, unlock x3);
 *            nested O then I, 5 x (lock O, lock I, 200 us, unlock I, unlock O).
 *   phase 3  main: 5 x successful trylock of T; then the contender holds T
 *            while main's trylock fails once and lock() waits.
 *   phase 4  main holds C across a 1 ms pthread_cond_timedwait (times out)
 *            and pthread_cond_wait until the contender signals ~3 ms later:
 *            C is free while main waits, so no hold of C includes the waits.
 * Prints the addresses, tids and its own counts/timings for the test.
 * Usage: lock_holder [holds=100] [hold_ms=2]
 *        lock_holder pairs N     N uncontended lock/unlock pairs; prints ns per
 *                                pair (the probe's cost = traced - untraced)
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>
#include "tt_clock.h"

static pthread_mutex_t mutex_a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t mutex_t = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t mutex_r;
static pthread_mutex_t mutex_c = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t mutex_o = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t mutex_i = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond_c = PTHREAD_COND_INITIALIZER;
static int cond_done; /* under mutex_c */
static atomic_int cond_waiting;
static atomic_int holder_done;
static atomic_int t_grab; /* phase 3: contender may take T */
static atomic_int t_held; /* phase 3: contender holds T */
static atomic_int t_release;
static int holds = 100;
static uint64_t hold_ns = 2000000;
static uint64_t *hold_measured_ns;
static long contender_acq;

static void sleep_ns(uint64_t ns)
{
	tt_sleep_until_ns(tt_now_ns() + ns);
}

static void *holder_main(void *arg)
{
	printf("holder_tid=%d\n", gettid());
	fflush(stdout);
	for (int i = 0; i < holds; i++) {
		pthread_mutex_lock(&mutex_a);
		uint64_t t0 = tt_now_ns();

		tt_sleep_until_ns(t0 + hold_ns);
		hold_measured_ns[i] = tt_now_ns() - t0;
		pthread_mutex_unlock(&mutex_a);
		sleep_ns(300000);
	}
	atomic_store(&holder_done, 1);
	return NULL;
}

static void *contender_main(void *arg)
{
	printf("contender_tid=%d\n", gettid());
	fflush(stdout);
	while (!atomic_load(&holder_done)) {
		pthread_mutex_lock(&mutex_a);
		contender_acq++;
		pthread_mutex_unlock(&mutex_a);
		sleep_ns(200000);
	}
	/* phase 3: hold T until main has failed a trylock and is waiting */
	while (!atomic_load(&t_grab))
		sleep_ns(100000);
	pthread_mutex_lock(&mutex_t);
	atomic_store(&t_held, 1);
	while (!atomic_load(&t_release))
		sleep_ns(100000);
	sleep_ns(5000000); /* main is blocked in lock(T) for ~5 ms */
	pthread_mutex_unlock(&mutex_t);
	/* phase 4: wake main ~3 ms after it started waiting on cond_c */
	while (!atomic_load(&cond_waiting))
		sleep_ns(100000);
	sleep_ns(3000000);
	pthread_mutex_lock(&mutex_c);
	cond_done = 1;
	pthread_cond_signal(&cond_c);
	pthread_mutex_unlock(&mutex_c);
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void phase_recursive(void)
{
	pthread_mutexattr_t at;

	pthread_mutexattr_init(&at);
	pthread_mutexattr_settype(&at, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&mutex_r, &at);
	for (int i = 0; i < 10; i++) {
		for (int d = 0; d < 3; d++)
			pthread_mutex_lock(&mutex_r);
		sleep_ns(100000);
		for (int d = 0; d < 3; d++)
			pthread_mutex_unlock(&mutex_r);
	}
	printf("recursive_mutex=%p recursive_holds=10\n", (void *)&mutex_r);
	for (int i = 0; i < 5; i++) {
		pthread_mutex_lock(&mutex_o);
		pthread_mutex_lock(&mutex_i);
		sleep_ns(200000);
		pthread_mutex_unlock(&mutex_i);
		pthread_mutex_unlock(&mutex_o);
	}
	printf("outer_mutex=%p inner_mutex=%p nested_holds=5\n", (void *)&mutex_o, (void *)&mutex_i);
}

static void phase_trylock(void)
{
	int ok = 0;

	for (int i = 0; i < 5; i++) {
		if (pthread_mutex_trylock(&mutex_t) == 0) {
			ok++;
			pthread_mutex_unlock(&mutex_t);
		}
	}
	atomic_store(&t_grab, 1);
	while (!atomic_load(&t_held))
		sleep_ns(100000);
	int busy = pthread_mutex_trylock(&mutex_t) != 0;

	atomic_store(&t_release, 1);
	pthread_mutex_lock(&mutex_t); /* waits ~5 ms: contended */
	pthread_mutex_unlock(&mutex_t);
	printf("trylock_mutex=%p trylock_ok=%d trylock_busy=%d\n", (void *)&mutex_t, ok, busy);
}

static int run_pairs(long n)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	uint64_t t0 = tt_now_ns();

	for (long i = 0; i < n; i++) {
		pthread_mutex_lock(&m);
		pthread_mutex_unlock(&m);
	}
	printf("pairs=%ld ns_per_pair=%.1f\n", n, (double)(tt_now_ns() - t0) / (double)n);
	return 0;
}

static void phase_condvar(void)
{
	struct timespec ts;
	int waits = 1;

	pthread_mutex_lock(&mutex_c);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_cond_timedwait(&cond_c, &mutex_c, &ts); /* nobody signals yet: times out */
	atomic_store(&cond_waiting, 1);
	while (!cond_done) {
		pthread_cond_wait(&cond_c, &mutex_c);
		waits++;
	}
	pthread_mutex_unlock(&mutex_c);
	printf("cond_mutex=%p cond_waits=%d\n", (void *)&mutex_c, waits);
}

int main(int argc, char **argv)
{
	pthread_t holder, contender;

	if (argc == 3 && !strcmp(argv[1], "pairs"))
		return run_pairs(atol(argv[2]));
	if (argc > 1)
		holds = atoi(argv[1]);
	if (argc > 2)
		hold_ns = (uint64_t)(atof(argv[2]) * 1e6);
	if (holds < 1 || hold_ns < 1) {
		fprintf(stderr, "usage: lock_holder [holds>0] [hold_ms>0]\n");
		return 2;
	}
	prctl(PR_SET_TIMERSLACK, 1UL); /* precise sleeps */
	hold_measured_ns = calloc((size_t)holds, sizeof(*hold_measured_ns));
	printf("main_tid=%d mutex=%p\n", gettid(), (void *)&mutex_a);
	fflush(stdout);
	pthread_create(&holder, NULL, holder_main, NULL);
	pthread_create(&contender, NULL, contender_main, NULL);
	pthread_join(holder, NULL);
	phase_recursive();
	phase_trylock();
	phase_condvar();
	pthread_join(contender, NULL);
	qsort(hold_measured_ns, (size_t)holds, sizeof(uint64_t), cmp_u64);
	printf("holds=%d hold_median_ns=%llu contender_acquisitions=%ld\n", holds,
	       (unsigned long long)hold_measured_ns[holds / 2], contender_acq);
	free(hold_measured_ns);
	return 0;
}
