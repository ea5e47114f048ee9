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

/* A traced thread that is off-CPU (key: tid), from its switch-out. */
struct sched_off {
	__u64 t_off_ns;
	__u32 pid;
	__u32 cpu_off;
	__u32 prev_state;
	__s32 kstack_id;
	__s32 ustack_id;
	__u8 voluntary;
	__u8 pad[3];
};

enum sched_counter {
	SCHED_CNT_LOST = 0,     /* ring buffer full: switch record dropped */
	SCHED_CNT_STACK_ERR,    /* stack map full / collision: stack not kept */
	SCHED_CNT_UNMATCHED,    /* switch-out whose switch-in never reached sched_switch */
	SCHED_CNT_NR,
};

#endif
