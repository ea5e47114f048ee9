// SPDX-License-Identifier: MIT
/*
 * Off-CPU intervals, off-CPU stacks, migrations and the traced threads.
 *
 *   sched_switch, prev traced   off[prev] = {now, cpu, state, voluntary, stacks};
 *                               tasks[prev] created / comm refreshed
 *   sched_switch, next          off[next] -> one struct tt_switch (or a histogram slot)
 *   sched_migrate_task          tasks[p].migrations++ (--aggregate: migrate_hist)
 *   sched_switch, prev dead     tasks[prev] sent to the loader and deleted
 *                               (retire_tasks: the map holds live threads)
 *
 * prev is the current task at sched_switch, so its kernel and user stacks are
 * taken there (blocked switch-outs only: a preempted thread's time is run-queue
 * time, see runq). The stack ids are kept in the record only when the interval
 * lasted at least min_offcpu_ns. Per-thread slots are reused in place
 * (t_off_ns = 0 marks a thread on CPU): one task-storage lookup, shared with
 * runq (a tid hash outside tp_btf), per switch-out and per switch-in.
 *
 * Wait reason: at a blocking switch-out the thread's user registers (saved at
 * its kernel entry, bpf_task_pt_regs) say which syscall it sleeps in and with
 * what arguments, as /proc/PID/syscall does: futex address, fd, pollfd array.
 * No uprobe and no syscall tracepoint: two loads at a switch we already take.
 *
 * voluntary = not preempted and prev_state != TASK_RUNNING: the 6.x
 * sched_switch passes `preempt` explicitly (tp_btf, raw_tp); the classic
 * tracepoint encodes it as TASK_REPORT_MAX (0x100) in prev_state.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <tailtrace/records.h>
#include "core/filter.bpf.h"
#include "sched/switch_clock.bpf.h"
#include "sched/user_regs.bpf.h"
#include "sched/waker_ctx.bpf.h"
#include "export/aggregate.bpf.h"
#include "sched/wait_reason.h"
#include "sched/sched.h"
#include "symbols/stack_epoch.bpf.h"
#include "core/counter.bpf.h"

/* What the programs could not do, or did, by SCHED_CNT_* (sched.h): per CPU, so
 * that no cache line bounces between the CPUs on the switch path; the loader sums
 * them (probe_counter_sum). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SCHED_CNT_NR);
	__type(key, __u32);
	__type(value, __u64);
} sched_counters SEC(".maps");

#include "sched/user_stack.bpf.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define TASK_RUNNING 0
#define TASK_DEAD 0x80
#define TP_REPORT_MAX 0x100   /* classic prev_state: preempted */
#define TP_REPORT_DEAD 0x10   /* classic prev_state: X */
#define TP_REPORT_ZOMBIE 0x20 /* classic prev_state: Z */

const volatile bool aggregate = false;   /* histogram of blocked time only */
const volatile bool emit_switch = true;  /* a record per interval (else: only stacked ones) */
const volatile bool want_stacks = true;  /* offcpu: stacks at blocking switch-outs */
const volatile __u64 min_offcpu_ns = 0;
const volatile bool kstack_reuse = true; /* see struct sched_off */
const volatile __u64 rb_wakeup_bytes = 1 << 20;
const volatile bool want_reason = true;  /* wait reasons (user_regs.bpf.h) */
const volatile bool with_runq = false;   /* do runq's switch work too (runq_switch.bpf.h) */
const volatile bool shared_clock = true; /* runq's own switch program runs too: one time for both */
const volatile __u32 skip_steps = 0;     /* enum sched_skip (--debug skip=STEP): benchmarks only */
const volatile bool retire_tasks = false; /* an exited thread's tasks entry goes to the loader */

#include "sched/runq_switch.bpf.h"
#include "sched/sched_map_full.bpf.h"

/* sched_switch passes prev_state since 5.18 (the loader reads the tracepoint's
 * prototype in the kernel's BTF: features_switch_state_arg). Before, a typed or
 * raw program that reads a fourth argument does not attach: the state is read
 * from prev instead, as the tracepoint itself did (task_struct.__state since
 * 5.14, .state before). */
const volatile bool switch_state_arg = true;

struct task_struct___pre514 {
	long state;
} __attribute__((preserve_access_index));

static __always_inline unsigned int task_state(bool btf, struct task_struct *t)
{
	if (bpf_core_field_exists(t->__state))
		return TT_FIELD(btf, t, __state);
	return (unsigned int)BPF_CORE_READ((struct task_struct___pre514 *)t, state);
}

/* prev_state of a sched_switch: its fourth argument, or prev's own state. */
#define SWITCH_PREV_STATE(btf, ctx, prev) \
	(switch_state_arg ? (unsigned int)(ctx)[3] : task_state(btf, prev))

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 32 << 20); /* resized by the loader (--ringbuf-mb) */
} switch_rb SEC(".maps");

