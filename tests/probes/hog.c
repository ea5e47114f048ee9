// SPDX-License-Identifier: MIT
/*
 * hog NTHREADS SECONDS CPU [gate]: NTHREADS threads pinned to CPU spin for
 * SECONDS under the default policy (SCHED_OTHER: they share the CPU fairly
 * with whatever else runs there). The untraced neighbour of the antagonist
 * tests. With "gate" it prints "ready PID" and waits for a line on stdin
 * before spinning (the test moves it into a cgroup first). Prints "done".
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tt_clock.h>

#define MAX_THREADS 16

static uint64_t t_end_ns;
static int cpu;

static void *spin(void *arg)
{
	cpu_set_t set;
	volatile uint64_t x = 0;

	(void)arg;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	while (tt_now_ns() < t_end_ns)
		for (int i = 0; i < 1000; i++)
			x++;
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th[MAX_THREADS];
	int n = argc > 3 ? atoi(argv[1]) : 0;
	double secs = argc > 3 ? atof(argv[2]) : 0;
	char line[16];

	if (n < 1 || n > MAX_THREADS || secs <= 0 || argc > 5) {
		fprintf(stderr, "usage: hog NTHREADS(1-%d) SECONDS CPU [gate]\n", MAX_THREADS);
		return 2;
	}
	cpu = atoi(argv[3]);
	if (argc == 5 && !strcmp(argv[4], "gate")) {
		printf("ready %d\n", (int)getpid());
		fflush(stdout);
		if (!fgets(line, sizeof(line), stdin))
			return 1;
	}
	t_end_ns = tt_now_ns() + (uint64_t)(secs * 1e9);
	for (int i = 0; i < n; i++)
		pthread_create(&th[i], NULL, spin, NULL);
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	printf("done\n");
	return 0;
}
