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

/* Each object's maps that can fill: map_full, a BPF_MAP_TYPE_PERCPU_ARRAY of __u64
 * indexed by the module's enum of them (core/map_full.h), counts the updates each
 * refused for want of room. */
#define TT_MAP_FULL_COUNTS(nr)                                                   \
	struct {                                                                 \
		__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);                         \
		__uint(max_entries, nr);                                         \
		__type(key, __u32);                                              \
		__type(value, __u64);                                            \
	} map_full SEC(".maps")

/* err, an update's result, counted at map_full[map] when the map had no room for
 * the entry; an entry another CPU made first (-EEXIST) is not a refusal. */
#define tt_count_full(map, err)                                                  \
	({                                                                       \
		long err_ = (err);                                               \
		if (err_ && err_ != -17 /* EEXIST */)                            \
			tt_count(&map_full, (map));                              \
		err_;                                                            \
	})

#endif
