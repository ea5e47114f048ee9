// SPDX-License-Identifier: MIT
/*
 * sleeper N USEC [EXIT [rt]]: one thread sleeps N times for USEC microseconds,
 * then exits with status EXIT. With "rt" it runs SCHED_FIFO pinned to the CPU
 * it started on, so no ordinary task preempts it and no load balancer moves
 * it between arming its timer and blocking: then every sleep is exactly one
 * voluntary context switch, even on a loaded machine.
 * Prints its tid first (flushed), so a test can attach with --pid, and at the
 * end its loop's window and the kernel's own count of its voluntary and
 * involuntary context switches in that window (getrusage RUSAGE_THREAD): a
 * sleep whose timer expired before the thread got to block (a stalled vCPU,
 * an interrupt) is no context switch, and the kernel knows. SIGTERM (a tracer
 * that stops its run early) ends the loop: the counts are still printed, then
 * it dies of the signal.
 */
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <tt_clock.h>

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_term };
	struct rusage r0, r1;
	uint64_t t0, t1;
	long n, usec;

	if (argc < 3 || (n = atol(argv[1])) < 0 || (usec = atol(argv[2])) < 0) {
		fprintf(stderr, "usage: sleeper N USEC [EXIT [rt]]\n");
		return 2;
	}
	if (argc > 4 && !strcmp(argv[4], "rt")) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(sched_getcpu(), &set);
		if (sched_setaffinity(0, sizeof(set), &set) ||
		    sched_setscheduler(0, SCHED_FIFO, &(struct sched_param){ .sched_priority = 1 })) {
			perror("sleeper: pinned SCHED_FIFO");
			return 2;
		}
	}
	sigaction(SIGTERM, &sa, NULL);
	printf("{\"tid\": %d}\n", gettid());
	fflush(stdout);
	getrusage(RUSAGE_THREAD, &r0);
	t0 = tt_now_ns();
	for (long i = 0; i < n && !stop; i++)
		usleep((useconds_t)usec);
	t1 = tt_now_ns();
	getrusage(RUSAGE_THREAD, &r1);
	printf("{\"loop_t_start_ns\": %llu, \"loop_t_end_ns\": %llu, \"nvcsw\": %ld, "
	       "\"nivcsw\": %ld, \"nvcsw_total\": %ld, \"nivcsw_total\": %ld}\n",
	       (unsigned long long)t0, (unsigned long long)t1, r1.ru_nvcsw - r0.ru_nvcsw,
	       r1.ru_nivcsw - r0.ru_nivcsw, r1.ru_nvcsw, r1.ru_nivcsw);
	if (stop) { /* then die of it, as without the handler */
		fflush(stdout);
		signal(SIGTERM, SIG_DFL);
		raise(SIGTERM);
	}
	return argc > 3 ? atoi(argv[3]) : 0;
}