/* One slot per live traced thread. Under tp_btf the off part of the thread's
 * task-storage slot, shared with runq (runq_switch.bpf.h: struct tt_thread,
 * freed with the task); under raw_tp and classic tracepoints a tid-keyed
 * hash, deleted at the thread's final (TASK_DEAD) switch-out. The loader
 * creates only the one its hook uses (features_select_progs). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct sched_off);
} off_ids SEC(".maps");

/* The stack map and its spill maps (sched.h): one size, so one bucket index;
 * and the second generation (one entry each unless the flight recorder). */
#define SCHED_STACK_MAP(name) TT_STACK_MAP(name, SCHED_STACK_ENTRIES, SCHED_STACK_DEPTH)
SCHED_STACK_MAP(stacks);
SCHED_STACK_MAP(stacks_spill);
SCHED_STACK_MAP(stacks_spill2);
SCHED_STACK_MAP(stacks1);
SCHED_STACK_MAP(stacks1_spill);
SCHED_STACK_MAP(stacks1_spill2);

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct tt_task);
} tasks SEC(".maps");

TT_HIST_MAP(offcpu_hist);
TT_HIST_MAP(migrate_hist); /* --aggregate: migrations, as the count of slot 0 */


/* A task's id in the PID namespace it was made in (its pid's deepest level: a
 * container's own numbers), as getpid() says it there. */
static __always_inline __u32 ns_id_of(struct pid *p)
{
	unsigned int level = BPF_CORE_READ(p, level);
	struct upid up = {};

	if (level > 32)
		return 0;
	bpf_probe_read_kernel(&up, sizeof(up), &p->numbers[level]);
	return (__u32)up.nr;
}

/* The current thread's pid and tid in its own PID namespace, into t. */
static __always_inline void task_ns_ids(struct tt_task *t)
{
	struct task_struct *cur = (struct task_struct *)bpf_get_current_task();

	t->ns_tid = ns_id_of(BPF_CORE_READ(cur, thread_pid));
	t->ns_pid = ns_id_of(BPF_CORE_READ(cur, group_leader, thread_pid));
}

/* A thread's last switch-out: its tasks entry sent on switch_rb (a record of its
 * own size, sched.c) and deleted, so the map holds the live threads however many
 * come and go. A full ring keeps the entry: read at the end, as before. */
static __always_inline void task_retire(__u32 tid)
{
	struct tt_task *t = bpf_map_lookup_elem(&tasks, &tid), *m;

	if (!t || !(m = bpf_ringbuf_reserve(&switch_rb, sizeof(*m), 0)))
		return;
	__builtin_memcpy(m, t, sizeof(*m));
	bpf_ringbuf_submit(m, tt_rb_flags(&switch_rb, rb_wakeup_bytes, sizeof(*m)));
	bpf_map_delete_elem(&tasks, &tid);
}

static __always_inline struct tt_task *task_get(__u32 tid, __u32 pid)
{
	struct tt_task *t = bpf_map_lookup_elem(&tasks, &tid);

	if (!t) {
		struct tt_task n = { .pid = pid, .tid = tid };

		tt_count_full(SCHED_MAP_TASKS, bpf_map_update_elem(&tasks, &tid, &n, BPF_NOEXIST));
		t = bpf_map_lookup_elem(&tasks, &tid);
	}
	return t;
}

/* id, unless the level before refused the stack (EEXIST: its bucket holds
 * another stack, sched.h): then the stack's id in this level's map. */
static __always_inline long stack_spill(void *ctx, void *map, __u64 flags, int level, long id)
{
	if (id != -17 /* EEXIST */)
		return id;
	id = bpf_get_stackid(ctx, map, flags);
	return id >= 0 ? id + level * SCHED_STACK_ENTRIES : id;
}

/* A stack's id in one generation's maps, or a negative errno. */
static __always_inline long stack_take(void *ctx, __u64 flags, void *map, void *spill, void *spill2)
{
	long id = bpf_get_stackid(ctx, map, flags);

	id = stack_spill(ctx, spill, flags, 1, id);
	return stack_spill(ctx, spill2, flags, 2, id);
}

static __always_inline __s32 stack_id(void *ctx, __u64 flags, __u32 epoch)
{
	long id = epoch & 1 ? stack_take(ctx, flags, &stacks1, &stacks1_spill, &stacks1_spill2) :
			      stack_take(ctx, flags, &stacks, &stacks_spill, &stacks_spill2);

	if (id < 0) {
		if (id != -14 /* EFAULT: no user stack (kernel thread) */)
			tt_count(&sched_counters, SCHED_CNT_STACK_ERR);
		return -1;
	}
	return (__s32)(id + (long)epoch * SCHED_STACK_IDS);
}

/* raw_tp and classic tracepoints: the thread's slot, made if it has none
 * (NULL: map full). */
