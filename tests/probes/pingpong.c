// SPDX-License-Identifier: MIT
/*
 * pingpong ROUNDS [PAIRS [QUIET_MS]]: PAIRS pairs of threads (default 1) each
 * pass a byte back and forth over two pipes ROUNDS times: a context-switch
 * storm (each round blocks both threads of a pair); then the process sleeps
 * QUIET_MS (default 0) before it exits: a burst, then quiet. ROUNDS given as
 * Nms: as many rounds as fit in N ms (a burst of a known length).
 */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_PAIRS 16

struct pair {
	int ab[2], ba[2];
	pthread_t ping, pong;
};

static long rounds;
static long long burst_ns; /* > 0: stop after this long (ROUNDS given in ms) */

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void *pong_main(void *arg)
{
	struct pair *p = arg;
	char c;

	for (long i = 0; i < rounds; i++)
		if (read(p->ab[0], &c, 1) != 1 || write(p->ba[1], &c, 1) != 1 || c == 'q')
			break;
	return NULL;
}

static void *ping_main(void *arg)
{
	struct pair *p = arg;
	char c = 'x';
	long long end_ns = burst_ns ? now_ns() + burst_ns : 0;

	for (long i = 0; i < rounds; i++) {
		if (end_ns && !(i & 63) && now_ns() >= end_ns)
			c = 'q'; /* the last round: pong stops after it */
		if (write(p->ab[1], &c, 1) != 1 || read(p->ba[0], &c, 1) != 1 || c == 'q')
			break;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct pair pairs[MAX_PAIRS];
	int n = argc > 2 ? atoi(argv[2]) : 1;
	long quiet_ms = argc > 3 ? atol(argv[3]) : 0;

	rounds = argc > 1 ? atol(argv[1]) : 10000;
	if (argc > 1 && strstr(argv[1], "ms")) {
		burst_ns = rounds * 1000000LL;
		rounds = LONG_MAX;
	}
	if (n < 1 || n > MAX_PAIRS || rounds < 1 || quiet_ms < 0) {
		fprintf(stderr, "usage: pingpong ROUNDS|Nms [PAIRS 1-%d [QUIET_MS]]\n", MAX_PAIRS);
		return 2;
	}
	for (int i = 0; i < n; i++) {
		if (pipe(pairs[i].ab) || pipe(pairs[i].ba))
			return 1;
		pthread_create(&pairs[i].pong, NULL, pong_main, &pairs[i]);
		pthread_create(&pairs[i].ping, NULL, ping_main, &pairs[i]);
	}
	for (int i = 0; i < n; i++) {
		pthread_join(pairs[i].ping, NULL);
		pthread_join(pairs[i].pong, NULL);
	}
	printf("{\"rounds\": %ld, \"pairs\": %d}\n", rounds, n);
	fflush(stdout);
	if (quiet_ms)
		usleep((useconds_t)quiet_ms * 1000);
	return 0;
}
