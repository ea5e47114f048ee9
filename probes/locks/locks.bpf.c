// SPDX-License-Identifier: MIT
/*
 * pthread mutex acquisitions: uprobes on pthread_mutex_{lock,trylock,unlock}
 * and a uretprobe on lock/trylock, in the libc the target maps.
 *
 *   lock/trylock entry   pending[tid] = {mutex, now}
 *   futex() syscall      pending[tid].flags |= CONTENDED (slow path taken)
 *   lock/trylock return  0: held[(tid, mutex)] = {t_request, now, ustack}
 *                        else (trylock busy): remember it, count it
 *   unlock entry         held[(tid, mutex)] -> one struct tt_lock record
 *   cond_*wait entry     like unlock; its return: a new hold (CONDVAR)
 *
 * CONTENDED rule: the call entered futex(), or waited longer than
 * contended_ns, or a trylock of the same mutex by the same thread failed
 * since its last acquisition. Recursive mutexes: re-acquisitions by the
 * owner bump a depth; the record is emitted at the matching last unlock.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <tailtrace/records.h>
#include "locks/locks.h"
#include "core/filter.bpf.h"
#include "core/counter.bpf.h"
#include "core/map_full.h"
#include "export/aggregate.bpf.h"
#include "symbols/stack_epoch.bpf.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

const volatile bool aggregate = false;     /* histograms only, no records */
const volatile bool capture_stacks = true; /* user stack at acquisition */
/* wait above this = contended: well above the uprobe+uretprobe round trip
 * itself (~10-20 us on the CI VMs), so only real waits qualify */
const volatile __u64 contended_ns = 100000;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct locks_pending);
} pending SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct locks_held_key);
	__type(value, struct locks_held);
} held SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct locks_held_key);
	__type(value, __u8);
} tryfailed SEC(".maps");

/* tid -> mutex released by a pthread_cond_*wait in progress */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u64);
} condwait SEC(".maps");

/* two generations taking turns (the second: the flight recorder's) */
TT_STACK_MAP(stacks, LOCKS_STACK_ENTRIES, LOCKS_STACK_DEPTH);
TT_STACK_MAP(stacks1, LOCKS_STACK_ENTRIES, LOCKS_STACK_DEPTH);

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LOCKS_CNT_NR);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

TT_MAP_FULL_COUNTS(LOCKS_MAP_NR); /* updates refused for want of room, by map */

/* --aggregate: per-thread log2 histograms (aggregate.h) */
TT_HIST_MAP(wait_hists);
TT_HIST_MAP(hold_hists);

static __always_inline void count(__u32 idx)
{
	tt_count(&counters, idx);
}

static __always_inline int on_lock_enter(__u64 mutex, __u32 flags)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	count(LOCKS_CNT_HITS);
	if (!tt_current_traced())
		return 0;
	struct locks_pending p = {
		.mutex = mutex,
		.t_request_ns = bpf_ktime_get_ns(),
		.flags = flags,
	};

	if (tt_count_full(LOCKS_MAP_PENDING, bpf_map_update_elem(&pending, &tid, &p, BPF_ANY)))
		count(LOCKS_CNT_STATE_FULL);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(mutex_lock_enter, void *mutex)
{
	return on_lock_enter((__u64)mutex, 0);
}

SEC("uprobe")
int BPF_KPROBE(mutex_trylock_enter, void *mutex)
{
	return on_lock_enter((__u64)mutex, TT_LOCK_TRYLOCK);
}

SEC("tracepoint/syscalls/sys_enter_futex")
int futex_enter(void *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct locks_pending *p = bpf_map_lookup_elem(&pending, &tid);

	if (p)
		p->flags |= TT_LOCK_CONTENDED;
	return 0;
}

static __always_inline void on_acquired(void *ctx, struct locks_pending *p, __u64 id, __u64 now)
{
	struct locks_held_key key = { .mutex = p->mutex, .tid = (__u32)id };
	struct locks_held *h = bpf_map_lookup_elem(&held, &key);
	struct locks_held v = {};

	if (h) { /* recursive mutex re-acquired by its owner */
		h->depth++;
		return;
	}
	v.t_request_ns = p->t_request_ns;
	v.t_acquired_ns = now;
	v.pid = id >> 32;
	v.flags = p->flags;
	v.ustack_id = -1;
	if (now - p->t_request_ns > contended_ns)
		v.flags |= TT_LOCK_CONTENDED;
	if (bpf_map_lookup_elem(&tryfailed, &key)) {
		v.flags |= TT_LOCK_CONTENDED;
		bpf_map_delete_elem(&tryfailed, &key);
	}
	if (aggregate) {
		if (!(p->flags & TT_LOCK_CONDVAR))
			tt_hist_add(&wait_hists, TT_HIST_LOCKS, key.tid, v.pid, 0,
				    now - p->t_request_ns);
	} else if (capture_stacks) {
		__u32 epoch = stack_epoch;
		long sid = epoch & 1 ? bpf_get_stackid(ctx, &stacks1, BPF_F_USER_STACK) :
				       bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);

		v.ustack_id = sid < 0 ? (__s32)sid : (__s32)(sid + (long)epoch * LOCKS_STACK_ENTRIES);
	}
	if (tt_count_full(LOCKS_MAP_HELD, bpf_map_update_elem(&held, &key, &v, BPF_NOEXIST)))
		count(LOCKS_CNT_STATE_FULL);
}

