/* SPDX-License-Identifier: MIT */
/*
 * Simulated per-request service: CPU work and a blocking downstream wait.
 * Both are what the probes should see: work_cpu_us() burns the thread's own
 * CPU time (a preempted thread takes longer in wall time, as a real handler
 * would), work_block_us() puts the thread to sleep (voluntary off-CPU).
 */
#ifndef ORDERS_WORK_H
#define ORDERS_WORK_H
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* Burn cpu_us microseconds of this thread's CPU time, or less if *stop
 * (NULL: never) becomes true. Returns 0 after the full work, 1 if cut short. */
int work_cpu_us(uint32_t cpu_us, const atomic_bool *stop);

/* Block this thread for wait_us microseconds (CLOCK_MONOTONIC), or until
 * stop_fd (an eventfd, -1 for none) becomes readable. Returns 0 after the
 * full wait, 1 if cut short by stop_fd, or a negative errno. */
int work_block_us(uint32_t wait_us, int stop_fd);

#endif