static __always_inline struct sched_off *off_slot(__u32 tid)
{
	struct sched_off *s = bpf_map_lookup_elem(&off_ids, &tid);

	if (!s) {
		tt_count_full(SCHED_MAP_OFF_IDS,
			      bpf_map_update_elem(&off_ids, &tid, &tt_thread_init.off, BPF_NOEXIST));
		s = bpf_map_lookup_elem(&off_ids, &tid);
	}
	return s;
}

/* The stack cache's key of a call site (sched.h): user IP, SP and frame pointer
 * and the return address above that frame, mixed; never 0 (an empty site). */
static __always_inline __u64 stack_site_key(const struct tt_user_regs *u_at, __u64 ret)
{
	return (u_at->ip * 0x9e3779b97f4a7c15ull ^ u_at->sp * 0xc2b2ae3d27d4eb4full ^
		u_at->bp * 0x165667b19e3779f9ull ^ ret * 0x27d4eb2f165667c5ull) | 1;
}

_Static_assert((SCHED_STACK_SITES & (SCHED_STACK_SITES - 1)) == 0, "a power of two");

/* The cached site of key, or the one with user stack u (ustack: match on u):
 * its index, SCHED_STACK_SITES when none is in this epoch. */
static __always_inline __u32 stack_site_find(const struct sched_off *s, __u64 key, __s32 u,
					     bool ustack, __u16 epoch)
{
	for (__u32 i = 0; i < SCHED_STACK_SITES; i++) {
		const struct sched_stack_site *e = &s->sites[i];

		if (e->key && e->epoch == epoch && (ustack ? e->ustack_id == u : e->key == key))
			return i;
	}
	return SCHED_STACK_SITES;
}

static __always_inline bool stack_site_spent(const struct sched_stack_site *e);

/* With copied user stacks (user_stack.h): the cached site of key whose copy's
 * unwind found the return addresses the stack at sp holds now (*path 1), one not
 * checked yet (-1), or one uncontested between its checks (2,
 * SCHED_USTACK_CHECK_EVERY); SCHED_STACK_SITES when none (*collided: a site of
 * key held another path, which is then contested). Two call paths that block
 * with equal registers (the same function called from two places at one depth,
 * without frame pointers) share a key: each has a site, told apart by its words. */
static __always_inline __u32 stack_site_find_copied(struct sched_off *s, __u64 key, __u16 epoch,
						    __u64 sp, int *path, bool *collided)
{
	for (__u32 i = 0; i < SCHED_STACK_SITES; i++) {
		struct sched_stack_site *e = &s->sites[i];

		if (e->key != key || e->epoch != epoch)
			continue;
		if (!e->contested && !stack_site_spent(e) &&
		    (e->uses & (SCHED_USTACK_CHECK_EVERY - 1))) {
			*path = 2;
			return i;
		}
		*path = ustack_path_holds(e->ustack_id, sp);
		if (*path < 0)
			tt_count(&sched_counters, SCHED_CNT_USTACK_UNCHECKED);
		if (*path)
			return i;
		e->contested = 1;
		*collided = true;
	}
	if (*collided)
		tt_count(&sched_counters, SCHED_CNT_USTACK_COLLISION);
	*path = -1;
	return SCHED_STACK_SITES;
}

static __always_inline bool stack_site_spent(const struct sched_stack_site *e)
{
	return e->uses >= e->budget;
}

/* Site i's stacks were taken afresh (sched.h): its budget doubles if they are
 * the ones it had, else starts over. */
static __always_inline void stack_site_refresh(struct sched_stack_site *e, __s32 u, __s32 k)
{
	tt_count(&sched_counters, SCHED_CNT_REFRESH);
	if (e->ustack_id == u && e->kstack_id == k) {
		e->budget = e->budget < SCHED_KSTACK_REUSE_MAX / 2 ? e->budget * 2
								  : SCHED_KSTACK_REUSE_MAX;
		return;
	}
	tt_count(&sched_counters, SCHED_CNT_REFRESH_CHANGED);
	e->budget = SCHED_KSTACK_REUSE;
}

