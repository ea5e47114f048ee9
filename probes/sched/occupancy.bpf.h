/* SPDX-License-Identifier: MIT */
/*
 * occupancy (occupancy.h): the per-CPU rings of noted switches and what a
 * traced thread's switch-in sends. Included by runq_switch.bpf.h: the program
 * that does runq's switch work notes every switch (occ_note) and, when it
 * writes a traced thread's runnable interval, sends the batches of slots that
 * cover it (occ_want). The includer defines `aggregate`, `skip_steps` (sched.h)
 * and occ_batch_out, which sends one batch.
 */
#ifndef TT_OCCUPANCY_BPF_H
#define TT_OCCUPANCY_BPF_H
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include "core/counter.bpf.h"
#include "core/filter.bpf.h"
#include "sched/occupancy.h"
#include "sched/sched.h"
#include "sched/sched_map_full.bpf.h"

#define PF_KTHREAD 0x00200000

/* A loop over ring slots, fn(i, ctx) for i = 0.. until it returns non-zero
 * (--listen's split of a wait, occ_blame_wait): bpf_loop (5.17+); in
 * sched_noloop.bpf.o, built with TT_NO_BPF_LOOP for the kernels without it
 * (the loader picks the object), a bounded loop, which the verifier walks
 * iteration by iteration (5.3+). A program that so much as names a bpf_loop
 * callback does not load on those kernels, so the choice is made when the
 * object is built, not with a flag. */
#ifdef TT_NO_BPF_LOOP
/* the verifier walks each iteration: at most this many slots a loop (a wait
 * whose CPU switched more often has its start counted unknown: OCC_CNT_TRUNC) */
#define OCC_LOOP_MAX 48
#define occ_loop(n, fn, ctx)                                                    \
	do {                                                                    \
		_Pragma("clang loop unroll(disable)")                           \
		for (__u32 i_ = 0; i_ < (n); i_++)                              \
			if (fn(i_, ctx))                                        \
				break;                                          \
	} while (0)
#else
#define OCC_LOOP_MAX OCC_RING
#define occ_loop(n, fn, ctx) bpf_loop(n, fn, ctx, 0)
#endif

const volatile bool occ_on = false; /* the loader sets it with the cpu event */
const volatile bool occ_irq = false; /* and this with the irq event */

/* This CPU's ring and its state (occupancy.h). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct occ_cpu);
} occ_cpu SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct occ_name);
} occ_names SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, OCC_CNT_NR);
	__type(key, __u32);
	__type(value, __u64);
} occ_counters SEC(".maps");

static __always_inline struct occ_cpu *occ_cpu_get(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&occ_cpu, &zero);
}

static __always_inline struct runq_msg *occ_batch(struct occ_cpu *c, __u64 g)
{
	return &c->batch[g & (OCC_BATCHES - 1)];
}

/* Slot seq of this CPU's ring. */
static __always_inline struct occ_rec *occ_slot_at(struct occ_cpu *c, __u64 seq)
{
	return &occ_batch(c, seq / OCC_BATCH)->occ[seq & (OCC_BATCH - 1)];
}

/* The oldest slot the ring still holds when seq were noted: the first of the
 * oldest whole batch (the batch still filling took the oldest one's place). */
static __always_inline __u64 occ_oldest(__u64 seq)
{
	__u64 g = (seq + OCC_BATCH - 1) / OCC_BATCH;

	return g > OCC_BATCHES ? (g - OCC_BATCHES) * OCC_BATCH : 0;
}

/* One batch to user space (runq_switch.bpf.h: its ring buffer). */
static __always_inline void occ_batch_out(struct runq_msg *m);

/* Batch g of this CPU to user space, unless it went out already. */
static __always_inline void occ_send(struct occ_cpu *c, __u64 g)
{
	__u32 bit = 1u << (g & (OCC_BATCHES - 1));

	if ((c->sent & bit) || (skip_steps & SCHED_SKIP_OCC_SEND))
		return;
	c->sent |= bit;
	occ_batch_out(occ_batch(c, g));
}

