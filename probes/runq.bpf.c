// SPDX-License-Identifier: MIT
/*
 * Run-queue latency of traced threads.
 *
 *   sched_waking (p traced)      start[p].waking = {now, current, its context, p on CPU?}
 *   sched_wakeup_new (p traced)  start[p] = {now, NEW, the parent}
 *   sched_switch, prev traced    still runnable (preempted): start[prev] = {now, PREEMPT}
 *                                blocked: start[prev].blocked = now (waits for its waking)
 *   sched_switch, next           [waking (or the switch-out, if woken while switching
 *                                out) or preemption, now] -> one struct tt_runq, or a
 *                                histogram slot (--aggregate)
 *
 * The wait starts at sched_waking, as `perf sched record` measures it (it
 * records sched_waking, not sched_wakeup, where the kernel has it), so no
 * sched_wakeup program runs: one program per wakeup.
 *
 * The irq event adds irq_handler_entry/exit, local_timer_entry/exit and
 * softirq_entry/exit: interrupts noted in the occupancy rings that every
 * switch notes too (occupancy.bpf.h; the rings are shared with sched when its
 * switch program does runq's switch work).
 *
 * Three variants of each hook share one inline function; the loader
 * autoloads exactly one set: tp_btf, raw_tp, or classic tracepoints. Classic
 * tracepoints carry only pids for the woken task, so that variant learns the
 * traced threads (tracked map) from switch-outs and forks of traced tasks.
 * start[] is task storage under tp_btf, a tid-keyed hash otherwise.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <tailtrace/records.h>
#include "filter.bpf.h"
#include "aggregate.bpf.h"
#include "runq.h"
#include "switch_clock.bpf.h"
#include "waker_ctx.bpf.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define TASK_RUNNING 0
#define TASK_DEAD 0x80
#define TP_REPORT_MAX 0x100   /* classic sched_switch prev_state: preempted */
#define TP_REPORT_DEAD 0x10   /* classic prev_state: X */
#define TP_REPORT_ZOMBIE 0x20 /* classic prev_state: Z */

const volatile bool aggregate = false;
const volatile __u64 rb_wakeup_bytes = 1 << 20;

#include "runq_switch.bpf.h"

/* Classic-tracepoint variant only: tid -> tgid of threads known traced. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u32);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} tracked SEC(".maps");

/* sched_waking of p (traced), in the waker's own context: when, by whom, in
 * what context, and whether p was still on a CPU (on_cpu; unknown in the
 * classic variant: true). Only the waking fields are written: the switch
 * program may be switching p out on another CPU at the same time. The
 * thread's own histograms (--aggregate under tp_btf) need only when and
 * on_cpu: the waker is not kept and the slot knows its pid. */
static __always_inline void on_waking(bool btf, struct task_struct *p, __u32 tid, __u32 pid,
				      bool on_cpu)
{
	struct runq_start *s = runq_slot(btf, p, tid);
	__u64 id;

	if (!s) {
		tt_count(&runq_counters, RUNQ_CNT_LOST); /* map full */
		return;
	}
	if (aggregate && btf) {
		s->waking_on_cpu = on_cpu;
		s->t_waking_ns = bpf_ktime_get_ns();
		return;
	}
	id = bpf_get_current_pid_tgid();
	s->waking_tid = (__u32)id;
	s->waking_pid = (__u32)(id >> 32);
	s->waking_ctx = aggregate ? TT_WAKER_UNKNOWN : tt_waker_context();
	s->waking_on_cpu = on_cpu;
	if (pid && !s->pid)
		s->pid = pid;
	s->t_waking_ns = bpf_ktime_get_ns();
}

/* sched_wakeup_new: a new traced thread is runnable from now; it runs in the
 * parent, which is the waker. */
static __always_inline void on_wakeup_new(bool btf, struct task_struct *p, __u32 tid, __u32 pid)
{
	struct runq_start *s = runq_slot(btf, p, tid);
	__u64 id = bpf_get_current_pid_tgid();

	if (!s) {
		tt_count(&runq_counters, RUNQ_CNT_LOST); /* map full */
		return;
	}
	if (!s->t_runnable_ns)
		runq_open_interval(s, bpf_ktime_get_ns(), pid, (__u32)id, (__u32)(id >> 32),
				   TT_WAKER_TASK, TT_RUNQ_WAKEUP_NEW);
}

