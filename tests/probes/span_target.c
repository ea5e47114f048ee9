// SPDX-License-Identifier: MIT
/*
 * Ground truth for the spans probe.
 *   span_target work N US   calls tt_span_work(i) N times, each between USDT probes
 *                           span_target:work__start(i) and work__done(i, ret); each sleeps US
 *                           microseconds (0: none, no syscall) and returns 2*i+1. Prints the sum
 *                           of the durations the function measured itself
 *                           (first to last line: what a span must show,
 *                           less the probe's own trap costs) and of the
 *                           call durations seen by the caller.
 *   span_target once N US BAD  N calls of tt_span_work(i, US), each followed by one
 *                           mark once__span(i, t_start_ns, 2*i+1) carrying its start;
 *                           then 2*BAD marks whose start is 0 or a second ahead.
 *   span_target context N   N marks context__span(i, t_start_ns, 2*i+1, traceparent,
 *                           tracestate), by turns with the i-th trace context (trace id
 *                           i + 1, parent id 2i + 1, tracestate k=vi), with NULL, and
 *                           with pointers that point to no memory.
 *   span_target recurse D   calls tt_span_recurse(D) once: D+1 nested calls.
 *   span_target jump N      N calls of tt_span_escape() that leave by longjmp
 *                           (their return is never seen), then N normal
 *                           calls of tt_span_work(i, 0).
 *   span_target spin N US   calls tt_span_spin(i, US) N times, each between USDT
 *                           probes spin_begin and spin_end (no arguments): each spins
 *                           on its CPU for US microseconds (a request that needs CPU).
 *   span_target overlap N   work__start(i, 0) for i < N, then work__done(i, 2i+1) for
 *                           each, the odd ones from a second thread: N marks open at
 *                           once (more than the probe's table of slots holds) and half
 *                           of them ended by another thread than their start's.
 *   span_target fork N      N calls of tt_span_fork(i), which forks: parent and
 *                           child both return from it; the child then exits 0.
 *                           Prints how many children did not exit 0.
 *   span_target serve N SLEEP_US CPU_US  N calls of tt_span_serve(i, SLEEP_US, CPU_US):
 *                           each sleeps SLEEP_US, then spins until the thread has used
 *                           CPU_US of CPU time (a request that sleeps, then computes:
 *                           under a CPU quota its computing waits out throttles).
 *   span_target many N M... N threads, each inside one call of tt_span_hold(i) until all
 *                           N are in (N spans open at once), then all return and exit;
 *                           then M threads the same way, and so on for each number
 *                           given. Prints held=N, held=M, ... once each wave's threads
 *                           have returned.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include "tt_clock.h"
#include "tt_usdt.h"

static uint64_t inner_sum_ns;

__attribute__((noinline, used)) long tt_span_work(long i, long sleep_us)
{
	uint64_t t0 = tt_now_ns();

	if (sleep_us) /* 0: no syscall, so a benchmark sees the probes' cost alone */
		tt_sleep_until_ns(t0 + (uint64_t)sleep_us * 1000);
	inner_sum_ns += tt_now_ns() - t0;
	return 2 * i + 1;
}

__attribute__((noinline, used)) long tt_span_spin(long i, long us)
{
	uint64_t end = tt_now_ns() + (uint64_t)us * 1000;
	volatile long x = 0;

	while (tt_now_ns() < end)
		for (int k = 0; k < 100; k++)
			x++;
	return i;
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline, used)) long tt_span_serve(long i, long sleep_us, long cpu_us)
{
	uint64_t end;
	volatile long x = 0;

	tt_sleep_until_ns(tt_now_ns() + (uint64_t)sleep_us * 1000);
	end = thread_cpu_ns() + (uint64_t)cpu_us * 1000;
	while (thread_cpu_ns() < end)
		for (int k = 0; k < 100; k++)
			x++;
	return i;
}

