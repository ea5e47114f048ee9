/* SPDX-License-Identifier: MIT */
/*
 * occupancy (occupancy.h): the per-CPU rings of noted switches and what a
 * traced thread's switch-in writes out. Included by runq_switch.bpf.h: the
 * program that does runq's switch work notes every switch (occ_note) and, when
 * it writes a traced thread's runnable interval, appends the slots that cover
 * it to the same ring-buffer message (occ_emit). The includer defines
 * `aggregate`, `skip_steps` (sched.h) and occ_append_one, which sends full
 * messages.
 */
#ifndef TT_OCCUPANCY_BPF_H
#define TT_OCCUPANCY_BPF_H
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include "core/counter.bpf.h"
#include "core/filter.bpf.h"
#include "sched/occupancy.h"
#include "sched/sched.h"

#define PF_KTHREAD 0x00200000

/* A loop over ring slots, fn(i, ctx) for i = 0.. until it returns non-zero:
 * bpf_loop (5.17+); in sched_noloop.bpf.o, built with TT_NO_BPF_LOOP for the
 * kernels without it (the loader picks the object), a bounded loop, which the
 * verifier walks iteration by iteration (5.3+). A program that so much as
 * names a bpf_loop callback does not load on those kernels, so the choice is
 * made when the object is built, not with a flag. */
#ifdef TT_NO_BPF_LOOP
/* the verifier walks each iteration: at most this many slots a loop (a wait
 * whose CPU switched more often keeps its last ones, the first marked
 * truncated and counted: OCC_CNT_TRUNC) */
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

/* OCC_RING slots per CPU, CPU c's at c * OCC_RING (sized by the loader). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, OCC_RING);
	__type(key, __u32);
	__type(value, struct occ_slot);
} occ_ring SEC(".maps");

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

/* Per CPU, the (tid, pid) pairs named lately, by tid: most slots need no
 * lookup in occ_names. */
#define OCC_KNOWN 256
struct occ_known {
	__u64 pair[OCC_KNOWN];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct occ_known);
} occ_known SEC(".maps");

/* Per-CPU scratch where a message is put together before it goes out. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct runq_msg);
} runq_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, OCC_CNT_NR);
	__type(key, __u32);
	__type(value, __u64);
} occ_counters SEC(".maps");

static __always_inline struct occ_slot *occ_slot_at(__u32 cpu, __u64 seq)
{
	__u32 idx = cpu * OCC_RING + (__u32)(seq & (OCC_RING - 1));

	return bpf_map_lookup_elem(&occ_ring, &idx);
}

/* A switch on this CPU at `now` to `next` (any task): note it in the ring. */
static __always_inline void occ_note(bool btf, struct task_struct *next, __u64 now, bool traced)
{
	__u32 zero = 0, cpu = bpf_get_smp_processor_id();
	struct occ_cpu *c;
	struct occ_slot *s;

	if (!occ_on || (skip_steps & SCHED_SKIP_OCC_NOTE) ||
	    !(c = bpf_map_lookup_elem(&occ_cpu, &zero)) ||
	    !(s = occ_slot_at(cpu, c->seq)))
		return;
	s->t_ns = now;
	s->task = (__u64)next;
	s->tid = TT_TASK_FIELD(btf, next, pid);
	s->pid = TT_TASK_FIELD(btf, next, tgid);
	s->flags = (TT_TASK_FIELD(btf, next, flags) & PF_KTHREAD ? TT_OCC_KTHREAD : 0) |
		   (traced ? TT_OCC_TRACED : 0);
	c->seq++;
	if (occ_irq) {
		c->cur = *s;
		c->soft = 0;
	}
}

/* ---- the irq event: interrupts in the same rings ------------------------- */

/* This CPU's ring state when the irq event is on, else NULL. */
static __always_inline struct occ_cpu *occ_irq_cpu(void)
{
	__u32 zero = 0;

	return occ_irq ? bpf_map_lookup_elem(&occ_cpu, &zero) : NULL;
}

/* Note an interrupt (flags: TT_OCC_HARDIRQ or TT_OCC_SOFTIRQ with its number),
 * or, with flags 0, the task it interrupted, again. */
