// SPDX-License-Identifier: MIT
/*
 * stripped_sleeper ROUNDS WAIT_US [LINGER_US]: ROUNDS times, main -> serve_request ->
 * (path_a or path_b, in turn) -> wait_for_work -> pthread_cond_timedwait on a
 * condition variable nobody signals: each round blocks WAIT_US inside libc;
 * then it sleeps LINGER_US (default 0) in main before it exits.
 * tests/probes/test_user_stacks.py builds it without frame pointers, splits its
 * debug part into /usr/lib/debug/.build-id/ and strips it: its static
 * functions are then named only by that debug file, and reached only by
 * unwinding through libc (Debian's, built without frame pointers). path_a and
 * path_b block at the same depth, so their threads' registers at the blocking
 * call are alike: the stack cache must still tell the two call paths apart.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;
static volatile unsigned long done_a, done_b;

static __attribute__((noinline)) void wait_for_work(unsigned wait_us)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_nsec += (long)wait_us * 1000;
	until.tv_sec += until.tv_nsec / 1000000000;
	until.tv_nsec %= 1000000000;
	pthread_mutex_lock(&lock);
	while (pthread_cond_timedwait(&never, &lock, &until) == 0)
		;
	pthread_mutex_unlock(&lock);
}

/* Two callers of one depth, different code (so the compiler keeps both). */
static __attribute__((noinline)) void path_a(unsigned wait_us)
{
	wait_for_work(wait_us);
	done_a++;
}

static __attribute__((noinline)) void path_b(unsigned wait_us)
{
	wait_for_work(wait_us);
	done_b += 2;
}

static __attribute__((noinline)) void serve_request(unsigned i, unsigned wait_us)
{
	if (i % 2)
		path_b(wait_us);
	else
		path_a(wait_us);
	__asm__ volatile("" ::: "memory"); /* no tail call: serve_request keeps its frame */
}

int main(int argc, char **argv)
{
	unsigned rounds, wait_us, linger_us;

	if (argc != 3 && argc != 4) {
		fprintf(stderr, "usage: stripped_sleeper ROUNDS WAIT_US [LINGER_US]\n");
		return 2;
	}
	rounds = (unsigned)atoi(argv[1]);
	wait_us = (unsigned)atoi(argv[2]);
	linger_us = argc == 4 ? (unsigned)atoi(argv[3]) : 0;
	for (unsigned i = 0; i < rounds; i++)
		serve_request(i, wait_us);
	if (linger_us)
		nanosleep(&(struct timespec){ .tv_sec = linger_us / 1000000,
					      .tv_nsec = (long)(linger_us % 1000000) * 1000 },
			  NULL);
	return done_a + done_b / 2 == rounds ? 0 : 1;
}
