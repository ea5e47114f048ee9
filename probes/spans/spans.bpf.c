// SPDX-License-Identifier: MIT
/*
 * Request spans (spans.h). Programs:
 *   span_enter   uprobe at the function's entry site: push a frame
 *   span_exit    uretprobe (URET mode): pop the frame at the return
 *   span_ret     uprobe at a ret or a jump out of it (RET mode)
 *   span_guard   uprobes on __cxa_begin_catch and longjmp: frames left by a
 *                C++ exception or a longjmp end there, marked as such
 *   span_mark_start, span_mark_end   USDT probes that start and end a request
 *   span_mark_once   one USDT probe at a request's end carrying its start
 *   span_tcp_in, span_tcp_out, span_tcp_state   tcp_probe, net_dev_queue and
 *                inet_sock_set_state: a request on a server's TCP port, from its
 *                first byte in to its answer's last byte out
 * The cookie of each program says which --span, which site and how it keys.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/usdt.bpf.h>
#include <tailtrace/records.h>
#include "spans/spans.h"
#include "core/filter.bpf.h"
#include "core/counter.bpf.h"
#include "sched/user_regs.bpf.h"
#include "core/map_full.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* glibc x86-64: jmp_buf[6] holds the stack pointer, mangled with the
 * thread's pointer guard (tcbhead_t at %fs:0x30): rol 0x11 after xor. */
#define JB_RSP 6
#define POINTER_GUARD_OFF 0x30
#define GO_G_STACK_HI 8   /* runtime.g: stack.lo, stack.hi first */
#define GO_MAX_STACK (1ull << 30)

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20);
} events SEC(".maps");

/* Kept while the thread or goroutine lives: creating and deleting it around every
 * call cost more than the rest of the span. A plain hash, never an LRU (the kernel's
 * LRU evicts live entries, the oldest first, before it is full on many CPUs: the
 * slowest requests' spans, silently): a thread's state is freed when it exits
 * (span_thread_exit_*), a goroutine's address is reused by the Go runtime, and a
 * full map refuses a new one, counted (SPANS_CNT_STATE_FULL). Sized by the loader
 * (spans_open_entries). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct spans_key);
	__type(value, struct spans_stack);
} open_spans SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SPANS_CNT_NR);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

TT_MAP_FULL_COUNTS(SPANS_MAP_NR); /* updates refused for want of room, by map */

static __always_inline void count(__u32 idx)
{
	tt_count(&counters, idx);
}

/* Wake the loader once this much waits (it also polls on a timer): not once a call. */
const volatile __u64 rb_wakeup_bytes = 1 << 20;

static const struct spans_stack empty_stack;

#define TOP(s) (&(s)->f[((s)->depth - 1) & (SPANS_MAX_DEPTH - 1)])

/* The key of the running thread or goroutine and the stack level of `sp`. */
static __always_inline bool span_key(struct pt_regs *ctx, bool go, __u64 sp,
				     struct spans_key *k, __u64 *level)
{
	__u64 id = bpf_get_current_pid_tgid(), hi = 0;

	k->pid = id >> 32;
	k->go = go;
	k->id = (__u32)id;
	*level = 0 - sp;
	if (!go)
		return true;
	k->id = ctx->r14; /* ABIInternal (Go >= 1.17): the current g */
	if (!k->id || bpf_probe_read_user(&hi, sizeof(hi), (void *)(k->id + GO_G_STACK_HI)) ||
	    sp > hi || hi - sp > GO_MAX_STACK) {
		count(SPANS_CNT_NO_G);
		return false;
	}
	*level = hi - sp;
	return true;
}

static __always_inline void span_fill(struct tt_span *r, struct spans_key *k,
				      struct spans_frame *f, __u32 depth, __u64 now, __s64 ret,
				      __u32 end, __u32 end_tid)
{
	r->t_start_ns = f->t_start_ns;
	r->t_end_ns = now;
	r->ret = ret;
	r->goroutine = k->go ? k->id : 0;
	r->pid = k->pid;
	r->tid = f->tid;
	r->end_tid = end_tid;
	r->span_id = f->span_id;
	r->depth = depth;
	r->end = end;
}

static __always_inline void span_emit_on(struct spans_key *k, struct spans_frame *f, __u32 depth,
					 __u64 now, __s64 ret, __u32 end, __u32 end_tid)
{
	struct tt_span *r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);

	if (!r) {
		count(SPANS_CNT_LOST);
		return;
	}
	span_fill(r, k, f, depth, now, ret, end, end_tid);
	bpf_ringbuf_submit(r, tt_rb_flags(&events, rb_wakeup_bytes, sizeof(*r)));
}

/* A span that ends on the running thread. */
static __always_inline void span_emit(struct spans_key *k, struct spans_frame *f, __u32 depth,
				      __u64 now, __s64 ret, __u32 end)
{
	span_emit_on(k, f, depth, now, ret, end, (__u32)bpf_get_current_pid_tgid());
}

/* Drop open frames at `level` or deeper: their end was never seen (a call in
 * flight while the probes attached, an exit no site covers). */
static __always_inline void drop_from(struct spans_stack *s, __u64 level)
{
	for (int i = 0; i < SPANS_MAX_DEPTH; i++) {
		if (!s->depth || s->depth > SPANS_MAX_DEPTH || TOP(s)->level < level)
			return;
		s->depth--;
		count(SPANS_CNT_STALE);
	}
}

/* Pop the top frame at exactly `level` as ended now; false if it is not there. */
static __always_inline bool close_top(struct spans_key *k, struct spans_stack *s, __u64 level,
				      __u32 span_id, __s64 ret, __u32 end)
{
	struct spans_frame f;
	__u32 d;

	if (!s->depth || s->depth > SPANS_MAX_DEPTH || TOP(s)->level != level ||
	    TOP(s)->span_id != span_id)
		return false;
	f = *TOP(s);
	d = --s->depth;
	span_emit(k, &f, d, bpf_ktime_get_ns(), ret, end);
	return true;
}

