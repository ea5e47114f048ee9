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
#include <tailtrace/records.h>
#include "sched/sched_stacks.h"

/* The stack cache: a thread blocking again from the same call site (the same
 * user IP, stack and frame pointers at its kernel entry, and the return
 * address above that frame) is on the same call path, so both stack ids are
 * reused, up to the site's budget of uses, then taken afresh in its place: a
 * site whose fresh stacks are the ones it had doubles its budget, from
 * SCHED_KSTACK_REUSE up to SCHED_KSTACK_REUSE_MAX; one whose stacks changed
 * goes back to SCHED_KSTACK_REUSE. A thread blocking from a new site with a
 * user stack a cached site has blocks through the same kernel path: the
 * kernel stack, the costly one to unwind, is reused, the count going on.
 * Each thread keeps its last SCHED_STACK_SITES sites: a server thread
 * alternates between several (the next request's poll, a read, a lock; a
 * PostgreSQL backend more than four in a transaction). With --user-stacks dwarf
 * a site's user stack is a copy the loader unwinds (user_stack.h), and a hit
 * is checked against the stack words that unwind read. */
#define SCHED_STACK_SITES 8
#define SCHED_KSTACK_REUSE 32
#define SCHED_KSTACK_REUSE_MAX 256

struct sched_stack_site {
	__u64 key;        /* the call site's registers, hashed; 0: empty */
	__s32 ustack_id;
	__s32 kstack_id;
	__u16 uses;       /* since the kernel stack was taken */
	__u16 epoch;      /* the stack maps' epoch of the ids (stack_epoch.h) */
	__u16 budget;     /* uses before the stacks are taken afresh */
	__u8 contested;   /* a copied stack's site whose registers another call path had:
			   * its hits are all checked (user_stack.h) */
	__u8 pad;
};

/* A copied stack's site no other call path has contested is checked at one hit
 * in SCHED_USTACK_CHECK_EVERY (and when its budget is spent): a second path at
 * its registers is caught within that many hits, then each has its site and
 * every hit of either is checked. */
#define SCHED_USTACK_CHECK_EVERY 8

/* Per traced thread (key: tid), kept while the thread lives: its open
 * off-CPU interval (t_off_ns != 0) from its switch-out, and the stack
 * cache. */
struct sched_off {
	__u64 t_off_ns;          /* 0: on CPU, no open interval */
	__u64 t_on_ns;           /* its last switch-in (0: none seen) */
	__u64 wait_addr;         /* wait reason at the switch-out (struct tt_switch) */
	__s32 syscall;
	__s32 wait_aux;
	__u32 pid;
	__u32 cpu_off;
	__u32 prev_state;
	__s32 kstack_id;
	__s32 ustack_id;
	__u8 voluntary;
	__u8 task_seen;          /* tasks map entry made */
	__u16 site_next;         /* the cache's site a new one replaces, mod SCHED_STACK_SITES */
	/* the stack cache: read and written at switch-outs only */
	struct sched_stack_site sites[SCHED_STACK_SITES];
};

/* A traced thread's switch-in that closes both its off-CPU interval and its
 * run-queue wait: the two records in one switch_rb message, one ring-buffer
 * reservation instead of one on each ring (sched_sample writes each to its
 * file). A bare struct tt_switch is the message's other size. */
struct sched_in_msg {
	struct tt_switch sw;
	struct tt_runq rq;
};

/* --debug skip=STEP (bench/bpf_programs.sh): steps of the switch program left
 * out, to measure what each costs. A run with any of them writes incomplete
 * records: for benchmarks only, but first-run, which makes a fault the kernel
 * sometimes makes (docs/probes/sched.md, "Unmatched intervals") for the tests
 * of gap records. */
enum sched_skip {
	SCHED_SKIP_BODY = 1u << 0,     /* body: return after the filter and the clock */
	SCHED_SKIP_OCC_NOTE = 1u << 1, /* occ-note: no switch noted in the occupancy rings */
	SCHED_SKIP_OCC_EMIT = 1u << 2, /* occ-emit: runq records go without their slots */
	SCHED_SKIP_SWITCH_RB = 1u << 3, /* switch-rb: no switch record reserved or sent */
	SCHED_SKIP_RUNQ_RB = 1u << 4,  /* runq-rb: no runq record sent */
	SCHED_SKIP_REASON = 1u << 5,   /* reason: no wait reason read */
	SCHED_SKIP_STACKS = 1u << 6,   /* stacks: no stack taken */
	SCHED_SKIP_RUNQ = 1u << 7,     /* runq: none of runq's switch work */
	SCHED_SKIP_AFTER_SLOTS = 1u << 8, /* after-slots: return once the threads' slots are found */
	SCHED_SKIP_OCC_SEND = 1u << 9, /* occ-send: the wanted batches are found, not sent */
	SCHED_SKIP_THROTTLE = 1u << 10, /* throttle: no throttle total read, no sched_wakeup
					 * program (throttle.bpf.h) */
	SCHED_SKIP_FIRST_RUN = 1u << 11, /* first-run: a traced thread's first switch-in
					  * ever is not seen (the typed variants' switch
					  * program takes it for an untraced thread's) */
};
/* The names of --debug skip=, bit i for name i. */
#define SCHED_SKIP_NAMES { "body", "occ-note", "occ-emit", "switch-rb", "runq-rb", "reason", \
			   "stacks", "runq", "after-slots", "occ-send", "throttle", "first-run" }

enum sched_counter {
	SCHED_CNT_LOST = 0,     /* ring buffer full: switch record dropped */
	SCHED_CNT_STACK_ERR,    /* stack map full / collision: stack not kept */
	SCHED_CNT_UNMATCHED,    /* an edge that never reached sched_switch: a switch-out
				 * with its interval still open, or a switch-in without
				 * one (each becomes a gap record) */
	SCHED_CNT_NO_SLOT,      /* a traced thread's task storage could not be read at
				 * sched_switch (tp_btf): that edge is lost */
	SCHED_CNT_UNWIND,       /* stack cache: blocked switch-outs that unwound */
	SCHED_CNT_REFRESH,      /* of those, a cached site's budget spent: taken afresh */
	SCHED_CNT_REFRESH_CHANGED, /* of those, stacks other than the cached ones */
	/* --user-stacks dwarf (user_stack.h) */
	SCHED_CNT_USTACK_COPIES,   /* user stacks copied for the loader to unwind */
	SCHED_CNT_USTACK_LOST,     /* copies dropped: ustack_rb full (no user stack) */
	SCHED_CNT_USTACK_UNCHECKED, /* cache hits before the site's copy was unwound */
	SCHED_CNT_USTACK_COLLISION, /* a key's sites whose stack words all differed: a new one */
	SCHED_CNT_NR,
};

#endif
