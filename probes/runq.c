// SPDX-License-Identifier: MIT
/* runq: loader side of runq.bpf.c (run-queue latency records / histograms). */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>

#include <recfile.h>
#include "aggregate.h"
#include "features.h"
#include "occupancy.h"
#include "occupancy_out.h"
#include "filter.h"
#include "registry.h"
#include "runq.h"
#include "runq.skel.h"

struct runq_state {
	struct runq_bpf *skel;
	struct recfile *out;
	int write_err;
	bool aggregate;
	uint64_t hist_events;     /* --aggregate: intervals counted in histograms */
	struct occ_out *occ;      /* the cpu event: who held the CPU meanwhile */
	bool occ_blame;           /* the cpu event under --listen: split in the kernel */
};

/* A bare tt_runq, or with the cpu event a runq_msg (occupancy.h). */
static int runq_sample(void *ctx, void *data, size_t size)
{
	struct runq_state *st = ctx;
	const struct runq_msg *m = data;
	size_t head = offsetof(struct runq_msg, occ);

	if (!st->occ) {
		if (size >= sizeof(struct tt_runq))
			probe_write(st->out, data, &st->write_err);
		return 0;
	}
	if (size < head || m->nocc > OCC_BATCH || size < head + m->nocc * sizeof(m->occ[0]))
		return 0;
	if (m->kind == RUNQ_MSG_RUNQ)
		probe_write(st->out, &m->r, &st->write_err);
	occ_out_write(st->occ, m->r.cpu, m->occ, m->nocc);
	return 0;
}

/* waker_ctx.bpf.h: user registers and the per-CPU layout, from the kernel's BTF. */
static void waker_ctx_configure(struct runq_bpf *skel)
{
	long rq, pc, cur;

	skel->rodata->have_task_regs = features_task_regs();
	if (features_percpu_layout(&rq, &pc, &cur))
		return;
	skel->rodata->have_preempt_count = true;
	skel->rodata->pcpu_pc_delta = pc - rq;
	skel->rodata->pcpu_cur_delta = cur - rq;
}

static int runq_open(struct tt_ctx *ctx, struct runq_state *st)
{
	const struct tt_opts *o = ctx->opts;
	int err;

	st->skel = runq_bpf__open();
	if (!st->skel) {
		snprintf(ctx->err, sizeof(ctx->err), "runq: cannot open BPF object: %s", strerror(errno));
		return -errno;
	}
	FILTER_CONFIGURE(st->skel->rodata, ctx);
	AGGREGATE_CONFIGURE(st->skel->rodata, o);
	waker_ctx_configure(st->skel);
	st->skel->rodata->rb_wakeup_bytes = probe_ringbuf_bytes(o) / 8;
	err = probe_size_ringbuf(st->skel->maps.runq_rb, o);
	if (o->aggregate) /* no records: the smallest ring buffer */
		err = err ?: bpf_map__set_max_entries(st->skel->maps.runq_rb, 4096);
	features_select_progs(st->skel->obj, features_hook());
	aggregate_drain_configure(st->skel->obj, o->aggregate);
	if (probe_runq_in_sched(o)) { /* sched's switch program does this work */
		bpf_program__set_autoload(st->skel->progs.runq_switch_btf, false);
		bpf_program__set_autoload(st->skel->progs.runq_switch_raw, false);
	}
	st->skel->rodata->runq_kacct = probe_runq_kacct(o);
	st->skel->rodata->occ_on = occ_wanted(o);
	st->skel->rodata->occ_irq = occ_irq_wanted(o);
	err = err ?: occ_configure(st->skel->obj, o);
	if (st->skel->rodata->runq_kacct) { /* the waits are the kernel's: no wakeup program */
		bpf_program__set_autoload(st->skel->progs.runq_waking_btf, false);
		bpf_program__set_autoload(st->skel->progs.runq_wakeup_new_btf, false);
	}
	err = err ?: probe_share_maps_before_load(ctx, st->skel->obj);
	err = err ?: runq_bpf__load(st->skel);
	if (!err)
		probe_share_maps_after_load(ctx, st->skel->obj);
	if (err) {
		snprintf(ctx->err, sizeof(ctx->err), "runq: cannot load BPF programs (%s hook): %s",
			 features_hook_name(features_hook()), strerror(-err));
		return err;
	}
	return 0;
}

static int runq_setup(struct tt_ctx *ctx, void **state)
{
	struct runq_state *st = calloc(1, sizeof(*st));
	int err;

	if (!st)
		return -ENOMEM;
	*state = st;
	st->aggregate = ctx->opts->aggregate;
	err = runq_open(ctx, st);
	if (err)
		return err;
	st->occ_blame = occ_wanted(ctx->opts) && !occ_records_wanted(ctx->opts);
	if (occ_records_wanted(ctx->opts) && !(st->occ = occ_out_open(ctx))) {
		snprintf(ctx->err, sizeof(ctx->err), "cpu: cannot create %s/occupancy.bin: %s",
			 ctx->opts->out_dir, strerror(errno));
		return -errno;
	}
	if (!st->aggregate) {
		st->out = probe_open_kind(ctx, TT_REC_RUNQ);
		if (!st->out) {
			snprintf(ctx->err, sizeof(ctx->err), "runq: cannot create %s/runq.bin: %s",
				 ctx->opts->out_dir, strerror(errno));
			return -errno;
		}
		err = probe_add_ringbuf(ctx, st->skel->maps.runq_rb, runq_sample, st);
		if (err) {
			snprintf(ctx->err, sizeof(ctx->err), "runq: ring buffer: %s", strerror(-err));
			return err;
		}
	}

	err = runq_bpf__attach(st->skel);
	if (err)
		snprintf(ctx->err, sizeof(ctx->err), "runq: cannot attach (%s hook): %s",
			 features_hook_name(features_hook()), strerror(-err));
	return err;
}

