// SPDX-License-Identifier: MIT
/*
 * sleeper N USEC [EXIT]: one thread sleeps N times for USEC microseconds
 * (N voluntary context switches at least), then exits with status EXIT.
 * Prints its tid first (flushed), so a test can attach with --pid.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long n, usec;

	if (argc < 3 || (n = atol(argv[1])) < 0 || (usec = atol(argv[2])) < 0) {
		fprintf(stderr, "usage: sleeper N USEC [EXIT]\n");
		return 2;
	}
	printf("{\"tid\": %d}\n", gettid());
	fflush(stdout);
	for (long i = 0; i < n; i++)
		usleep((useconds_t)usec);
	return argc > 3 ? atoi(argv[3]) : 0;
}