/* ---- tp_btf and raw_tp: typed task pointers ---------------------------- */

static __always_inline int wakeup_new_task(bool btf, struct task_struct *p)
{
	if (tt_task_traced_v(btf, p))
		on_wakeup_new(btf, p, TT_TASK_FIELD(btf, p, pid), TT_TASK_FIELD(btf, p, tgid));
	return 0;
}

static __always_inline int waking_task(bool btf, struct task_struct *p)
{
	if (tt_task_traced_v(btf, p))
		on_waking(btf, p, TT_TASK_FIELD(btf, p, pid), TT_TASK_FIELD(btf, p, tgid),
			  TT_TASK_FIELD(btf, p, on_cpu));
	return 0;
}

static __always_inline int switch_task(bool btf, bool preempt, struct task_struct *prev,
				       struct task_struct *next, unsigned int prev_state)
{
	__u64 id = bpf_get_current_pid_tgid();
	bool prev_traced = tt_task_traced_ids_v(btf, prev, (__u32)(id >> 32), (__u32)id);
	bool next_traced = tt_task_traced_v(btf, next);
	__u32 next_tid = TT_TASK_FIELD(btf, next, pid);

	__u64 now;

	if (!prev_traced && !next_traced) { /* no shared clock either: switch_clock.bpf.h */
		if (occ_on)
			occ_note(btf, next, bpf_ktime_get_ns(), false);
		return 0;
	}
	if (btf && runq_kacct) { /* no clock at all: the kernel's (runq_switch.bpf.h) */
		if (occ_on) /* no clock read on this path without the cpu event */
			occ_note(btf, next, bpf_ktime_get_ns(), next_traced);
		if (prev_traced)
			runq_kacct_out(tt_thread_get(prev, true), prev, preempt || prev_state == TASK_RUNNING,
				       prev_state == TASK_DEAD, (__u32)id, (__u32)(id >> 32));
		if (next_traced)
			runq_kacct_in(runq_kacct_slot(next), next);
		return 0;
	}
	now = tt_switch_now((__u32)id, next_tid);
	occ_note(btf, next, now, next_traced);
	runq_on_switch(btf, prev, next, now, prev_traced,
		       preempt || prev_state == TASK_RUNNING, prev_state == TASK_DEAD, (__u32)id,
		       (__u32)(id >> 32), next_traced, next_tid, false);
	return 0;
}

