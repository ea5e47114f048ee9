/* SPDX-License-Identifier: MIT */
/*
 * CPU-quota throttling of a runnable interval, read from the scheduler's own
 * state (docs/containers.md, "The throttled part").
 *
 * CFS bandwidth control keeps, in every cfs_rq, a running total of the time
 * the cfs_rq's group or one of its ancestors was throttled (tg_unthrottle_up
 * adds each throttle when it ends), and the start of a throttle in progress:
 *
 *   self: throttled_clock_self_time, throttled_clock_self (rq clock ns; kernels
 *         from 6.6, counted only while the cfs_rq holds a task: ours does);
 *   pelt: throttled_clock_pelt_time, throttled_clock_pelt while throttle_count
 *         is above 0 (the PELT clock: the task clock where the CPU runs at its
 *         full capacity and frequency, as in the VMs we test on; slower on a
 *         CPU running at a lower frequency). Kernels before 6.6.
 *
 * When a thread becomes runnable (preempted at a switch-out, woken once it is
 * queued, new) its cfs_rq's total is noted together with the part of a
 * throttle in progress that is already over: base = total + (now - start).
 * At its switch-in the throttled part of the wait is total - base: every
 * throttle that ended while it waited, less what of the first lay before the
 * wait began. A throttle still in progress at the switch-in did not hold the
 * thread back (it is running), so it is not counted. The thread's cfs_rq is
 * the one of the CPU it waits on: a wakeup is noted after its migration
 * (sched_wakeup), and a waiting task moved to another CPU carries what it has
 * been throttled so far over to its group's cfs_rq there (throttle_migrate).
 *
 * The kernel that throttles per task (6.18: a thread leaves the run queue at
 * its return to user space and comes back at the unthrottle) keeps the same
 * totals, so the same two reads hold there.
 */
#ifndef TT_THROTTLE_BPF_H
#define TT_THROTTLE_BPF_H
#include <bpf/bpf_core_read.h>
#include "core/filter.bpf.h"
#include "sched/throttle.h"

/* enum tt_throttle_clock, set by the loader (features_throttle_clock). */
const volatile __u8 throttle_clock = TT_THROTTLE_NONE;

/* The kernel's own struct cfs_rq and struct rq (vmlinux.h) hold every field read
 * here; a field the running kernel lacks is never read (throttle_clock says which
 * it has), so its relocation may fail. Fields are read with TT_FIELD: plain loads
 * of tp_btf's typed pointers, bpf_probe_read_kernel under raw_tp. */

/* The throttled total of cfs_rq c, and with *base the base a wait that begins
 * now is measured from. btf: c is a typed pointer. */
static __always_inline __u64 cfs_throttle_total(bool btf, struct cfs_rq *c, __u64 *base)
{
	__u64 total = 0, start = 0, now = 0;
	struct rq *rq;

	if (!c)
		return 0;
	if (throttle_clock == TT_THROTTLE_SELF) {
		total = TT_FIELD(btf, c, throttled_clock_self_time);
		if (base && (start = TT_FIELD(btf, c, throttled_clock_self))) {
			rq = TT_FIELD(btf, c, rq);
			now = rq ? TT_FIELD(btf, rq, clock) : 0;
		}
	} else if (throttle_clock == TT_THROTTLE_PELT) {
		total = TT_FIELD(btf, c, throttled_clock_pelt_time);
		if (base && TT_FIELD(btf, c, throttle_count) > 0) {
			start = TT_FIELD(btf, c, throttled_clock_pelt);
			rq = TT_FIELD(btf, c, rq);
			now = rq ? TT_FIELD(btf, rq, clock_pelt) -
				   TT_FIELD(btf, rq, lost_idle_time) : 0;
		}
	}
	if (base)
		*base = total + (start && now > start ? now - start : 0);
	return total;
}

/* The same of t's cfs_rq. */
static __always_inline __u64 throttle_total(bool btf, struct task_struct *t, __u64 *base)
{
	return cfs_throttle_total(btf, TT_FIELD(btf, t, se.cfs_rq), base);
}

/* t becomes runnable now: note where its throttled time is measured from. A task of
 * the root group (se.depth 0, in the task's own hot line) is never throttled: nothing
 * is read for it, at the note or at its switch-in. */
static __always_inline void throttle_note(bool btf, struct task_struct *t, struct runq_start *s)
{
	if (throttle_clock == TT_THROTTLE_NONE || !t || !TT_FIELD(btf, t, se.depth))
		return;
	throttle_total(btf, t, &s->throttle_base);
	s->throttle_noted = 1;
}

/* t switches in after waiting wait_ns: the part of it spent throttled. */
static __always_inline __u64 throttle_take(bool btf, struct task_struct *t, struct runq_start *s,
					   __u64 wait_ns)
{
	__u64 total, part;

	if (throttle_clock == TT_THROTTLE_NONE || !t || !s->throttle_noted)
		return 0;
	s->throttle_noted = 0;
	total = throttle_total(btf, t, NULL);
	part = total - s->throttle_base; /* a migration's base may lie above the total */
	if ((__s64)part <= 0)
		return 0;
	return part < wait_ns ? part : wait_ns;
}

/* t, runnable, moves to dest_cpu (sched_migrate_task, before it leaves its cfs_rq):
 * a waiting task is pulled by an idle CPU, often just after its group's unthrottle.
 * The part throttled so far is carried over to its group's cfs_rq there: the base
 * is that cfs_rq's, less it. */
static __always_inline void throttle_migrate(bool btf, struct task_struct *t, int dest_cpu,
					     struct runq_start *s)
{
	struct cfs_rq *old, *dst = NULL, **per_cpu;
	struct task_group *tg;
	__u64 base, so_far;

	if (throttle_clock == TT_THROTTLE_NONE || !s->throttle_noted)
		return;
	old = TT_FIELD(btf, t, se.cfs_rq);
	so_far = cfs_throttle_total(btf, old, NULL) - s->throttle_base;
	if ((__s64)so_far < 0)
		so_far = 0;
	tg = old ? TT_FIELD(btf, old, tg) : NULL;
	per_cpu = tg ? TT_FIELD(btf, tg, cfs_rq) : NULL;
	if (!per_cpu || dest_cpu < 0 ||
	    bpf_probe_read_kernel(&dst, sizeof(dst), per_cpu + (__u32)dest_cpu) || !dst) {
		s->throttle_noted = 0; /* its wait's throttled part is not known */
		return;
	}
	cfs_throttle_total(false, dst, &base);
	s->throttle_base = base - so_far;
}

#endif
