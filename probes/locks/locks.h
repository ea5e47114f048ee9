/* SPDX-License-Identifier: MIT */
/*
 * locks: pthread mutex hold/wait through uprobes on the target's libc.
 * Types shared by locks.bpf.c and locks.c (the record is struct tt_lock in
 * records.h).
 *
 * --aggregate: no records; per-thread log2 histograms of mutex wait
 * ("lock_wait") and hold ("lock_hold") go to aggregate.h at finish().
 */
#ifndef TT_LOCKS_H
#define TT_LOCKS_H

#define LOCKS_STACK_DEPTH 64     /* frames kept per user stack */
#define LOCKS_STACK_ENTRIES 8192 /* distinct stacks (stack map size) */

enum locks_counter {
	LOCKS_CNT_LOST = 0,      /* ring buffer full: record dropped */
	LOCKS_CNT_TRYFAIL,       /* trylock returned non-zero (no record) */
	LOCKS_CNT_STATE_FULL,    /* per-thread/per-mutex state map full */
	LOCKS_CNT_UNMATCHED,     /* unlock of a mutex not seen acquired */
	LOCKS_CNT_HITS,          /* uprobe/uretprobe program runs (their cost) */
	LOCKS_CNT_NR,
};

/* A lock()/trylock() call in progress on a thread (key: tid). */
struct locks_pending {
	__u64 mutex;
	__u64 t_request_ns;
	__u32 flags;     /* TT_LOCK_TRYLOCK; TT_LOCK_CONTENDED once futex() seen */
	__u32 pad;
};

/* A mutex held by a thread. */
struct locks_held_key {
	__u64 mutex;
	__u32 tid;
	__u32 pad;
};

struct locks_held {
	__u64 t_request_ns;
	__u64 t_acquired_ns;
	__u32 pid;
	__s32 ustack_id;
	__u32 flags;
	__u32 depth;     /* extra recursive acquisitions still held */
};

#ifndef __VMLINUX_H__
#include <stdint.h>
#include <stdio.h>
struct tt_syms_set;

struct stack_epochs;

/* A stack id and a process that used it (its symbols). */
struct locks_stack {
	int32_t id;
	uint32_t pid;
};

/* locks_out.c: side files. Append the user stacks of ids[0..n) (distinct) to
 * OUT/stacks.jsonl as {"stream":"locks","id":N,"kind":"user","frames":[..]};
 * fds: the two generations' maps, epoch: the one now (stack_epoch.h: an
 * expired id is counted there and not written). syms symbolizes target_pid;
 * other pids (--all) get their own symbolizer. */
int locks_stacks_write(const char *out_dir, struct tt_syms_set *syms, const int fds[2],
		       struct stack_epochs *epochs, uint32_t epoch,
		       const struct locks_stack *ids, size_t n);
#endif

#endif
