/* SPDX-License-Identifier: MIT */
/*
 * retired_tasks: the traced threads that exited, as the loader keeps them.
 *
 * The switch program sends a thread's tasks-map entry to the loader at the
 * thread's last switch-out and deletes it from the map (sched.bpf.c,
 * task_retire), so the map holds the live threads only: a server that starts
 * a thread per connection would otherwise fill its 65,536 entries within hours.
 * tasks.bin is the retired threads and the live ones, one row per tid.
 */
#ifndef TT_RETIRED_TASKS_H
#define TT_RETIRED_TASKS_H
#include <stddef.h>
#include <stdint.h>
#include <tailtrace/records.h>

struct retired_tasks;

struct retired_tasks *retired_tasks_new(void);
void retired_tasks_free(struct retired_tasks *r);

/* A thread that exited at exit_ns (CLOCK_MONOTONIC). 0, or -ENOMEM. */
int retired_tasks_add(struct retired_tasks *r, const struct tt_task *t, uint64_t exit_ns);

/* Forget the threads that exited before t_ns (the flight recorder: older than
 * any window it can still capture). */
void retired_tasks_forget_before(struct retired_tasks *r, uint64_t t_ns);

/* How many were added, ever. */
uint64_t retired_tasks_added(const struct retired_tasks *r);

/* The threads that exited at or after since_ns, oldest first, copied into out
 * (room for max). Returns how many. */
size_t retired_tasks_copy(const struct retired_tasks *r, uint64_t since_ns, struct tt_task *out,
			  size_t max);

/* How many are kept. */
size_t retired_tasks_count(const struct retired_tasks *r);

/* Sort n tasks by tid and keep one row per tid, the last of each in the
 * array's order (a reused tid: the thread that has it now). Returns the rows
 * kept, at the front of v. */
size_t tasks_sort_unique(struct tt_task *v, size_t n);

#endif