static __always_inline void occ_note_irq(struct occ_cpu *c, __u32 flags)
{
	struct occ_slot *s = occ_slot_at(bpf_get_smp_processor_id(), c->seq);

	if (!s)
		return;
	if (flags) {
		s->t_ns = bpf_ktime_get_ns();
		s->task = 0;
		s->tid = 0;
		s->pid = 0;
		s->flags = flags;
	} else if (c->cur.t_ns) {
		*s = c->cur;
		s->t_ns = bpf_ktime_get_ns();
	} else { /* no switch noted on this CPU yet: what is running is not known */
		return;
	}
	c->seq++;
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

/* The task's name and cgroup, read the first time it is written. */
static __always_inline void occ_name(const struct occ_slot *s, struct occ_known *known)
{
	__u64 pair = (__u64)s->tid << 32 | s->pid;
	__u64 *k = &known->pair[s->tid & (OCC_KNOWN - 1)];
	struct task_struct *t = (struct task_struct *)s->task;
	struct occ_name *n, v = {};

	if (!s->tid || *k == pair)
		return;
	*k = pair;
	n = bpf_map_lookup_elem(&occ_names, &s->tid);
	if (n && n->pid == s->pid)
		return;
	v.pid = s->pid;
	v.flags = s->flags & (TT_OCC_KTHREAD | TT_OCC_TRACED);
	v.reused = n != NULL;
	v.cgid = BPF_CORE_READ(t, cgroups, dfl_cgrp, kn, id);
	bpf_probe_read_kernel(v.comm, sizeof(v.comm), &t->comm);
	if (bpf_map_update_elem(&occ_names, &s->tid, &v, BPF_ANY))
		tt_count(&occ_counters, OCC_CNT_NAMES_FULL);
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
	__u32 cpu, pid, tid;
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
	if (!bpf_map_update_elem(&occ_blame, k, &ns, BPF_NOEXIST))
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
static __always_inline __u32 occ_class_of(const struct occ_slot *s, __u32 pid, __u32 *occ)
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
	struct occ_slot *s;
	__u64 from;
	__u32 cls, occ;

	if (w->seq < w->oldest + i + 1 || !(s = occ_slot_at(w->cpu, w->seq - 1 - i)))
		return 1;
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
	__u32 zero = 0;
	struct occ_cpu *c = bpf_map_lookup_elem(&occ_cpu, &zero);
	struct occ_blame_ctx w = { .t0 = t0, .end = now, .tid = tid,
				   .cpu = bpf_get_smp_processor_id() };

	if (!occ_on || !c || now <= t0)
		return 0;
	w.k.pid = pid;
	w.seq = c->seq;
	w.oldest = w.seq > OCC_LOOP_MAX ? w.seq - OCC_LOOP_MAX : 0;
	occ_loop(OCC_LOOP_MAX, occ_blame_one, &w);
	if (!w.found && w.end > t0) {
		occ_blame_add(&w, OCC_CLS_UNKNOWN, 0, w.end - t0);
		tt_count(&occ_counters, OCC_CNT_TRUNC);
	}
	if (w.ns)
		occ_blame_add_map(&w.k, w.ns);
	return 0;
}

struct occ_emit_ctx {
	struct runq_msg *m;
	struct occ_known *known;
	__u64 from, to; /* append slots [from, to) */
	__u32 cpu;
	__u32 trunc;    /* TT_OCC_TRUNC on the first slot: its predecessor was lost */
};

/* occ_loop step (defined with the ring buffer, runq_switch.bpf.h): slot from + i. */
static long occ_append_one(__u32 i, void *arg);

/* Append slots [from, to) to m; returns the first slot appended (later than from
 * when more than OCC_LOOP_MAX were asked). */
static __always_inline __u64 occ_append(struct runq_msg *m, struct occ_known *known, __u32 cpu,
					__u64 from, __u64 to, __u32 trunc)
{
	struct occ_emit_ctx w = { .m = m, .known = known, .cpu = cpu, .trunc = trunc, .from = from,
				  .to = to };

	if (to > from + OCC_LOOP_MAX) { /* the last slots, the first marked: its start is lost */
		w.from = to - OCC_LOOP_MAX;
		w.trunc = TT_OCC_TRUNC;
		tt_count(&occ_counters, OCC_CNT_TRUNC);
	}
	if (from < to)
		occ_loop(OCC_LOOP_MAX, occ_append_one, &w);
	return w.from;
}

/* The slot that held the CPU at t0: the last one noted at or before t0 among
 * the ring's [oldest, seq) (slots are in time order), or oldest - 1 when even
 * the oldest is after t0 (that one's predecessor is lost, or there is none). */
static __always_inline __u64 occ_anchor(__u32 cpu, __u64 oldest, __u64 seq, __u64 t0)
{
	__u64 lo = oldest, hi = seq; /* invariant: slots < lo are <= t0, slots >= hi are > t0 */

	/* mostly the wait began a few switches ago: look there first */
	for (int i = 1; i <= 4 && seq >= oldest + i; i++) {
		struct occ_slot *s = occ_slot_at(cpu, seq - i);

		if (!s)
			break;
		if (s->t_ns <= t0)
			return seq - i;
		hi = seq - i;
	}
	for (int i = 0; i < 12 && lo < hi; i++) { /* log2(OCC_RING) + 3 */
		__u64 mid = lo + (hi - lo) / 2;
		struct occ_slot *s = occ_slot_at(cpu, mid);

		if (!s)
			break;
		if (s->t_ns <= t0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo - 1; /* may be oldest - 1 */
}

/* m holds the runq record of a traced thread that ran at `now` on this CPU
 * after waiting since t0: append this CPU's slots from the one that held it at
 * t0 up to now, except those already written: the written slots stay one
 * contiguous range [lo_seq, hi_seq), so each switch is written about once
 * however many waits overlap it. */
static __always_inline void occ_emit(struct runq_msg *m, __u64 t0)
{
	__u32 zero = 0, cpu = bpf_get_smp_processor_id(), trunc = 0;
	struct occ_cpu *c = bpf_map_lookup_elem(&occ_cpu, &zero);
	struct occ_known *known = bpf_map_lookup_elem(&occ_known, &zero);
	__u64 seq, oldest, a;

	if (!c || !known)
		return;
	seq = c->seq;
	oldest = seq > OCC_RING ? seq - OCC_RING : 0;
	a = occ_anchor(cpu, oldest, seq, t0);
	if (a + 1 == oldest) { /* nothing noted at or before t0 is left */
		a = oldest;
		if (oldest > 0) {
			trunc = TT_OCC_TRUNC;
			tt_count(&occ_counters, OCC_CNT_TRUNC);
		}
	}
	if (c->hi_seq <= a || c->hi_seq < oldest) { /* nothing of it written yet */
		c->lo_seq = occ_append(m, known, cpu, a, seq, trunc);
	} else {
		__u64 lo = c->lo_seq, from;

		if (a < c->lo_seq) /* an older wait: its start too */
			lo = occ_append(m, known, cpu, a, c->lo_seq, trunc);
		from = occ_append(m, known, cpu, c->hi_seq, seq, 0);
		if (from > c->hi_seq) /* cut short (no bpf_loop): the written range restarts */
			lo = from;
		c->lo_seq = lo;
	}
	c->hi_seq = seq;
}

#endif