__attribute__((noinline, used)) long tt_span_recurse(long depth)
{
	/* through a volatile pointer: gcc -O2 would turn the recursion into a loop */
	long (*volatile self)(long) = tt_span_recurse;

	if (depth <= 0)
		return 0;
	return self(depth - 1) + 1;
}

static jmp_buf escape_to;

__attribute__((noinline, used)) long tt_span_escape(long i)
{
	longjmp(escape_to, 1); /* never returns: its uretprobe never fires */
	return i;
}

__attribute__((noinline, used)) long tt_span_fork(long i)
{
	pid_t pid = fork();

	(void)i;
	return pid; /* the child returns 0 through the span too */
}

static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_all_in = PTHREAD_COND_INITIALIZER;
static long hold_in, hold_n;

__attribute__((noinline, used)) long tt_span_hold(long i)
{
	pthread_mutex_lock(&hold_lock);
	if (++hold_in == hold_n)
		pthread_cond_broadcast(&hold_all_in);
	while (hold_in < hold_n)
		pthread_cond_wait(&hold_all_in, &hold_lock);
	pthread_mutex_unlock(&hold_lock);
	return i;
}

static void *hold_main(void *arg)
{
	tt_span_hold((long)arg);
	return NULL;
}

/* n threads with small stacks and no guard page (one mapping each: 50,000 threads
 * stay under vm.max_map_count's 65,530), all inside tt_span_hold at once. */
static int run_many(long n)
{
	pthread_t *t = calloc((size_t)n, sizeof(*t));
	pthread_attr_t attr;
	long started = 0;

	if (!t || pthread_attr_init(&attr) || pthread_attr_setstacksize(&attr, 64 << 10) ||
	    pthread_attr_setguardsize(&attr, 0))
		return 1;
	hold_in = 0;
	hold_n = n;
	for (; started < n; started++)
		if (pthread_create(&t[started], &attr, hold_main, (void *)started))
			break;
	if (started < n) { /* let the ones started return */
		fprintf(stderr, "span_target: only %ld of %ld threads started\n", started, n);
		pthread_mutex_lock(&hold_lock);
		hold_n = started;
		pthread_cond_broadcast(&hold_all_in);
		pthread_mutex_unlock(&hold_lock);
	}
	for (long i = 0; i < started; i++)
		pthread_join(t[i], NULL);
	free(t);
	printf("held=%ld\n", started);
	return started == n ? 0 : 1;
}

static void run_forks(long n)
{
	long failed = 0;

	for (long i = 0; i < n; i++) {
		int status;
		long r = tt_span_fork(i);

		if (r == 0)
			_exit(0);
		if (r < 0 || waitpid((pid_t)r, &status, 0) < 0 ||
		    !WIFEXITED(status) || WEXITSTATUS(status))
			failed++;
	}
	printf("forks=%ld failed_children=%ld\n", n, failed);
}

static void run_jumps(long n)
{
	for (volatile long i = 0; i < n; i++) {
		if (setjmp(escape_to) == 0)
			tt_span_escape(i);
	}
	for (long i = 0; i < n; i++)
		tt_span_work(i, 0);
	printf("escaped=%ld returned=%ld\n", n, n);
}

static long overlap_n;

static void *overlap_end_odd(void *arg)
{
	(void)arg;
	for (long i = 1; i < overlap_n; i += 2)
		TT_USDT2(span_target, work__done, i, 2 * i + 1);
	return NULL;
}

static int run_overlap(long n)
{
	pthread_t t;

	overlap_n = n;
	for (long i = 0; i < n; i++)
		TT_USDT2(span_target, work__start, i, 0);
	if (pthread_create(&t, NULL, overlap_end_odd, NULL))
		return 1;
	for (long i = 0; i < n; i += 2)
		TT_USDT2(span_target, work__done, i, 2 * i + 1);
	pthread_join(t, NULL);
	printf("overlap=%ld\n", n);
	return 0;
}

/* context N: the trace-context arguments of a one-mark span, valid, NULL or unreadable
 * by turns. */
