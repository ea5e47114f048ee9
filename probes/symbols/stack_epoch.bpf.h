/* SPDX-License-Identifier: MIT */
/*
 * The BPF side of stack maps that take turns (stack_epoch.h): a stack map of
 * ENTRIES stacks of DEPTH frames, for each generation, and the loader's
 * epoch. An id taken in generation epoch & 1 is stored as id + epoch x IDS.
 */
#ifndef TT_STACK_EPOCH_BPF_H
#define TT_STACK_EPOCH_BPF_H

#define TT_STACK_MAP(name, entries, depth)                                   \
	struct {                                                             \
		__uint(type, BPF_MAP_TYPE_STACK_TRACE);                      \
		__uint(max_entries, entries);                                \
		__uint(key_size, sizeof(__u32));                             \
		__uint(value_size, (depth) * sizeof(__u64));                 \
	} name SEC(".maps")

__u32 stack_epoch = 0; /* the loader's: the generation, and the ids' base */

#endif
