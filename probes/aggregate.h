/* SPDX-License-Identifier: MIT */
/*
 * --aggregate: in-kernel log2 histograms instead of per-event records.
 * struct tt_hist is shared by the BPF side (aggregate.bpf.h, one per thread
 * in a hash map keyed by tid) and the loader (aggregate.c prints them like
 * runqlat and writes aggregate.json).
 */
#ifndef TT_AGGREGATE_H
#define TT_AGGREGATE_H
#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define TT_HIST_SLOTS 32 /* slot k: [2^k, 2^(k+1)) microseconds; slot 0: [0, 2) */

struct tt_hist {
	__u64 slots[TT_HIST_SLOTS];
	__u64 count;
	__u64 sum_ns;
	__u64 max_ns;
	__u32 pid;
	__u32 pad;
};

#ifndef __VMLINUX_H__
#include <stdint.h>
#include <stdio.h>

/* Record one thread's histogram of a metric ("runq", "offcpu", ...). */
int aggregate_add(const char *metric, const char *unit, uint32_t tid,
		  const struct tt_hist *h);
struct bpf_map;
/* aggregate_add() every thread's histogram of a BPF hash map (tid -> struct
 * tt_hist). *events, if not NULL, gets the sum of their counts. 0 or -errno. */
int aggregate_add_map(struct bpf_map *map, const char *metric, const char *unit,
		      uint64_t *events);
/* Remember a thread's comm for the per-thread output. */
void aggregate_note_task(uint32_t tid, uint32_t pid, const char *comm);
/* Print each metric's total histogram (all threads; per thread with verbose)
 * to out and write DIR/aggregate.json. 0 or -errno. */
int aggregate_write(const char *dir, FILE *out, int verbose);
/* Histogram text for one set of slots, runqlat style. */
void aggregate_print_hist(FILE *out, const char *unit, const __u64 *slots, int n);
void aggregate_reset(void);
#endif

#endif