static __always_inline void take_stacks(void *ctx, struct sched_off *s, __u32 tid,
					const struct tt_user_regs *u_at)
{
	__u32 epoch = stack_epoch, i, j = SCHED_STACK_SITES;
	__u16 uses = 0, budget = SCHED_KSTACK_REUSE;
	bool collided = false;
	int path = -1;
	struct sched_stack_site *e;
	__u64 ret = 0, key;
	__s32 u, k;

	/* the frame pointer's return address tells apart two callers whose frames are the
	 * same size (equal IP, SP and BP at the same blocking call) */
	if (u_at->bp)
		bpf_probe_read_user(&ret, sizeof(ret), (void *)(u_at->bp + 8));
	key = stack_site_key(u_at, ret);
	if (!kstack_reuse || !u_at->ip)
		i = SCHED_STACK_SITES;
	else if (ustack_copy_bytes)
		i = stack_site_find_copied(s, key, (__u16)epoch, u_at->sp, &path, &collided);
	else
		i = stack_site_find(s, key, 0, false, (__u16)epoch);
	if (i < SCHED_STACK_SITES && !stack_site_spent(&s->sites[i])) { /* same call site */
		s->ustack_id = s->sites[i].ustack_id;
		s->kstack_id = s->sites[i].kstack_id;
		s->sites[i].uses++;
		return;
	}
	tt_count(&sched_counters, SCHED_CNT_UNWIND);
	if (!ustack_copy_bytes)
		u = stack_id(ctx, BPF_F_USER_STACK, epoch);
	else if (path == 1) /* a spent site on the same path: its copy stays */
		u = s->sites[i & (SCHED_STACK_SITES - 1)].ustack_id;
	else if ((u = ustack_copy(ctx, u_at, s->pid, tid)) >= 0)
		tt_count(&sched_counters, SCHED_CNT_USTACK_COPIES);
	if (kstack_reuse && u >= 0 && i == SCHED_STACK_SITES && !ustack_copy_bytes)
		j = stack_site_find(s, 0, u, true, (__u16)epoch);
	if (j < SCHED_STACK_SITES && !stack_site_spent(&s->sites[j])) {
		/* a new site on a known user stack: its kernel stack */
		k = s->sites[j].kstack_id;
		uses = ++s->sites[j].uses;
		budget = s->sites[j].budget;
	} else {
		k = stack_id(ctx, 0, epoch);
	}
	s->ustack_id = u;
	s->kstack_id = k;
	if (i < SCHED_STACK_SITES) { /* its budget spent: taken afresh in its place */
		e = &s->sites[i & (SCHED_STACK_SITES - 1)];
		stack_site_refresh(e, u, k);
		budget = e->budget;
	} else { /* a new site: contested if it is there because another path had its key */
		e = &s->sites[s->site_next++ & (SCHED_STACK_SITES - 1)];
		e->contested = collided;
	}
	e->key = key;
	e->ustack_id = u;
	e->kstack_id = k;
	e->uses = uses;
	e->budget = budget;
	e->epoch = (__u16)epoch;
}

/* The syscall the current (blocking) task sleeps in (user_regs.bpf.h): nr,
 * first and second argument (futex: address and op; read: fd; poll: pollfd
 * array and nfds; the pollfd's own fd would cost a user-memory read per
 * switch); and its user IP, SP and frame pointer for the stack cache. */
static __always_inline void take_wait_reason(struct sched_off *s, bool voluntary,
					     struct tt_user_regs *r)
{
	s->syscall = -1;
	s->wait_addr = 0;
	s->wait_aux = 0;
	if (!want_reason || (skip_steps & SCHED_SKIP_REASON) || !voluntary ||
	    !tt_user_regs_read(r) || r->nr < 0)
		return;
	s->syscall = (__s32)r->nr;
	s->wait_addr = r->arg0;
	s->wait_aux = (__s32)r->arg1;
}

static __always_inline void switch_fill(struct tt_switch *r, const struct sched_off *s, __u32 tid,
					__u64 now, bool stacked)
{
	r->t_off_ns = s->t_off_ns;
	r->t_on_ns = now;
	r->pid = s->pid;
	r->tid = tid;
	r->cpu_off = s->cpu_off;
	r->cpu_on = bpf_get_smp_processor_id();
	r->kstack_id = stacked ? s->kstack_id : -1;
	r->ustack_id = stacked ? s->ustack_id : -1;
	r->prev_state = s->prev_state;
	r->wait_addr = s->wait_addr;
	r->syscall = s->syscall;
	r->wait_aux = s->wait_aux;
	r->voluntary = s->voluntary;
	r->unmatched = 0;
	r->pad[0] = r->pad[1] = 0;
}

/* The switch record of the interval s closes now, with rq, the run-queue wait
 * this switch-in closes (NULL: none), in the same message (struct
 * sched_in_msg); rq goes on its own ring when no switch record is written. */
static __always_inline void emit(struct sched_off *s, __u32 tid, __u64 now,
				 const struct tt_runq *rq)
{
	bool stacked = now - s->t_off_ns >= min_offcpu_ns;
	struct sched_in_msg *m;
	struct tt_switch *r;

	if ((!emit_switch && !(stacked && s->kstack_id >= 0)) || (skip_steps & SCHED_SKIP_SWITCH_RB)) {
		if (rq)
			runq_send(rq);
		return;
	}
	if (rq) {
		m = bpf_ringbuf_reserve(&switch_rb, sizeof(*m), 0);
		if (!m) {
			tt_count(&sched_counters, SCHED_CNT_LOST);
			tt_count(&runq_counters, RUNQ_CNT_LOST);
			return;
		}
		switch_fill(&m->sw, s, tid, now, stacked);
		m->rq = *rq;
		bpf_ringbuf_submit(m, tt_rb_flags(&switch_rb, rb_wakeup_bytes, sizeof(*m)));
		return;
	}
	r = bpf_ringbuf_reserve(&switch_rb, sizeof(*r), 0);
	if (!r) {
		tt_count(&sched_counters, SCHED_CNT_LOST);
		return;
	}
	switch_fill(r, s, tid, now, stacked);
	bpf_ringbuf_submit(r, tt_rb_flags(&switch_rb, rb_wakeup_bytes, sizeof(*r)));
}

