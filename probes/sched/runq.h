/* SPDX-License-Identifier: MIT */
/*
 * runq: run-queue latency. One struct tt_runq (records.h) per runnable
 * interval of a traced thread: from the sched_waking that ended its sleep
 * (as `perf sched record` measures it: the waking, not the later
 * sched_wakeup), from its creation (sched_wakeup_new), or from being switched
 * out while still runnable (preemption), to its switch-in. sched_waking runs
 * in the waker's context (sched_wakeup may run on the target CPU from an IPI,
 * where current is a bystander), so it also names the waker and the context
 * it ran in (task, hard IRQ, softirq). One program per wakeup: no
 * sched_wakeup program.
 */
#ifndef TT_RUNQ_H
#define TT_RUNQ_H
#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* Per traced thread (key: tid), kept while it lives. The sched_waking program
 * writes only the waking_* fields and t_waking_ns; the switch program the
 * rest, and it consumes the waking at the switch-in. A waking can run on
 * another CPU while the thread is still switching out (it found the thread
 * on its CPU, waking_on_cpu): that wait starts at the switch-out. */
struct runq_start {
	__u64 t_runnable_ns;   /* open interval (preempted, new task); 0: none */
	__u64 t_blocked_ns;    /* blocked switch-out waiting for its wake; 0: none */
	__u64 t_waking_ns;     /* last sched_waking since the last switch-in; 0: none */
	__u32 pid;
	__u32 waker_tid;       /* of the open interval (wakeup_new: the parent) */
	__u32 waker_pid;
	__u32 waking_tid;      /* of t_waking_ns: the waker */
	__u32 waking_pid;
	__u8 kind;          /* enum tt_runq_kind, of the open interval */
	__u8 waker_ctx;     /* enum tt_waker_ctx, of the open interval */
	__u8 waking_ctx;    /* enum tt_waker_ctx, of t_waking_ns */
	__u8 waking_on_cpu; /* the waking found the thread still on a CPU */
	/* kernel accounting (--aggregate, runq_switch.bpf.h), at the last switch-out: */
	__u8 switched_out;     /* seen, kind set; the switch-in not yet */
	__u8 out_delayed;      /* it blocked, left queued (EEVDF delayed dequeue) */
	__u8 throttle_noted;   /* throttle_base is of the open wait (throttle.bpf.h) */
	__u8 pad;
	__u64 throttle_base;   /* its cfs_rq's throttled total when it became runnable */
};

/* The rest of the kernel accounting's state at the last switch-out (tp_btf
 * only: struct tt_thread), apart so that struct runq_start fills the slot's
 * first cache line. */
struct runq_kacct {
	__u32 out_migrations;  /* se.nr_migrations */
	__u32 out_attach;      /* runq_attach_gen: attached since? */
	__u64 run_delay_ns;    /* sched_info.run_delay */
};

/* Per-CPU counters (runq_counters map, runq_switch.bpf.h). */
enum runq_counter {
	RUNQ_CNT_LOST = 0,      /* ring buffer full / map full: record dropped */
	RUNQ_CNT_UNMATCHED,     /* intervals with an edge never seen: a switch-in,
				 * or the waking of a blocked thread */
	RUNQ_CNT_NR,
};

#endif
