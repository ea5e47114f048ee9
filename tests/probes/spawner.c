// SPDX-License-Identifier: MIT
/*
 * spawner: the first thing main does is start a thread that runs ~2 ms and
 * exits. Seen by tailtrace only if tracing began before the program's first
 * instruction (-- CMD holds the child before exec).
 */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include <tt_clock.h>

static int child_tid;

static void *early(void *arg)
{
	uint64_t t0 = tt_now_ns();

	child_tid = gettid();
	while (tt_now_ns() - t0 < 2000000ull)
		;
	return arg;
}

int main(void)
{
	pthread_t th;

	pthread_create(&th, NULL, early, NULL);
	pthread_join(th, NULL);
	printf("{\"tid\": %d, \"early_tid\": %d}\n", gettid(), child_tid);
	return 0;
}