/* An edge the kernel never reported (docs/probes/sched.md, "Unmatched intervals"):
 * count it and, unless only histograms are kept, write [t_from, now] as a
 * gap record so the analysis knows the thread's state there is unknown
 * instead of taking it for time on CPU. */
static __always_inline void unmatched(struct sched_off *s, __u32 tid, __u64 t_from, __u64 now)
{
	struct tt_switch *r;

	tt_count(&sched_counters, SCHED_CNT_UNMATCHED);
	if (aggregate || !emit_switch)
		return;
	r = bpf_ringbuf_reserve(&switch_rb, sizeof(*r), 0);
	if (!r) {
		tt_count(&sched_counters, SCHED_CNT_LOST);
		return;
	}
	__builtin_memset(r, 0, sizeof(*r));
	r->t_off_ns = t_from;
	r->t_on_ns = now;
	r->pid = s->pid;
	r->tid = tid;
	r->cpu_off = r->cpu_on = bpf_get_smp_processor_id();
	r->kstack_id = r->ustack_id = -1;
	r->syscall = -1;
	r->unmatched = 1;
	bpf_ringbuf_submit(r, tt_rb_flags(&switch_rb, rb_wakeup_bytes, sizeof(*r)));
}

/* prev (the current task, traced) switched out; s: its slot (NULL: none
 * could be made); missed_in_from: the start of the wait runq found still
 * pending (runq_switch_out; 0: none, or runq not traced). */
static __always_inline void on_switch_out(void *ctx, bool btf, struct sched_off *s, __u64 now,
					  __u32 tid, __u32 pid, __u32 state, bool voluntary, bool dead,
					  __u64 missed_in_from)
{
	struct tt_user_regs u_at = {};

	if (!s) {
		tt_count(&sched_counters, SCHED_CNT_LOST); /* map full */
		return;
	}
	/* A thread running again without its switch-in having reached the
	 * tracepoint (seen on 6.x under load): that interval is lost. Count it
	 * and record the stretch as a gap: off CPU, then on, split unknown.
	 * A thread this slot never saw come in or go out (a new thread's first
	 * run) shows it only by runq's pending wait: the gap is from its start. */
	if (s->t_off_ns) {
		unmatched(s, tid, s->t_off_ns, now);
	} else if (missed_in_from && !s->t_on_ns) {
		s->pid = pid;
		unmatched(s, tid, missed_in_from, now);
	}
	/* comm: taken when the thread is first seen and when it exits (a name
	 * set later is picked up from /proc at the end if it still lives).
	 * --listen names processes only: their leaders (the exporter deletes
	 * them once exited, so the map holds live processes). */
	if ((!s->task_seen || dead) && (!hist_by_process || tid == pid)) {
		struct tt_task *t = task_get(tid, pid);

		if (t) {
			bpf_get_current_comm(t->comm, sizeof(t->comm));
			task_ns_ids(t);
		}
		s->task_seen = 1;
	}
	if (dead) { /* its last switch-out: no interval will close */
		if (retire_tasks && !hist_by_process)
			task_retire(tid);
		if (btf) /* task storage goes with the task */
			s->t_off_ns = 0;
		else
			bpf_map_delete_elem(&off_ids, &tid);
		return;
	}
	s->pid = pid;
	s->cpu_off = bpf_get_smp_processor_id();
	s->prev_state = state;
	s->voluntary = voluntary;
	s->kstack_id = s->ustack_id = -1;
	take_wait_reason(s, voluntary, &u_at);
	if (want_stacks && voluntary && !aggregate && !(skip_steps & SCHED_SKIP_STACKS))
		take_stacks(ctx, s, tid, &u_at);
	s->t_off_ns = now;
}

/* next (traced) switched in; s: its slot, NULL when it has none; th: the
 * tp_btf slot s is part of (NULL outside tp_btf); pid: its tgid (0: not
 * known here, the slot was made at a switch-out that set it); rq: the
 * run-queue wait this switch-in closes, to be sent (NULL: none). */