static void run_context(long n)
{
	const char *unmapped = (const char *)8;
	char parent[64], state[32];

	for (long i = 0; i < n; i++) {
		uint64_t t0 = tt_now_ns();

		snprintf(parent, sizeof(parent), "00-%032lx-%016lx-01", i + 1, 2 * i + 1);
		snprintf(state, sizeof(state), "k=v%ld", i);
		if (i % 3 == 0)
			TT_USDT5(span_target, context__span, i, t0, 2 * i + 1, parent, state);
		else if (i % 3 == 1)
			TT_USDT5(span_target, context__span, i, t0, 2 * i + 1, (const char *)NULL,
				 (const char *)NULL);
		else
			TT_USDT5(span_target, context__span, i, t0, 2 * i + 1, unmapped, unmapped);
	}
	printf("context=%ld\n", n);
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "overlap"))
		return run_overlap(atol(argv[2]));
	if (argc == 3 && !strcmp(argv[1], "jump")) {
		run_jumps(atol(argv[2]));
		return 0;
	}
	if (argc == 4 && !strcmp(argv[1], "work")) {
		long n = atol(argv[2]), us = atol(argv[3]), check = 0;
		uint64_t sum_ns = 0;

		prctl(PR_SET_TIMERSLACK, 1UL);
		for (long i = 0; i < n; i++) {
			uint64_t t0 = tt_now_ns();
			long r;

			TT_USDT2(span_target, work__start, i, 0);
			r = tt_span_work(i, us);
			TT_USDT2(span_target, work__done, i, r);
			check += r;
			sum_ns += tt_now_ns() - t0;
		}
		printf("calls=%ld inner_sum_ns=%llu outer_sum_ns=%llu check=%ld\n", n,
		       (unsigned long long)inner_sum_ns, (unsigned long long)sum_ns, check);
		return 0;
	}
	if (argc == 5 && !strcmp(argv[1], "once")) {
		long n = atol(argv[2]), us = atol(argv[3]), bad = atol(argv[4]);

		for (long i = 0; i < n; i++) {
			uint64_t t0 = tt_now_ns();
			long r = tt_span_work(i, us);

			TT_USDT3(span_target, once__span, i, t0, r);
		}
		for (long i = 0; i < bad; i++) { /* starts that are no time before the end */
			TT_USDT3(span_target, once__span, i, (uint64_t)0, 0L);
			TT_USDT3(span_target, once__span, i, tt_now_ns() + 1000000000ull, 0L);
		}
		printf("once=%ld bad=%ld\n", n, 2 * bad);
		return 0;
	}
	if (argc == 4 && !strcmp(argv[1], "spin")) {
		long n = atol(argv[2]), us = atol(argv[3]);

		for (long i = 0; i < n; i++) {
			STAP_PROBE(span_target, spin_begin); /* no argument: paired by thread */
			tt_span_spin(i, us);
			STAP_PROBE(span_target, spin_end);
		}
		printf("spins=%ld\n", n);
		return 0;
	}
	if (argc == 5 && !strcmp(argv[1], "serve")) {
		long n = atol(argv[2]), sleep_us = atol(argv[3]), cpu_us = atol(argv[4]);

		for (long i = 0; i < n; i++)
			tt_span_serve(i, sleep_us, cpu_us);
		printf("served=%ld\n", n);
		return 0;
	}
	if (argc >= 3 && !strcmp(argv[1], "many")) {
		for (int i = 2; i < argc; i++)
			if (run_many(atol(argv[i])))
				return 1;
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "fork")) {
		run_forks(atol(argv[2]));
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "context")) {
		run_context(atol(argv[2]));
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "recurse")) {
		printf("recurse=%ld\n", tt_span_recurse(atol(argv[2])));
		return 0;
	}
	fprintf(stderr, "usage: span_target work N SLEEP_US | once N SLEEP_US BAD | context N | spin N US | serve N SLEEP_US CPU_US | many N M... | recurse DEPTH | jump N | "
		"fork N | overlap N\n");
	return 2;
}
