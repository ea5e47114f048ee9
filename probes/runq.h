/* SPDX-License-Identifier: MIT */
/*
 * runq: run-queue latency. One struct tt_runq (records.h) per runnable
 * interval of a traced thread: from its wakeup (sched_wakeup / _new) or from
 * being switched out while still runnable (preemption) to its switch-in.
 * The waker is taken at sched_waking, which runs in the waker's context
 * (sched_wakeup may run on the target CPU from an IPI, where current is a
 * bystander), with the context it ran in (task, hard IRQ, softirq).
 */
#ifndef TT_RUNQ_H
#define TT_RUNQ_H
#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* Per traced thread (key: tid), kept while it lives: when it became runnable
 * and has not run yet (t_runnable_ns != 0), how, and who woke it. */
struct runq_start {
	__u64 t_runnable_ns;   /* 0: no open runnable interval */
	__u32 pid;
	__u32 waker_tid;       /* of the open interval */
	__u32 waker_pid;
	__u32 waking_tid;      /* pending: set at sched_waking, taken at sched_wakeup */
	__u32 waking_pid;
	__u8 kind;       /* enum tt_runq_kind */
	__u8 waker_ctx;  /* enum tt_waker_ctx, of the open interval */
	__u8 waking_ctx; /* pending; TT_WAKER_NONE: no sched_waking seen */
	__u8 pad[5];
};

/* Per-CPU counters (runq_counters map, runq_switch.bpf.h). */
enum runq_counter {
	RUNQ_CNT_LOST = 0,      /* ring buffer full / map full: record dropped */
	RUNQ_CNT_UNMATCHED,     /* start entries whose switch-in was never seen */
	RUNQ_CNT_NR,
};

#endif