/* The slot the next note goes to; a batch's first starts it anew. */
static __always_inline struct occ_rec *occ_next_slot(struct occ_cpu *c, __u32 cpu)
{
	__u64 g = c->seq / OCC_BATCH;
	struct runq_msg *m = occ_batch(c, g);

	c->writing = 1;
	asm volatile("" ::: "memory"); /* set before the slot is touched */
	if (!(c->seq & (OCC_BATCH - 1))) {
		c->sent &= ~(1u << (g & (OCC_BATCHES - 1)));
		m->r.cpu = cpu;
		m->kind = RUNQ_MSG_OCC;
		m->nocc = OCC_BATCH;
	}
	return &m->occ[c->seq & (OCC_BATCH - 1)];
}

/* The slot occ_next_slot gave is written: a batch it fills goes out if a wait
 * wants it. */
static __always_inline void occ_commit(struct occ_cpu *c)
{
	__u64 g = c->seq / OCC_BATCH;

	if ((c->seq & (OCC_BATCH - 1)) == OCC_BATCH - 1 && c->want == g + 1)
		occ_send(c, g);
	c->seq++;
	asm volatile("" ::: "memory"); /* cleared once the slot is taken */
	c->writing = 0;
}

/* The task's name and cgroup, read when its switch is first noted (records
 * only: --listen keeps no names). */
static __always_inline void occ_name(struct occ_cpu *c, struct task_struct *t, __u32 tid,
				     __u32 pid, __u32 flags)
{
	__u64 pair = (__u64)tid << 32 | pid;
	__u64 *k = &c->known[tid & (OCC_KNOWN - 1)];
	struct occ_name *n, v = {};

	if (aggregate || !tid || *k == pair)
		return;
	*k = pair;
	n = bpf_map_lookup_elem(&occ_names, &tid);
	if (n && n->pid == pid)
		return;
	v.pid = pid;
	v.flags = flags & (TT_OCC_KTHREAD | TT_OCC_TRACED);
	v.reused = n != NULL;
	v.cgid = BPF_CORE_READ(t, cgroups, dfl_cgrp, kn, id);
	bpf_probe_read_kernel(v.comm, sizeof(v.comm), &t->comm);
	if (tt_count_full(SCHED_MAP_OCC_NAMES, bpf_map_update_elem(&occ_names, &tid, &v, BPF_ANY)))
		tt_count(&occ_counters, OCC_CNT_NAMES_FULL);
}

/* A switch on this CPU at `now` to `next` (any task): note it in the ring. */
static __always_inline void occ_note(bool btf, struct task_struct *next, __u64 now, bool traced)
{
	struct occ_cpu *c;
	struct occ_rec *s;

	if (!occ_on || (skip_steps & SCHED_SKIP_OCC_NOTE) || !(c = occ_cpu_get()))
		return;
	s = occ_next_slot(c, bpf_get_smp_processor_id());
	s->t_ns = now;
	s->tid = TT_FIELD(btf, next, pid);
	s->pid = TT_FIELD(btf, next, tgid);
	s->flags = (TT_FIELD(btf, next, flags) & PF_KTHREAD ? TT_OCC_KTHREAD : 0) |
		   (traced ? TT_OCC_TRACED : 0);
	occ_name(c, next, s->tid, s->pid, s->flags);
	if (occ_irq) {
		c->cur = *s;
		c->soft = 0;
	}
	occ_commit(c);
}

/* ---- the irq event: interrupts in the same rings ------------------------- */

/* This CPU's ring state when the irq event is on, else NULL. */
static __always_inline struct occ_cpu *occ_irq_cpu(void)
{
	return occ_irq ? occ_cpu_get() : NULL;
}

/* Note an interrupt (flags: TT_OCC_HARDIRQ or TT_OCC_SOFTIRQ with its number),
 * or, with flags 0, the task it interrupted, again. */
static __always_inline void occ_note_irq(struct occ_cpu *c, __u32 flags)
{
	struct occ_rec *s;

	if (!flags && !c->cur.t_ns) /* no switch noted on this CPU yet: what runs is not known */
		return;
	/* A hard IRQ that interrupted a softirq's program between its slot and its commit (a
	 * switch's program runs with interrupts off): its entry and exit would write the
	 * slot that program is writing. Both are left out, counted; the interrupt's time
	 * is the softirq's. */
	if (c->writing) {
		tt_count(&occ_counters, OCC_CNT_IRQ_NESTED);
		return;
	}
	s = occ_next_slot(c, bpf_get_smp_processor_id());
	if (flags) {
		s->tid = 0;
		s->pid = 0;
		s->flags = flags;
	} else {
		*s = c->cur;
	}
	s->t_ns = bpf_ktime_get_ns();
	occ_commit(c);
}

