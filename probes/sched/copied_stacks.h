/* SPDX-License-Identifier: MIT */
/*
 * The user stacks the switch program copied (--user-stacks dwarf,
 * user_stack.h), unwound as they arrive (symbols/unwind.h) while their
 * process still lives: each copy's id -> its frames, and back to the program
 * the stack words each unwind read (ustack_paths), which a cache hit checks.
 */
#ifndef TT_COPIED_STACKS_H
#define TT_COPIED_STACKS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct copied_stacks;
struct tt_syms_set;

/* paths_fd: the ustack_paths map; syms: the run's symbolizers, one made for each
 * process a copy comes from (its maps read while it lives: a short-lived child
 * is often gone by the time its switch record is read). NULL on ENOMEM. */
struct copied_stacks *copied_stacks_new(int paths_fd, unsigned copy_bytes,
					struct tt_syms_set *syms);
/* ustack_rb's callback: one struct tt_ustack_copy. */
int copied_stacks_add(void *ctx, void *data, size_t size);
/* The frames of copy id (leaf first) in *ips: their count, 0 for an id never
 * unwound. */
int copied_stacks_get(const struct copied_stacks *cs, int32_t id, const uint64_t **ips);
/* The target pid's maps read and its files opened now, while it lives
 * (unwinder_watch): its copies unwind by them even when read after its exit. */
void copied_stacks_watch(struct copied_stacks *cs, int pid);
/* True the first time it is asked for id (its stacks.jsonl line is due). */
bool copied_stacks_first_use(struct copied_stacks *cs, int32_t id);
/* The switch program's counts (sched.h: SCHED_CNT_USTACK_*). */
struct copied_stacks_bpf {
	uint64_t copies, lost, unchecked, collisions;
};
/* meta.json "user_stacks": how the copies were unwound and where they stopped. */
void copied_stacks_meta(const struct copied_stacks *cs, const struct copied_stacks_bpf *b, FILE *f);
void copied_stacks_free(struct copied_stacks *cs);

#endif
