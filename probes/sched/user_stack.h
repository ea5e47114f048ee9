/* SPDX-License-Identifier: MIT */
/*
 * User stacks through code built without frame pointers (--user-stacks dwarf,
 * docs/probes/symbols.md), perf's way: at a blocking switch-out whose call site
 * the stack cache does not know, the switch program copies the top of the
 * thread's user stack and its registers into ustack_rb; the loader unwinds the
 * copy with each object's call-frame information (symbols/unwind.c, libdwfl)
 * and writes back into ustack_paths where on the stack the unwind found the
 * return addresses. A later hit on that site reads those words again: equal,
 * the same call path up to there (the site's IP, SP and frame pointer alone tell two callers apart only
 * when frame pointers are kept); different, the stack is copied afresh.
 * Shared types only: user_stack.bpf.h is the program's side, user_stack.c the
 * loader's.
 */
#ifndef TT_USER_STACK_H
#define TT_USER_STACK_H
#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* A copy's stack id has this bit set: the loader's table, not a stack map. */
#define TT_USTACK_ID_BIT (1u << 30)
#define TT_USTACK_ID_CPU_SHIFT 22     /* bits 22-29: the CPU; 0-21: its copies */
#define TT_USTACK_MAX_BYTES 16384     /* --user-stacks dwarf,BYTES at most */
#define TT_USTACK_DEFAULT_BYTES 8192  /* perf's --call-graph dwarf default */
#define TT_USTACK_PAGE 4096
#define TT_USTACK_PATH_WORDS 4        /* return addresses a hit's check compares, at most */
#define TT_USTACK_PATH_SPAN 512       /* within this many bytes above SP */

/* The user registers an unwind starts from (DWARF numbering is the loader's). */
enum tt_ustack_reg {
	TT_UREG_IP, TT_UREG_SP, TT_UREG_BP, TT_UREG_BX,
	TT_UREG_R12, TT_UREG_R13, TT_UREG_R14, TT_UREG_R15,
	TT_UREG_NR,
};

#define TT_USTACK_FP_FRAMES 64 /* SCHED_STACK_DEPTH */
#define TT_USTACK_RETURNS 4    /* pending uretprobes' return addresses carried, at most */

/* A return address a pending uretprobe replaced on the stack with its
 * trampoline (the kernel's utask->return_instances): where, and what it was. */
struct tt_ustack_return {
	__u64 slot;  /* the stack address of the return address */
	__u64 ip;    /* the return address the trampoline stands for */
};

/* One copy (ustack_rb): the header, then size bytes of stack from regs[SP].
 * fp_ips: the frame-pointer walk from the same registers (the kernel's), which
 * goes on where the copy ends (a stack deeper than the copy) and the loader
 * joins on at the frame both walks reached. returns: the uretprobes pending on
 * the thread (the newest first), whose trampoline the stack holds where their
 * functions' return addresses were (tailtrace's own --span probes among them). */
struct tt_ustack_copy {
	__u32 id;    /* TT_USTACK_ID_BIT | cpu << TT_USTACK_ID_CPU_SHIFT | sequence */
	__u32 pid;
	__u32 tid;
	__u32 size;
	__u64 regs[TT_UREG_NR];
	__u32 fp_n;  /* frames in fp_ips */
	__u32 nreturns;
	__u64 trampoline;  /* where the returns go instead: the uretprobe trampoline */
	struct tt_ustack_return returns[TT_USTACK_RETURNS];
	__u64 fp_ips[TT_USTACK_FP_FRAMES];
	__u8 stack[TT_USTACK_MAX_BYTES];
};

/* The return addresses the unwind of one copy read (key: the copy's id): their
 * offsets above SP, 8-aligned, in the order read, and their values mixed
 * (tt_ustack_mix from TT_USTACK_MIX_SEED). */
struct tt_ustack_path {
	__u64 hash;
	__u16 span;  /* bytes to read above SP: the last offset + 8 */
	__u16 n;
	__u16 off[TT_USTACK_PATH_WORDS];
};

#define TT_USTACK_MIX_SEED 0xcbf29ce484222325ull

static inline __attribute__((always_inline)) __u64 tt_ustack_mix(__u64 h, __u64 word)
{
	return (h ^ word) * 0x100000001b3ull;
}

#endif
