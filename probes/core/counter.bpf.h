/* SPDX-License-Identifier: MIT */
/*
 * Per-CPU event counters (lost records, uprobe hits, ...): one helper for every
 * BPF object; the loader sums a counter over the CPUs with probe_counter_sum().
 */
#ifndef TT_COUNTER_BPF_H
#define TT_COUNTER_BPF_H

/* counters: a BPF_MAP_TYPE_PERCPU_ARRAY of __u64, indexed by the module's enum. */
static __always_inline void tt_count(void *counters, __u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(counters, &idx);

	if (v)
		(*v)++;
}

#endif
