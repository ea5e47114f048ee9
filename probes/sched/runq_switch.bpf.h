/* SPDX-License-Identifier: MIT */
/*
 * Run-queue latency in the kernel: the state sched.bpf.c keeps per traced
 * thread for the runq event and what a switch does to it. The switch records'
 * program (sched.bpf.c switch_task) does this work too when runq is traced
 * with a typed hook (with_runq): one program per switch; runq's own switch
 * programs (runq_switch_*) load only for the classic tracepoints and --debug
 * split-switch. The includer defines `aggregate`, `rb_wakeup_bytes` and
 * `skip_steps`.
 *
 * Under tp_btf a thread's runq and sched state share one task-storage slot
 * (struct tt_thread): the switch program finds prev's and next's with one
 * lookup each instead of two. A slot lookup is cheap when warm, but with a
 * hundred threads on two CPUs next's slot is cold: each separate slot costs
 * its own cache misses.
 */
#ifndef TT_RUNQ_SWITCH_BPF_H
#define TT_RUNQ_SWITCH_BPF_H
#include <bpf/bpf_helpers.h>
#include <tailtrace/records.h>
#include "export/aggregate.bpf.h"
#include "core/counter.bpf.h"
#include "core/filter.bpf.h"
#include "sched/occupancy.bpf.h"
#include "sched/runq.h"
#include "sched/sched.h"
#include "sched/sched_map_full.bpf.h"
#include "sched/throttle.bpf.h"

/* One thread's state under tp_btf (the sched part unused without sched),
 * and with --aggregate its own histograms (aggregate.bpf.h). rq comes
 * first: runq_thread_of() relies on it. Laid out for the switch-in of a
 * thread whose slot is cold (a hundred threads on two CPUs): what it reads,
 * rq and the first part of off, sits in the slot's first two cache lines
 * (the kernel puts the data 8 bytes into a line of its own). */
struct tt_thread {
	struct runq_start rq;
	struct sched_off off;
	struct runq_kacct ka;
	struct tt_lhists h;
};
_Static_assert(8 + __builtin_offsetof(struct runq_start, throttle_base) <= 64,
	       "runq_start but its throttle base fills the first line");
_Static_assert(8 + sizeof(struct runq_start) + __builtin_offsetof(struct sched_off, sites) <= 128,
	       "what a switch-in reads of sched_off is in the second line");

/* A new slot: zeroed (no interval, an empty stack cache). */
static const struct tt_thread tt_thread_init;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 32 << 20); /* resized by the loader (--ringbuf-mb) */
} runq_rb SEC(".maps");

/* Per traced thread: struct tt_thread in task storage under tp_btf (typed task
 * pointers: no hashing, freed with the task); struct runq_start in a
 * tid-keyed hash under raw_tp and classic tracepoints. The loader creates
 * only the one its hook uses (features_select_progs); btf is a compile-time
 * constant in every program. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct tt_thread);
} start_btf SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct runq_start);
} start_ids SEC(".maps");

TT_HIST_MAP(runq_hist);
/* --aggregate: each run-queue wait's throttled part, when above 0 (sub 0); the same
 * wait is in runq_hist whole */
TT_HIST_MAP(throttle_hist);

/* enum runq_counter (runq.h), summed by the loader */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, RUNQ_CNT_NR);
	__type(key, __u32);
	__type(value, __u64);
} runq_counters SEC(".maps");

/* tp_btf: the thread's slot; made if create and it has none. NULL: none, or
 * allocation failed. */