static __always_inline int span_enter_at(struct pt_regs *ctx, __u64 cookie)
{
	__u64 sp = PT_REGS_SP(ctx), level;
	__u32 flags = SPANS_COOKIE_FLAGS(cookie), d;
	struct spans_stack *s;
	struct spans_frame *f;
	struct spans_key k;

	count(SPANS_CNT_HITS);
	if (!tt_current_traced() || !span_key(ctx, flags & SPANS_COOKIE_GO, sp, &k, &level))
		return 0;
	s = bpf_map_lookup_elem(&open_spans, &k);
	if (!s) {
		tt_count_full(SPANS_MAP_OPEN_SPANS,
			      bpf_map_update_elem(&open_spans, &k, &empty_stack, BPF_NOEXIST));
		s = bpf_map_lookup_elem(&open_spans, &k);
		if (!s) {
			count(SPANS_CNT_STATE_FULL);
			return 0;
		}
	}
	/* a new call at this level: anything open here or deeper has ended */
	drop_from(s, level);
	d = s->depth++;
	if (d >= SPANS_MAX_DEPTH) {
		count(SPANS_CNT_TOO_DEEP);
		return 0;
	}
	f = &s->f[d & (SPANS_MAX_DEPTH - 1)];
	f->t_start_ns = bpf_ktime_get_ns();
	f->level = level;
	f->span_id = SPANS_COOKIE_SPAN(cookie);
	f->tid = (__u32)bpf_get_current_pid_tgid();
	return 0;
}

/* A thread exits: its stack of open spans goes (a frame still open is counted stale,
 * as a call whose return was never seen). Runs in the exiting thread. */
static __always_inline void span_thread_gone(void)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct spans_key k = { .id = (__u32)id, .pid = id >> 32 };
	struct spans_stack *s = bpf_map_lookup_elem(&open_spans, &k);

	if (!s)
		return;
	if (s->depth)
		count(SPANS_CNT_STALE);
	bpf_map_delete_elem(&open_spans, &k);
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(span_thread_exit_btf)
{
	span_thread_gone();
	return 0;
}

SEC("raw_tp/sched_process_exit")
int BPF_PROG(span_thread_exit_raw)
{
	span_thread_gone();
	return 0;
}

SEC("uprobe")
int span_enter(struct pt_regs *ctx)
{
	return span_enter_at(ctx, bpf_get_attach_cookie(ctx));
}

/* A return with no entry in a process forked inside a traced call: the child
 * returns through the call its parent entered (the return was copied with the
 * stack), no call of its own. The forking thread is the child's real_parent;
 * its stack of open spans is there once it has entered one. */
static __always_inline bool inherited_return(void)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	struct task_struct *p = BPF_CORE_READ(t, real_parent);
	struct spans_key pk = { .pid = BPF_CORE_READ(p, tgid), .id = BPF_CORE_READ(p, pid) };
	__u64 id = bpf_get_current_pid_tgid();

	return (__u32)id == (__u32)(id >> 32) && bpf_map_lookup_elem(&open_spans, &pk);
}

static __always_inline int span_exit_at(struct pt_regs *ctx, __u32 span_id)
{
	/* after `ret` popped the return address: the entry stack pointer + 8 */
	__u64 level = 0 - (PT_REGS_SP(ctx) - 8);
	__s64 rc = (__s64)PT_REGS_RC(ctx);
	struct spans_key k = { .id = (__u32)bpf_get_current_pid_tgid(),
			       .pid = bpf_get_current_pid_tgid() >> 32 };
	struct spans_stack *s = bpf_map_lookup_elem(&open_spans, &k);

	count(SPANS_CNT_HITS);
	if (!s) {
		if (tt_current_traced() && !inherited_return())
			count(SPANS_CNT_UNMATCHED);
		return 0;
	}
	if (s->depth > SPANS_MAX_DEPTH) { /* a call nested too deep to be recorded returns */
		s->depth--;
		return 0;
	}
	/* deeper frames than ours are gone; the frame below must be ours */
	drop_from(s, level + 1);
	if (!close_top(&k, s, level, span_id, rc, TT_SPAN_RETURN)) {
		count(SPANS_CNT_UNMATCHED);
		if (s->depth && s->depth <= SPANS_MAX_DEPTH && TOP(s)->level == level)
			s->depth--; /* another span's frame at our level: it is over too */
	}
	return 0;
}

SEC("uretprobe")
int span_exit(struct pt_regs *ctx)
{
	return span_exit_at(ctx, SPANS_COOKIE_SPAN(bpf_get_attach_cookie(ctx)));
}

/* Does jcc condition `nibble` hold for these flags? (Intel SDM Jcc table) */
static __always_inline bool cc_holds(__u64 fl, __u32 nibble)
{
	bool cf = fl & 1, pf = fl >> 2 & 1, zf = fl >> 6 & 1, sf = fl >> 7 & 1, of = fl >> 11 & 1;
	bool r;

	switch (nibble >> 1) {
	case 0: r = of; break;
	case 1: r = cf; break;
	case 2: r = zf; break;
	case 3: r = cf || zf; break;
	case 4: r = sf; break;
	case 5: r = pf; break;
	case 6: r = sf != of; break;
	default: r = zf || sf != of; break;
	}
	return nibble & 1 ? !r : r;
}

SEC("uprobe")
int span_ret(struct pt_regs *ctx)
{
	__u64 cookie = bpf_get_attach_cookie(ctx), level, fl = ctx->flags;
	__u32 site = SPANS_COOKIE_SITE(cookie), cc = SPANS_COOKIE_CC(cookie);
	__s64 rc = site == SPANS_SITE_TAIL_END ? 0 : (__s64)PT_REGS_RC(ctx);
	struct spans_stack *s;
	struct spans_key k;

	count(SPANS_CNT_HITS);
	if (cc && !cc_holds(fl, cc - 1))
		return 0; /* a conditional jump out, not taken this time */
	if (!span_key(ctx, SPANS_COOKIE_FLAGS(cookie) & SPANS_COOKIE_GO, PT_REGS_SP(ctx), &k, &level))
		return 0;
	s = bpf_map_lookup_elem(&open_spans, &k);
	if (s && s->depth > SPANS_MAX_DEPTH) {
		/* a call nested too deep to be recorded: its own ret (deeper than the last
		 * recorded frame) pops it */
		if (site == SPANS_SITE_RET && level > s->f[SPANS_MAX_DEPTH - 1].level)
			s->depth--;
		return 0;
	}
	if (!s || !s->depth || TOP(s)->level < level) {
		/* no open frame here or deeper: a followed function's own call
		 * (not ours), or a call in flight when the probes attached */
		if (site == SPANS_SITE_RET)
			count(SPANS_CNT_UNMATCHED);
		return 0;
	}
	drop_from(s, level + 1); /* frames deeper than this exit have ended */
	if (!close_top(&k, s, level, SPANS_COOKIE_SPAN(cookie), rc,
		       site == SPANS_SITE_TAIL_END ? TT_SPAN_TAILCALL : TT_SPAN_RETURN) &&
	    site == SPANS_SITE_RET)
		count(SPANS_CNT_UNMATCHED);
	return 0;
}

/* ---- exits that are not returns ------------------------------------------ */

