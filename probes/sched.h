/* SPDX-License-Identifier: MIT */
/*
 * sched: off-CPU intervals (struct tt_switch), their stacks (offcpu),
 * migrations and the traced threads (struct tt_task, tasks.bin).
 */
#ifndef TT_SCHED_H
#define TT_SCHED_H
#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define SCHED_STACK_DEPTH 64      /* frames kept per stack */
#define SCHED_STACK_ENTRIES 16384 /* distinct stacks (stack map size) */

/* Per traced thread (key: tid), kept while the thread lives: its open
 * off-CPU interval (t_off_ns != 0) from its switch-out, and the kernel stack
 * cache (a thread blocking again from the same user stack blocks through the
 * same kernel path: the kernel stack, the costly one to unwind, is reused up
 * to SCHED_KSTACK_REUSE times, then taken afresh). */
struct sched_off {
	__u64 t_off_ns;          /* 0: on CPU, no open interval */
	__u32 pid;
	__u32 cpu_off;
	__u32 prev_state;
	__s32 kstack_id;
	__s32 ustack_id;
	__s32 last_ustack_id;
	__s32 last_kstack_id;
	__u16 kstack_uses;
	__u8 voluntary;
	__u8 task_seen;          /* tasks map entry made */
};

#define SCHED_KSTACK_REUSE 32

enum sched_counter {
	SCHED_CNT_LOST = 0,     /* ring buffer full: switch record dropped */
	SCHED_CNT_STACK_ERR,    /* stack map full / collision: stack not kept */
	SCHED_CNT_UNMATCHED,    /* switch-out whose switch-in never reached sched_switch */
	SCHED_CNT_NR,
};

#endif
