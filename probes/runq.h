/* SPDX-License-Identifier: MIT */
/*
 * runq: run-queue latency. One struct tt_runq (records.h) per runnable
 * interval of a traced thread: from its wakeup (sched_wakeup / _new) or from
 * being switched out while still runnable (preemption) to its switch-in.
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
	__u32 waker_tid;
	__u8 kind;       /* enum tt_runq_kind */
	__u8 pad[7];
};

#endif