static __always_inline void on_switch_in(struct tt_thread *th, struct sched_off *s, __u32 tid,
					 __u32 pid, __u64 now, const struct tt_runq *rq)
{
	__u32 reason;

	if (rq && (!s || !s->t_off_ns)) /* no switch record for it to go with */
		runq_send(rq);
	if (!s)
		return;
	if (!s->t_off_ns) { /* its switch-out never reached the tracepoint */
		if (s->t_on_ns)
			unmatched(s, tid, s->t_on_ns, now);
		else if (pid) /* a slot made here: its first switch-in seen */
			s->pid = pid;
		s->t_on_ns = now;
		return;
	}
	s->t_on_ns = now;
	if (!aggregate)
		emit(s, tid, now, rq);
	else if (s->voluntary && (emit_switch || want_stacks)) {
		reason = tt_wait_reason(s->syscall);
		if (th)
			tt_lhist_add(&th->h, TT_LHIST_OFFCPU + reason, now - s->t_off_ns);
		else
			tt_hist_add(&offcpu_hist, TT_HIST_SWITCH, tid, s->pid, reason,
				    now - s->t_off_ns);
	}
	s->t_off_ns = 0;
}

/* Move a thread's off-CPU histograms and migrations into offcpu_hist and
 * migrate_hist: at its exit, and from the drain iterator below. */
static __always_inline void sched_lhist_drain_at(struct tt_thread *th, __u32 tid, __u32 pid,
						 bool final)
{
	__u32 id = hist_by_process ? pid : tid;
	struct tt_hist *h;
	__u64 n;

	for (int r = 0; r < TT_WAIT_NR; r++)
		tt_lhist_drain(&th->h, TT_LHIST_OFFCPU + r, &offcpu_hist, TT_HIST_SWITCH, final, id,
			       pid, r);
	n = th->h.migrations;
	if (!n)
		return;
	if (!(h = tt_hist_get(&migrate_hist, id, pid, 0))) {
		if (final)
			tt_hist_refuse(TT_HIST_SWITCH, n);
		return;
	}
	__sync_fetch_and_add(&th->h.migrations, -n);
	__sync_fetch_and_add(&h->slots[0], n);
	__sync_fetch_and_add(&h->count, n);
}

/* From the drain iterator: what a full map refuses stays for the next drain. */
static __always_inline void sched_lhist_drain(struct tt_thread *th, __u32 tid, __u32 pid)
{
	sched_lhist_drain_at(th, tid, pid, false);
}

/* ---- tp_btf and raw_tp ---------------------------------------------------- */

/* Is this switch-in the thread's first run ever? (sched_info's count of runs
 * is raised after the tracepoint.) For --debug skip=first-run. */
static __always_inline bool first_run(bool btf, struct task_struct *t)
{
	return (btf ? t->sched_info.pcount : BPF_CORE_READ(t, sched_info.pcount)) == 0;
}

static __always_inline int switch_task(void *ctx, bool btf, bool preempt,
				       struct task_struct *prev, struct task_struct *next,
				       unsigned int prev_state)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 next_tid = TT_FIELD(btf, next, pid);
	bool blocked = !preempt && prev_state != TASK_RUNNING;
	bool prev_traced = tt_task_traced_ids_v(btf, prev, (__u32)(id >> 32), (__u32)id);
	bool next_traced = tt_task_traced_v(btf, next);
	bool runq = with_runq && !(skip_steps & SCHED_SKIP_RUNQ);
	struct tt_runq rq; /* the wait next's switch-in closes, sent with its switch record */
	bool has_rq = false;
	__u64 now, missed_in_from = 0;

	if ((skip_steps & SCHED_SKIP_FIRST_RUN) && next_traced && first_run(btf, next))
		next_traced = false; /* its switch-in unseen; prev's switch-out is */
	if (!prev_traced && !next_traced) { /* no shared clock either: switch_clock.bpf.h */
		if (runq && occ_on)
			occ_note(btf, next, bpf_ktime_get_ns(), false);
		return 0;
	}
	now = shared_clock ? tt_switch_now((__u32)id, next_tid) : bpf_ktime_get_ns();
	if (skip_steps & SCHED_SKIP_BODY)
		return 0;
	if (runq)
		occ_note(btf, next, now, next_traced);
	if (btf) { /* one slot per thread for both parts */
		bool kacct = runq && runq_kacct;
		struct tt_thread *tp = prev_traced ? tt_thread_get(prev, true) : NULL;
		/* next's slot is made at its first switch-in too: a first
		 * switch-out the kernel never reports is then a gap from here,
		 * not a stretch no record covers (runq_kacct_in skips a new slot) */
		struct tt_thread *tn = next_traced ? tt_thread_get(next, true) : NULL;

		if ((prev_traced && !tp) || (next_traced && !tn))
			tt_count(&sched_counters, SCHED_CNT_NO_SLOT);
		if (skip_steps & SCHED_SKIP_AFTER_SLOTS)
			return 0;
		if (kacct && prev_traced)
			runq_kacct_out(tp, prev, !blocked, prev_state == TASK_DEAD, (__u32)id,
				       (__u32)(id >> 32));
		if (kacct && next_traced)
			runq_kacct_in(tn, next);
		if (runq && !kacct && prev_traced)
			missed_in_from = runq_switch_out(btf, tp ? &tp->rq : NULL, prev, now,
							 !blocked, prev_state == TASK_DEAD,
							 (__u32)id, (__u32)(id >> 32), false);
		if (runq && !kacct && next_traced)
			has_rq = runq_switch_in(btf, tn ? &tn->rq : NULL, next, next_tid, now, &rq);
		if (prev_traced)
			on_switch_out(ctx, btf, tp ? &tp->off : NULL, now, (__u32)id,
				      (__u32)(id >> 32), blocked ? prev_state : 0, blocked,
				      prev_state == TASK_DEAD, missed_in_from);
		if (aggregate && prev_state == TASK_DEAD && tp) /* task storage goes with it */
			sched_lhist_drain_at(tp, (__u32)id, (__u32)(id >> 32), true);
		if (next_traced && tn)
			on_switch_in(tn, &tn->off, next_tid, TT_FIELD(btf, next, tgid), now,
				     has_rq ? &rq : NULL);
		return 0;
	}
	if (runq)
		has_rq = runq_on_switch(btf, prev, next, now, prev_traced, !blocked,
					prev_state == TASK_DEAD, (__u32)id, (__u32)(id >> 32),
					next_traced, next_tid, false, &rq, &missed_in_from);
	if (prev_traced)
		on_switch_out(ctx, btf, off_slot((__u32)id), now, (__u32)id, (__u32)(id >> 32),
			      blocked ? prev_state : 0, blocked, prev_state == TASK_DEAD,
			      missed_in_from);
	if (next_traced)
		on_switch_in(NULL, off_slot(next_tid), next_tid, TT_FIELD(btf, next, tgid), now,
			     has_rq ? &rq : NULL);
	return 0;
}

