/* SPDX-License-Identifier: MIT */
/* What every fuzz target shares: a property check that aborts, so libFuzzer
 * saves the input that broke it. */
#ifndef TT_FUZZ_H
#define TT_FUZZ_H
#include <stdio.h>
#include <stdlib.h>

#define REQUIRE(cond)                                                         \
	do {                                                                  \
		if (!(cond)) {                                                \
			fprintf(stderr, "%s: property failed: %s (line %d)\n", \
				__FILE__, #cond, __LINE__);                   \
			abort();                                              \
		}                                                             \
	} while (0)

#endif
