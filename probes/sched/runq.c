// SPDX-License-Identifier: MIT
/* The runq part of the sched module (runq_part.h): run-queue records or histograms,
 * and who held the CPU meanwhile. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>

#include <recfile.h>
#include "export/aggregate.h"
#include "core/features.h"
#include "sched/occupancy.h"
#include "sched/occupancy_out.h"
#include "core/registry.h"
#include "sched/runq.h"
#include "sched/runq_part.h"
#include "sched/sched.h"
#include "sched/throttle.h"
#include "sched.skel.h"

/* A bare tt_runq, or with the cpu event a runq_msg (occupancy.h). */
static int runq_sample(void *ctx, void *data, size_t size)
{
	struct runq_part *rp = ctx;
	const struct runq_msg *m = data;
	size_t head = offsetof(struct runq_msg, occ);

	if (!rp->occ) {
		if (size >= sizeof(struct tt_runq))
			probe_write(rp->out, data, &rp->write_err);
		return 0;
	}
	if (size < head || m->nocc > OCC_BATCH || size < head + m->nocc * sizeof(m->occ[0]))
		return 0;
	if (m->kind == RUNQ_MSG_RUNQ)
		probe_write(rp->out, &m->r, &rp->write_err);
	occ_out_write(rp->occ, m->r.cpu, m->occ, m->nocc);
	return 0;
}

/* waker_ctx.bpf.h: user registers and the per-CPU layout, from the kernel's BTF. */
static void waker_ctx_configure(struct sched_bpf *skel)
{
	long rq, pc, cur;

	skel->rodata->have_typed_task = features_typed_task();
	if (!skel->rodata->have_typed_task || features_percpu_layout(&rq, &pc, &cur)) {
		features_fallback("wakeup contexts (a task, or an interrupt)",
				  "bpf_get_current_task_btf", "5.11",
				  "an interrupt is told apart only when it wakes over the idle task",
				  "a wait an interrupt ended over a running task names that task as "
				  "its waker, marked a guess");
		return;
	}
	if (!features_task_rq()) { /* the program reaches the per-CPU area from the run queue */
		features_fallback("wakeup contexts (a task, or an interrupt)",
				  "CONFIG_FAIR_GROUP_SCHED", NULL,
				  "an interrupt is told apart only when it wakes over the idle task",
				  "a wait an interrupt ended over a running task names that task as "
				  "its waker, marked a guess");
		return;
	}
	skel->rodata->have_preempt_count = true;
	skel->rodata->pcpu_pc_delta = pc - rq;
	skel->rodata->pcpu_cur_delta = cur - rq;
}

static void autoload(struct bpf_program *p, bool on)
{
	if (!on)
		bpf_program__set_autoload(p, false);
}

int runq_part_configure(struct tt_ctx *ctx, struct sched_bpf *s)
{
	const struct tt_opts *o = ctx->opts;
	bool on = (o->events & TT_EV_RUNQ) != 0, own_switch = on && !probe_runq_in_sched(o);
	int err;

	waker_ctx_configure(s);
	s->rodata->with_runq = probe_runq_in_sched(o);
	s->rodata->runq_kacct = probe_runq_kacct(o);
	s->rodata->throttle_clock = (o->debug.skip_steps & SCHED_SKIP_THROTTLE) ? TT_THROTTLE_NONE :
				    (__u8)probe_throttle_clock(o);
	/* the only sched_switch program unless runq's own runs beside it */
	s->rodata->shared_clock = own_switch;
	/* sized for runq's records, or as small as can be without them */
	if (o->aggregate || !on)
		err = bpf_map__set_max_entries(s->maps.runq_rb, 4096);
	else
		err = probe_size_ringbuf(s->maps.runq_rb, o);
	if (!err && !on)
		err = bpf_map__set_max_entries(s->maps.start_ids, 1) ?:
		      bpf_map__set_max_entries(s->maps.runq_hist, 1) ?:
		      bpf_map__set_max_entries(s->maps.tracked, 1);
	if (!err && s->rodata->throttle_clock == TT_THROTTLE_NONE)
		err = bpf_map__set_max_entries(s->maps.throttle_hist, 1);
	s->rodata->occ_on = on && occ_wanted(o);
	s->rodata->occ_irq = s->rodata->occ_on && occ_irq_wanted(o);
	err = err ?: occ_configure(s->obj, o);
	/* the waits are the kernel's under kacct: no wakeup program */
	autoload(s->progs.runq_waking_btf, on && !s->rodata->runq_kacct);
	autoload(s->progs.runq_wakeup_new_btf, on && !s->rodata->runq_kacct);
	autoload(s->progs.runq_waking_raw, on);
	autoload(s->progs.runq_wakeup_new_raw, on);
	/* a wakeup's throttle base, once it is queued where it waits */
	autoload(s->progs.runq_wakeup_btf, s->rodata->throttle_clock != TT_THROTTLE_NONE);
	autoload(s->progs.runq_wakeup_raw, s->rodata->throttle_clock != TT_THROTTLE_NONE);
	autoload(s->progs.runq_switch_btf, own_switch);
	autoload(s->progs.runq_switch_raw, own_switch);
	autoload(s->progs.runq_waking_tp, on);
	autoload(s->progs.runq_wakeup_new_tp, on);
	autoload(s->progs.runq_fork_tp, on);
	autoload(s->progs.runq_switch_tp, on);
	autoload(s->progs.runq_drain_btf, on);
	if (err)
		snprintf(ctx->err, sizeof(ctx->err), "runq: cannot configure the BPF object: %s",
			 strerror(-err));
	return err;
}