SEC("uretprobe")
int BPF_KRETPROBE(mutex_lock_exit, int ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u64 now = bpf_ktime_get_ns();
	__u32 tid = (__u32)id;
	struct locks_pending *p = bpf_map_lookup_elem(&pending, &tid);

	count(LOCKS_CNT_HITS);
	if (!p)
		return 0;
	if (ret == 0) {
		on_acquired(ctx, p, id, now);
	} else if (p->flags & TT_LOCK_TRYLOCK) {
		struct locks_held_key key = { .mutex = p->mutex, .tid = tid };
		__u8 one = 1;

		tt_count_full(LOCKS_MAP_TRYFAILED,
			      bpf_map_update_elem(&tryfailed, &key, &one, BPF_ANY));
		count(LOCKS_CNT_TRYFAIL);
	}
	bpf_map_delete_elem(&pending, &tid);
	return 0;
}

/* A hold ends now: one record (or a hold histogram sample), state dropped. */
static __always_inline void on_released(struct locks_held_key *key, struct locks_held *h, __u64 now)
{
	struct tt_lock *r;

	if (aggregate) {
		tt_hist_add(&hold_hists, TT_HIST_LOCKS, key->tid, h->pid, 0,
			    now - h->t_acquired_ns);
	} else if ((r = bpf_ringbuf_reserve(&events, sizeof(*r), 0))) {
		r->mutex = key->mutex;
		r->t_request_ns = h->t_request_ns;
		r->t_acquired_ns = h->t_acquired_ns;
		r->t_released_ns = now;
		r->pid = h->pid;
		r->tid = key->tid;
		r->ustack_id = h->ustack_id;
		r->flags = h->flags;
		bpf_ringbuf_submit(r, 0);
	} else {
		count(LOCKS_CNT_LOST);
	}
	bpf_map_delete_elem(&held, key);
}

SEC("uprobe")
int BPF_KPROBE(mutex_unlock_enter, void *mutex)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u64 now = bpf_ktime_get_ns();
	struct locks_held_key key = { .mutex = (__u64)mutex, .tid = (__u32)id };
	struct locks_held *h = bpf_map_lookup_elem(&held, &key);

	count(LOCKS_CNT_HITS);
	if (!h) {
		count(LOCKS_CNT_UNMATCHED);
		return 0;
	}
	if (h->depth) {
		h->depth--;
		return 0;
	}
	on_released(&key, h, now);
	return 0;
}

/* pthread_cond_{wait,timedwait,clockwait}(cond, mutex, ...) release the
 * mutex inside glibc (not through pthread_mutex_unlock) and take it again
 * before returning: the hold ends at entry, a new one (TT_LOCK_CONDVAR,
 * no lock wait) starts at return, so a hold never includes a cond wait. */
SEC("uprobe")
int BPF_KPROBE(cond_wait_enter, void *cond, void *mutex)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u64 now = bpf_ktime_get_ns();
	struct locks_held_key key = { .mutex = (__u64)mutex, .tid = (__u32)id };
	struct locks_held *h = bpf_map_lookup_elem(&held, &key);
	__u32 tid = (__u32)id;

	count(LOCKS_CNT_HITS);
	if (!h || h->depth)
		return 0; /* not seen acquired, or recursively held: left as is */
	on_released(&key, h, now);
	tt_count_full(LOCKS_MAP_CONDWAIT, bpf_map_update_elem(&condwait, &tid, &key.mutex, BPF_ANY));
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(cond_wait_exit, int ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	__u64 *mutex = bpf_map_lookup_elem(&condwait, &tid);
	struct locks_pending p = { .flags = TT_LOCK_CONDVAR };

	count(LOCKS_CNT_HITS);
	if (!mutex)
		return 0;
	p.mutex = *mutex;
	p.t_request_ns = bpf_ktime_get_ns();
	on_acquired(ctx, &p, id, p.t_request_ns); /* also on ETIMEDOUT: it holds the mutex */
	bpf_map_delete_elem(&condwait, &tid);
	return 0;
}