/* End every frame at `level` or deeper as left by an exception or longjmp. */
static __always_inline void unwind_from(struct spans_key *k, struct spans_stack *s, __u64 level,
					__u32 end)
{
	__u64 now = bpf_ktime_get_ns();

	for (int i = 0; i < SPANS_MAX_DEPTH; i++) {
		struct spans_frame f;

		if (!s->depth || s->depth > SPANS_MAX_DEPTH || TOP(s)->level < level)
			return;
		f = *TOP(s);
		s->depth--;
		span_emit(k, &f, s->depth, now, 0, end);
	}
}

/* The stack pointer a longjmp will restore, or 0. */
static __always_inline __u64 longjmp_target_sp(struct pt_regs *ctx)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	__u64 fsbase = BPF_CORE_READ(t, thread.fsbase), guard = 0, m = 0;

	if (bpf_probe_read_user(&m, sizeof(m), (void *)(PT_REGS_PARM1(ctx) + JB_RSP * 8)) ||
	    bpf_probe_read_user(&guard, sizeof(guard), (void *)(fsbase + POINTER_GUARD_OFF)))
		return 0;
	return ((m >> 0x11) | (m << (64 - 0x11))) ^ guard;
}

static __always_inline int span_guard_at(struct pt_regs *ctx, __u32 guard)
{
	__u64 id = bpf_get_current_pid_tgid(), sp = PT_REGS_SP(ctx), to;
	struct spans_key k = { .id = (__u32)id, .pid = id >> 32 };
	struct spans_stack *s = bpf_map_lookup_elem(&open_spans, &k);

	if (!s)
		return 0; /* no span open on this thread: nothing to do */
	count(SPANS_CNT_GUARD_HITS);
	if (guard == SPANS_GUARD_CATCH) {
		/* called from the catching frame: frames at its call level or deeper are gone */
		unwind_from(&k, s, 0 - sp, TT_SPAN_EXCEPTION);
	} else {
		to = longjmp_target_sp(ctx);
		if (!to || to <= sp) {
			count(SPANS_CNT_BAD_JMPBUF);
			return 0;
		}
		unwind_from(&k, s, 0 - to + 1, TT_SPAN_LONGJMP);
	}
	return 0;
}

SEC("uprobe")
int span_guard(struct pt_regs *ctx)
{
	return span_guard_at(ctx, (__u32)bpf_get_attach_cookie(ctx));
}

/* ---- kernels without BPF cookies on uprobes (before 5.15) ------------------
 * A site's cookie says which --span it serves. Without cookies each --span's
 * entry and uretprobe have programs of their own, the span's index compiled
 * in, and each guard kind too; the loader loads these instead of the cookie
 * programs (spans.c). Exits by uprobes on return instructions (Go, files with
 * exception machinery) tell their sites apart by cookie only: refused there. */
#define SPAN_NO_COOKIE(n)                                                       \
	SEC("uprobe")                                                           \
	int span_enter_nc##n(struct pt_regs *ctx)                               \
	{                                                                       \
		return span_enter_at(ctx, SPANS_COOKIE(n, SPANS_SITE_ENTRY, 0, 0)); \
	}                                                                       \
	SEC("uretprobe")                                                        \
	int span_exit_nc##n(struct pt_regs *ctx)                                \
	{                                                                       \
		return span_exit_at(ctx, n);                                    \
	}
SPAN_NO_COOKIE(0)
SPAN_NO_COOKIE(1)
SPAN_NO_COOKIE(2)
SPAN_NO_COOKIE(3)
SPAN_NO_COOKIE(4)
SPAN_NO_COOKIE(5)
SPAN_NO_COOKIE(6)
SPAN_NO_COOKIE(7)
_Static_assert(SPANS_NO_COOKIE_PROGS == 8, "a program pair per --span");

SEC("uprobe")
int span_guard_catch_nc(struct pt_regs *ctx)
{
	return span_guard_at(ctx, SPANS_GUARD_CATCH);
}

SEC("uprobe")
int span_guard_longjmp_nc(struct pt_regs *ctx)
{
	return span_guard_at(ctx, SPANS_GUARD_LONGJMP);
}

/* ---- spans between two USDT probes ---------------------------------------- */

/* Open USDT spans by request. A start whose end never comes (its process
 * died) stays: counted as state-map overflows once it fills. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct spans_mark_key);
	__type(value, struct spans_mark);
} open_marks SEC(".maps");

/* Open marks by a hash of their key: most starts find their slot free and
 * their end finds them there, two array lookups and a compare-and-swap in all.
 * A start whose slot is taken by another open mark goes to open_marks. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SPANS_MARK_SLOTS);
	__type(key, __u32);
	__type(value, struct spans_mark_slot);
} mark_slots SEC(".maps");

static __always_inline struct spans_mark_slot *mark_slot(const struct spans_mark_key *k)
{
	__u32 i = (__u32)(k->id * 0x9E3779B97F4A7C15ull >> 32) ^ k->pid ^ (k->span_id << 7);

	i &= SPANS_MARK_SLOTS - 1;
	return bpf_map_lookup_elem(&mark_slots, &i);
}

/* The start at t in the key's slot: true if it is kept there (the slot was
 * free, or held this very key: a start again whose end was never seen). */
static __always_inline bool mark_slot_start(const struct spans_mark_key *k, __u64 t, __u32 tid)
{
	struct spans_mark_slot *s = mark_slot(k);
	__u64 tag = k->id + 1, was;

	if (!s || !tag)
		return false;
	was = __sync_val_compare_and_swap(&s->tag, 0, tag);
	if (was && !(was == tag && s->pid == k->pid && s->span_id == k->span_id))
		return false;
	if (was)
		count(SPANS_CNT_STALE);
	s->t_start_ns = t;
	s->tid = tid;
	s->pid = k->pid;
	s->span_id = k->span_id;
	return true;
}

/* The key's start from its slot (freed), if it is there. */
static __always_inline bool mark_slot_end(const struct spans_mark_key *k, struct spans_mark *m)
{
	struct spans_mark_slot *s = mark_slot(k);

	if (!s || s->tag != k->id + 1 || s->pid != k->pid || s->span_id != k->span_id)
		return false;
	m->t_start_ns = s->t_start_ns;
	m->tid = s->tid;
	__sync_val_compare_and_swap(&s->tag, k->id + 1, 0);
	return true;
}

