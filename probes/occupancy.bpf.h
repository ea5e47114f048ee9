/* SPDX-License-Identifier: MIT */
/*
 * occupancy (occupancy.h): the per-CPU rings of noted switches and what a
 * traced thread's switch-in writes out. Included by runq_switch.bpf.h: the
 * program that does runq's switch work notes every switch (occ_note) and, at a
 * traced thread's switch-in, writes the slots that cover its wait
 * (occ_emit). The includer defines `aggregate` and `rb_wakeup_bytes`.
 */
#ifndef TT_OCCUPANCY_BPF_H
#define TT_OCCUPANCY_BPF_H
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include "counter.bpf.h"
#include "filter.bpf.h"
#include "occupancy.h"

#define PF_KTHREAD 0x00200000

const volatile bool occ_on = false; /* the loader sets it with the cpu event */

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
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20); /* resized by the loader (--ringbuf-mb) */
} occ_rb SEC(".maps");

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

	if (!occ_on || aggregate || !(c = bpf_map_lookup_elem(&occ_cpu, &zero)) ||
	    !(s = occ_slot_at(cpu, c->seq)))
		return;
	s->t_ns = now;
	s->cpu = cpu;
	s->tid = TT_TASK_FIELD(btf, next, pid);
	s->pid = TT_TASK_FIELD(btf, next, tgid);
	s->flags = (TT_TASK_FIELD(btf, next, flags) & PF_KTHREAD ? TT_OCC_KTHREAD : 0) |
		   (traced ? TT_OCC_TRACED : 0);
	s->cgid = BPF_CORE_READ(next, cgroups, dfl_cgrp, kn, id);
	if (btf)
		__builtin_memcpy(s->comm, next->comm, sizeof(s->comm));
	else
		bpf_probe_read_kernel(s->comm, sizeof(s->comm), &next->comm);
	c->seq++;
}

static __always_inline void occ_write(struct occ_slot *s, __u32 flags)
{
	struct occ_slot *r = bpf_ringbuf_reserve(&occ_rb, sizeof(*r), 0);

	if (!r) {
		tt_count(&occ_counters, OCC_CNT_LOST);
		return;
	}
	__builtin_memcpy(r, s, sizeof(*r));
	r->flags |= flags;
	bpf_ringbuf_submit(r, tt_rb_flags(&occ_rb, rb_wakeup_bytes));
}

struct occ_walk {
	__u32 cpu;
	__u32 trunc;   /* TT_OCC_TRUNC until the walk finds where to start */
	bool covered;
	__u64 seq, from, stop;
};

/* bpf_loop step: one slot further back, until one at or before `stop`. */
static long occ_walk_back(__u32 i, void *arg)
{
	struct occ_walk *w = arg;
	struct occ_slot *s;

	if (w->from == 0 || w->from + OCC_RING == w->seq)
		return 1; /* the first switch noted, or the ring's oldest slot */
	s = occ_slot_at(w->cpu, w->from - 1);
	if (!s)
		return 1;
	if (s->t_ns <= w->stop) {
		if (!w->covered) /* the anchor: it held the CPU at t0 */
			w->from--;
		w->trunc = 0;
		return 1;
	}
	w->from--;
	return 0;
}

/* bpf_loop step: write slot from + i. */
static long occ_write_one(__u32 i, void *arg)
{
	struct occ_walk *w = arg;
	struct occ_slot *s;

	if (w->from + i >= w->seq || !(s = occ_slot_at(w->cpu, w->from + i)))
		return 1;
	occ_write(s, i == 0 ? w->trunc : 0);
	return 0;
}

/* A traced thread ran at `now` on this CPU after waiting since t0: write the
 * slots of this CPU from the one that held it at t0 (or from the end of what
 * is already written, if that covers t0) up to now. */
static __always_inline void occ_emit(__u64 t0, __u64 now)
{
	__u32 zero = 0;
	struct occ_walk w = { .cpu = bpf_get_smp_processor_id(), .trunc = TT_OCC_TRUNC };
	struct occ_cpu *c;

	if (!occ_on || !(c = bpf_map_lookup_elem(&occ_cpu, &zero)))
		return;
	w.seq = w.from = c->seq;
	w.covered = c->cov_hi && c->cov_lo <= t0 && t0 <= c->cov_hi;
	w.stop = w.covered ? c->cov_hi : t0; /* write what is after it (or holds it) */
	bpf_loop(OCC_RING, occ_walk_back, &w, 0);
	if (w.from == 0)
		w.trunc = 0; /* back to the first switch noted: nothing was lost */
	if (w.trunc)
		tt_count(&occ_counters, OCC_CNT_TRUNC);
	bpf_loop(OCC_RING, occ_write_one, &w, 0);
	if (!w.covered)
		c->cov_lo = t0;
	c->cov_hi = now;
}

#endif
