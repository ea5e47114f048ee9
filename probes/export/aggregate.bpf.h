/* SPDX-License-Identifier: MIT */
/* BPF side of --aggregate: add one duration to a thread's (or, with
 * hist_by_process, its process's) log2 histogram of one sub-kind. */
#ifndef TT_AGGREGATE_BPF_H
#define TT_AGGREGATE_BPF_H
#include <bpf/bpf_helpers.h>
#include "core/counter.bpf.h"
#include "export/aggregate.h"
#include "sched/wait_reason.h"

/* Durations a full histogram map refused, by enum tt_hist_stream: added to the
 * stream's lost events by the loader (the histograms are keyed by thread: a host
 * with thousands of threads fills a map). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, TT_HIST_STREAMS);
	__type(key, __u32);
	__type(value, __u64);
} hist_refused SEC(".maps");

static __always_inline void tt_hist_refuse(__u32 stream, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&hist_refused, &stream);

	if (v)
		*v += n;
}

#define TT_HIST_MAP(name)                                                        \
	struct {                                                                 \
		__uint(type, BPF_MAP_TYPE_HASH);                                 \
		__uint(max_entries, 16384);                                      \
		__type(key, struct tt_hist_key);                                 \
		__type(value, struct tt_hist);                                   \
	} name SEC(".maps")

static __always_inline __u32 tt_log2_u64(__u64 v)
{
	__u32 r = 0, s;

	s = (v > 0xffffffffull) << 5; v >>= s; r |= s;
	s = (v > 0xffff) << 4; v >>= s; r |= s;
	s = (v > 0xff) << 3; v >>= s; r |= s;
	s = (v > 0xf) << 2; v >>= s; r |= s;
	s = (v > 0x3) << 1; v >>= s; r |= s;
	r |= (v >> 1);
	return r;
}

/* Set by the loader (--listen): one histogram per process, not per thread,
 * so a busy host's thread churn does not fill the map. */
const volatile bool hist_by_process = false;

/* The histogram of (id, sub) in map, made if it has none. NULL: map full. */
static __always_inline struct tt_hist *tt_hist_get(void *map, __u32 id, __u32 pid, __u32 sub)
{
	static const struct tt_hist zero;
	struct tt_hist_key key = { .id = id, .sub = sub };
	struct tt_hist *h = bpf_map_lookup_elem(map, &key);

	if (!h) {
		bpf_map_update_elem(map, &key, &zero, BPF_NOEXIST);
		h = bpf_map_lookup_elem(map, &key);
		if (!h)
			return NULL;
		h->pid = pid;
	}
	return h;
}

/* The log2 slot of a duration, bounded for the verifier. */
static __always_inline __u32 tt_hist_slot(__u64 delta_ns)
{
	__u32 slot = tt_log2_u64(delta_ns / 1000);

	if (slot >= TT_HIST_SLOTS)
		slot = TT_HIST_SLOTS - 1;
	/* Clamped, then masked behind a compiler barrier: the verifier sees the
	 * index bounded whatever registers clang picks once this is inlined
	 * (the lock program failed to load without it). TT_HIST_SLOTS is a
	 * power of two, so the mask changes no value. */
	barrier_var(slot);
	return slot & (TT_HIST_SLOTS - 1);
}

static __always_inline void tt_hist_add(void *map, __u32 stream, __u32 tid, __u32 pid,
					__u32 sub, __u64 delta_ns)
{
	struct tt_hist *h = tt_hist_get(map, hist_by_process ? pid : tid, pid, sub);
	__u32 slot = tt_hist_slot(delta_ns);

	if (!h) {
		tt_hist_refuse(stream, 1);
		return;
	}
	__sync_fetch_and_add(&h->slots[slot], 1);
	__sync_fetch_and_add(&h->count, 1);
	/* not with 0 (a migration's): clang makes `+= 0` an atomic `|= 0`, which
	 * kernels before 5.12 do not load (only the plain atomic add) */
	if (delta_ns)
		__sync_fetch_and_add(&h->sum_ns, delta_ns);
	if (delta_ns > h->max_ns)
		h->max_ns = delta_ns; /* racy max: a thread runs on one CPU at a time */
}

