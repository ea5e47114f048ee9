/* SPDX-License-Identifier: MIT */
/*
 * occupancy: who held a CPU while traced threads waited for it. Types shared
 * by occupancy.bpf.h and the loader (runq.c, occupancy_out.c).
 *
 * Every sched_switch on every CPU notes the task it switches in (any task:
 * untraced, kernel thread, idle) in that CPU's ring of OCC_RING slots, kept as
 * OCC_BATCHES batches of OCC_BATCH slots, each laid out as the ring-buffer
 * message that carries it. When a traced thread switches in after a runnable
 * interval [t0, t1] on a CPU, the batches of that CPU that cover [t0, t1] go
 * to user space: the complete ones at once, the one still filling when it is
 * full (user space reads a wanted batch still filling at the end of the run:
 * occ_out_pending). A batch goes out at most once, so overlapping waits send
 * each switch once; batches no traced wait covers never go out. A task's name
 * and cgroup are read when its switch is first noted (occ_names).
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
#define OCC_BATCHES (OCC_RING / OCC_BATCH) /* at most 32: struct occ_cpu.sent */

/* One noted switch (flags: TT_OCC_* of records.h), as it goes to user space. */
struct occ_rec {
	__u64 t_ns;     /* the task switched in */
	__u32 tid;      /* 0: the idle task */
	__u32 pid;      /* tgid */
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

/* Per CPU (one per-CPU array value): the ring, how many switches were noted
 * (slot seq is batch[(seq / OCC_BATCH) % OCC_BATCHES].occ[seq % OCC_BATCH]),
 * which batches went out, the (tid, pid) pairs named lately (most notes need
 * no lookup in occ_names). With the irq event, also the task the last switch
 * put on the CPU (an interrupt's exit notes it again) and the softirq in
 * progress (a hard IRQ inside it returns to it). */
#define OCC_KNOWN 256
struct occ_cpu {
	__u64 seq;
	__u64 want;           /* batch number + 1 a wait needs: sent once full (0: none) */
	__u32 sent;           /* bit b: the batch at ring position b went out */
	__u32 soft;           /* irq event: flags of the softirq running, 0 none,
			       * OCC_SOFT_OWN: one the current task's own syscall runs */
	__u32 writing;        /* a program is between occ_next_slot and occ_commit: an
			       * interrupt's program that comes meanwhile notes nothing */
	__u32 pad;
	struct occ_rec cur;   /* irq event: the task switched in last */
	__u64 known[OCC_KNOWN];
	struct runq_msg batch[OCC_BATCHES]; /* kind RUNQ_MSG_OCC, r.cpu, nocc OCC_BATCH */
};
#define OCC_SOFT_OWN 1u

enum occ_counter {
	OCC_CNT_LOST = 0,  /* ring buffer full: message dropped */
	OCC_CNT_TRUNC,     /* waits whose start was overwritten in the ring */
	OCC_CNT_NAMES_FULL, /* names not kept: occ_names full */
	OCC_CNT_BLAME_FULL, /* --listen: waits not added, occ_blame full */
	OCC_CNT_IRQ_NESTED, /* irq event: hard IRQs that came while a softirq's program
			     * was writing its slot, their time left to that softirq */
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
