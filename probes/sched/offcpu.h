/* SPDX-License-Identifier: MIT */
/*
 * Off-CPU stacks: sums blocked time per (thread, kernel stack, user stack)
 * while switch records stream in, then writes stacks.jsonl (symbolized
 * frames per stack id) and offcpu.folded (flame-graph input) at the end.
 */
#ifndef TT_OFFCPU_H
#define TT_OFFCPU_H
#include <stddef.h>
#include <stdint.h>
#include <tailtrace/records.h>
#include "sched/sched_stacks.h"
#include "symbols/stack_epoch.h"

struct tt_syms_set;
struct tt_ksyms;
struct offcpu_acc;
struct copied_stacks;

struct offcpu_acc *offcpu_new(void);
/* Account one switch record (no-op without stacks). 0 or -ENOMEM. */
int offcpu_add(struct offcpu_acc *a, const struct tt_switch *r);
/* The stack maps (sched_stacks.h): each generation's map and spill maps, in id
 * order, the epoch now and the epochs' state (stack_epoch.h: an expired id
 * is counted there and written without a stack). */
struct offcpu_stacks {
	int fds[SCHED_STACK_MAPS];
	uint32_t epoch;
	struct stack_epochs *epochs;
	struct copied_stacks *copies; /* --user-stacks dwarf: the user stacks (NULL: none) */
};
/* Write DIR/stacks.jsonl (appended: other streams add theirs) and
 * DIR/offcpu.folded. tasks (sorted by tid) give each thread's comm; syms
 * symbolizes target_pid (other pids get their own symbolizer). ksyms: kernel
 * symbols already read (the flight recorder's captures), or NULL:
 * /proc/kallsyms is read for this call. */
int offcpu_write(struct offcpu_acc *a, const char *dir, struct offcpu_stacks *sm,
		 const struct tt_task *tasks, size_t ntasks,
		 struct tt_syms_set *syms, struct tt_ksyms *ksyms);
void offcpu_free(struct offcpu_acc *a);

#endif
