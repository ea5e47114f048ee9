// SPDX-License-Identifier: MIT
/*
 * tt-stall EVERY_MS STALL_MS DURATION_S [LOG]: every EVERY_MS, one SCHED_FIFO
 * thread per CPU (pinned) spins for STALL_MS: nothing else runs on the machine
 * meanwhile (the kernel's RT throttling leaves 5% of each second). An injected
 * CPU stall of a known time for the flight-recorder tests: each is written to
 * LOG (default stdout) as "stall T_START_NS T_END_NS" (CLOCK_MONOTONIC).
 * The stall starts when the last spinner runs (under emulation creating them
 * took milliseconds) and each spinner starts on its own CPU, below tt-stall
 * itself (SCHED_FIFO too): a spinner must not take the CPU of the thread that
 * has yet to start the next one. Needs root (SCHED_FIFO).
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tt_clock.h>

#define MAX_CPUS 64
#define SPIN_PRIO 10 /* the spinners; tt-stall itself runs at SPIN_PRIO + 1 */

static int n_spin;                    /* spinners of this stall */
static uint64_t stall_ns;
static atomic_int n_started;
static _Atomic uint64_t t_start_ns, t_end_ns; /* set by the last spinner to start */

static void *spin(void *arg)
{
	volatile uint64_t x = 0;
	uint64_t end;

	(void)arg;
	if (atomic_fetch_add(&n_started, 1) + 1 == n_spin) {
		uint64_t now = tt_now_ns();

		atomic_store(&t_start_ns, now);
		atomic_store(&t_end_ns, now + stall_ns);
	}
	while (!(end = atomic_load(&t_end_ns)))
		x++; /* holds this CPU until every spinner holds its own */
	while (tt_now_ns() < end)
		for (int i = 0; i < 1000; i++)
			x++;
	return NULL;
}

/* One stall: a FIFO spinner on each CPU, for stall_ns once all of them run; its times in
 * *t0, *t1. 0 or an errno. */
static int stall_once(int ncpu, uint64_t *t0, uint64_t *t1)
{
	pthread_t th[MAX_CPUS];
	pthread_attr_t a;
	struct sched_param sp = { .sched_priority = SPIN_PRIO };
	cpu_set_t set;
	int err = 0, n = 0;

	pthread_attr_init(&a);
	pthread_attr_setinheritsched(&a, PTHREAD_EXPLICIT_SCHED);
	pthread_attr_setschedpolicy(&a, SCHED_FIFO);
	pthread_attr_setschedparam(&a, &sp);
	n_spin = ncpu;
	atomic_store(&n_started, 0);
	atomic_store(&t_end_ns, 0);
	for (; n < ncpu && !err; n++) {
		CPU_ZERO(&set);
		CPU_SET(n, &set);
		err = pthread_attr_setaffinity_np(&a, sizeof(set), &set);
		if (!err)
			err = pthread_create(&th[n], &a, spin, NULL);
	}
	n -= err != 0;
	if (err)
		atomic_store(&t_end_ns, 1); /* the started ones end at once */
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	pthread_attr_destroy(&a);
	*t0 = atomic_load(&t_start_ns);
	*t1 = atomic_load(&t_end_ns);
	return err;
}

int main(int argc, char **argv)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	uint64_t every_ns, stop_ns, next;
	FILE *log = stdout;
	int err;

	if (argc < 4 || argc > 5) {
		fprintf(stderr, "usage: tt-stall EVERY_MS STALL_MS DURATION_S [LOG]\n");
		return 2;
	}
	every_ns = strtoull(argv[1], NULL, 10) * 1000000ull;
	stall_ns = strtoull(argv[2], NULL, 10) * 1000000ull;
	stop_ns = tt_now_ns() + (uint64_t)(atof(argv[3]) * 1e9);
	if (!every_ns || !stall_ns || stall_ns >= every_ns || ncpu < 1 || ncpu > MAX_CPUS) {
		fprintf(stderr, "tt-stall: STALL_MS must be below EVERY_MS, both above 0\n");
		return 2;
	}
	err = sched_setscheduler(0, SCHED_FIFO, &(struct sched_param){ .sched_priority = SPIN_PRIO + 1 });
	if (err) {
		perror("tt-stall: SCHED_FIFO (run as root)");
		return 1;
	}
	if (argc == 5 && !(log = fopen(argv[4], "we"))) {
		perror(argv[4]);
		return 1;
	}
	for (next = tt_now_ns() + every_ns; next + stall_ns < stop_ns; next += every_ns) {
		uint64_t t0, t1;

		tt_sleep_until_ns(next);
		err = stall_once((int)ncpu, &t0, &t1);
		if (err) {
			fprintf(stderr, "tt-stall: SCHED_FIFO threads: %s (run as root)\n", strerror(err));
			return 1;
		}
		fprintf(log, "stall %llu %llu\n", (unsigned long long)t0, (unsigned long long)t1);
		fflush(log);
	}
	return 0;
}
