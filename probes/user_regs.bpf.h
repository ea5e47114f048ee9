/* SPDX-License-Identifier: MIT */
/*
 * The current task's user registers, saved at its kernel entry
 * (bpf_task_pt_regs), and the syscall it is inside: on x86 a task in a
 * syscall has orig_ax = its number and ax = -ENOSYS until it returns; an
 * exception (page fault) or interrupt entry leaves another ax or orig_ax < 0.
 * What /proc/PID/syscall shows. Used by sched.bpf.c (wait reasons, the stack
 * cache) and waker_ctx.bpf.h (a softirq run inside the waker's own syscall).
 * Callers check the loader's feature flag (features_task_regs) first.
 * pt_regs is a BTF pointer: direct (probe-mem) loads, no helper per field.
 */
#ifndef TT_USER_REGS_BPF_H
#define TT_USER_REGS_BPF_H
#include <bpf/bpf_helpers.h>

#define TT_PF_KTHREAD 0x00200000
#define TT_ENOSYS 38

struct tt_user_regs {
	long nr;          /* syscall number, -1: not in a syscall */
	__u64 arg0, arg1; /* its first two arguments */
	__u64 ip, sp, bp; /* user IP, stack and frame pointer */
};

/* false for a kernel thread or on an architecture we do not read. */
static __always_inline bool tt_user_regs_read(struct tt_user_regs *r)
{
#if defined(__TARGET_ARCH_x86)
	struct task_struct *t = bpf_get_current_task_btf();
	struct pt_regs *regs;

	if (t->flags & TT_PF_KTHREAD)
		return false;
	regs = (struct pt_regs *)bpf_task_pt_regs(t);
	r->nr = (long)regs->orig_ax >= 0 && (long)regs->ax == -TT_ENOSYS ? (long)regs->orig_ax : -1;
	r->arg0 = regs->di;
	r->arg1 = regs->si;
	r->ip = regs->ip;
	r->sp = regs->sp;
	r->bp = regs->bp;
	return true;
#else
	return false;
#endif
}

#endif
