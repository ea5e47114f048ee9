// SPDX-License-Identifier: MIT
/*
 * pingpong ROUNDS: two threads pass a byte back and forth over two pipes
 * ROUNDS times: a context-switch storm (each round blocks both threads).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int ab[2], ba[2];
static long rounds;

static void *pong(void *arg)
{
	char c;

	for (long i = 0; i < rounds; i++)
		if (read(ab[0], &c, 1) != 1 || write(ba[1], &c, 1) != 1)
			break;
	return arg;
}

int main(int argc, char **argv)
{
	pthread_t th;
	char c = 'x';

	rounds = argc > 1 ? atol(argv[1]) : 10000;
	if (pipe(ab) || pipe(ba))
		return 1;
	pthread_create(&th, NULL, pong, NULL);
	for (long i = 0; i < rounds; i++)
		if (write(ab[1], &c, 1) != 1 || read(ba[0], &c, 1) != 1)
			break;
	pthread_join(th, NULL);
	printf("{\"rounds\": %ld}\n", rounds);
	return 0;
}