static __always_inline int on_migrate(bool btf, struct task_struct *p, int dest_cpu)
{
	struct runq_start *s;
	struct tt_thread *th;
	struct tt_task *t;

	if (!tt_task_traced_v(btf, p))
		return 0;
	if (throttle_clock != TT_THROTTLE_NONE &&
	    (s = runq_slot_find(btf, p, TT_FIELD(btf, p, pid))))
		throttle_migrate(btf, p, dest_cpu, s);
	if (aggregate && btf && (th = tt_thread_get(p, false))) {
		__sync_fetch_and_add(&th->h.migrations, 1);
		return 0;
	}
	if (aggregate) {
		tt_hist_add(&migrate_hist, TT_HIST_SWITCH, TT_FIELD(btf, p, pid),
			    TT_FIELD(btf, p, tgid), 0, 0);
		return 0;
	}
	t = task_get(TT_FIELD(btf, p, pid), TT_FIELD(btf, p, tgid));
	if (t)
		__sync_fetch_and_add(&t->migrations, 1);
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch_btf, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return switch_task(ctx, true, preempt, prev, next, SWITCH_PREV_STATE(true, ctx, prev));
}

SEC("tp_btf/sched_migrate_task")
int BPF_PROG(sched_migrate_btf, struct task_struct *p, int dest_cpu)
{
	return on_migrate(true, p, dest_cpu);
}

/* --aggregate under tp_btf: every thread's off-CPU histograms and migrations
 * moved into the maps (aggregate_drain runs it before they are read). */
TT_THREAD_DRAIN_ITER(sched_drain_btf, sched_lhist_drain)

/* A task that execs takes its new name where it was already named as a CPU's
 * occupant (a shell that became the program is not a "bash" holding the CPU). */
static __always_inline int on_exec(void)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct occ_name *n;

	if (!occ_on)
		return 0;
	n = bpf_map_lookup_elem(&occ_names, &tid);
	if (n)
		bpf_get_current_comm(n->comm, sizeof(n->comm));
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(sched_exec_btf, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	return on_exec();
}

SEC("raw_tp/sched_process_exec")
int BPF_PROG(sched_exec_raw, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	return on_exec();
}

SEC("raw_tp/sched_switch")
int BPF_PROG(sched_switch_raw, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return switch_task(ctx, false, preempt, prev, next, SWITCH_PREV_STATE(false, ctx, prev));
}

SEC("raw_tp/sched_migrate_task")
int BPF_PROG(sched_migrate_raw, struct task_struct *p, int dest_cpu)
{
	return on_migrate(false, p, dest_cpu);
}

/* ---- classic tracepoints: a thread is known once it switched out traced -- */

