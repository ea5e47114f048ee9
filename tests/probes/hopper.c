// SPDX-License-Identifier: MIT
/*
 * hopper N [LINGER_S]: the main thread moves itself between two CPUs N
 * times (sched_setaffinity to one CPU, then the other): at least N
 * migrations (sched_migrate_task) by construction. Prints its tid and the
 * CPUs used, then sleeps LINGER_S seconds (default 0) before it exits.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100;
	int cpus[2], k = 0;
	cpu_set_t allowed;

	sched_getaffinity(0, sizeof(allowed), &allowed);
	for (int c = 0; c < CPU_SETSIZE && k < 2; c++)
		if (CPU_ISSET(c, &allowed))
			cpus[k++] = c;
	if (k < 2 || n < 1) {
		fprintf(stderr, "hopper: needs N >= 1 and two allowed CPUs\n");
		return 2;
	}
	for (long i = 0; i < n; i++)
		if (pin(cpus[i % 2]) || sched_getcpu() != cpus[i % 2]) {
			perror("hopper: sched_setaffinity");
			return 1;
		}
	printf("{\"tid\": %d, \"cpus\": [%d, %d], \"hops\": %ld}\n", gettid(), cpus[0], cpus[1], n);
	fflush(stdout);
	if (argc > 2)
		sleep((unsigned)atoi(argv[2]));
	return 0;
}
