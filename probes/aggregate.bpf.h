/* SPDX-License-Identifier: MIT */
/* BPF side of --aggregate: add one duration to a thread's (or, with
 * hist_by_process, its process's) log2 histogram of one sub-kind. */
#ifndef TT_AGGREGATE_BPF_H
#define TT_AGGREGATE_BPF_H
#include <bpf/bpf_helpers.h>
#include "aggregate.h"

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

static __always_inline void tt_hist_add(void *map, __u32 tid, __u32 pid, __u32 sub,
					__u64 delta_ns)
{
	static const struct tt_hist zero;
	struct tt_hist_key key = { .id = hist_by_process ? pid : tid, .sub = sub };
	struct tt_hist *h = bpf_map_lookup_elem(map, &key);
	__u32 slot;

	if (!h) {
		bpf_map_update_elem(map, &key, &zero, BPF_NOEXIST);
		h = bpf_map_lookup_elem(map, &key);
		if (!h)
			return;
		h->pid = pid;
	}
	slot = tt_log2_u64(delta_ns / 1000);
	if (slot >= TT_HIST_SLOTS)
		slot = TT_HIST_SLOTS - 1;
	/* Clamped, then masked behind a compiler barrier: the verifier sees the
	 * index bounded whatever registers clang picks once this is inlined
	 * (the lock program failed to load without it). TT_HIST_SLOTS is a
	 * power of two, so the mask changes no value. */
	barrier_var(slot);
	slot &= TT_HIST_SLOTS - 1;
	__sync_fetch_and_add(&h->slots[slot], 1);
	__sync_fetch_and_add(&h->count, 1);
	__sync_fetch_and_add(&h->sum_ns, delta_ns);
	if (delta_ns > h->max_ns)
		h->max_ns = delta_ns; /* racy max: a thread runs on one CPU at a time */
}

#endif