static __always_inline bool mark_key(struct pt_regs *ctx, __u64 cookie, struct spans_mark_key *k)
{
	__u64 id = bpf_get_current_pid_tgid();
	long arg = 0;

	k->pid = id >> 32;
	k->span_id = SPANS_COOKIE_SPAN(cookie);
	k->id = (__u32)id;
	if (!(SPANS_COOKIE_FLAGS(cookie) & SPANS_COOKIE_BY_ARG))
		return true;
	if (bpf_usdt_arg(ctx, 0, &arg)) {
		count(SPANS_CNT_NO_ARG);
		return false;
	}
	k->id = (__u64)arg;
	return true;
}

/* slots: the compare-and-swap fast path (mark_slots); the _hash programs do without
 * it, for kernels before 5.12, which load no compare-and-swap instruction at all
 * (not even in code never run: the loader picks the programs). */
static __always_inline int mark_start_at(struct pt_regs *ctx, bool slots)
{
	struct spans_mark m = { .t_start_ns = bpf_ktime_get_ns(),
				.tid = (__u32)bpf_get_current_pid_tgid() };
	struct spans_mark_key k;
	long err;

	count(SPANS_CNT_HITS);
	if (!tt_current_traced() || !mark_key(ctx, bpf_usdt_cookie(ctx), &k))
		return 0;
	if (slots && mark_slot_start(&k, m.t_start_ns, m.tid))
		return 0;
	err = bpf_map_update_elem(&open_marks, &k, &m, BPF_NOEXIST);
	if (err == -EEXIST) { /* the same request started again: its earlier end was never seen */
		count(SPANS_CNT_STALE);
		bpf_map_update_elem(&open_marks, &k, &m, BPF_EXIST);
	} else if (err) {
		tt_count_full(SPANS_MAP_OPEN_MARKS, err);
		count(SPANS_CNT_STATE_FULL);
	}
	return 0;
}

/* A ring message for a span with its request's trace context, with room for a
 * tracestate or without: the message (*ms: the larger one, or NULL; *size: what
 * was reserved), or NULL with the ring full (counted). */
static __always_inline struct spans_context_msg *
context_reserve(bool with_state, struct spans_context_state_msg **ms, __u64 *size)
{
	struct spans_context_msg *m;

	if (with_state) {
		*ms = bpf_ringbuf_reserve(&events, sizeof(**ms), 0);
		m = *ms ? &(*ms)->context : NULL;
		*size = sizeof(**ms);
	} else {
		m = bpf_ringbuf_reserve(&events, sizeof(*m), 0);
		*size = sizeof(*m);
	}
	if (!m)
		count(SPANS_CNT_LOST);
	return m;
}

/* A USDT span ends: with its request's trace context where the end probe offers
 * one (the cookie names the arguments pointing to the traceparent and tracestate
 * values; each read as a string, up to its NUL: the loader keeps it to its line's
 * end), in one message as tcp_emit sends it; else alone. A NULL traceparent is a
 * request without one; one that cannot be read is counted. */
static __always_inline void usdt_emit(struct pt_regs *ctx, __u64 cookie, struct spans_key *k,
				      struct spans_frame *f, __u64 now, __s64 ret)
{
	__u32 parent_arg = SPANS_COOKIE_TRACEPARENT(cookie), tid = (__u32)bpf_get_current_pid_tgid();
	__u32 state_arg = SPANS_COOKIE_TRACESTATE(cookie);
	struct spans_context_state_msg *ms = NULL;
	struct spans_context_msg *m;
	long parent = 0, state = 0;
	__u64 size;

	if (parent_arg) {
		count(SPANS_CNT_USDT_CONTEXT);
		if (bpf_usdt_arg(ctx, parent_arg - 1, &parent)) {
			count(SPANS_CNT_CONTEXT_UNREAD);
			parent = 0;
		}
	}
	if (!parent) {
		span_emit_on(k, f, 0, now, ret, TT_SPAN_RETURN, tid);
		return;
	}
	if (state_arg && bpf_usdt_arg(ctx, state_arg - 1, &state))
		state = 0;
	m = context_reserve(state != 0, &ms, &size);
	if (!m)
		return;
	if (bpf_probe_read_user_str(m->traceparent, sizeof(m->traceparent), (void *)parent) < 0) {
		count(SPANS_CNT_CONTEXT_UNREAD);
		bpf_ringbuf_discard(m, 0);
		span_emit_on(k, f, 0, now, ret, TT_SPAN_RETURN, tid);
		return;
	}
	count(SPANS_CNT_CONTEXT);
	span_fill(&m->span, k, f, 0, now, ret, TT_SPAN_RETURN, tid);
	__builtin_memset(m->traceresponse, 0, sizeof(m->traceresponse));
	if (ms && bpf_probe_read_user_str(ms->tracestate.value, sizeof(ms->tracestate.value),
					  (void *)state) > 1)
		count(SPANS_CNT_TRACESTATE);
	bpf_ringbuf_submit(m, tt_rb_flags(&events, rb_wakeup_bytes, size));
}

static __always_inline int mark_end_at(struct pt_regs *ctx, bool slots)
{
	__u64 cookie = bpf_usdt_cookie(ctx);
	struct spans_mark_key k;
	struct spans_mark *m, kept;
	struct spans_frame f = { .span_id = SPANS_COOKIE_SPAN(cookie) };
	struct spans_key sk = { .pid = bpf_get_current_pid_tgid() >> 32 };
	long ret = 0;

	count(SPANS_CNT_HITS);
	if (!mark_key(ctx, cookie, &k))
		return 0;
	if (slots && mark_slot_end(&k, &kept)) {
		m = &kept;
	} else if ((m = bpf_map_lookup_elem(&open_marks, &k))) {
		kept = *m;
		m = &kept;
		bpf_map_delete_elem(&open_marks, &k);
	} else {
		if (tt_current_traced())
			count(SPANS_CNT_UNMATCHED);
		return 0;
	}
	f.t_start_ns = m->t_start_ns;
	f.tid = m->tid;
	if ((SPANS_COOKIE_FLAGS(cookie) & SPANS_COOKIE_RET_ARG) && bpf_usdt_arg(ctx, 1, &ret))
		count(SPANS_CNT_NO_ARG);
	usdt_emit(ctx, cookie, &sk, &f, bpf_ktime_get_ns(), ret);
	return 0;
}

SEC("usdt")
int span_mark_start(struct pt_regs *ctx)
{
	return mark_start_at(ctx, true);
}

SEC("usdt")
int span_mark_end(struct pt_regs *ctx)
{
	return mark_end_at(ctx, true);
}

SEC("usdt")
int span_mark_start_hash(struct pt_regs *ctx)
{
	return mark_start_at(ctx, false);
}

SEC("usdt")
int span_mark_end_hash(struct pt_regs *ctx)
{
	return mark_end_at(ctx, false);
}

/* ---- a span in one USDT probe --------------------------------------------- */

