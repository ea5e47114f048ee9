// SPDX-License-Identifier: MIT
/*
 * deepstacks PATHS USEC [lock | exec CMD...]: sleeps USEC microseconds PATHS times, each time
 * under a different user stack (path i: LEVELS calls through via_a or via_b
 * as the bits of i say), so tailtrace's offcpu stream sees PATHS distinct
 * user stacks: with a few hundred, some land in a bucket of the stack map
 * that another one holds (the map does not chain), which
 * tests/probes/test_probes_switch.py uses to check that no stack is lost to
 * such collisions. Prints {"tid": N} first and, at the end, {"paths": PATHS,
 * "nvcsw": N}: the kernel's own count of the loop's voluntary context switches
 * (getrusage RUSAGE_THREAD). A sleep whose timer expired before the thread
 * reached schedule() (a stalled vCPU) is no switch, and the kernel knows.
 * With "lock", each sleep holds a mutex, taken on the same path (the locks
 * probe's stacks). With "exec CMD...", it then sleeps 300 ms more (a test's
 * cue, after that line, to act before the new image runs) and execs CMD in the
 * same process (a new image under the same pid: the unwinder's maps must follow).
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define LEVELS 10 /* up to 1024 distinct call paths, 12 frames deep at most */

static long usec;
static int locking;
static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static volatile long sink;

static void walk(long i, int level);

/* Two call sites per level: bit `level` of i picks one, so path i is a
 * distinct chain of return addresses. The store after each call keeps
 * the frame (no tail call). */
__attribute__((noinline)) static void via_a(long i, int level)
{
	walk(i, level);
	sink++;
}

__attribute__((noinline)) static void via_b(long i, int level)
{
	walk(i, level);
	sink++;
}

__attribute__((noinline)) static void walk(long i, int level)
{
	if (level == LEVELS) {
		if (locking)
			pthread_mutex_lock(&mutex);
		usleep((useconds_t)usec);
		if (locking)
			pthread_mutex_unlock(&mutex);
		return;
	}
	if ((i >> level) & 1)
		via_b(i, level + 1);
	else
		via_a(i, level + 1);
	sink++;
}

static long long now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv)
{
	long paths;
	long long t0, t1;
	struct rusage r0, r1;

	if (argc < 3 || (paths = atol(argv[1])) < 1 || paths > (1L << LEVELS) ||
	    (usec = atol(argv[2])) < 0 || (argc == 4 && strcmp(argv[3], "lock")) ||
	    (argc > 4 && strcmp(argv[3], "exec"))) {
		fprintf(stderr, "usage: deepstacks PATHS(1..%d) USEC [lock | exec CMD...]\n",
			1 << LEVELS);
		return 2;
	}
	locking = argc == 4;
	printf("{\"tid\": %d}\n", gettid());
	fflush(stdout);
	getrusage(RUSAGE_THREAD, &r0);
	t0 = now_ns();
	for (long i = 0; i < paths; i++)
		walk(i, 0);
	t1 = now_ns();
	getrusage(RUSAGE_THREAD, &r1);
	printf("{\"paths\": %ld, \"nvcsw\": %ld, \"loop_t_start_ns\": %lld, \"loop_t_end_ns\": %lld}\n",
	       paths, r1.ru_nvcsw - r0.ru_nvcsw, t0, t1);
	fflush(stdout);
	if (argc > 4) {
		usleep(300000);
		execvp(argv[4], argv + 4);
		perror(argv[4]);
		return 127;
	}
	return 0;
}
