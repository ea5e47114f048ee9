/* SPDX-License-Identifier: MIT */
/*
 * The current task's user registers, saved at its kernel entry
 * (bpf_task_pt_regs), and the syscall it is inside: on x86 a task in a
 * syscall has orig_ax = its number and ax = -ENOSYS until it returns; an
 * exception (page fault) or interrupt entry leaves another ax or orig_ax < 0.
 * What /proc/PID/syscall shows. Used by sched.bpf.c (wait reasons, the stack
 * cache) and waker_ctx.bpf.h (a softirq run inside the waker's own syscall).
 * Callers check the loader's feature flag (features_user_regs) first.
 *
 * How they are read (user_regs_how, set by the loader):
 *   TT_REGS_HELPER  bpf_task_pt_regs (5.15+, typed task pointers: tp_btf): pt_regs
 *                   is a BTF pointer, direct (probe-mem) loads
 *   TT_REGS_STACK   the pt_regs at the top of the task's kernel stack, where the
 *                   kernel's own task_pt_regs() finds them on x86-64 (stack +
 *                   THREAD_SIZE - sizeof(pt_regs)): kernels before 5.15, and raw_tp
 *                   and classic tracepoint programs, whose task pointers are untyped
 */
#ifndef TT_USER_REGS_BPF_H
#define TT_USER_REGS_BPF_H
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#define TT_PF_KTHREAD 0x00200000
#define TT_ENOSYS 38

enum { TT_REGS_NONE = 0, TT_REGS_HELPER = 1, TT_REGS_STACK = 2 };
const volatile __u8 user_regs_how = TT_REGS_NONE;
const volatile __u32 kernel_thread_size = 16384; /* THREAD_SIZE: 16 KiB, 32 with KASAN */

struct tt_user_regs {
	long nr;          /* syscall number, -1: not in a syscall */
	__u64 arg0, arg1; /* its first two arguments */
	__u64 ip, sp, bp; /* user IP, stack and frame pointer */
};

static __always_inline void tt_user_regs_fill(struct tt_user_regs *r, long orig_ax, long ax,
					      __u64 di, __u64 si, __u64 ip, __u64 sp, __u64 bp)
{
	r->nr = orig_ax >= 0 && ax == -TT_ENOSYS ? orig_ax : -1;
	r->arg0 = di;
	r->arg1 = si;
	r->ip = ip;
	r->sp = sp;
	r->bp = bp;
}

#if defined(__TARGET_ARCH_x86)
/* TT_REGS_HELPER: the current task's saved user registers as a BTF pointer (direct
 * loads); NULL for a kernel thread. */
static __always_inline struct pt_regs *tt_regs_btf(void)
{
	struct task_struct *t = bpf_get_current_task_btf();

	if (t->flags & TT_PF_KTHREAD)
		return NULL;
	return (struct pt_regs *)bpf_task_pt_regs(t);
}

/* TT_REGS_STACK: where they sit at the top of its kernel stack, to be read with
 * bpf_core_read; NULL for a kernel thread or a task without a stack. */
static __always_inline struct pt_regs *tt_regs_on_stack(void)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	void *stack;

	if (BPF_CORE_READ(t, flags) & TT_PF_KTHREAD)
		return NULL;
	stack = BPF_CORE_READ(t, stack);
	return stack ? (struct pt_regs *)(stack + kernel_thread_size) - 1 : NULL;
}
#endif

/* false for a kernel thread, when they cannot be read, or on an architecture we do
 * not read. */
static __always_inline bool tt_user_regs_read(struct tt_user_regs *r)
{
#if defined(__TARGET_ARCH_x86)
	struct pt_regs *regs;
	long orig_ax = -1, ax = 0;

	if (user_regs_how == TT_REGS_HELPER) {
		if (!(regs = tt_regs_btf()))
			return false;
		tt_user_regs_fill(r, (long)regs->orig_ax, (long)regs->ax, regs->di, regs->si,
				  regs->ip, regs->sp, regs->bp);
		return true;
	}
	if (user_regs_how != TT_REGS_STACK || !(regs = tt_regs_on_stack()))
		return false;
	/* field by field, not a copy of pt_regs: its 168 bytes on the program's stack
	 * pass the 512 a program and its calls share before 6.13 */
	if (bpf_core_read(&orig_ax, sizeof(orig_ax), &regs->orig_ax) ||
	    bpf_core_read(&ax, sizeof(ax), &regs->ax) ||
	    bpf_core_read(&r->arg0, sizeof(r->arg0), &regs->di) ||
	    bpf_core_read(&r->arg1, sizeof(r->arg1), &regs->si) ||
	    bpf_core_read(&r->ip, sizeof(r->ip), &regs->ip) ||
	    bpf_core_read(&r->sp, sizeof(r->sp), &regs->sp) ||
	    bpf_core_read(&r->bp, sizeof(r->bp), &regs->bp))
		return false;
	r->nr = orig_ax >= 0 && ax == -TT_ENOSYS ? orig_ax : -1;
	return true;
#else
	return false;
#endif
}

/* The current syscall's third argument (dx: a write's count, a writev's vector
 * length) into out, apart from tt_user_regs_read: few callers need it. False when
 * it cannot be read. */
static __always_inline bool tt_user_regs_arg2(__u64 *out)
{
#if defined(__TARGET_ARCH_x86)
	struct pt_regs *regs;

	if (user_regs_how == TT_REGS_HELPER) {
		if (!(regs = tt_regs_btf()))
			return false;
		*out = regs->dx;
		return true;
	}
	if (user_regs_how == TT_REGS_STACK && (regs = tt_regs_on_stack()))
		return !bpf_core_read(out, sizeof(*out), &regs->dx);
#endif
	return false;
}

/* The callee-saved registers an unwind through code without frame pointers may
 * need (bx, r12-r15: user_stack.h) into out: false when they cannot be read. */
static __always_inline bool tt_user_regs_callee(__u64 out[5])
{
#if defined(__TARGET_ARCH_x86)
	struct pt_regs *regs;

	if (user_regs_how == TT_REGS_HELPER) {
		if (!(regs = tt_regs_btf()))
			return false;
		out[0] = regs->bx;
		out[1] = regs->r12;
		out[2] = regs->r13;
		out[3] = regs->r14;
		out[4] = regs->r15;
		return true;
	}
	if (user_regs_how == TT_REGS_STACK && (regs = tt_regs_on_stack()))
		return !bpf_core_read(&out[0], sizeof(out[0]), &regs->bx) &&
		       !bpf_core_read(&out[1], sizeof(out[1]), &regs->r12) &&
		       !bpf_core_read(&out[2], sizeof(out[2]), &regs->r13) &&
		       !bpf_core_read(&out[3], sizeof(out[3]), &regs->r14) &&
		       !bpf_core_read(&out[4], sizeof(out[4]), &regs->r15);
#endif
	return false;
}

#endif