static int runq_finish(struct tt_ctx *ctx, void *state)
{
	struct runq_state *st = state;
	int err;

	if (st->aggregate) {
		err = aggregate_drain(st->skel->obj);
		if (err) {
			snprintf(ctx->err, sizeof(ctx->err),
				 "runq: cannot collect the threads' histograms: %s", strerror(-err));
			return err;
		}
		return aggregate_add_map(st->skel->maps.runq_hist, "runq", "usecs",
					 &st->hist_events);
	}
	err = probe_flush(st->out, &st->write_err);
	if (err) {
		snprintf(ctx->err, sizeof(ctx->err), "runq: writing runq.bin: %s", strerror(-err));
		return err;
	}
	/* the flight recorder: each capture has its occupants */
	err = st->occ && !ctx->flight ?
		      occ_out_finish(st->occ, ctx->opts->out_dir, st->skel->maps.occ_names) : 0;
	if (err)
		snprintf(ctx->err, sizeof(ctx->err), "cpu: writing occupancy.bin / occupants.bin: %s",
			 strerror(-err));
	return err;
}

/* A flight-recorder capture: the names of the CPUs' occupants (its records are there). */
static int runq_capture(struct tt_ctx *ctx, void *state, const struct tt_capture *cap)
{
	struct runq_state *st = state;
	int err = st->occ ? occ_out_occupants(st->occ, cap->dir, st->skel->maps.occ_names) : 0;

	if (err)
		snprintf(ctx->err, sizeof(ctx->err), "cpu: writing %s/occupants.bin: %s", cap->dir,
			 strerror(-err));
	return err;
}

static int runq_stats(void *state, struct tt_stream_stats *out, int max)
{
	struct runq_state *st = state;

	if (max < 1 || !st->skel)
		return 0;
	out[0] = (struct tt_stream_stats){
		.stream = "runq",
		.hook = features_hook_name(features_hook()),
		.written = st->aggregate ? st->hist_events : recfile_count(st->out),
		.lost = probe_counter_sum(st->skel->maps.runq_counters, RUNQ_CNT_LOST) +
			recfile_dropped(st->out),
		.unmatched = probe_counter_sum(st->skel->maps.runq_counters, RUNQ_CNT_UNMATCHED),
	};
	if (st->occ_blame && max >= 2) {
		out[1] = (struct tt_stream_stats){
			.stream = "cpu",
			.hook = features_hook_name(features_hook()),
			.lost = probe_counter_sum(st->skel->maps.occ_counters, OCC_CNT_BLAME_FULL),
		};
		return 2;
	}
	if (!st->occ || max < 2)
		return 1;
	out[1] = (struct tt_stream_stats){
		.stream = "cpu",
		.hook = features_hook_name(features_hook()),
		.written = occ_out_written(st->occ),
		.lost = probe_counter_sum(st->skel->maps.occ_counters, OCC_CNT_LOST) +
			occ_out_dropped(st->occ),
	};
	return 2;
}

/* meta.json: the cgroups of the CPUs' occupants, and the waits whose start the
 * per-CPU rings no longer held. */
static void runq_meta(void *state, FILE *f)
{
	struct runq_state *st = state;

	if (!st->occ)
		return;
	occ_out_meta(st->occ, f);
	fprintf(f, "  \"cpu_waits_truncated\": %llu,\n",
		(unsigned long long)probe_counter_sum(st->skel->maps.occ_counters, OCC_CNT_TRUNC));
}

static void runq_destroy(void *state)
{
	struct runq_state *st = state;

	if (!st)
		return;
	runq_bpf__destroy(st->skel);
	recfile_close(st->out);
	occ_out_free(st->occ);
	free(st);
}

static struct bpf_object *runq_object(void *state)
{
	struct runq_state *st = state;

	return st && st->skel ? st->skel->obj : NULL;
}

/* --toggle-ms: the skeleton's links destroyed, or made again. */
static int runq_toggle(void *state, bool on)
{
	struct runq_state *st = state;

	return probe_toggle_skeleton(st->skel->skeleton, &st->skel->bss->runq_attach_gen, on);
}

const struct tt_probe probe_runq = {
	.name = "runq",
	.events = TT_EV_RUNQ | TT_EV_CPU | TT_EV_IRQ,
	.setup = runq_setup,
	.finish = runq_finish,
	.stats = runq_stats,
	.destroy = runq_destroy,
	.object = runq_object,
	.toggle = runq_toggle,
	.capture = runq_capture,
	.meta = runq_meta,
};