/* NAME__span(id, t_start_ns[, ret]) at the request's end: the program knows when it
 * began (CLOCK_MONOTONIC, bpf_ktime_get_ns's clock), so one trap makes the span and
 * nothing is kept between marks. Its thread is taken as the start's too. */
#define ONCE_MAX_NS (24 * 3600 * 1000000000ull) /* a start further back is not a time */

SEC("usdt")
int span_mark_once(struct pt_regs *ctx)
{
	__u64 cookie = bpf_usdt_cookie(ctx), now = bpf_ktime_get_ns();
	__u64 id = bpf_get_current_pid_tgid();
	struct spans_frame f = { .span_id = SPANS_COOKIE_SPAN(cookie), .tid = (__u32)id };
	struct spans_key k = { .pid = id >> 32 };
	long t0 = 0, ret = 0;

	count(SPANS_CNT_HITS);
	if (!tt_current_traced())
		return 0;
	if (bpf_usdt_arg(ctx, 1, &t0)) {
		count(SPANS_CNT_NO_ARG);
		return 0;
	}
	if (t0 <= 0 || (__u64)t0 > now || now - (__u64)t0 > ONCE_MAX_NS) {
		count(SPANS_CNT_BAD_START);
		return 0;
	}
	if ((SPANS_COOKIE_FLAGS(cookie) & SPANS_COOKIE_RET_ARG) && bpf_usdt_arg(ctx, 2, &ret))
		count(SPANS_CNT_NO_ARG);
	f.t_start_ns = (__u64)t0;
	usdt_emit(ctx, cookie, &k, &f, now, ret);
	return 0;
}

/* ---- a span from a request's bytes in to the response's out (tcp:PORT) ------ */

/* A request on a server's TCP socket: from its first byte arriving (tcp_probe, in
 * the receiving softirq) to the last byte of its answer leaving (net_dev_queue).
 * The answer is over when the next request's first byte arrives on the socket or
 * the connection closes (inet_sock_set_state): the span is emitted then. No code
 * of the target is touched: for servers whose handler has no function a uprobe
 * can take (JIT code). Connections are request-response (HTTP/1.1 keep-alive,
 * RESP, ...): bytes in while a request is unanswered belong to it. */
const volatile __u16 tcp_port[SPANS_TCP_PORTS] = {}; /* local ports; 0 = unused */
const volatile __u8 tcp_span[SPANS_TCP_PORTS] = {};  /* the --span each port belongs to */
const volatile __u32 tcp_netns = 0;                  /* the target's network namespace (0: any) */
const volatile bool tcp_context = false;             /* read each request's traceparent */

/* Requests by socket. Not an LRU, which may evict one still open: a request
 * never answered is swept by the loader (spans.c tcp_sweep), the entry of a
 * closed connection goes with its close. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SPANS_TCP_SOCKETS);
	__type(key, struct spans_tcp_key);
	__type(value, struct spans_tcp_open);
} tcp_open SEC(".maps");

/* The tracestate header of a request in tcp_open, by the same key, while it is
 * open: few requests carry one, and each takes 512 bytes. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SPANS_TCP_TRACESTATES);
	__type(key, struct spans_tcp_key);
	__type(value, struct spans_tracestate);
} tcp_tracestate SEC(".maps");

/* The --span of a socket of the target's ports, or -1: most packets are not the
 * target's and leave at the port compare. */
static __always_inline int tcp_span_of(bool btf, const struct sock *sk, struct spans_tcp_key *k)
{
	__u16 port = TT_FIELD(btf, sk, __sk_common.skc_num);
	int span = -1;

	for (int i = 0; i < SPANS_TCP_PORTS && tcp_port[i]; i++)
		if (tcp_port[i] == port)
			span = tcp_span[i];
	if (span < 0 || TT_FIELD(btf, sk, sk_protocol) != IPPROTO_TCP)
		return -1;
	if (tcp_netns && (btf ? sk->__sk_common.skc_net.net->ns.inum :
			  BPF_CORE_READ(sk, __sk_common.skc_net.net, ns.inum)) != tcp_netns)
		return -1;
	k->sk = (__u64)sk;
	k->ports = TT_FIELD(btf, sk, __sk_common.skc_portpair);
	return span;
}

/* The TCP payload bytes of skb: past its TCP header, whichever layer's turn it is. */
static __always_inline __s64 tcp_payload(bool btf, const struct sk_buff *skb)
{
	unsigned char *head = TT_FIELD(btf, skb, head), *data = TT_FIELD(btf, skb, data);
	__u16 th = TT_FIELD(btf, skb, transport_header);
	__u8 doff = 0;

	if (bpf_probe_read_kernel(&doff, 1, head + th + 12))
		return 0;
	return (__s64)TT_FIELD(btf, skb, len) - (head + th - data) - (doff >> 4) * 4;
}

/* A request of k is done (answered, or dropped at its connection's close): its
 * tracestate leaves tcp_tracestate. */
static __always_inline void tcp_tracestate_drop(const struct spans_tcp_key *k,
						struct spans_tcp_open *o)
{
	if (!o->tracestate)
		return;
	bpf_map_delete_elem(&tcp_tracestate, k);
	o->tracestate = 0;
}

/* An answered request: its span, on the last target thread that sent its bytes;
 * with the trace context its request or its answer carried, one message of all
 * (of its own size when the request's tracestate goes with it). */
static __always_inline void tcp_emit(const struct spans_tcp_key *k, struct spans_tcp_open *o)
{
	struct spans_frame f = { .t_start_ns = o->t_start_ns, .span_id = o->span_id,
				 .tid = o->tid };
	struct spans_key key = { .pid = o->pid };
	struct spans_context_state_msg *ms = NULL;
	struct spans_tracestate *state = NULL;
	struct spans_context_msg *m;
	__u64 size;

	if (!o->traceparent[0] && !o->traceresponse[0]) {
		span_emit_on(&key, &f, 0, o->t_out_ns, 0, TT_SPAN_RETURN, o->tid);
		return;
	}
	if (o->tracestate)
		state = bpf_map_lookup_elem(&tcp_tracestate, k);
	m = context_reserve(state != NULL, &ms, &size);
	if (!m) {
		tcp_tracestate_drop(k, o);
		return;
	}
	span_fill(&m->span, &key, &f, 0, o->t_out_ns, 0, TT_SPAN_RETURN, o->tid);
	__builtin_memcpy(m->traceparent, o->traceparent, sizeof(m->traceparent));
	__builtin_memcpy(m->traceresponse, o->traceresponse, sizeof(m->traceresponse));
	if (ms && state)
		bpf_probe_read_kernel(&ms->tracestate, sizeof(ms->tracestate), state);
	tcp_tracestate_drop(k, o);
	bpf_ringbuf_submit(m, tt_rb_flags(&events, rb_wakeup_bytes, size));
}

