// SPDX-License-Identifier: MIT
/*
 * Request spans: one uprobe (entry) and one uretprobe (return) program,
 * attached once per --span option with the option's index as BPF cookie.
 * Each thread keeps a stack of open span calls, so nested and recursive
 * spans pair correctly; depth = how many span calls enclose this one.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <tailtrace/records.h>
#include "spans.h"
#include "filter.bpf.h"
#include "counter.bpf.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct spans_stack);
} open_spans SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SPANS_CNT_NR);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline void count(__u32 idx)
{
	tt_count(&counters, idx);
}

static const struct spans_stack empty_stack;

/*
 * Drop open frames that cannot be live any more: stacks grow down, so a frame
 * whose entry stack pointer is at or below `sp_min` belongs to a call that
 * already returned without its uretprobe firing (a call in flight while the
 * probes were being attached, a longjmp out of it). Without this one missed
 * return would leave every later span of that thread one level too deep.
 */
static __always_inline void spans_drop_stale(struct spans_stack *s, __u64 sp_min)
{
	for (int i = 0; i < SPANS_MAX_DEPTH; i++) {
		__u32 top = s->depth;

		if (top == 0 || top > SPANS_MAX_DEPTH)
			return;
		if (s->f[(top - 1) & (SPANS_MAX_DEPTH - 1)].sp > sp_min)
			return;
		s->depth = top - 1;
		count(SPANS_CNT_STALE);
	}
}

SEC("uprobe")
int span_enter(struct pt_regs *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct spans_stack *s = bpf_map_lookup_elem(&open_spans, &tid);
	__u32 d;

	count(SPANS_CNT_HITS);
	if (!tt_current_traced())
		return 0;
	if (!s) {
		bpf_map_update_elem(&open_spans, &tid, &empty_stack, BPF_NOEXIST);
		s = bpf_map_lookup_elem(&open_spans, &tid);
		if (!s) {
			count(SPANS_CNT_STATE_FULL);
			return 0;
		}
	}
	/* a new call at this stack level: anything open at or below it has returned */
	spans_drop_stale(s, PT_REGS_SP(ctx));
	d = s->depth++;
	if (d >= SPANS_MAX_DEPTH) {
		count(SPANS_CNT_TOO_DEEP);
		return 0;
	}
	s->f[d & (SPANS_MAX_DEPTH - 1)].t_start_ns = bpf_ktime_get_ns();
	s->f[d & (SPANS_MAX_DEPTH - 1)].sp = PT_REGS_SP(ctx);
	s->f[d & (SPANS_MAX_DEPTH - 1)].span_id = (__u32)bpf_get_attach_cookie(ctx);
	return 0;
}

SEC("uretprobe")
int span_exit(struct pt_regs *ctx)
{
	__u64 now = bpf_ktime_get_ns(), id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, span_id = (__u32)bpf_get_attach_cookie(ctx), d;
	struct spans_stack *s = bpf_map_lookup_elem(&open_spans, &tid);
	/* after `ret` popped the return address: the entry stack pointer + 8 */
	__u64 sp_entry = PT_REGS_SP(ctx) - 8, open_sp;
	__u64 t_start_ns;
	__u32 open_id;
	struct tt_span *r;

	count(SPANS_CNT_HITS);
	if (s)
		spans_drop_stale(s, sp_entry - 1); /* deeper frames than ours are gone */
	if (!s || !s->depth) {
		count(SPANS_CNT_UNMATCHED);
		return 0;
	}
	d = --s->depth;
	t_start_ns = s->f[d & (SPANS_MAX_DEPTH - 1)].t_start_ns;
	open_sp = s->f[d & (SPANS_MAX_DEPTH - 1)].sp;
	open_id = s->f[d & (SPANS_MAX_DEPTH - 1)].span_id;
	if (!d) /* read s before: a deleted element may be reused at once */
		bpf_map_delete_elem(&open_spans, &tid);
	if (d >= SPANS_MAX_DEPTH)
		return 0;
	if (open_id != span_id || open_sp != sp_entry) {
		count(SPANS_CNT_UNMATCHED);
		return 0;
	}
	r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r) {
		count(SPANS_CNT_LOST);
		return 0;
	}
	r->t_start_ns = t_start_ns;
	r->t_end_ns = now;
	r->ret = (__s64)PT_REGS_RC(ctx);
	r->pid = id >> 32;
	r->tid = tid;
	r->span_id = span_id;
	r->depth = d;
	bpf_ringbuf_submit(r, 0);
	return 0;
}
