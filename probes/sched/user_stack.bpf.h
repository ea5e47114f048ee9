/* SPDX-License-Identifier: MIT */
/*
 * The switch program's side of user stacks through code without frame
 * pointers (user_stack.h): the copy of a blocking thread's stack top, and the
 * check of a cached call site against the words its unwind read. Included by
 * sched.bpf.c after user_regs.bpf.h and its sched_counters.
 */
#ifndef TT_USER_STACK_BPF_H
#define TT_USER_STACK_BPF_H
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include "sched/user_stack.h"

/* Bytes of stack copied (the loader: --user-stacks dwarf[,BYTES]); 0: user stacks
 * are walked by frame pointer (bpf_get_stackid) and nothing here runs. */
const volatile __u32 ustack_copy_bytes = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096); /* sized by the loader */
} ustack_rb SEC(".maps");

/* Where a copy is made before it is sent, and where a check reads the words. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tt_ustack_copy);
} ustack_scratch SEC(".maps");

/* Each CPU's copies so far: the low bits of their ids. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} ustack_seq SEC(".maps");

/* Written by the loader once it has unwound a copy (key: the copy's id). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct tt_ustack_path);
} ustack_paths SEC(".maps");

/* The stack from sp up into c->stack: to the end of sp's page, then whole
 * pages while readable (the stack's top is the first page that is not) until
 * ustack_copy_bytes are there. Its size (0: not even sp's page was read). */
static __always_inline __u32 ustack_read(struct tt_ustack_copy *c, __u64 sp)
{
	__u64 size = TT_USTACK_PAGE - (sp & (TT_USTACK_PAGE - 1)), want = ustack_copy_bytes;

	if (bpf_probe_read_user(c->stack, size, (void *)sp))
		return 0;
	for (int i = 0; i < TT_USTACK_MAX_BYTES / TT_USTACK_PAGE - 1; i++) {
		if (size >= want || size > TT_USTACK_MAX_BYTES - TT_USTACK_PAGE)
			break;
		if (bpf_probe_read_user(c->stack + size, TT_USTACK_PAGE, (void *)(sp + size)))
			break;
		size += TT_USTACK_PAGE;
	}
	return (__u32)size;
}

/* The uretprobes pending on the current thread, the newest first: each one's
 * function returns through the trampoline the kernel put in place of its
 * return address (tailtrace's --span probes, or another tool's). */
static __always_inline void ustack_returns(struct tt_ustack_copy *c)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	struct return_instance *ri;

	c->nreturns = 0;
	if (!bpf_core_field_exists(t->utask))
		return;
	ri = BPF_CORE_READ(t, utask, return_instances);
	c->trampoline = ri ? BPF_CORE_READ(t, mm, uprobes_state.xol_area, vaddr) : 0;
	for (int i = 0; i < TT_USTACK_RETURNS && ri; i++) {
		c->returns[i].slot = BPF_CORE_READ(ri, stack);
		c->returns[i].ip = BPF_CORE_READ(ri, orig_ret_vaddr);
		c->nreturns = i + 1;
		ri = BPF_CORE_READ(ri, next);
	}
}

/* Copy the current thread's stack top and registers, and its frame-pointer
 * walk, into ustack_rb: the copy's id, or -1 (counted SCHED_CNT_USTACK_LOST when
 * the ring was full). */
static __always_inline __s32 ustack_copy(void *ctx, const struct tt_user_regs *u, __u32 pid,
					 __u32 tid)
{
	long fp;

	__u32 zero = 0, cpu = bpf_get_smp_processor_id(), *seq;
	struct tt_ustack_copy *c = bpf_map_lookup_elem(&ustack_scratch, &zero);
	__u64 len;

	seq = bpf_map_lookup_elem(&ustack_seq, &zero);
	if (!c || !seq || !u->sp || !tt_user_regs_callee(&c->regs[TT_UREG_BX]))
		return -1;
	c->regs[TT_UREG_IP] = u->ip;
	c->regs[TT_UREG_SP] = u->sp;
	c->regs[TT_UREG_BP] = u->bp;
	c->size = ustack_read(c, u->sp);
	if (!c->size)
		return -1;
	fp = bpf_get_stack(ctx, c->fp_ips, sizeof(c->fp_ips), BPF_F_USER_STACK);
	c->fp_n = fp > 0 ? (__u32)fp / sizeof(c->fp_ips[0]) : 0;
	ustack_returns(c);
	c->id = TT_USTACK_ID_BIT | (cpu & 0xff) << TT_USTACK_ID_CPU_SHIFT |
		(*seq & ((1u << TT_USTACK_ID_CPU_SHIFT) - 1));
	*seq += 1;
	c->pid = pid;
	c->tid = tid;
	len = offsetof(struct tt_ustack_copy, stack) + c->size;
	if (len > sizeof(*c))
		return -1;
	/* the loader is woken for each (no batching): until it has unwound a copy, the
	 * hits of its site go unchecked */
	if (bpf_ringbuf_output(&ustack_rb, c, len, 0)) {
		tt_count(&sched_counters, SCHED_CNT_USTACK_LOST);
		return -1;
	}
	return (__s32)c->id;
}

/* Does the stack at sp hold the words the unwind of copy id read (the same
 * call path)? 1 yes, 0 no, -1 not known yet (the loader has not unwound it). */
static __always_inline int ustack_path_holds(__s32 id, __u64 sp)
{
	__u32 zero = 0, key = (__u32)id, span, off;
	struct tt_ustack_path *p = bpf_map_lookup_elem(&ustack_paths, &key);
	struct tt_ustack_copy *c;
	__u64 h = TT_USTACK_MIX_SEED;

	if (!p)
		return -1;
	span = p->span;
	if (span == 0) /* the unwind read nothing above SP: the IP and SP decide */
		return 1;
	c = bpf_map_lookup_elem(&ustack_scratch, &zero);
	if (!c || span > TT_USTACK_PATH_SPAN || bpf_probe_read_user(c->stack, span, (void *)sp))
		return 0;
	for (int i = 0; i < TT_USTACK_PATH_WORDS; i++) {
		if (i >= p->n)
			break;
		off = p->off[i] & (TT_USTACK_PATH_SPAN - 8);
		h = tt_ustack_mix(h, *(__u64 *)(c->stack + off));
	}
	return h == p->hash;
}

#endif