/* How far the socket's reader has read (tcp_sock.copied_seq): read through the
 * sock pointer, whose BTF type is struct sock, not its container. */
static __always_inline __u32 tcp_copied_seq(const struct sock *sk)
{
	return BPF_CORE_READ((const struct tcp_sock *)sk, copied_seq);
}

/* A request starts on its connection: where its bytes begin in the stream, and
 * how far the target has read it, for the trace-context scan (tcp_read). */
static __always_inline void tcp_context_start(bool btf, const struct sock *sk,
					      const struct sk_buff *skb, struct spans_tcp_open *o)
{
	__u32 seq = 0;

	o->context = SPANS_CONTEXT_OFF;
	if (!tcp_context)
		return;
	/* TCP_SKB_CB(skb)->seq: the first word of skb->cb on the receive path */
	if (bpf_probe_read_kernel(&seq, sizeof(seq), (const void *)skb +
				  bpf_core_field_offset(struct sk_buff, cb)))
		return;
	o->req_seq = seq;
	o->read_seq = tcp_copied_seq(sk);
	o->traceparent[0] = 0;
	o->traceresponse[0] = 0;
	o->tracestate = 0;
	o->context = SPANS_CONTEXT_WANTED;
}

/* A request's bytes arrive: the first starts it; after an answer, they end that
 * request and start the next (the entry is reused). */
static __always_inline void tcp_in(bool btf, const struct sock *sk, const struct sk_buff *skb)
{
	struct spans_tcp_key k = {};
	int span = tcp_span_of(btf, sk, &k);
	struct spans_tcp_open *o, fresh = { .span_id = span, .pid = tt_targ_tgids[0] };

	if (span < 0 || tcp_payload(btf, skb) <= 0)
		return;
	o = bpf_map_lookup_elem(&tcp_open, &k);
	if (o && !o->t_out_ns)
		return;
	count(SPANS_CNT_TCP_IN);
	if (o) {
		tcp_emit(&k, o);
		o->t_start_ns = bpf_ktime_get_ns();
		o->t_out_ns = 0;
		o->tid = 0;
		o->pid = tt_targ_tgids[0];
		tcp_context_start(btf, sk, skb, o);
		return;
	}
	fresh.t_start_ns = bpf_ktime_get_ns();
	tcp_context_start(btf, sk, skb, &fresh);
	if (tt_count_full(SPANS_MAP_TCP_OPEN, bpf_map_update_elem(&tcp_open, &k, &fresh, BPF_NOEXIST)))
		count(SPANS_CNT_STATE_FULL);
}

static __always_inline void tcp_answer_read(bool btf, const struct sock *sk,
					    const struct sk_buff *skb, struct spans_tcp_open *o);

/* Bytes of the answer leave: the request ends here unless more follow. Bytes the
 * kernel sends from softirq (held by Nagle or a full window) move the end, not
 * the thread: the thread is taken only while a task owns the socket (lock_sock:
 * its send, or the backlog it processes), not from a softirq that happened to
 * run over a thread of the target (loopback: another connection's send). */
static __always_inline void tcp_out(bool btf, const struct sk_buff *skb)
{
	const struct sock *sk = TT_FIELD(btf, skb, sk);
	__u64 id = bpf_get_current_pid_tgid();
	struct spans_tcp_key k = {};
	struct spans_tcp_open *o;
	bool first, traced;

	if (!sk || tcp_span_of(btf, sk, &k) < 0 || !(o = bpf_map_lookup_elem(&tcp_open, &k)) ||
	    tcp_payload(btf, skb) <= 0)
		return;
	first = tcp_context && !o->t_out_ns; /* the answer's first bytes */
	o->t_out_ns = bpf_ktime_get_ns();
	if (!TT_FIELD(btf, sk, sk_lock.owned)) {
		if (first)
			count(SPANS_CNT_RESPONSE_UNREAD);
		return;
	}
	traced = !(tt_filter & TT_FILTER_TGID) || tt_current_traced();
	if ((tt_filter & TT_FILTER_TGID) ? traced : !o->tid) {
		o->tid = (__u32)id;
		o->pid = id >> 32;
	}
	if (first && traced)
		tcp_answer_read(btf, sk, skb, o);
	else if (first)
		count(SPANS_CNT_RESPONSE_UNREAD);
}

/* The connection leaves ESTABLISHED: its answered request ends; at the close, an
 * unanswered one is dropped (counted). */
static __always_inline void tcp_state(bool btf, const struct sock *sk, int newstate)
{
	struct spans_tcp_key k = {};
	struct spans_tcp_open *o;

	if (newstate == TCP_ESTABLISHED || tcp_span_of(btf, sk, &k) < 0 ||
	    !(o = bpf_map_lookup_elem(&tcp_open, &k)))
		return;
	if (o->t_out_ns)
		tcp_emit(&k, o);
	else if (newstate != TCP_CLOSE)
		return; /* a half-closed connection may still answer */
	else
		count(SPANS_CNT_STALE);
	tcp_tracestate_drop(&k, o);
	bpf_map_delete_elem(&tcp_open, &k);
}

/* ---- the trace context a request carries (its traceparent header) ---------- */

/* The request's first bytes as the target's read() or recv() copied them. */
struct spans_scan {
	char b[2 * SPANS_CONTEXT_SCAN];
	/* where the header's value begins (0: none) and the bytes read: kept in the
	 * map, not in registers, so that the verifier meets one state after the scan
	 * (a register's bounds differ at each turn it left the loop from) */
	__u32 at, n;
	struct spans_tracestate state; /* a request's tracestate, on its way to tcp_tracestate */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2); /* 0: a request's bytes (tcp_read), 1: an answer's */
	__type(key, __u32);
	__type(value, struct spans_scan);
} context_scan SEC(".maps");

#define SYS_READ 0 /* x86-64 */
#define SYS_WRITE 1
#define SYS_READV 19
#define SYS_WRITEV 20
#define SYS_SENDTO 44
#define SYS_RECVFROM 45
#define SYS_SENDMSG 46
#define SYS_RECVMSG 47
#define SEND_VECTOR_MAX 8 /* a writev's or sendmsg's buffers added up, at most */

/* Where the current read(), readv(), recvfrom() or recvmsg() copies to (the first
 * buffer of a vector), from the registers its syscall entered with; 0: another
 * call (splice, io_uring) or unreadable. */
