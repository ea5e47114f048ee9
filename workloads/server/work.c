/* SPDX-License-Identifier: MIT */
/* Simulated per-request service. See work.h. */
#include "work.h"

#include <errno.h>
#include <poll.h>
#include <time.h>

#include "tt_clock.h"

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A few hundred ns of integer work between clock reads. */
static uint64_t mix_round(uint64_t x)
{
	int i;

	for (i = 0; i < 256; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
	}
	return x;
}

/* Where the work's result goes, so the compiler keeps the work. */
static volatile uint64_t work_sink;

int work_cpu_us(uint32_t cpu_us, const atomic_bool *stop)
{
	uint64_t t_end_ns, x = 0x9e3779b97f4a7c15ull;

	if (cpu_us == 0)
		return 0;
	t_end_ns = thread_cpu_ns() + (uint64_t)cpu_us * 1000u;
	do {
		x = mix_round(x);
		if (stop && atomic_load_explicit(stop, memory_order_relaxed))
			return 1;
	} while (thread_cpu_ns() < t_end_ns);
	work_sink = x;
	return 0;
}

int work_block_us(uint32_t wait_us, int stop_fd)
{
	uint64_t t_end_ns = tt_now_ns() + (uint64_t)wait_us * 1000u, now_ns;
	struct pollfd pfd = { .fd = stop_fd, .events = POLLIN };
	struct timespec left;
	int rc;

	if (wait_us == 0)
		return 0;
	while ((now_ns = tt_now_ns()) < t_end_ns) {
		left.tv_sec = (time_t)((t_end_ns - now_ns) / 1000000000ull);
		left.tv_nsec = (long)((t_end_ns - now_ns) % 1000000000ull);
		rc = ppoll(&pfd, stop_fd >= 0 ? 1 : 0, &left, NULL);
		if (rc > 0)
			return 1;
		if (rc < 0 && errno != EINTR)
			return -errno;
	}
	return 0;
}