static __always_inline __u32 occ_irq_flags(__u32 kind, __u32 num)
{
	return kind | (num & 0xffff) << TT_OCC_IRQ_SHIFT;
}

static __always_inline void occ_hardirq_entry(__u32 num)
{
	struct occ_cpu *c = occ_irq_cpu();

	if (c)
		occ_note_irq(c, occ_irq_flags(TT_OCC_HARDIRQ, num));
}

/* Back to the softirq it interrupted, or to the task. */
static __always_inline void occ_hardirq_exit(void)
{
	struct occ_cpu *c = occ_irq_cpu();

	if (c)
		occ_note_irq(c, c->soft > OCC_SOFT_OWN ? c->soft : 0);
}

/* A softirq: noted unless the current task's own syscall runs it (then its
 * time is that task's, as the waker context says: waker_ctx.bpf.h). */
static __always_inline void occ_softirq_entry(__u32 vec, bool own)
{
	struct occ_cpu *c = occ_irq_cpu();

	if (!c)
		return;
	c->soft = own ? OCC_SOFT_OWN : occ_irq_flags(TT_OCC_SOFTIRQ, vec);
	if (!own)
		occ_note_irq(c, c->soft);
}

static __always_inline void occ_softirq_exit(void)
{
	struct occ_cpu *c = occ_irq_cpu();
	bool own;

	if (!c)
		return;
	own = c->soft == OCC_SOFT_OWN;
	c->soft = 0;
	if (!own)
		occ_note_irq(c, 0);
}

/* ---- --listen: waits split in the kernel (occupancy.h, occ_blame) ---------- */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, OCC_BLAME_ENTRIES); /* 1 without --listen (the loader) */
	__type(key, struct occ_blame_key);
	__type(value, __u64);
} occ_blame SEC(".maps");

struct occ_blame_ctx {
	__u64 t0, end, seq, oldest; /* the wait [t0, end) still to split, from slot seq - 1 back */
	__u32 pid, tid;
	bool found;                 /* reached the slot that held the CPU at t0 */
	struct occ_blame_key k;     /* the run of segments of one key not added yet */
	__u64 ns;
};

static __always_inline void occ_blame_add_map(const struct occ_blame_key *k, __u64 ns)
{
	__u64 *v = bpf_map_lookup_elem(&occ_blame, k);

	if (v) {
		__sync_fetch_and_add(v, ns);
		return;
	}
	if (!tt_count_full(SCHED_MAP_OCC_BLAME, bpf_map_update_elem(&occ_blame, k, &ns, BPF_NOEXIST)))
		return;
	v = bpf_map_lookup_elem(&occ_blame, k); /* another CPU made it meanwhile? */
	if (v)
		__sync_fetch_and_add(v, ns);
	else
		tt_count(&occ_counters, OCC_CNT_BLAME_FULL);
}

/* Consecutive segments of one key (a CPU shared by siblings) add up before
 * they go to the map. */
static __always_inline void occ_blame_add(struct occ_blame_ctx *w, __u32 cls, __u32 occ, __u64 ns)
{
	if (w->ns && w->k.cls == cls && w->k.occ == occ) {
		w->ns += ns;
		return;
	}
	if (w->ns)
		occ_blame_add_map(&w->k, w->ns);
	w->k.cls = cls;
	w->k.occ = occ;
	w->ns = ns;
}

/* The class of a slot's occupant for a thread of process pid. */
static __always_inline __u32 occ_class_of(const struct occ_rec *s, __u32 pid, __u32 *occ)
{
	*occ = s->pid;
	if (s->flags & (TT_OCC_HARDIRQ | TT_OCC_SOFTIRQ)) {
		*occ = s->flags & ~(TT_OCC_KTHREAD | TT_OCC_TRUNC | TT_OCC_TRACED);
		return OCC_CLS_IRQ;
	}
	if (!s->tid) {
		*occ = 0;
		return OCC_CLS_IDLE;
	}
	if (s->flags & TT_OCC_KTHREAD)
		return OCC_CLS_KERNEL;
	if (s->pid == pid)
		return OCC_CLS_SIBLING;
	if ((s->flags & TT_OCC_TRACED) && tt_filter)
		return OCC_CLS_PEER;
	return OCC_CLS_OTHER;
}

