/* SPDX-License-Identifier: MIT */
/*
 * Which tasks are traced: one inline check shared by every probe object
 * (scheduler tracepoints and the uprobe modules). The loader sets the
 * const volatile settings before load (FILTER_CONFIGURE in filter.h), so the
 * verifier prunes the modes that are off.
 *
 * Threads follow automatically: they share the target's tgid (and, for --comm,
 * the group leader's comm). A target's descendant processes follow too
 * (TT_FILTER_TREE): a task is traced when a target is among its first
 * TT_TREE_DEPTH ancestors (real_parent), read where the check runs, so a
 * worker forked at any time is traced from its first instruction and nothing
 * has to be told of the fork. The tracer itself is never traced.
 */
#ifndef TT_FILTER_BPF_H
#define TT_FILTER_BPF_H
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include "core/filter.h"

const volatile __u32 tt_filter = 0;
const volatile __u32 tt_targ_tgids[TT_TARGETS_MAX] = {}; /* --pid, or the -- CMD child; 0 = unused */
const volatile __u32 tt_self_tgid = 0;
const volatile __u32 tt_also_tgid[TT_ALSO_MAX] = {}; /* --also-pid; 0 = unused */
const volatile __u64 tt_targ_cgid = 0;
const volatile char tt_targ_comm[TT_COMM_LEN] = {};

static __always_inline bool tt_comm_match(const char *comm)
{
	for (int i = 0; i < TT_COMM_LEN; i++) {
		if (comm[i] != tt_targ_comm[i])
			return false;
		if (!comm[i])
			break;
	}
	return true;
}

/* One of the --also-pid processes (e.g. the server a workload talks to). */
static __always_inline bool tt_also_match(__u32 tgid)
{
	for (int i = 0; i < TT_ALSO_MAX; i++) {
		if (!tt_also_tgid[i])
			return false;
		if (tgid == tt_also_tgid[i])
			return true;
	}
	return false;
}

/* One of the targets (the --pid list, or the -- CMD child). */
static __always_inline bool tt_targ_match(__u32 tgid)
{
	for (int i = 0; i < TT_TARGETS_MAX; i++) {
		if (!tt_targ_tgids[i])
			return false;
		if (tgid == tt_targ_tgids[i])
			return true;
	}
	return false;
}

/* Is a target among t's first TT_TREE_DEPTH ancestors? The walk stops at init
 * (tgid 1) and the idle task (0), where every process's chain ends. A trusted
 * pointer (tp_btf) is walked with plain loads. */
static __always_inline bool tt_descends(bool btf, struct task_struct *t)
{
	struct task_struct *p = t;

	for (int i = 0; i < TT_TREE_DEPTH; i++) {
		__u32 tgid;

		p = btf ? p->real_parent : BPF_CORE_READ(p, real_parent);
		if (!p)
			return false;
		tgid = btf ? p->tgid : BPF_CORE_READ(p, tgid);
		if (tgid <= 1)
			return false;
		if (tt_targ_match(tgid))
			return true;
	}
	return false;
}

/* Is the group leader's comm the target's? The kernel keeps comm zero-padded
 * (strscpy_pad), as the loader does tt_targ_comm: two 8-byte compares. A
 * trusted task pointer (tp_btf) is read with plain loads; otherwise the
 * string is copied with a helper. */
static __always_inline bool tt_comm_traced(bool btf, struct task_struct *t)
{
	const volatile __u64 *want = (const volatile __u64 *)tt_targ_comm;
	char comm[TT_COMM_LEN];

	if (btf) {
		const __u64 *c = (const __u64 *)t->group_leader->comm;

		return c[0] == want[0] && c[1] == want[1];
	}
	BPF_CORE_READ_STR_INTO(&comm, t, group_leader, comm);
	return tt_comm_match(comm);
}

/* The task's cgroup v2 id. A trusted pointer (tp_btf) is walked with plain
 * loads: four probe-read helper calls per task cost ~0.1 us at every switch
 * of the machine under --cgroup. */
static __always_inline __u64 tt_task_cgroup_id(bool btf, struct task_struct *t)
{
	if (btf)
		return t->cgroups->dfl_cgrp->kn->id;
	return BPF_CORE_READ(t, cgroups, dfl_cgrp, kn, id);
}

/* tgid and thread id already known (cheap path for the current task); btf: t
 * is a trusted pointer (a compile-time constant, as in TT_FIELD). */
static __always_inline bool tt_task_traced_ids_v(bool btf, struct task_struct *t, __u32 tgid,
						 __u32 tid)
{
	if (!tid || tgid == tt_self_tgid)
		return false; /* idle task, or tailtrace itself */
	if ((tt_filter & TT_FILTER_TGID) && !tt_targ_match(tgid) && !tt_also_match(tgid) &&
	    !((tt_filter & TT_FILTER_TREE) && tt_descends(btf, t)))
		return false;
	if ((tt_filter & TT_FILTER_COMM) && !tt_comm_traced(btf, t))
		return false;
	if ((tt_filter & TT_FILTER_CGROUP) && tt_task_cgroup_id(btf, t) != tt_targ_cgid)
		return false;
	return true;
}

static __always_inline bool tt_task_traced_ids(struct task_struct *t, __u32 tgid, __u32 tid)
{
	return tt_task_traced_ids_v(false, t, tgid, tid);
}

static __always_inline bool tt_task_traced(struct task_struct *t)
{
	return tt_task_traced_ids(t, BPF_CORE_READ(t, tgid), BPF_CORE_READ(t, pid));
}

/* tp_btf programs get trusted pointers (tasks, sockets, skbs): plain (CO-RE
 * relocated) loads, no probe-read helper calls on the hot path. btf must be a
 * compile-time constant so the other branch disappears from raw_tp programs. */
#define TT_FIELD(btf, p, f) ((btf) ? (p)->f : BPF_CORE_READ(p, f))

static __always_inline bool tt_task_traced_v(bool btf, struct task_struct *t)
{
	return tt_task_traced_ids_v(btf, t, TT_FIELD(btf, t, tgid), TT_FIELD(btf, t, pid));
}

static __always_inline bool tt_current_traced(void)
{
	__u64 id = bpf_get_current_pid_tgid();

	return tt_task_traced_ids((struct task_struct *)bpf_get_current_task(),
				  (__u32)(id >> 32), (__u32)id);
}

/* Ring buffer wake-up policy: wake the consumer only when the data waiting
 * crosses a multiple of wakeup_bytes with this record (size bytes, counted in
 * what waits), so a busy target does not cost one wake-up per event; the
 * consumer also polls on a timer. Not "whenever a batch waits": a consumer
 * that lags (a loaded machine) would then be woken at every record, each an
 * irq_work and, in a VM, a self-IPI: the programs took 3-5 us a run instead
 * of 0.5-0.8. A crossing two CPUs both miss is caught at the next multiple.
 * wakeup_bytes is a power of two (an eighth of a ring, probe_ringbuf_bytes):
 * a crossing changes a bit at or above it, so no division per record. */
static __always_inline __u64 tt_rb_flags(void *rb, __u64 wakeup_bytes, __u64 size)
{
	__u64 avail = bpf_ringbuf_query(rb, BPF_RB_AVAIL_DATA);

	return avail >= size && (avail ^ (avail - size)) >= wakeup_bytes ?
		       BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

#endif