SEC("tp/sched/sched_switch")
int sched_switch_tp(struct trace_event_raw_sched_switch *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u64 now = tt_switch_now((__u32)id, ctx->next_pid);
	long state = ctx->prev_state;
	bool blocked = !(state & TP_REPORT_MAX) && (state & 0xff) != TASK_RUNNING;

	__u32 next_tid = ctx->next_pid;

	if (tt_current_traced())
		on_switch_out(ctx, false, off_slot((__u32)id), now, (__u32)id, (__u32)(id >> 32),
			      blocked ? (__u32)(state & 0xff) : 0, blocked,
			      state & (TP_REPORT_DEAD | TP_REPORT_ZOMBIE), 0);
	if (next_tid)
		on_switch_in(NULL, bpf_map_lookup_elem(&off_ids, &next_tid), next_tid, 0, now, NULL);
	return 0;
}

SEC("tp/sched/sched_migrate_task")
int sched_migrate_tp(struct trace_event_raw_sched_migrate_task *ctx)
{
	__u32 tid = ctx->pid;
	struct tt_task *t;

	if (aggregate) { /* any traced thread that switched out (tasks may hold leaders only) */
		struct sched_off *s = bpf_map_lookup_elem(&off_ids, &tid);

		if (s && s->pid)
			tt_hist_add(&migrate_hist, TT_HIST_SWITCH, tid, s->pid, 0, 0);
		return 0;
	}
	t = bpf_map_lookup_elem(&tasks, &tid);
	if (t)
		__sync_fetch_and_add(&t->migrations, 1);
	return 0;
}

/*
 * Run-queue latency of traced threads (the runq event).
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
	if (!s->t_runnable_ns) {
		runq_open_interval(s, bpf_ktime_get_ns(), pid, (__u32)id, (__u32)(id >> 32),
				   TT_WAKER_TASK, TT_RUNQ_WAKEUP_NEW);
		throttle_note(btf, p, s);
	}
}

/* sched_wakeup: p (traced) is queued on the CPU it will wait on, after any
 * migration its wakeup made: the throttled time of its wait is measured from
 * here (throttle.bpf.h). Loaded only where the kernel keeps throttle totals. */
static __always_inline int wakeup_task(bool btf, struct task_struct *p)
{
	struct runq_start *s;

	if (!tt_task_traced_v(btf, p) || !(s = runq_slot_find(btf, p, TT_FIELD(btf, p, pid))))
		return 0;
	throttle_note(btf, p, s);
	return 0;
}

/* ---- tp_btf and raw_tp: typed task pointers ---------------------------- */

static __always_inline int wakeup_new_task(bool btf, struct task_struct *p)
{
	if (tt_task_traced_v(btf, p))
		on_wakeup_new(btf, p, TT_FIELD(btf, p, pid), TT_FIELD(btf, p, tgid));
	return 0;
}

static __always_inline int waking_task(bool btf, struct task_struct *p)
{
	if (tt_task_traced_v(btf, p))
		on_waking(btf, p, TT_FIELD(btf, p, pid), TT_FIELD(btf, p, tgid),
			  TT_FIELD(btf, p, on_cpu));
	return 0;
}

static __always_inline int runq_switch_task(bool btf, bool preempt, struct task_struct *prev,
					    struct task_struct *next, unsigned int prev_state)
{
	__u64 id = bpf_get_current_pid_tgid();
	bool prev_traced = tt_task_traced_ids_v(btf, prev, (__u32)(id >> 32), (__u32)id);
	bool next_traced = tt_task_traced_v(btf, next);
	__u32 next_tid = TT_FIELD(btf, next, pid);

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
		       (__u32)(id >> 32), next_traced, next_tid, false, NULL, NULL);
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

SEC("tp_btf/sched_wakeup")
int BPF_PROG(runq_wakeup_btf, struct task_struct *p)
{
	return wakeup_task(true, p);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(runq_switch_btf, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return runq_switch_task(true, preempt, prev, next, SWITCH_PREV_STATE(true, ctx, prev));
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

SEC("raw_tp/sched_wakeup")
int BPF_PROG(runq_wakeup_raw, struct task_struct *p)
{
	return wakeup_task(false, p);
}

SEC("raw_tp/sched_switch")
int BPF_PROG(runq_switch_raw, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return runq_switch_task(false, preempt, prev, next, SWITCH_PREV_STATE(false, ctx, prev));
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
		tt_count_full(SCHED_MAP_TRACKED, bpf_map_update_elem(&tracked, &child, &tgid, BPF_ANY));
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
		tt_count_full(SCHED_MAP_TRACKED, bpf_map_update_elem(&tracked, &tid, &tgid, BPF_ANY));
	else if (known && (!traced || (state & (TP_REPORT_DEAD | TP_REPORT_ZOMBIE))))
		bpf_map_delete_elem(&tracked, &tid); /* exited, or a forked child of another tgid */
	runq_on_switch(false, NULL, NULL, tt_switch_now(tid, ctx->next_pid), traced, runnable,
		       state & (TP_REPORT_DEAD | TP_REPORT_ZOMBIE), tid, tgid, ctx->next_pid != 0,
		       ctx->next_pid, true, NULL, NULL);
	return 0;
}
