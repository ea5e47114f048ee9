/* SPDX-License-Identifier: MIT */
/*
 * occupancy: who held a CPU while traced threads waited for it. Types shared
 * by occupancy.bpf.h and the loader (runq.c, occupancy_out.c).
 *
 * Every sched_switch on every CPU notes the task it switches in (any task:
 * untraced, kernel thread, idle) in that CPU's ring of OCC_RING slots. When a
 * traced thread switches in after a runnable interval [t0, t1] on a CPU, the
 * slots of that CPU that cover [t0, t1] go to user space with its runq record:
 * the task that held the CPU at t0 (the anchor) and every later switch up to
 * t1. So records are only written for CPUs and times where traced threads
 * waited, however busy the rest of the machine is. The slots written so far
 * stay one range per CPU, so overlapping waits write each switch about once.
 * A task's name and cgroup are read once, when it is first written (occ_names).
 *
 * The irq event (opt-in) notes interrupts in the same rings: a hard IRQ
 * handler, the local timer interrupt or a softirq is a slot of its own (tid 0,
 * TT_OCC_HARDIRQ / TT_OCC_SOFTIRQ with its number), and its exit notes again
 * the task it interrupted. A softirq that a task's own syscall runs (a
 * loopback send's local_bh_enable) stays that task's time and is not noted.
 */
#ifndef TT_OCCUPANCY_H
#define TT_OCCUPANCY_H
#include <tailtrace/records.h>

#define OCC_RING 512 /* switches remembered per CPU (a power of two) */
#define OCC_BATCH 16 /* slots carried by one ring-buffer message */

/* One noted switch (flags: TT_OCC_* of records.h). */
struct occ_slot {
	__u64 t_ns;     /* the task switched in */
	__u64 task;     /* its task_struct, to read its name when it is first written */
	__u32 tid;      /* 0: the idle task */
	__u32 pid;      /* tgid */
	__u32 flags;
	__u32 pad;
};

/* One slot as it goes to user space. */
struct occ_rec {
	__u64 t_ns;
	__u32 tid;
	__u32 pid;
	__u32 flags;
	__u32 pad;
};

/* A runq_rb message: a runq record and up to OCC_BATCH occupancy slots of its
 * CPU (kind RUNQ_MSG_RUNQ), or more slots of the same wait (RUNQ_MSG_OCC: only
 * r.cpu is set). Without the cpu event the ring carries bare struct tt_runq. */
enum { RUNQ_MSG_RUNQ = 1, RUNQ_MSG_OCC = 2 };
struct runq_msg {
	struct tt_runq r;
	__u32 kind;
	__u32 nocc;
	struct occ_rec occ[OCC_BATCH];
};

/* occ_names (key: tid): what a task written in occupancy is. */
struct occ_name {
	__u64 cgid;     /* cgroup v2 id */
	__u32 pid;
	__u32 flags;    /* TT_OCC_KTHREAD, TT_OCC_TRACED */
	__u32 reused;   /* the tid was seen for another process before */
	__u32 pad;
	char comm[16];
};

/* Per CPU: how many switches were noted, and which of them were written. With
 * the irq event, also the task the last switch put on the CPU (an interrupt's
 * exit notes it again) and the softirq in progress (a hard IRQ inside it
 * returns to it). */
struct occ_cpu {
	__u64 seq;
	__u64 lo_seq, hi_seq; /* slots [lo_seq, hi_seq) were written (one range) */
	struct occ_slot cur;  /* irq event: the task switched in last */
	__u32 soft;           /* irq event: flags of the softirq running, 0 none,
			       * OCC_SOFT_OWN: one the current task's own syscall runs */
	__u32 pad;
};
#define OCC_SOFT_OWN 1u

enum occ_counter {
	OCC_CNT_LOST = 0,  /* ring buffer full: message dropped */
	OCC_CNT_TRUNC,     /* waits whose start was overwritten in the ring */
	OCC_CNT_NAMES_FULL, /* names not kept: occ_names full */
	OCC_CNT_BLAME_FULL, /* --listen: waits not added, occ_blame full */
	OCC_CNT_NR,
};

/* --listen (no records): each traced wait is split in the kernel by what held
 * the CPU, and the time added up by (waiting process, class, occupant) in
 * occ_blame (the exporter serves it). The classes of analyze/explain/antagonists.py. */
enum occ_class {
	OCC_CLS_SIBLING = 0, /* another thread of the waiting process */
	OCC_CLS_PEER,        /* another traced process (not in a system-wide run) */
	OCC_CLS_OTHER,       /* another process */
	OCC_CLS_KERNEL,      /* a kernel thread */
	OCC_CLS_IRQ,         /* an interrupt (the irq event) */
	OCC_CLS_IDLE,        /* nothing ran: the wakeup's own latency */
	OCC_CLS_UNKNOWN,     /* the ring no longer held the wait's start */
	OCC_CLS_NR,
};

struct occ_blame_key {
	__u32 pid;   /* the waiting thread's process */
	__u32 occ;   /* the occupant's process; an interrupt's flags (kind, number); 0 */
	__u32 cls;   /* enum occ_class */
	__u32 pad;
};
#define OCC_BLAME_ENTRIES 16384

#endif