static __always_inline __u64 tcp_read_buffer(void)
{
	struct tt_user_regs r = {};
	struct user_msghdr mh = {};
	struct iovec iov = {};
	__u64 vec;

	if (!tt_user_regs_read(&r))
		return 0;
	if (r.nr == SYS_READ || r.nr == SYS_RECVFROM)
		return r.arg1;
	if (r.nr == SYS_READV)
		vec = r.arg1;
	else if (r.nr == SYS_RECVMSG && !bpf_probe_read_user(&mh, sizeof(mh), (void *)r.arg1))
		vec = (__u64)mh.msg_iov;
	else
		return 0;
	if (bpf_probe_read_user(&iov, sizeof(iov), (void *)vec))
		return 0;
	return (__u64)iov.iov_base;
}

/* The names the scans look for, "\ntraceparent:", "\ntracestate:" and
 * "\ntraceresponse:", as two
 * little-endian words in lower case: HEAD, the newline and the name's first 7
 * bytes; TAIL, the rest with the colon, its bytes in TAIL_MASK. */
#define TRACEPARENT_LEN 13
#define TRACEPARENT_HEAD 0x617065636172740aull /* "\ntracepa" */
#define TRACEPARENT_TAIL 0x3a746e6572ull       /* "rent:" */
#define TRACEPARENT_MASK 0xffffffffffull
#define TRACERESPONSE_LEN 15
#define TRACERESPONSE_HEAD 0x657265636172740aull /* "\ntracere" */
#define TRACERESPONSE_TAIL 0x3a65736e6f7073ull   /* "sponse:" */
#define TRACERESPONSE_MASK 0xffffffffffffffull
#define TRACESTATE_LEN 12
#define TRACESTATE_HEAD 0x747365636172740aull /* "\ntracest" */
#define TRACESTATE_TAIL 0x3a657461ull         /* "ate:" */
#define TRACESTATE_MASK 0xffffffffull
#define HEADERS_END 0x0d0a /* "\n\r": the empty line after the headers */
#define FOLD_CASE 0x2020202020202020ull /* the 0x20 bit: upper-case letters to lower */

/* The first n bytes of an HTTP/1.x request or answer, in b: the value of its
 * header NAME (past the blanks after the colon, to the end of the bytes read or
 * out_bytes - 1, a power of two) into out; out[0] stays 0 without one. The scan
 * ends at the headers' end (an empty line). */
static __always_inline void header_find(struct spans_scan *sc, __u32 n, __u32 name_len,
					__u64 head, __u64 tail, __u64 tail_mask, char *out,
					__u32 out_bytes)
{
	const char *b = sc->b;
	__u32 at, len;

	/* Few branches a turn: the verifier walks every turn and keeps each branch it
	 * has yet to walk (8,192 at most). A match past n, in an earlier scan's bytes,
	 * is refused after the loop; the newline is not folded. */
	sc->at = 0;
	sc->n = n;
	for (__u32 i = 0; i < SPANS_CONTEXT_SCAN - TRACERESPONSE_LEN; i++) {
		__u64 w = *(const __u64 *)(b + i);

		if ((__u16)w == HEADERS_END)
			break;
		if ((w | (FOLD_CASE & ~0xffull)) == head &&
		    ((*(const __u64 *)(b + i + 8) | FOLD_CASE) & tail_mask) == tail) {
			sc->at = i + name_len;
			break;
		}
	}
	at = *(volatile __u32 *)&sc->at; /* from the map, not what the compiler remembers */
	n = *(volatile __u32 *)&sc->n;
	if (!at || at >= SPANS_CONTEXT_SCAN || n > SPANS_CONTEXT_SCAN)
		return;
	for (int k = 0; k < 4 && at < n && (b[at & (2 * SPANS_CONTEXT_SCAN - 1)] == ' ' ||
					     b[at & (2 * SPANS_CONTEXT_SCAN - 1)] == '\t'); k++)
		at++;
	if (at >= n || at >= SPANS_CONTEXT_SCAN)
		return;
	len = n - at;
	if (len > out_bytes - 1)
		len = out_bytes - 1;
	asm volatile("" : "+r"(len)); /* keep the mask: the verifier wants the bound here */
	len &= out_bytes - 1;
	bpf_probe_read_kernel(out, len, b + at);
	out[len] = 0;
	if (!out[0])
		out[0] = '?'; /* an empty value: found, and malformed */
}

/* A request that carried a traceparent: its tracestate header, if any, into
 * tcp_tracestate (counted refused when full). The W3C has a tracestate read only
 * beside a traceparent. */
static __always_inline void tcp_tracestate_read(struct spans_scan *sc, __u32 n,
						const struct spans_tcp_key *k,
						struct spans_tcp_open *o)
{
	sc->state.value[0] = 0;
	header_find(sc, n, TRACESTATE_LEN, TRACESTATE_HEAD, TRACESTATE_TAIL, TRACESTATE_MASK,
		    sc->state.value, SPANS_TRACESTATE_BYTES);
	if (!sc->state.value[0])
		return;
	if (tt_count_full(SPANS_MAP_TCP_TRACESTATE,
			  bpf_map_update_elem(&tcp_tracestate, k, &sc->state, BPF_ANY)))
		return;
	o->tracestate = 1;
	count(SPANS_CNT_TRACESTATE);
}

/* The target read from a request's socket (tcp_rcv_space_adjust, in its read):
 * the socket's read position has moved from read_seq to copied_seq. Once it has
 * passed the request's first byte, the bytes from there are in the buffer the
 * call copied to: look for the traceparent header in the first of them, once,
 * and for a tracestate beside it. */
static __always_inline void tcp_read(bool btf, const struct sock *sk)
{
	struct spans_tcp_key k = {};
	struct spans_tcp_open *o;
	struct spans_scan *sc;
	__u32 start, end, n, zero = 0;
	__u64 buf;

	if (!tcp_context || tcp_span_of(btf, sk, &k) < 0 ||
	    !(o = bpf_map_lookup_elem(&tcp_open, &k)) || o->context != SPANS_CONTEXT_WANTED)
		return;
	end = tcp_copied_seq(sk);
	start = o->read_seq;
	o->read_seq = end;
	if ((__s32)(end - o->req_seq) <= 0) /* the bytes before the request's */
		return;
	o->context = SPANS_CONTEXT_DONE;
	if ((__s32)(o->req_seq - start) < 0 || !(buf = tcp_read_buffer()) ||
	    !(sc = bpf_map_lookup_elem(&context_scan, &zero))) {
		count(SPANS_CNT_CONTEXT_UNREAD);
		return;
	}
	buf += o->req_seq - start;
	n = end - o->req_seq;
	if (n > SPANS_CONTEXT_SCAN)
		n = SPANS_CONTEXT_SCAN;
	asm volatile("" : "+r"(n)); /* keep the mask: the verifier wants the bound here */
	n &= 2 * SPANS_CONTEXT_SCAN - 1;
	if (bpf_probe_read_user(sc->b, n, (void *)buf)) {
		count(SPANS_CNT_CONTEXT_UNREAD);
		return;
	}
	header_find(sc, n, TRACEPARENT_LEN, TRACEPARENT_HEAD, TRACEPARENT_TAIL, TRACEPARENT_MASK,
		    o->traceparent, SPANS_TRACEPARENT_BYTES);
	if (!o->traceparent[0])
		return;
	count(SPANS_CNT_CONTEXT);
	tcp_tracestate_read(sc, n, &k, o);
}

