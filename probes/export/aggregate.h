/* SPDX-License-Identifier: MIT */
/*
 * --aggregate: in-kernel log2 histograms instead of per-event records.
 * struct tt_hist is shared by the BPF side (aggregate.bpf.h, one per thread,
 * or per process with --listen, and per sub-kind in a hash map keyed by
 * struct tt_hist_key) and the loader (aggregate.c prints them like runqlat
 * and writes aggregate.json; exporter.c serves them to Prometheus).
 */
#ifndef TT_AGGREGATE_H
#define TT_AGGREGATE_H
#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define TT_HIST_SLOTS 32 /* slot k: [2^k, 2^(k+1)) microseconds; slot 0: [0, 2) */

/* sub: what a metric is split by. runq: enum tt_runq_sub; offcpu: enum
 * tt_wait_reason (wait_reason.h); others 0. */
struct tt_hist_key {
	__u32 id;  /* tid; tgid when the BPF side's hist_by_process is set */
	__u32 sub;
};

enum tt_runq_sub { TT_RUNQ_SUB_WAKEUP, TT_RUNQ_SUB_PREEMPT, TT_RUNQ_SUB_NR };

/* The stream a histogram map's durations count in when the map is full and
 * refuses them (each object's hist_refused, summed into that stream's lost
 * events): runq_hist; offcpu_hist and migrate_hist; the locks' two maps. */
enum tt_hist_stream { TT_HIST_RUNQ, TT_HIST_SWITCH, TT_HIST_LOCKS, TT_HIST_STREAMS };

struct tt_hist {
	__u64 slots[TT_HIST_SLOTS];
	__u64 count;
	__u64 sum_ns;
	__u64 max_ns;
	__u32 pid;
	__u32 pad;
};

#ifndef __VMLINUX_H__
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Loader side: the settings every object with histograms (aggregate.bpf.h)
 * takes before load, from struct tt_opts. */
#define AGGREGATE_CONFIGURE(rodata, o)                                           \
	do {                                                                     \
		(rodata)->aggregate = (o)->aggregate;                            \
		(rodata)->hist_by_process = (o)->listen != NULL;                 \
	} while (0)

struct bpf_object;
/* Before load: obj's drain iterators (SEC("iter/task"), the tp_btf variant
 * only) load with --aggregate and are never attached by the skeleton. */
void aggregate_drain_configure(struct bpf_object *obj, bool aggregate);
/* Run obj's loaded drain iterators: under tp_btf every thread's own
 * histograms (aggregate.bpf.h, struct tt_lhists) move into the maps; call it before reading
 * them. Outside tp_btf nothing is loaded and this does nothing. 0 or -errno. */
int aggregate_drain(struct bpf_object *obj);
/* How often the loader drains in a long --aggregate run (u32 slots). */
#define AGGREGATE_DRAIN_MS 10000

/* Record one thread's histogram of a metric ("runq", "offcpu", ...). */
int aggregate_add(const char *metric, const char *unit, uint32_t tid,
		  const struct tt_hist *h);
struct bpf_map;
/* aggregate_add() every thread's histogram of a BPF hash map (struct
 * tt_hist_key -> struct tt_hist), a thread's sub-kinds summed into one.
 * *events, if not NULL, gets the sum of their counts. 0 or -errno. */
int aggregate_add_map(struct bpf_map *map, const char *metric, const char *unit,
		      uint64_t *events);
/* Remember a thread's comm for the per-thread output. */
void aggregate_note_task(uint32_t tid, uint32_t pid, const char *comm);
/* Print each metric's total histogram (all threads; per thread with verbose)
 * to out and write DIR/aggregate.json. 0 or -errno. */
int aggregate_write(const char *dir, FILE *out, int verbose);
/* Histogram text for one set of slots, runqlat style. */
void aggregate_print_hist(FILE *out, const char *unit, const __u64 *slots, int n);
/* Call fn for every entry of a histogram map (struct tt_hist_key -> struct
 * tt_hist) until it returns non-zero; that value, or 0. */
int aggregate_map_each(struct bpf_map *map,
		       int (*fn)(void *arg, const struct tt_hist_key *key, const struct tt_hist *h),
		       void *arg);
/* Add src's counts into dst (slots, count, sum; max of the maxima). */
void aggregate_hist_merge(struct tt_hist *dst, const struct tt_hist *src);
void aggregate_reset(void);
#endif

#endif
