/* SPDX-License-Identifier: MIT */
/*
 * In what context does a wakeup run (enum tt_waker_ctx in records.h)?
 * sched_waking fires in the waker's context: a task, or an interrupt that
 * borrowed whatever task was on the CPU. preempt_count says which; on x86 it
 * is the per-CPU variable __preempt_count. Typed per-CPU ksyms need
 * CONFIG_KALLSYMS_ALL (often off), so it is reached from a per-CPU address we
 * can get: this CPU's run queue (current->se.cfs_rq->rq, a per-CPU `struct
 * rq runqueues`) plus the constant distance between the two variables in
 * the per-CPU area, which the loader reads from the kernel's BTF
 * (features_percpu_offset). Each read is checked: current_task, reached the
 * same way, must be the current task, else the context is
 * a guess, and says so (TT_WAKER_TASK_GUESS), rather than wrong.
 */
#ifndef TT_WAKER_CTX_BPF_H
#define TT_WAKER_CTX_BPF_H
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include "sched/user_regs.bpf.h"

/* Set by the loader (runq.c, the sched module) from BTF; have_preempt_count false: unknown
 * (also when se.cfs_rq is missing, a kernel without CONFIG_FAIR_GROUP_SCHED: the read in
 * tt_preempt_count is then dead code the verifier drops, its failed relocation never run). */
const volatile bool have_preempt_count = false;
const volatile long pcpu_pc_delta = 0;    /* __preempt_count - runqueues */
const volatile long pcpu_cur_delta = 0; /* current_task - runqueues */
const volatile bool have_typed_task = false; /* bpf_get_current_task_btf (5.11) */

#define TT_NMI_MASK 0x00f00000
#define TT_HARDIRQ_MASK 0x000f0000
#define TT_SOFTIRQ_OFFSET 0x00000100

/* 0 and *pc set, or -1 when it cannot be read and verified. */
static __always_inline int tt_preempt_count(int *pc)
{
	struct task_struct *t = bpf_get_current_task_btf();
	unsigned long rq = (unsigned long)t->se.cfs_rq->rq; /* BTF: probe-mem loads */
	struct task_struct *cur = NULL;

	if (!rq || bpf_probe_read_kernel(&cur, sizeof(cur), (void *)(rq + pcpu_cur_delta)) ||
	    cur != t)
		return -1;
	return bpf_probe_read_kernel(pc, sizeof(*pc), (void *)(rq + pcpu_pc_delta)) ? -1 : 0;
}

/* Is the current task inside a syscall (user_regs.bpf.h)? A softirq run from a task's own syscall (local_bh_enable after a loopback
 * send) is that task's doing; one run at IRQ exit over a task in user mode,
 * or in ksoftirqd, is not. */
static __always_inline bool tt_current_in_syscall(void)
{
	struct tt_user_regs r;

	return user_regs_how != TT_REGS_NONE && tt_user_regs_read(&r) && r.nr >= 0;
}

/* The context the current wakeup runs in. Without a verified preempt_count
 * only a wakeup over the idle task is known to be an interrupt. */
static __always_inline __u8 tt_waker_context(void)
{
	int pc = 0;

	if (!have_preempt_count || !have_typed_task || tt_preempt_count(&pc))
		return (__u32)bpf_get_current_pid_tgid() ? TT_WAKER_TASK_GUESS : TT_WAKER_HARDIRQ;
	if (pc & (TT_NMI_MASK | TT_HARDIRQ_MASK))
		return TT_WAKER_HARDIRQ;
	if (pc & TT_SOFTIRQ_OFFSET)
		return tt_current_in_syscall() ? TT_WAKER_SOFTIRQ_TASK : TT_WAKER_SOFTIRQ;
	return TT_WAKER_TASK;
}

#endif
