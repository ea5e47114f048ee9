/* SPDX-License-Identifier: MIT */
/*
 * The known cost of one request in the test servers (handoff_server.c,
 * prefork_server.c): cpu_us of this thread's CPU time (CLOCK_THREAD_CPUTIME_ID,
 * so time the thread spends preempted does not count), then sleep_us asleep.
 * Requests are one line ("x\n") answered with one line ("ok\n").
 */
#ifndef TT_KNOWN_COST_H
#define TT_KNOWN_COST_H
#include <stdint.h>
#include <time.h>

static inline uint64_t known_thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void known_cost(unsigned cpu_us, unsigned sleep_us)
{
	uint64_t t0 = known_thread_cpu_ns();
	struct timespec nap = { .tv_sec = sleep_us / 1000000, .tv_nsec = (sleep_us % 1000000) * 1000L };
	volatile uint64_t spin = 0;

	while (known_thread_cpu_ns() - t0 < cpu_us * 1000ull)
		spin++;
	while (nanosleep(&nap, &nap))
		;
}
#endif