/* Where the current write(), writev(), sendto() or sendmsg() sends from: its
 * first buffer and that buffer's length, and the bytes of the whole call (a
 * vector's buffers added up); false for another call (sendfile, io_uring) or a
 * vector longer than SEND_VECTOR_MAX. */
static __always_inline bool tcp_write_buffer(__u64 *buf, __u64 *len, __u64 *total)
{
	struct tt_user_regs r = {};
	struct user_msghdr mh = {};
	struct iovec iov = {};
	__u64 vec, count = 0;

	if (!tt_user_regs_read(&r) || !tt_user_regs_arg2(&count))
		return false;
	if (r.nr == SYS_WRITE || r.nr == SYS_SENDTO) {
		*buf = r.arg1;
		*len = *total = count;
		return true;
	}
	if (r.nr == SYS_WRITEV) {
		vec = r.arg1;
	} else if (r.nr == SYS_SENDMSG && !bpf_probe_read_user(&mh, sizeof(mh), (void *)r.arg1)) {
		vec = (__u64)mh.msg_iov;
		count = mh.msg_iovlen;
	} else {
		return false;
	}
	if (!count || count > SEND_VECTOR_MAX)
		return false;
	*total = 0;
	for (__u32 k = 0; k < SEND_VECTOR_MAX && k < count; k++) {
		if (bpf_probe_read_user(&iov, sizeof(iov), (void *)(vec + k * sizeof(iov))))
			return false;
		if (!k) {
			*buf = (__u64)iov.iov_base;
			*len = iov.iov_len;
		}
		*total += iov.iov_len;
	}
	return true;
}

/* An answer's first bytes leave (tcp_out, inside the target's send): look for
 * its traceresponse header. The packet's sequence number says where the answer
 * begins in the stream; the call has queued its bytes up to the socket's
 * write_seq, so its first byte is the call's length before that, and the answer
 * begins that far into the call's buffer. A write larger than one push
 * (~64 KiB) breaks the sum: the bytes found there must start "HTTP/" to be read. */
static __always_inline void tcp_answer_read(bool btf, const struct sock *sk,
					    const struct sk_buff *skb, struct spans_tcp_open *o)
{
	unsigned char *head = TT_FIELD(btf, skb, head);
	__u16 th = TT_FIELD(btf, skb, transport_header);
	__u64 buf = 0, len = 0, total = 0;
	__u32 seq = 0, first, off, n, one = 1;
	struct spans_scan *sc;

	if (bpf_probe_read_kernel(&seq, sizeof(seq), head + th + 4) ||
	    !tcp_write_buffer(&buf, &len, &total) ||
	    !(sc = bpf_map_lookup_elem(&context_scan, &one)))
		goto unread;
	first = BPF_CORE_READ((const struct tcp_sock *)sk, write_seq) - (__u32)total;
	off = bpf_ntohl(seq) - first; /* a sequence number before the call's wraps past len */
	if (off >= len)
		goto unread;
	/* the first bytes alone first: another protocol's answers cost no copy; fewer
	 * than 16 bytes hold no HTTP status line */
	if (len - off < 16) {
		count(SPANS_CNT_RESPONSE_NOT_HTTP);
		return;
	}
	if (bpf_probe_read_user(sc->b, 8, (void *)(buf + off)))
		goto unread;
	if (*(const __u32 *)sc->b != 0x50545448 /* "HTTP" */ || sc->b[4] != '/') {
		count(SPANS_CNT_RESPONSE_NOT_HTTP);
		return;
	}
	n = len - off > SPANS_CONTEXT_SCAN ? SPANS_CONTEXT_SCAN : (__u32)(len - off);
	asm volatile("" : "+r"(n)); /* keep the mask: the verifier wants the bound here */
	n &= 2 * SPANS_CONTEXT_SCAN - 1;
	if (bpf_probe_read_user(sc->b, n, (void *)(buf + off)))
		goto unread;
	header_find(sc, n, TRACERESPONSE_LEN, TRACERESPONSE_HEAD, TRACERESPONSE_TAIL,
		    TRACERESPONSE_MASK, o->traceresponse, SPANS_TRACEPARENT_BYTES);
	if (o->traceresponse[0])
		count(SPANS_CNT_RESPONSE_CONTEXT);
	return;
unread:
	count(SPANS_CNT_RESPONSE_UNREAD);
}

SEC("tp_btf/tcp_rcv_space_adjust")
int BPF_PROG(span_tcp_read_btf, struct sock *sk)
{
	tcp_read(true, sk);
	return 0;
}

SEC("raw_tp/tcp_rcv_space_adjust")
int BPF_PROG(span_tcp_read_raw, struct sock *sk)
{
	tcp_read(false, sk);
	return 0;
}

SEC("tp_btf/tcp_probe")
int BPF_PROG(span_tcp_in_btf, struct sock *sk, const struct sk_buff *skb)
{
	tcp_in(true, sk, skb);
	return 0;
}

SEC("raw_tp/tcp_probe")
int BPF_PROG(span_tcp_in_raw, struct sock *sk, const struct sk_buff *skb)
{
	tcp_in(false, sk, skb);
	return 0;
}

SEC("tp_btf/net_dev_queue")
int BPF_PROG(span_tcp_out_btf, struct sk_buff *skb)
{
	tcp_out(true, skb);
	return 0;
}

SEC("raw_tp/net_dev_queue")
int BPF_PROG(span_tcp_out_raw, struct sk_buff *skb)
{
	tcp_out(false, skb);
	return 0;
}

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(span_tcp_state_btf, const struct sock *sk, int oldstate, int newstate)
{
	tcp_state(true, sk, newstate);
	return 0;
}

SEC("raw_tp/inet_sock_set_state")
int BPF_PROG(span_tcp_state_raw, const struct sock *sk, int oldstate, int newstate)
{
	tcp_state(false, sk, newstate);
	return 0;
}
