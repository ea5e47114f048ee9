/* SPDX-License-Identifier: MIT */
/*
 * The runq, cpu and irq events' part of the sched module (sched.c, one BPF
 * object: sched.bpf.c): run-queue records (runq.bin) or histograms, and with
 * the cpu event who held the CPU meanwhile (occupancy.bin, occupants.bin).
 * sched.c calls these in its own order: configure before load, open after
 * it, then finish / capture / stats / meta, and free.
 */
#ifndef TT_RUNQ_PART_H
#define TT_RUNQ_PART_H
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/probe.h"

struct sched_bpf;
struct occ_out;
struct tt_runq;

struct runq_part {
	struct recfile *out;      /* runq.bin; NULL with --aggregate or without runq */
	int write_err;
	uint64_t hist_events;     /* --aggregate: intervals counted in histograms */
	struct occ_out *occ;      /* the cpu event's records: who held the CPU meanwhile */
	bool occ_blame;           /* the cpu event under --listen: split in the kernel */
	bool on;                  /* the runq event is traced */
};

/* Before load: the runq settings and which of its programs load. 0 or -errno
 * with ctx->err. */
int runq_part_configure(struct tt_ctx *ctx, struct sched_bpf *skel);
/* After load, before attach: its outputs and its ring buffer. */
int runq_part_open(struct tt_ctx *ctx, struct runq_part *rp, struct sched_bpf *skel);
/* A run-queue record that came on another ring (sched.c: struct sched_in_msg). */
void runq_part_write(struct runq_part *rp, const struct tt_runq *r);
int runq_part_finish(struct tt_ctx *ctx, struct runq_part *rp, struct sched_bpf *skel);
int runq_part_capture(struct tt_ctx *ctx, struct runq_part *rp, struct sched_bpf *skel,
		      const struct tt_capture *cap);
/* The flight recorder's upkeep: the switches a wait wants that still sit in
 * the rings (occ_out_pending) into the store, so a capture has them. Returns
 * the ms until the next call, -1: never. */
int runq_part_tick(struct runq_part *rp, struct sched_bpf *skel);
/* The runq and cpu streams' figures into out[0..max); returns how many. */
int runq_part_stats(struct runq_part *rp, struct sched_bpf *skel, struct tt_stream_stats *out,
		    int max);
void runq_part_meta(struct runq_part *rp, struct sched_bpf *skel, FILE *f);
void runq_part_free(struct runq_part *rp);

#endif