SEC("tp_btf/sched_waking")
int BPF_PROG(runq_waking_btf, struct task_struct *p)
{
	return waking_task(true, p);
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(runq_wakeup_new_btf, struct task_struct *p)
{
	return wakeup_new_task(true, p);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(runq_switch_btf, bool preempt, struct task_struct *prev,
	     struct task_struct *next, unsigned int prev_state)
{
	return switch_task(true, preempt, prev, next, prev_state);
}

SEC("raw_tp/sched_waking")
int BPF_PROG(runq_waking_raw, struct task_struct *p)
{
	return waking_task(false, p);
}

SEC("raw_tp/sched_wakeup_new")
int BPF_PROG(runq_wakeup_new_raw, struct task_struct *p)
{
	return wakeup_new_task(false, p);
}

SEC("raw_tp/sched_switch")
int BPF_PROG(runq_switch_raw, bool preempt, struct task_struct *prev,
	     struct task_struct *next, unsigned int prev_state)
{
	return switch_task(false, preempt, prev, next, prev_state);
}

/* ---- the irq event: interrupts on the CPUs (occupancy.bpf.h) ------------- */

/* The six programs of one hook variant (tp_btf or raw_tp: the same arguments). */
#define OCC_IRQ_PROGS(hook, v)                                                  \
	SEC(hook "/irq_handler_entry")                                          \
	int BPF_PROG(occ_irq_entry_##v, int irq)                               \
	{                                                                       \
		occ_hardirq_entry(irq);                                         \
		return 0;                                                       \
	}                                                                       \
	SEC(hook "/irq_handler_exit")                                           \
	int BPF_PROG(occ_irq_exit_##v)                                          \
	{                                                                       \
		occ_hardirq_exit();                                             \
		return 0;                                                       \
	}                                                                       \
	SEC(hook "/local_timer_entry")                                          \
	int BPF_PROG(occ_timer_entry_##v)                                       \
	{                                                                       \
		occ_hardirq_entry(TT_OCC_IRQ_TIMER);                            \
		return 0;                                                       \
	}                                                                       \
	SEC(hook "/local_timer_exit")                                           \
	int BPF_PROG(occ_timer_exit_##v)                                        \
	{                                                                       \
		occ_hardirq_exit();                                             \
		return 0;                                                       \
	}                                                                       \
	SEC(hook "/softirq_entry")                                              \
	int BPF_PROG(occ_softirq_entry_##v, unsigned int vec)                   \
	{                                                                       \
		occ_softirq_entry(vec, tt_current_in_syscall());                \
		return 0;                                                       \
	}                                                                       \
	SEC(hook "/softirq_exit")                                               \
	int BPF_PROG(occ_softirq_exit_##v)                                      \
	{                                                                       \
		occ_softirq_exit();                                             \
		return 0;                                                       \
	}

OCC_IRQ_PROGS("tp_btf", btf)
OCC_IRQ_PROGS("raw_tp", raw)

/* --aggregate under tp_btf: every thread's run-queue histograms moved into
 * runq_hist (aggregate_drain runs it before the map is read). */
TT_THREAD_DRAIN_ITER(runq_drain_btf, runq_lhist_drain)

/* ---- classic tracepoints: pids and comms only -------------------------- */

/* The classic variant's slot owner: a thread known traced (its tgid), or any
 * thread when tracing system-wide (tgid unknown until it switches out). */
static __always_inline bool traced_pid(__u32 tid, __u32 *tgid)
{
	__u32 *known = bpf_map_lookup_elem(&tracked, &tid);

	*tgid = known ? *known : 0;
	return known || (!tt_filter && tid);
}

SEC("tp/sched/sched_waking")
int runq_waking_tp(struct trace_event_raw_sched_wakeup_template *ctx)
{
	__u32 tid = ctx->pid, tgid;

	if (traced_pid(tid, &tgid))
		on_waking(false, NULL, tid, tgid, true);
	return 0;
}

SEC("tp/sched/sched_wakeup_new")
int runq_wakeup_new_tp(struct trace_event_raw_sched_wakeup_template *ctx)
{
	__u32 tid = ctx->pid, tgid;

	if (traced_pid(tid, &tgid))
		on_wakeup_new(false, NULL, tid, tgid);
	return 0;
}

/* Forks run in the parent: a traced parent's new thread is traced (assumed a
 * thread of the same tgid until it first runs and is checked directly). */
SEC("tp/sched/sched_process_fork")
int runq_fork_tp(struct trace_event_raw_sched_process_fork *ctx)
{
	__u32 child = ctx->child_pid;
	__u32 tgid = (__u32)(bpf_get_current_pid_tgid() >> 32);

	if (tt_current_traced())
		bpf_map_update_elem(&tracked, &child, &tgid, BPF_ANY);
	return 0;
}

SEC("tp/sched/sched_switch")
int runq_switch_tp(struct trace_event_raw_sched_switch *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, tgid = (__u32)(id >> 32);
	long state = ctx->prev_state;
	bool runnable = (state & TP_REPORT_MAX) || (state & 0xff) == TASK_RUNNING;
	bool traced = tt_current_traced();
	__u32 *known = bpf_map_lookup_elem(&tracked, &tid);

	if (traced && !known)
		bpf_map_update_elem(&tracked, &tid, &tgid, BPF_ANY);
	else if (known && (!traced || (state & (TP_REPORT_DEAD | TP_REPORT_ZOMBIE))))
		bpf_map_delete_elem(&tracked, &tid); /* exited, or a forked child of another tgid */
	runq_on_switch(false, NULL, NULL, tt_switch_now(tid, ctx->next_pid), traced, runnable,
		       state & (TP_REPORT_DEAD | TP_REPORT_ZOMBIE), tid, tgid, ctx->next_pid != 0,
		       ctx->next_pid, true);
	return 0;
}
