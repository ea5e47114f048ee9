/* SPDX-License-Identifier: MIT */
/*
 * occupancy: who held a CPU while traced threads waited for it. Types shared
 * by occupancy.bpf.h and the loader (runq.c, occupancy.c).
 *
 * Every sched_switch on every CPU notes the task it switches in (any task:
 * untraced, kernel thread, idle) in that CPU's ring of OCC_RING slots. When a
 * traced thread switches in after a runnable interval [t0, t1] on a CPU, the
 * slots of that CPU that cover [t0, t1] go to user space: the task that held
 * the CPU at t0 (the anchor) and every later switch up to t1. So records
 * are only written for CPUs and times where traced threads waited, however
 * busy the rest of the machine is. A per-CPU coverage interval keeps two
 * overlapping waits from writing the same slots twice.
 */
#ifndef TT_OCCUPANCY_H
#define TT_OCCUPANCY_H
#include <tailtrace/records.h>

#define OCC_RING 512 /* switches remembered per CPU (a power of two) */

/* struct occ_slot.flags: TT_OCC_* of records.h (tt_occ.flags in occupancy.bin). */

/* One noted switch; also what a record carries to user space. */
struct occ_slot {
	__u64 t_ns;     /* the task switched in */
	__u64 cgid;     /* its cgroup v2 id */
	__u32 cpu;
	__u32 tid;      /* 0: the idle task */
	__u32 pid;      /* tgid */
	__u32 flags;
	char comm[16];
};

/* Per CPU: how many switches were noted, and which times its records cover. */
struct occ_cpu {
	__u64 seq;
	__u64 cov_lo, cov_hi; /* every switch in [cov_lo, cov_hi] was written */
};

enum occ_counter {
	OCC_CNT_LOST = 0,  /* ring buffer full: record dropped */
	OCC_CNT_TRUNC,     /* waits whose start was overwritten in the ring */
	OCC_CNT_NR,
};

#endif