static __always_inline struct tt_thread *tt_thread_get(struct task_struct *t, bool create)
{
	return bpf_task_storage_get(&start_btf, t, create ? (void *)&tt_thread_init : 0,
				    create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
}

/* The thread's slot, or NULL (none yet; or allocation failed / map full). */
static __always_inline struct runq_start *runq_slot_find(bool btf, struct task_struct *t,
							 __u32 tid)
{
	if (btf) {
		struct tt_thread *th = tt_thread_get(t, false);

		return th ? &th->rq : NULL;
	}
	return bpf_map_lookup_elem(&start_ids, &tid);
}

/* The thread's slot, made (zeroed) if it has none. */
static __always_inline struct runq_start *runq_slot(bool btf, struct task_struct *t, __u32 tid)
{
	struct runq_start *s;

	if (btf) {
		struct tt_thread *th = tt_thread_get(t, true);

		return th ? &th->rq : NULL;
	}
	s = bpf_map_lookup_elem(&start_ids, &tid);
	if (!s) {
		static const struct runq_start zero;

		tt_count_full(SCHED_MAP_START_IDS,
			      bpf_map_update_elem(&start_ids, &tid, &zero, BPF_NOEXIST));
		s = bpf_map_lookup_elem(&start_ids, &tid);
	}
	return s;
}

static __always_inline void runq_open_interval(struct runq_start *s, __u64 now, __u32 pid,
					       __u32 waker, __u32 waker_pid, __u8 ctx, __u8 kind)
{
	s->pid = pid;
	s->waker_tid = waker;
	s->waker_pid = waker_pid;
	s->waker_ctx = ctx;
	s->kind = kind;
	s->t_runnable_ns = now;
}

/* The tp_btf slot a runq slot is part of (rq is its first member); NULL
 * outside tp_btf, where runq slots stand alone in start_ids. */
static __always_inline struct tt_thread *runq_thread_of(bool btf, struct runq_start *s)
{
	_Static_assert(__builtin_offsetof(struct tt_thread, rq) == 0, "rq first");
	return btf ? (struct tt_thread *)s : NULL;
}

static __always_inline void occ_batch_out(struct runq_msg *m)
{
	if (bpf_ringbuf_output(&runq_rb, m, sizeof(*m), tt_rb_flags(&runq_rb, rb_wakeup_bytes, sizeof(*m))))
		tt_count(&occ_counters, OCC_CNT_LOST);
}

static __always_inline void runq_fill(struct tt_runq *r, __u32 tid, __u32 pid, __u64 t0, __u64 now,
				      __u8 kind, __u32 waker, __u32 waker_pid, __u8 ctx,
				      __u64 throttled_ns)
{
	r->t_runnable_ns = t0;
	r->t_run_ns = now;
	r->pid = pid;
	r->tid = tid;
	r->cpu = bpf_get_smp_processor_id();
	r->waker_tid = waker;
	r->waker_pid = waker_pid;
	r->kind = kind;
	r->waker_ctx = ctx;
	__builtin_memset(r->pad, 0, sizeof(r->pad));
	r->throttled_ns = throttled_ns;
}

/* --aggregate: a wait's throttled part into th's histogram (tp_btf) or throttle_hist. */
static __always_inline void runq_throttled_add(struct tt_thread *th, __u32 tid, __u32 pid,
					       __u64 throttled_ns)
{
	if (!throttled_ns)
		return;
	if (th)
		tt_lhist_add(&th->h, TT_LHIST_THROTTLED, throttled_ns);
	else
		tt_hist_add(&throttle_hist, TT_HIST_RUNQ, tid, pid, 0, throttled_ns);
}

/* One runnable interval [t0, now] of tid into a histogram (in th, the
 * thread's tp_btf slot, if it has one; else in runq_hist), or filled into *r
 * to be sent: true. With the cpu event the switches of this CPU that cover
 * the wait go out in batches (occupancy.bpf.h); occ_want marks them. t: the
 * thread (NULL in the classic variant), whose throttled part is taken. */
static __always_inline bool runq_take(bool btf, struct tt_thread *th, struct task_struct *t,
				      struct runq_start *s, __u32 tid, __u32 pid, __u64 t0,
				      __u64 now, __u8 kind, __u32 waker, __u32 waker_pid, __u8 ctx,
				      struct tt_runq *r)
{
	__u32 sub = kind == TT_RUNQ_PREEMPT ? TT_RUNQ_SUB_PREEMPT : TT_RUNQ_SUB_WAKEUP;

	if (aggregate && occ_on)
		occ_blame_wait(tid, pid, t0, now);
	if (aggregate && th) {
		tt_lhist_add(&th->h, sub, now - t0);
		runq_throttled_add(th, tid, pid, throttle_take(btf, t, s, now - t0));
		return false;
	}
	if (aggregate) {
		tt_hist_add(&runq_hist, TT_HIST_RUNQ, tid, pid, sub, now - t0);
		runq_throttled_add(NULL, tid, pid, throttle_take(btf, t, s, now - t0));
		return false;
	}
	if (skip_steps & SCHED_SKIP_RUNQ_RB)
		return false;
	if (occ_on && !(skip_steps & SCHED_SKIP_OCC_EMIT))
		occ_want(t0);
	runq_fill(r, tid, pid, t0, now, kind, waker, waker_pid, ctx,
		  throttle_take(btf, t, s, now - t0));
	return true;
}

/* A run-queue record on its own ring; with the cpu event as the header of a
 * runq_msg (read as a bare tt_runq without it). */
static __always_inline void runq_send(const struct tt_runq *r)
{
	const __u32 head = __builtin_offsetof(struct runq_msg, occ);
	struct runq_msg *m = bpf_ringbuf_reserve(&runq_rb, head, 0);

	if (!m) {
		tt_count(&runq_counters, RUNQ_CNT_LOST);
		return;
	}
	m->r = *r;
	m->kind = RUNQ_MSG_RUNQ;
	m->nocc = 0;
	bpf_ringbuf_submit(m, tt_rb_flags(&runq_rb, rb_wakeup_bytes, head));
}

/* Move a thread's run-queue histograms into runq_hist: at its exit, and from
 * sched.bpf.c's drain iterator runq_drain_btf. */
static __always_inline void runq_lhist_drain_at(struct tt_thread *th, __u32 tid, __u32 pid,
						bool final)
{
	__u32 id = hist_by_process ? pid : tid;

	tt_lhist_drain(&th->h, TT_RUNQ_SUB_WAKEUP, &runq_hist, TT_HIST_RUNQ, final, id, pid,
		       TT_RUNQ_SUB_WAKEUP);
	tt_lhist_drain(&th->h, TT_RUNQ_SUB_PREEMPT, &runq_hist, TT_HIST_RUNQ, final, id, pid,
		       TT_RUNQ_SUB_PREEMPT);
	tt_lhist_drain(&th->h, TT_LHIST_THROTTLED, &throttle_hist, TT_HIST_RUNQ, final, id, pid, 0);
}

/* From the drain iterator: what a full map refuses stays for the next drain. */
static __always_inline void runq_lhist_drain(struct tt_thread *th, __u32 tid, __u32 pid)
{
	runq_lhist_drain_at(th, tid, pid, false);
}

/* ---- --aggregate under tp_btf: the kernel's own accounting -------------
 *
 * With CONFIG_SCHED_INFO the scheduler keeps each task's run-queue wait
 * itself (the figures of /proc/PID/schedstat): sched_info.last_queued is
 * the rq clock at its enqueue (wakeup, creation, or a preemption's
 * requeue), and each wait is added to sched_info.run_delay at the task's
 * switch-in (sched_info_arrive), or at a dequeue while queued (migration).
 * The sched_switch tracepoint fires before that switch-in is accounted, so
 * next's wait is run_delay's growth since its last switch-out (the parts
 * before a migration) plus rq clock - last_queued: what the kernel is about
 * to add. No sched_waking or sched_wakeup_new program runs. The wait starts
 * at the enqueue, as bcc's runqlat measures it (sched_wakeup), not at
 * sched_waking as the records do (`perf sched`): a remote wakeup's IPI is
 * not in it. */
const volatile bool runq_kacct = false;
/* Bumped by the loader before each attach after the first (--toggle-ms): a
 * switch-out from before a detached stretch is not this thread's last. */
__u32 runq_attach_gen = 0;

/* sched_entity.sched_delayed (EEVDF's delayed dequeue, 6.12+), where the
 * kernel has it: a task that blocked and is still queued. */
struct sched_entity___delayed {
	unsigned char sched_delayed;
} __attribute__((preserve_access_index));

static __always_inline bool runq_se_delayed(struct task_struct *t)
{
	struct sched_entity___delayed *se = (void *)&t->se;

	return bpf_core_field_exists(se->sched_delayed) && se->sched_delayed;
}

/* May the kernel's total hold part of the thread's sleep? A thread that
 * blocked but stayed queued (delayed dequeue) and was then migrated got its
 * last_queued set by that migration while it slept (sched_info_enqueue):
 * the kernel then counts the rest of the sleep as run-queue wait (seen here:
 * a 2.6 s "wait" of a thread asleep in pthread_join). Such a wait is not
 * counted (unmatched). */
static __always_inline bool runq_kacct_tainted(const struct tt_thread *th,
					       struct task_struct *t)
{
	return th->rq.kind == TT_RUNQ_WAKEUP && th->rq.out_delayed &&
	       (__u32)t->se.nr_migrations != th->ka.out_migrations;
}

/* Is the thread's last switch-out pending, and from this attach? One from
 * before a detached stretch (--toggle-ms) is forgotten: what came between
 * is unknown, not a lost edge. */
static __always_inline bool runq_kacct_out_pending(struct tt_thread *th)
{
	if (th->rq.switched_out && th->ka.out_attach != runq_attach_gen)
		th->rq.switched_out = 0;
	return th->rq.switched_out;
}

/* The histogram of the wait that follows the thread's last switch-out. */
static __always_inline __u32 runq_kacct_sub(const struct tt_thread *th)
{
	return th->rq.kind == TT_RUNQ_PREEMPT ? TT_RUNQ_SUB_PREEMPT : TT_RUNQ_SUB_WAKEUP;
}

/* prev (traced) switched out: what its next wait is measured from. th: its
 * slot (NULL: none could be made). */
static __always_inline void runq_kacct_out(struct tt_thread *th, struct task_struct *prev,
					   bool prev_runnable, bool prev_dead, __u32 tid,
					   __u32 pid)
{
	if (!th) {
		tt_count(&runq_counters, RUNQ_CNT_LOST); /* map full */
		return;
	}
	if (runq_kacct_out_pending(th)) {
		/* Its switch-in never reached the tracepoint (mostly an idle
		 * CPU's: docs/probes/sched.md, "Unmatched intervals"). The kernel
		 * still added that wait to run_delay: counted all the same. */
		tt_count(&runq_counters, RUNQ_CNT_UNMATCHED);
		if (!runq_kacct_tainted(th, prev))
			tt_lhist_add(&th->h, runq_kacct_sub(th),
				     prev->sched_info.run_delay - th->ka.run_delay_ns);
	}
	th->rq.switched_out = !prev_dead;
	if (prev_dead) { /* task storage goes with the task: move its histograms now */
		runq_lhist_drain_at(th, tid, pid, true);
		return;
	}
	th->rq.kind = prev_runnable ? TT_RUNQ_PREEMPT : TT_RUNQ_WAKEUP;
	th->rq.throttle_noted = 0;
	if (prev_runnable) /* a sleeper's is noted at its wakeup (sched_wakeup) */
		throttle_note(true, prev, &th->rq);
	th->rq.out_delayed = !prev_runnable && runq_se_delayed(prev);
	th->ka.out_migrations = (__u32)prev->se.nr_migrations;
	th->ka.out_attach = runq_attach_gen;
	th->ka.run_delay_ns = prev->sched_info.run_delay;
}

/* next's slot: made for a new thread (it never ran: its first wait is from
 * its creation), else only found. */
static __always_inline struct tt_thread *runq_kacct_slot(struct task_struct *next)
{
	return tt_thread_get(next, next->sched_info.pcount == 0);
}

/* next (traced) switched in: its wait since its switch-out, or since its
 * creation. A thread whose switch-out came before tailtrace attached is
 * skipped: its wait's kind is unknown. */
static __always_inline void runq_kacct_in(struct tt_thread *th, struct task_struct *next)
{
	__u64 queued = next->sched_info.last_queued, wait = 0, clock;
	bool new_task = next->sched_info.pcount == 0;

	if (!th || (!runq_kacct_out_pending(th) && !new_task))
		return;
	if (th->rq.switched_out && runq_kacct_tainted(th, next)) {
		tt_count(&runq_counters, RUNQ_CNT_UNMATCHED);
		th->rq.switched_out = 0;
		return;
	}
	if (th->rq.switched_out)
		wait = next->sched_info.run_delay - th->ka.run_delay_ns;
	if (queued) {
		clock = next->se.cfs_rq->rq->clock; /* this CPU's: next is on it */
		if (clock > queued)
			wait += clock - queued;
	}
	tt_lhist_add(&th->h, th->rq.switched_out ? runq_kacct_sub(th) : TT_RUNQ_SUB_WAKEUP, wait);
	runq_throttled_add(th, next->pid, next->tgid, throttle_take(true, next, &th->rq, wait));
	th->rq.switched_out = 0;
	if (occ_on && wait) { /* --listen with the cpu event: who held the CPU meanwhile */
		__u64 now = bpf_ktime_get_ns();

		occ_blame_wait(next->pid, next->tgid, now - wait, now);
	}
}

/* A task iterator (SEC "iter/task") named name that calls drain(th, tid,
 * tgid) on every thread with a slot; it writes nothing (aggregate_drain). */
#define TT_THREAD_DRAIN_ITER(name, drain)                                        \
	SEC("iter/task")                                                         \
	int name(struct bpf_iter__task *ctx)                                     \
	{                                                                        \
		struct task_struct *t = ctx->task;                               \
		struct tt_thread *th = t ? tt_thread_get(t, false) : NULL;       \
									         \
		if (th)                                                          \
			drain(th, t->pid, t->tgid);                              \
		return 0;                                                        \
	}

/* prev (the current task, traced) switched out; s: its slot, NULL if it has
 * none. Preempted: a runnable interval opens now. Blocked: the thread waits
 * for its sched_waking, which may already have run on another CPU while it
 * was switching out (runq.h); the waking is kept. Slots are reused in place
 * while the thread lives. Returns the start of a wait whose switch-in never
 * reached the tracepoint (0: none), so the switch records can mark the
 * stretch from it a gap: the only sign of a new thread's first switch-in
 * missed, since its switch slot saw nothing before. */
static __always_inline __u64 runq_switch_out(bool btf, struct runq_start *s,
					     struct task_struct *prev, __u64 now,
					     bool prev_runnable, bool prev_dead, __u32 prev_tid,
					     __u32 prev_pid, bool clear_blocked)
{
	__u64 missed_in_from = 0;

	/* Running, so an open interval or a pending wait is stale: its
	 * switch-in never reached the tracepoint (seen on 6.x under load). */
	if (s && (s->t_runnable_ns || s->t_blocked_ns) && !clear_blocked) {
		tt_count(&runq_counters, RUNQ_CNT_UNMATCHED);
		missed_in_from = s->t_runnable_ns ? s->t_runnable_ns : s->t_blocked_ns;
	}
	if (prev_dead) {
		if (!btf) /* task storage goes with the task */
			bpf_map_delete_elem(&start_ids, &prev_tid);
		else if (aggregate && s) /* ... and its histograms with it: move them now */
			runq_lhist_drain_at(runq_thread_of(btf, s), prev_tid, prev_pid, true);
		return missed_in_from;
	}
	if (!s)
		return 0;
	if (prev_runnable) {
		runq_open_interval(s, now, prev_pid, 0, 0, TT_WAKER_NONE, TT_RUNQ_PREEMPT);
		s->t_blocked_ns = 0;
		throttle_note(btf, prev, s);
		return missed_in_from;
	}
	s->throttle_noted = 0; /* its wakeup notes it again (sched_wakeup) */
	s->pid = prev_pid;
	s->t_runnable_ns = 0;
	s->t_blocked_ns = now;
	return missed_in_from;
}

/* Was the pending waking the one that ended this wait? After the blocked
 * switch-out, or before it while the thread was still on its CPU; with no
 * switch-out seen (the first after attaching), a waking of a thread off CPU. */
static __always_inline bool runq_waking_ends_wait(const struct runq_start *s, __u64 w)
{
	if (!w)
		return false;
	if (s->t_blocked_ns)
		return w >= s->t_blocked_ns || s->waking_on_cpu;
	return !s->waking_on_cpu;
}

/* next (traced; a guess in the classic variant: only traced threads ever
 * have a pending interval) switched in; s: its slot or NULL. The wait it
 * closes is sent, or with out filled into *out for the caller to send with
 * the switch record (sched.bpf.c): true then. */
static __always_inline bool runq_switch_in(bool btf, struct runq_start *s,
					   struct task_struct *next, __u32 next_tid, __u64 now,
					   struct tt_runq *out)
{
	struct tt_thread *th = runq_thread_of(btf, s);
	struct tt_runq r, *dst = out ? out : &r;
	bool took = false;
	__u64 w, t0;

	if (!s)
		return false;
	w = s->t_waking_ns;
	if (s->t_runnable_ns) { /* preempted, or a new task */
		took = runq_take(btf, th, next, s, next_tid, s->pid, s->t_runnable_ns, now, s->kind,
				 s->waker_tid, s->waker_pid, s->waker_ctx, dst);
	} else if (runq_waking_ends_wait(s, w)) {
		t0 = w > s->t_blocked_ns ? w : s->t_blocked_ns; /* woken while switching out */
		took = runq_take(btf, th, next, s, next_tid, s->pid, t0, now, TT_RUNQ_WAKEUP,
				 s->waking_tid, s->waking_pid, s->waking_ctx, dst);
	} else if (s->t_blocked_ns) {
		tt_count(&runq_counters, RUNQ_CNT_UNMATCHED); /* its waking was never seen */
	}
	s->t_runnable_ns = 0;
	s->t_blocked_ns = 0;
	s->t_waking_ns = 0;
	s->throttle_noted = 0;
	if (took && !out)
		runq_send(&r);
	return took && out;
}

/* Both, finding the slots. out: as in runq_switch_in; *missed_in_from (if
 * not NULL): runq_switch_out's. */
static __always_inline bool runq_on_switch(bool btf, struct task_struct *prev,
					   struct task_struct *next, __u64 now, bool prev_traced,
					   bool prev_runnable, bool prev_dead, __u32 prev_tid,
					   __u32 prev_pid, bool next_traced, __u32 next_tid,
					   bool clear_blocked, struct tt_runq *out,
					   __u64 *missed_in_from)
{
	__u64 missed = 0;

	if (prev_traced)
		missed = runq_switch_out(btf, prev_runnable ? runq_slot(btf, prev, prev_tid) :
								runq_slot_find(btf, prev, prev_tid),
					 prev, now, prev_runnable, prev_dead, prev_tid, prev_pid,
					 clear_blocked);
	if (missed_in_from)
		*missed_in_from = missed;
	return next_traced &&
	       runq_switch_in(btf, runq_slot_find(btf, next, next_tid), next, next_tid, now, out);
}

#endif