/* --aggregate under tp_btf: a thread's own histograms, in its task-storage
 * slot (runq_switch.bpf.h, struct tt_thread): runq's by enum tt_runq_sub,
 * then off-CPU time by enum tt_wait_reason (TT_LHIST_OFFCPU + reason), the
 * waits' throttled parts (TT_LHIST_THROTTLED), and its migrations. The
 * programs add to them; tt_lhist_drain moves them into the maps, from the
 * drain iterators (aggregate_drain) and at the thread's exit. Sums and maxima sit together, before the slots, so an update touches
 * two lines. u32 slots: a thread cannot switch 2^32 times between two drains
 * (every AGGREGATE_DRAIN_MS at least). */
#define TT_LHIST_OFFCPU TT_RUNQ_SUB_NR
/* the throttled parts of its run-queue waits (throttle.bpf.h), those above 0 */
#define TT_LHIST_THROTTLED (TT_RUNQ_SUB_NR + TT_WAIT_NR)
#define TT_LHIST_NR (TT_LHIST_THROTTLED + 1)

struct tt_lhists {
	__u64 sum_ns[TT_LHIST_NR];
	__u64 max_ns[TT_LHIST_NR];
	__u64 migrations;
	__u32 slots[TT_LHIST_NR][TT_HIST_SLOTS];
};

/* One duration into the thread's histogram i. Its own lines, not a hash
 * lookup and lines its whole process shares (docs/benchmarks.md). Atomic,
 * because tt_lhist_drain may run on another CPU at the same time. */
static __always_inline void tt_lhist_add(struct tt_lhists *l, __u32 i, __u64 delta_ns)
{
	if (i >= TT_LHIST_NR)
		return;
	barrier_var(i);
	__sync_fetch_and_add(&l->slots[i][tt_hist_slot(delta_ns)], 1);
	__sync_fetch_and_add(&l->sum_ns[i], delta_ns);
	if (delta_ns > l->max_ns[i])
		l->max_ns[i] = delta_ns; /* racy max, as in tt_hist_add */
}

/* Move what the thread's histogram i holds into map's (id, sub) histogram:
 * each slot's value subtracted from it and added to map's, so adds racing
 * with the move stay for the next one, and the map's count is the sum of the
 * slots it got. A full map leaves them for the next drain, or, at the thread's
 * exit (final), counts them refused in stream. */
static __always_inline void tt_lhist_drain(struct tt_lhists *l, __u32 i, void *map, __u32 stream,
					   bool final, __u32 id, __u32 pid, __u32 sub)
{
	struct tt_hist *h;
	__u64 n = 0, sum;
	__u32 v;
	int k;

	if (i >= TT_LHIST_NR)
		return;
	for (k = 0; k < TT_HIST_SLOTS; k++)
		n += l->slots[i][k];
	if (!n)
		return;
	h = tt_hist_get(map, id, pid, sub);
	if (!h) { /* map full: left here, tried again at the next drain */
		if (final)
			tt_hist_refuse(stream, n);
		return;
	}
	n = 0;
	for (k = 0; k < TT_HIST_SLOTS; k++) {
		v = l->slots[i][k];
		if (!v)
			continue;
		__sync_fetch_and_add(&l->slots[i][k], -v);
		__sync_fetch_and_add(&h->slots[k], v);
		n += v;
	}
	__sync_fetch_and_add(&h->count, n);
	sum = l->sum_ns[i];
	__sync_fetch_and_add(&l->sum_ns[i], -sum);
	__sync_fetch_and_add(&h->sum_ns, sum);
	if (l->max_ns[i] > h->max_ns)
		h->max_ns = l->max_ns[i];
	l->max_ns[i] = 0;
}

#endif
