// SPDX-License-Identifier: MIT
/*
 * busy NTHREADS SECONDS CPU [LINGER_S [gate]]: NTHREADS threads pinned to CPU (-1: not
 * pinned, the scheduler spreads and migrates them) spin together for SECONDS under SCHED_RR (equal priority: round robin, and ordinary load
 * on a shared machine cannot take the CPU from them; nice -20 if RR is not
 * permitted). Ground truth for run-queue tests: each thread is runnable or
 * running the whole window, running about 1/NTHREADS of it.
 * Prints one JSON line per thread: tid, its spin window, its own CPU time,
 * the policy it got, its voluntary/involuntary context switches (the
 * kernel's RUSAGE_THREAD counts) and its whole run-queue wait as the kernel
 * accounts it (/proc/thread-self/schedstat run_delay, -1 without
 * CONFIG_SCHED_INFO), all read at the end of its window. Then the process sleeps LINGER_S seconds
 * (default 0) before exiting, so a tracer can read its final counts. With
 * "gate" it waits for a line on stdin before it starts (a tracer attached
 * with --pid sees every switch of the spinners).
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <tt_clock.h>

#define MAX_THREADS 16

struct worker {
	pthread_t th;
	int tid;
	uint64_t t_start_ns, t_end_ns, cpu_ns;
	long nvcsw, nivcsw;
	long long run_delay_ns;
	const char *policy;
};

static pthread_barrier_t barrier;
static uint64_t spin_ns;
static int cpu;

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The second field of /proc/thread-self/schedstat: the thread's run-queue
 * wait so far, in ns; -1 when the kernel does not keep it. */
static long long thread_run_delay_ns(void)
{
	unsigned long long on_cpu, wait;
	FILE *f = fopen("/proc/thread-self/schedstat", "r");
	int n = f ? fscanf(f, "%llu %llu", &on_cpu, &wait) : 0;

	if (f)
		fclose(f);
	return n == 2 ? (long long)wait : -1;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	cpu_set_t set;
	uint64_t c0;

	w->tid = gettid();
	if (cpu >= 0) {
		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		sched_setaffinity(0, sizeof(set), &set);
	}
	if (sched_setscheduler(0, SCHED_RR, &(struct sched_param){ .sched_priority = 1 }) == 0) {
		w->policy = "rr";
	} else {
		setpriority(PRIO_PROCESS, (id_t)w->tid, -20);
		w->policy = "nice-20";
	}
	pthread_barrier_wait(&barrier);
	c0 = thread_cpu_ns();
	w->t_start_ns = tt_now_ns();
	while (tt_now_ns() - w->t_start_ns < spin_ns)
		;
	w->t_end_ns = tt_now_ns();
	w->cpu_ns = thread_cpu_ns() - c0;
	struct rusage ru;

	getrusage(RUSAGE_THREAD, &ru);
	w->nvcsw = ru.ru_nvcsw;
	w->nivcsw = ru.ru_nivcsw;
	w->run_delay_ns = thread_run_delay_ns();
	return NULL;
}

int main(int argc, char **argv)
{
	struct worker w[MAX_THREADS];
	int n;

	if (argc < 4 || argc > 6 || (n = atoi(argv[1])) < 1 || n > MAX_THREADS) {
		fprintf(stderr, "usage: busy NTHREADS(1-%d) SECONDS CPU [LINGER_S [gate]]\n", MAX_THREADS);
		return 2;
	}
	if (argc == 6) { /* gate: start on a line from stdin */
		char line[16];

		if (!fgets(line, sizeof(line), stdin))
			return 1;
	}
	spin_ns = (uint64_t)(atof(argv[2]) * 1e9);
	cpu = atoi(argv[3]);
	pthread_barrier_init(&barrier, NULL, (unsigned)n);
	for (int i = 0; i < n; i++)
		pthread_create(&w[i].th, NULL, worker_main, &w[i]);
	for (int i = 0; i < n; i++)
		pthread_join(w[i].th, NULL);
	for (int i = 0; i < n; i++)
		printf("{\"tid\": %d, \"policy\": \"%s\", \"t_start_ns\": %llu, \"t_end_ns\": %llu, "
		       "\"cpu_ns\": %llu, \"nvcsw\": %ld, \"nivcsw\": %ld, \"run_delay_ns\": %lld}\n",
		       w[i].tid, w[i].policy, (unsigned long long)w[i].t_start_ns,
		       (unsigned long long)w[i].t_end_ns, (unsigned long long)w[i].cpu_ns, w[i].nvcsw,
		       w[i].nivcsw, w[i].run_delay_ns);
	fflush(stdout);
	if (argc >= 5)
		usleep((useconds_t)(atof(argv[4]) * 1e6));
	return 0;
}