/* occ_loop step: slot seq - 1 - i held the CPU from its time to w->end. */
static long occ_blame_one(__u32 i, void *arg)
{
	struct occ_blame_ctx *w = arg;
	struct occ_cpu *c = occ_cpu_get();
	struct occ_rec *s;
	__u64 from;
	__u32 cls, occ;

	if (w->seq < w->oldest + i + 1 || !c)
		return 1;
	s = occ_slot_at(c, w->seq - 1 - i);
	if (i == 0 && s->tid == w->tid) { /* the thread's own switch-in: the wait ends there */
		w->end = s->t_ns < w->end ? s->t_ns : w->end;
		return 0;
	}
	from = s->t_ns > w->t0 ? s->t_ns : w->t0;
	if (w->end > from) {
		cls = occ_class_of(s, w->k.pid, &occ);
		occ_blame_add(w, cls, occ, w->end - from);
		w->end = from;
	}
	if (s->t_ns <= w->t0) {
		w->found = true;
		return 1;
	}
	return 0;
}

/* Thread tid of process pid ran on this CPU at `now` after waiting since t0:
 * add its wait to occ_blame, split by what the ring says held the CPU. A
 * global function: the verifier checks it once, not inside every caller. */
__noinline int occ_blame_wait(__u32 tid, __u32 pid, __u64 t0, __u64 now)
{
	struct occ_cpu *c = occ_cpu_get();
	struct occ_blame_ctx w = { .t0 = t0, .end = now, .tid = tid };

	if (!occ_on || !c || now <= t0)
		return 0;
	w.k.pid = pid;
	w.seq = c->seq;
	w.oldest = occ_oldest(w.seq);
	if (w.seq > w.oldest + OCC_LOOP_MAX)
		w.oldest = w.seq - OCC_LOOP_MAX;
	occ_loop(OCC_LOOP_MAX, occ_blame_one, &w);
	if (!w.found && w.end > t0) {
		occ_blame_add(&w, OCC_CLS_UNKNOWN, 0, w.end - t0);
		tt_count(&occ_counters, OCC_CNT_TRUNC);
	}
	if (w.ns)
		occ_blame_add_map(&w.k, w.ns);
	return 0;
}

/* A traced thread ran on this CPU at its last noted switch after waiting
 * since t0: the batches from the one that holds the slot that held the CPU at
 * t0 go out, the whole ones now (each once), the one still filling when it is
 * full. Found walking back a batch at a time from the thread's own switch-in
 * (a batch whose first slot is at or before t0 holds that slot): mostly the
 * wait began in the same batch or the one before. A global function: the
 * verifier checks its loop once, not at every caller (inlined, the switch
 * program passed 6.12's limit of a million instructions checked: E2BIG). */
__noinline int occ_want(__u64 t0)
{
	struct occ_cpu *c = occ_cpu_get();
	__u64 seq, full, first, g;

	if (!c || !c->seq)
		return 0;
	seq = c->seq;
	full = seq / OCC_BATCH;
	first = occ_oldest(seq) / OCC_BATCH;
	if (seq & (OCC_BATCH - 1))
		c->want = full + 1;
	g = (seq - 1) / OCC_BATCH;
	_Pragma("clang loop unroll(disable)")
	for (int i = 0; i < OCC_BATCHES; i++, g--) {
		struct runq_msg *m = occ_batch(c, g);
		bool anchor = m->occ[0].t_ns <= t0;

		if (!anchor && g == first && g > 0) { /* its start went out of the ring */
			if (!(c->sent & 1u << (g & (OCC_BATCHES - 1))))
				m->occ[0].flags |= TT_OCC_TRUNC;
			tt_count(&occ_counters, OCC_CNT_TRUNC);
		}
		if (g < full)
			occ_send(c, g);
		if (anchor || g <= first)
			break;
	}
	return 0;
}

#endif
