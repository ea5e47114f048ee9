/* SPDX-License-Identifier: MIT */
/* The server's C unit tests: CHECK counts a failure and goes on, so one run
 * lists every failed check; main returns non-zero if there was any. */
#ifndef ORDERS_TEST_CHECK_H
#define ORDERS_TEST_CHECK_H
#include <stdio.h>

static int failures;

#define CHECK(cond)                                                           \
	do {                                                                  \
		if (!(cond)) {                                                \
			fprintf(stderr, "%s:%d: %s: CHECK(%s) failed\n",      \
				__FILE__, __LINE__, __func__, #cond);         \
			failures++;                                           \
		}                                                             \
	} while (0)

#endif
