/* SPDX-License-Identifier: MIT */
/* CLOCK_MONOTONIC in nanoseconds: the one clock of every tailtrace record. */
#ifndef TT_CLOCK_H
#define TT_CLOCK_H
#include <stdint.h>
#include <time.h>

static inline uint64_t tt_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* t_ns as a struct timespec (an absolute CLOCK_MONOTONIC deadline, or a
 * duration). */
static inline struct timespec tt_timespec_of_ns(uint64_t t_ns)
{
	return (struct timespec){
		.tv_sec = (time_t)(t_ns / 1000000000ull),
		.tv_nsec = (long)(t_ns % 1000000000ull),
	};
}

static inline void tt_sleep_until_ns(uint64_t t_ns)
{
	struct timespec ts = tt_timespec_of_ns(t_ns);

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0)
		;
}
#endif