int runq_part_open(struct tt_ctx *ctx, struct runq_part *rp, struct sched_bpf *s)
{
	const struct tt_opts *o = ctx->opts;
	int err;

	rp->on = (o->events & TT_EV_RUNQ) != 0;
	if (!rp->on)
		return 0;
	rp->occ_blame = occ_wanted(o) && !occ_records_wanted(o);
	if (occ_records_wanted(o) && !(rp->occ = occ_out_open(ctx))) {
		snprintf(ctx->err, sizeof(ctx->err), "cpu: cannot create %s/occupancy.bin: %s",
			 o->out_dir, strerror(errno));
		return -errno;
	}
	if (o->aggregate)
		return 0;
	rp->out = probe_open_kind(ctx, TT_REC_RUNQ);
	if (!rp->out) {
		snprintf(ctx->err, sizeof(ctx->err), "runq: cannot create %s/runq.bin: %s",
			 o->out_dir, strerror(errno));
		return -errno;
	}
	err = probe_add_ringbuf(ctx, s->maps.runq_rb, runq_sample, rp);
	if (err)
		snprintf(ctx->err, sizeof(ctx->err), "runq: ring buffer: %s", strerror(-err));
	return err;
}

void runq_part_write(struct runq_part *rp, const struct tt_runq *r)
{
	if (rp->out)
		probe_write(rp->out, r, &rp->write_err);
}

/* After aggregate_drain (sched.c) under --aggregate. */
int runq_part_finish(struct tt_ctx *ctx, struct runq_part *rp, struct sched_bpf *s)
{
	int err;

	if (!rp->on)
		return 0;
	if (ctx->opts->aggregate) {
		err = aggregate_add_map(s->maps.runq_hist, "runq", "usecs", &rp->hist_events);
		if (!err && s->rodata->throttle_clock != TT_THROTTLE_NONE)
			err = aggregate_add_map(s->maps.throttle_hist, "throttled", "usecs", NULL);
		return err;
	}
	err = probe_flush(rp->out, &rp->write_err);
	if (err) {
		snprintf(ctx->err, sizeof(ctx->err), "runq: writing runq.bin: %s", strerror(-err));
		return err;
	}
	/* the flight recorder: each capture has its occupants */
	err = rp->occ && !ctx->flight ? occ_out_pending(rp->occ, s->maps.occ_cpu) ?:
					occ_out_finish(rp->occ, ctx->opts->out_dir, s->maps.occ_names)
				      : 0;
	if (err)
		snprintf(ctx->err, sizeof(ctx->err), "cpu: writing occupancy.bin / occupants.bin: %s",
			 strerror(-err));
	return err;
}

/* A flight-recorder capture: the names of the CPUs' occupants (its records are there). */
int runq_part_capture(struct tt_ctx *ctx, struct runq_part *rp, struct sched_bpf *s,
		      const struct tt_capture *cap)
{
	int err = rp->occ ? occ_out_occupants(rp->occ, cap->dir, s->maps.occ_names) : 0;

	if (err)
		snprintf(ctx->err, sizeof(ctx->err), "cpu: writing %s/occupants.bin: %s", cap->dir,
			 strerror(-err));
	return err;
}

#define RUNQ_PENDING_MS 50

int runq_part_tick(struct runq_part *rp, struct sched_bpf *s)
{
	if (!rp->occ)
		return -1;
	occ_out_pending(rp->occ, s->maps.occ_cpu); /* a failed read: the next tick's */
	return RUNQ_PENDING_MS;
}

int runq_part_stats(struct runq_part *rp, struct sched_bpf *s, struct tt_stream_stats *out,
		    int max)
{
	const char *hook = features_hook_name(features_hook());

	if (!rp->on || max < 1)
		return 0;
	out[0] = (struct tt_stream_stats){
		.stream = "runq",
		.hook = hook,
		.written = rp->out ? recfile_count(rp->out) : rp->hist_events,
		.lost = probe_counter_sum(s->maps.runq_counters, RUNQ_CNT_LOST) +
			probe_counter_sum(s->maps.hist_refused, TT_HIST_RUNQ) +
			recfile_dropped(rp->out),
		.unmatched = probe_counter_sum(s->maps.runq_counters, RUNQ_CNT_UNMATCHED),
	};
	if (max < 2 || (!rp->occ && !rp->occ_blame))
		return 1;
	out[1] = (struct tt_stream_stats){
		.stream = "cpu",
		.hook = hook,
		.written = rp->occ ? occ_out_written(rp->occ) : 0,
		.lost = rp->occ ? probe_counter_sum(s->maps.occ_counters, OCC_CNT_LOST) +
					  occ_out_dropped(rp->occ)
				: probe_counter_sum(s->maps.occ_counters, OCC_CNT_BLAME_FULL),
	};
	return 2;
}

/* meta.json: the cgroups of the CPUs' occupants, and the waits whose start the
 * per-CPU rings no longer held. */
void runq_part_meta(struct runq_part *rp, struct sched_bpf *s, FILE *f)
{
	if (!rp->occ)
		return;
	occ_out_meta(rp->occ, f);
	fprintf(f, "  \"cpu_waits_truncated\": %llu,\n",
		(unsigned long long)probe_counter_sum(s->maps.occ_counters, OCC_CNT_TRUNC));
	fprintf(f, "  \"cpu_irqs_nested\": %llu,\n",
		(unsigned long long)probe_counter_sum(s->maps.occ_counters, OCC_CNT_IRQ_NESTED));
}

void runq_part_free(struct runq_part *rp)
{
	recfile_close(rp->out);
	occ_out_free(rp->occ);
}
