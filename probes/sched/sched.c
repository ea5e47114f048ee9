// SPDX-License-Identifier: MIT
/*
 * sched: the loader side of the one scheduler BPF object (sched.bpf.c), for
 * the runq, switch, offcpu, cpu and irq events. Streams switch records to
 * switches.bin, sums off-CPU time per stack while they arrive, and at the end
 * writes tasks.bin, stacks.jsonl and offcpu.folded (or the --aggregate
 * histograms). The run-queue records and the CPU occupancy are its runq part
 * (runq.c, runq_part.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>

#include <recfile.h>
#include <tt_clock.h>
#include "export/aggregate.h"
#include "export/exporter.h"
#include "core/map_full.h"
#include "core/features.h"
#include "sched/occupancy_out.h"
#include "symbols/syms.h"
#include "core/filter.h"
#include "flight/flight_store.h"
#include "sched/copied_stacks.h"
#include "sched/retired_tasks.h"
#include "sched/offcpu.h"
#include "core/registry.h"
#include "sched/runq_part.h"
#include "sched/sched.h"
#include "sched/user_stack.h"
#include "sched/wait_names.h"
#include "symbols/stack_epoch.h"
#include "sched.skel.h"
#include "sched_noloop.skel.h"

struct sched_state {
	struct sched_bpf *skel;
	struct recfile *out;      /* switches.bin, NULL when not recorded */
	struct offcpu_acc *acc;   /* NULL unless offcpu */
	uint64_t tasks_written;
	uint64_t stacked;         /* switch records carrying a stack */
	uint64_t hist_events;     /* --aggregate: intervals counted in histograms */
	int write_err;
	bool aggregate;
	bool flight;              /* --flight-recorder: stacks are summed per capture */
	struct tt_ksyms *ksyms;   /* read at the first capture, kept for the next */
	struct tt_syms_set *syms; /* the loader's: processes seen are noted in it */
	struct runq_part rq;      /* the runq, cpu and irq events */
	struct stack_epochs epochs; /* the stack maps' turns (the flight recorder) */
	struct copied_stacks *copies; /* --user-stacks dwarf: the copies, unwound */
	uint64_t watch_next_ns, watch_every_ns; /* the targets' maps read for the copies */
	struct wait_names *names;     /* the futex words waited on (NULL: not recorded) */
	struct retired_tasks *retired; /* the threads that exited (NULL: kept in the map) */
	uint64_t retired_keep_ns;     /* the flight recorder: how long they are kept (0: all) */
};

#define SYSCALL_FUTEX 202 /* x86-64 */

/* The stack maps, in id order: each generation's map and its spill maps (sched.h). */
static void stack_maps(struct sched_bpf *s, struct bpf_map *out[SCHED_STACK_MAPS])
{
	out[0] = s->maps.stacks;
	out[1] = s->maps.stacks_spill;
	out[2] = s->maps.stacks_spill2;
	out[3] = s->maps.stacks1;
	out[4] = s->maps.stacks1_spill;
	out[5] = s->maps.stacks1_spill2;
}

_Static_assert(sizeof(struct tt_task) < sizeof(struct tt_switch),
	       "switch_rb's records are told apart by their size");

/* An exited thread's tasks entry (sched.bpf.c task_retire), kept for tasks.bin. */
static int sched_retire(struct sched_state *st, const struct tt_task *t)
{
	uint64_t now_ns = tt_now_ns();
	int err = retired_tasks_add(st->retired, t, now_ns);

	if (st->retired_keep_ns && now_ns > st->retired_keep_ns)
		retired_tasks_forget_before(st->retired, now_ns - st->retired_keep_ns);
	return err;
}

/* A struct tt_switch, or a struct sched_in_msg: a switch record and the run-queue
 * record of the same switch-in, the latter written by the runq part; or a
 * struct tt_task, a thread that exited. */
static int sched_sample(void *ctx, void *data, size_t size)
{
	struct sched_state *st = ctx;
	int err;

	if (size == sizeof(struct tt_task)) {
		struct tt_task t;

		memcpy(&t, data, sizeof(t));
		err = sched_retire(st, &t);
		if (err && !st->write_err)
			st->write_err = err;
		return 0;
	}
	if (size < sizeof(struct tt_switch))
		return 0;
	probe_write(st->out, data, &st->write_err);
	if (size >= sizeof(struct sched_in_msg))
		runq_part_write(&st->rq, &((const struct sched_in_msg *)data)->rq);
	if (!st->write_err && (st->acc || st->flight)) {
		const struct tt_switch *r = data;

		if (r->syscall == SYSCALL_FUTEX && r->wait_addr)
			wait_names_note(st->names, r->pid, r->wait_addr);
		if (r->ustack_id >= 0 || r->syscall == SYSCALL_FUTEX) /* its maps while it lives */
			syms_set_get(st->syms, (int)r->pid, true);
		st->stacked += r->kstack_id >= 0 || r->ustack_id >= 0;
		err = st->acc ? offcpu_add(st->acc, r) : 0;
		if (err)
			st->write_err = err;
	}
	return 0;
}

/* sched's skeleton, over the object built without bpf_loop when the kernel lacks
 * it (occupancy.bpf.h): the same maps, programs and variables, so one skeleton
 * serves both. NULL with errno. */
static struct sched_bpf *sched_skel_open(bool bpf_loop)
{
	struct sched_bpf *s = calloc(1, sizeof(*s));
	int err;

	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	err = sched_bpf__create_skeleton(s);
	if (!err && !bpf_loop)
		s->skeleton->data = (void *)sched_noloop_bpf__elf_bytes(&s->skeleton->data_sz);
	err = err ?: bpf_object__open_skeleton(s->skeleton, features_open_opts());
	if (err) {
		sched_bpf__destroy(s);
		errno = -err;
		return NULL;
	}
	return s;
}

/* The bytes of user stack the program copies at a new call site (user_stack.h):
 * --user-stacks dwarf when it can run, else 0 (frame pointers). */
static unsigned user_stack_bytes(const struct tt_ctx *ctx, bool user_regs)
{
	const struct tt_opts *o = ctx->opts;

	if (!o->user_stack_bytes || !(o->events & TT_EV_OFFCPU) || o->aggregate)
		return 0;
	if (ctx->flight) {
		if (o->user_stacks_given)
			fprintf(stderr, "tailtrace: --user-stacks dwarf: not with --flight-recorder, "
				"whose off-CPU user stacks are walked by frame pointer\n");
		return 0;
	}
	if (!user_regs) {
		features_fallback("--user-stacks dwarf", "the user registers", "5.10",
				  "frame pointers", "user stacks stop at the first function "
				  "built without them");
		return 0;
	}
	return o->user_stack_bytes;
}

/* The copies' ring: 8 MiB, some 900 copies of 8 KiB (a burst of new call
 * sites, as when a server's threads start, copies a stack each; the loader
 * takes them as they come), less when --ringbuf-mb is smaller; and the words
 * their checks read. One entry each without --user-stacks dwarf. */
static int size_user_stacks(struct sched_bpf *s, const struct tt_opts *o)
{
	unsigned long bytes = probe_ringbuf_bytes(o);

	if (!s->rodata->ustack_copy_bytes)
		return bpf_map__set_max_entries(s->maps.ustack_rb, 4096) ?:
		       bpf_map__set_max_entries(s->maps.ustack_paths, 1);
	return bpf_map__set_max_entries(s->maps.ustack_rb,
					(__u32)(bytes > (8ul << 20) ? 8ul << 20 : bytes));
}

static bool records_wanted(const struct tt_opts *o)
{
	return !o->aggregate && (o->events & (TT_EV_SWITCH | TT_EV_OFFCPU));
}

static int sched_open(struct tt_ctx *ctx, struct sched_state *st)
{
	const struct tt_opts *o = ctx->opts;
	struct bpf_map *stacks[SCHED_STACK_MAPS];
	struct sched_bpf *s;
	unsigned thread_size;
	int err;

	if (!features_bpf_loop() && occ_wanted(o) && !occ_records_wanted(o))
		features_fallback("--listen's split of waits by occupant", "bpf_loop", "5.17",
				  "bounded loops", "a wait during which its CPU switched more than "
				  "48 times has its start counted unknown (and truncated)");
	s = st->skel = sched_skel_open(features_bpf_loop());
	if (!s) {
		snprintf(ctx->err, sizeof(ctx->err), "sched: cannot open BPF object: %s", strerror(errno));
		return -errno;
	}
	FILTER_CONFIGURE(s->rodata, ctx);
	AGGREGATE_CONFIGURE(s->rodata, o);
	s->rodata->emit_switch = (o->events & TT_EV_SWITCH) != 0;
	s->rodata->want_stacks = (o->events & TT_EV_OFFCPU) != 0;
	s->rodata->min_offcpu_ns = o->min_offcpu_us * 1000;
	s->rodata->kstack_reuse = !o->debug.exact_stacks;
	s->rodata->skip_steps = o->debug.skip_steps;
	s->rodata->retire_tasks = records_wanted(o); /* switch_rb is read then */
	s->rodata->user_regs_how = (__u8)features_user_regs(&thread_size);
	s->rodata->kernel_thread_size = thread_size;
	s->rodata->want_reason = s->rodata->user_regs_how != FEATURES_REGS_NONE;
	s->rodata->switch_state_arg = features_switch_state_arg();
	s->rodata->rb_wakeup_bytes = probe_ringbuf_bytes(o) / 8;
	s->rodata->ustack_copy_bytes = user_stack_bytes(ctx, s->rodata->want_reason);
	err = probe_size_ringbuf(s->maps.switch_rb, o) ?: size_user_stacks(s, o);
	if (!err && (o->aggregate || !(o->events & (TT_EV_SWITCH | TT_EV_OFFCPU))))
		err = bpf_map__set_max_entries(s->maps.switch_rb, 4096);
	stack_maps(s, stacks);
	for (int i = 0; !err && i < SCHED_STACK_MAPS; i++) /* the second generation: epochs only */
		if (!(o->events & TT_EV_OFFCPU) || (i >= SCHED_STACK_LEVELS && !st->epochs.period_ns))
			err = bpf_map__set_max_entries(stacks[i], 1);
	if (!err && !o->aggregate) /* histograms: --aggregate only */
		err = bpf_map__set_max_entries(s->maps.offcpu_hist, 1) ?:
		      bpf_map__set_max_entries(s->maps.migrate_hist, 1);
	if (err) {
		snprintf(ctx->err, sizeof(ctx->err), "sched: cannot size the BPF maps: %s",
			 strerror(-err));
		return err;
	}
	/* the hook's variant of every program, then what the events leave out */
	features_select_progs(s->obj, features_hook());
	aggregate_drain_configure(s->obj, o->aggregate);
	err = runq_part_configure(ctx, s);
	if (err)
		return err;
	err = sched_bpf__load(s);
	if (err)
		snprintf(ctx->err, sizeof(ctx->err), "sched: cannot load BPF programs (%s hook): %s",
			 features_hook_name(features_hook()), strerror(-err));
	return err;
}

static int sched_setup(struct tt_ctx *ctx, void **state)
{
	const struct tt_opts *o = ctx->opts;
	struct sched_state *st = calloc(1, sizeof(*st));
	int err;

	if (!st)
		return -ENOMEM;
	*state = st;
	st->aggregate = o->aggregate;
	st->flight = ctx->flight != NULL && (o->events & TT_EV_OFFCPU);
	stack_epochs_init(&st->epochs, ctx, o->events & TT_EV_OFFCPU, SCHED_STACK_IDS, tt_now_ns());
	st->syms = ctx->syms;
	err = sched_open(ctx, st) ?: runq_part_open(ctx, &st->rq, st->skel);
	if (err)
		return err;
	if (records_wanted(o)) {
		st->out = probe_open_kind(ctx, TT_REC_SWITCH);
		if (!st->out) {
			snprintf(ctx->err, sizeof(ctx->err), "sched: cannot create %s/switches.bin: %s",
				 o->out_dir, strerror(errno));
			return -errno;
		}
		/* the flight recorder sums each capture's own switches instead */
		if ((o->events & TT_EV_OFFCPU) && !ctx->flight &&
		    (!(st->acc = offcpu_new()) || !(st->names = wait_names_new())))
			return -ENOMEM;
		if (!(st->retired = retired_tasks_new()))
			return -ENOMEM;
		/* the recorder keeps the threads its windows can still reach */
		st->retired_keep_ns = ctx->flight ? (uint64_t)((2 * o->flight_s + 60) * 1e9) : 0;
		err = probe_add_ringbuf(ctx, st->skel->maps.switch_rb, sched_sample, st);
		if (!err && st->skel->rodata->ustack_copy_bytes) {
			st->copies = copied_stacks_new(bpf_map__fd(st->skel->maps.ustack_paths),
						       st->skel->rodata->ustack_copy_bytes, st->syms);
			err = st->copies ? probe_add_ringbuf(ctx, st->skel->maps.ustack_rb,
							     copied_stacks_add, st->copies)
					 : -ENOMEM;
		}
		if (err) {
			snprintf(ctx->err, sizeof(ctx->err), "sched: ring buffer: %s", strerror(-err));
			return err;
		}
	}
	err = sched_bpf__attach(st->skel);
	if (err)
		snprintf(ctx->err, sizeof(ctx->err), "sched: cannot attach (%s hook): %s",
			 features_hook_name(features_hook()), strerror(-err));
	return err;
}

/* Every thread: those that exited at or after since_ns (retired), then the live
 * ones in the tasks map; sorted by tid, one row each (a reused tid: its thread
 * now). */
static int tasks_read(struct sched_state *st, uint64_t since_ns, struct tt_task **out, size_t *n)
{
	int fd = bpf_map__fd(st->skel->maps.tasks);
	size_t live = bpf_map__max_entries(st->skel->maps.tasks);
	size_t gone = st->retired ? retired_tasks_count(st->retired) : 0, cnt = 0;
	struct tt_task *v = calloc(live + gone + 1, sizeof(*v));
	__u32 key, next, *prev = NULL;

	if (!v)
		return -ENOMEM;
	if (gone)
		cnt = retired_tasks_copy(st->retired, since_ns, v, gone);
	while (cnt < live + gone && bpf_map_get_next_key(fd, prev, &next) == 0) {
		if (bpf_map_lookup_elem(fd, &next, &v[cnt]) == 0)
			cnt++;
		key = next;
		prev = &key;
	}
	*out = v;
	*n = tasks_sort_unique(v, cnt);
	return 0;
}

static int tasks_write(const char *dir, struct sched_state *st, const struct tt_task *v, size_t n)
{
	struct recfile *f = recfile_open_kind(dir, TT_REC_TASK);
	int err;

	if (!f)
		return -errno;
	err = recfile_write(f, v, n);
	st->tasks_written = recfile_count(f);
	return recfile_close(f) ?: err;
}

/* DIR/stacks.jsonl and offcpu.folded from accumulated records and the stack maps. */
static int write_offcpu(struct tt_ctx *ctx, struct sched_state *st, struct offcpu_acc *acc,
			const char *dir, const struct tt_task *tasks, size_t ntasks,
			struct tt_ksyms *ksyms)
{
	struct bpf_map *maps[SCHED_STACK_MAPS];
	struct offcpu_stacks sm = { .epoch = st->skel->bss->stack_epoch, .epochs = &st->epochs,
				    .copies = st->copies };

	stack_maps(st->skel, maps);
	for (int i = 0; i < SCHED_STACK_MAPS; i++)
		sm.fds[i] = bpf_map__fd(maps[i]);
	return offcpu_write(acc, dir, &sm, tasks, ntasks, ctx->syms, ksyms);
}

/* The targets' maps read for the unwinder while they live (copied_stacks_watch),
 * when due, on the symbolizers' schedule (SYMS_FIRST_REFRESH_NS, syms.h): the ms
 * until the next time, -1 if never. */
static int targets_watch(const struct tt_ctx *ctx, struct sched_state *st, uint64_t now_ns)
{
	if (!st->copies || !ctx->ntargets)
		return -1;
	if (!st->watch_every_ns) {
		st->watch_every_ns = SYMS_FIRST_REFRESH_NS;
		st->watch_next_ns = now_ns + SYMS_FIRST_REFRESH_NS;
	}
	if (now_ns >= st->watch_next_ns) {
		for (int i = 0; i < ctx->ntargets; i++)
			copied_stacks_watch(st->copies, ctx->target_pids[i]);
		if (st->watch_every_ns < SYMS_REFRESH_NS)
			st->watch_every_ns *= 2;
		st->watch_next_ns = now_ns + st->watch_every_ns;
	}
	return (int)((st->watch_next_ns - now_ns) / 1000000) + 1;
}

static int ms_sooner(int a, int b)
{
	return a < 0 || (b >= 0 && b < a) ? b : a;
}

/* The stack maps' next epoch, when due (stack_epoch.h); under the flight
 * recorder, the switches waits want that are still in the rings; the targets'
 * maps for the unwinder. */
static int sched_tick(struct tt_ctx *ctx, void *state, uint64_t now_ns)
{
	struct sched_state *st = state;
	struct bpf_map *maps[SCHED_STACK_MAPS];
	int fds[SCHED_STACK_MAPS];
	const int *gens[2] = { fds, fds + SCHED_STACK_LEVELS };
	int due_ms = ctx->flight ? runq_part_tick(&st->rq, st->skel) : -1, ms;

	due_ms = ms_sooner(due_ms, targets_watch(ctx, st, now_ns));
	if (!st->epochs.period_ns)
		return due_ms;
	stack_maps(st->skel, maps);
	for (int i = 0; i < SCHED_STACK_MAPS; i++)
		fds[i] = bpf_map__fd(maps[i]);
	ms = stack_epochs_tick(&st->epochs, &st->skel->bss->stack_epoch, gens,
			       SCHED_STACK_LEVELS, now_ns);
	return ms_sooner(ms, due_ms);
}

static int sched_finish(struct tt_ctx *ctx, void *state)
{
	struct sched_state *st = state;

	if (ctx->opts->verbose)
		fprintf(stderr, "tailtrace: sched: %llu switch edges without a readable thread slot\n",
			(unsigned long long)probe_counter_sum(st->skel->maps.sched_counters, SCHED_CNT_NO_SLOT));
	struct tt_task *tasks = NULL;
	size_t ntasks = 0;
	int rec_err = probe_flush(st->out, &st->write_err), err, rq_err;

	/* switches.bin failed (disk full): still try the small side files below,
	 * the thread names and stacks make what was recorded readable */
	err = tasks_read(st, 0, &tasks, &ntasks);
	for (size_t i = 0; !err && i < ntasks; i++)
		aggregate_note_task(tasks[i].tid, tasks[i].pid, tasks[i].comm);
	if (!err && !st->aggregate && !ctx->flight) /* the recorder: each capture has its own */
		err = tasks_write(ctx->opts->out_dir, st, tasks, ntasks);
	if (!err && st->aggregate && (err = aggregate_drain(st->skel->obj))) { /* every part's */
		snprintf(ctx->err, sizeof(ctx->err),
			 "sched: cannot collect the threads' histograms: %s", strerror(-err));
		free(tasks);
		return rec_err ?: err;
	}
	if (!err && st->aggregate && (ctx->opts->events & (TT_EV_SWITCH | TT_EV_OFFCPU)))
		err = aggregate_add_map(st->skel->maps.offcpu_hist, "offcpu", "usecs",
					&st->hist_events);
	if (!err && st->acc)
		err = write_offcpu(ctx, st, st->acc, ctx->opts->out_dir, tasks, ntasks, NULL) ?:
		      wait_names_write(st->names, ctx->opts->out_dir, ctx->syms);
	/* runq.bin and occupancy.bin are flushed whatever became of switches.bin (a full
	 * disk): the histograms only once drained */
	rq_err = st->aggregate && err ? 0 : runq_part_finish(ctx, &st->rq, st->skel);
	if (rec_err)
		snprintf(ctx->err, sizeof(ctx->err), "sched: writing switches.bin: %s%s",
			 strerror(-rec_err), err ? " (and tasks/stacks)" : "");
	else if (err)
		snprintf(ctx->err, sizeof(ctx->err), "sched: writing tasks/stacks: %s", strerror(-err));
	free(tasks);
	return rec_err ?: err ?: rq_err; /* rq_err has its own message */
}

static int acc_one(void *arg, uint32_t type, const void *rec)
{
	struct tt_switch r;

	(void)type;
	memcpy(&r, rec, sizeof(r)); /* the flight store keeps records unaligned */
	return offcpu_add(arg, &r);
}

/* A flight-recorder capture: the threads, and the off-CPU stacks of its switches. */
static int sched_capture(struct tt_ctx *ctx, void *state, const struct tt_capture *cap)
{
	struct sched_state *st = state;
	struct offcpu_acc *acc = NULL;
	struct tt_task *tasks = NULL;
	size_t ntasks = 0;
	int err = tasks_read(st, cap->t0_ns, &tasks, &ntasks);

	err = err ?: tasks_write(cap->dir, st, tasks, ntasks);
	if (!err && (err = runq_part_capture(ctx, &st->rq, st->skel, cap))) {
		free(tasks);
		return err; /* its own message */
	}
	if (!err && (ctx->opts->events & TT_EV_OFFCPU)) {
		acc = offcpu_new();
		err = acc ? flight_store_each(cap->store, TT_REC_SWITCH, cap->t0_ns, cap->t1_ns,
					      acc_one, acc) : -ENOMEM;
		if (!st->ksyms)
			st->ksyms = ksyms_load();
		err = err ?: write_offcpu(ctx, st, acc, cap->dir, tasks, ntasks, st->ksyms);
	}
	if (err)
		snprintf(ctx->err, sizeof(ctx->err), "sched: writing %s (tasks, stacks): %s",
			 cap->dir, strerror(-err));
	offcpu_free(acc);
	free(tasks);
	return err;
}

/* The sched object's maps that can fill: those map_full counts (enum sched_map),
 * the stack maps (a stack all three levels refused) and the histograms. */
static int sched_map_full(void *state, struct tt_map_full *out, int max)
{
	struct sched_state *st = state;
	struct sched_bpf *s = st->skel;
	int n = 0;

	if (!s)
		return 0;
	int hook = features_hook();
	/* the tid-keyed state of raw_tp and the classic hook (tp_btf: task storage) */
	struct bpf_map *const counted[SCHED_MAP_NR] = {
		[SCHED_MAP_TASKS] = s->maps.tasks,
		[SCHED_MAP_OFF_IDS] = hook != TT_HOOK_TP_BTF ? s->maps.off_ids : NULL,
		[SCHED_MAP_START_IDS] = hook != TT_HOOK_TP_BTF ? s->maps.start_ids : NULL,
		[SCHED_MAP_TRACKED] = hook == TT_HOOK_TRACEPOINT ? s->maps.tracked : NULL,
		[SCHED_MAP_OCC_NAMES] = s->maps.occ_names, [SCHED_MAP_OCC_BLAME] = s->maps.occ_blame,
	};

	probe_map_full_counts(out, &n, max, s->maps.map_full, counted, SCHED_MAP_NR);
	if (st->acc || st->flight)
		probe_map_full_add(out, &n, max, s->maps.stacks,
				   probe_counter_sum(s->maps.sched_counters, SCHED_CNT_STACK_ERR));
	if (st->aggregate) {
		probe_map_full_add(out, &n, max, s->maps.runq_hist,
				   probe_counter_sum(s->maps.hist_refused, TT_HIST_RUNQ));
		probe_map_full_add(out, &n, max, s->maps.offcpu_hist,
				   probe_counter_sum(s->maps.hist_refused, TT_HIST_SWITCH));
	}
	return n;
}

static int sched_stats(void *state, struct tt_stream_stats *out, int max)
{
	struct sched_state *st = state;
	const char *hook = features_hook_name(features_hook());
	int n = 0;

	if (!st->skel)
		return 0;
	n = runq_part_stats(&st->rq, st->skel, out, max);
	if ((st->out || st->aggregate) && n < max)
		out[n++] = (struct tt_stream_stats){
			.stream = "switch", .hook = hook,
			.written = st->aggregate ? st->hist_events : recfile_count(st->out),
			.lost = probe_counter_sum(st->skel->maps.sched_counters, SCHED_CNT_LOST) +
				probe_counter_sum(st->skel->maps.hist_refused, TT_HIST_SWITCH) +
				recfile_dropped(st->out),
			.unmatched = probe_counter_sum(st->skel->maps.sched_counters, SCHED_CNT_UNMATCHED) };
	if ((st->acc || st->flight) && n < max)
		out[n++] = (struct tt_stream_stats){
			.stream = "offcpu", .hook = hook, .written = st->stacked,
			.lost = probe_counter_sum(st->skel->maps.sched_counters, SCHED_CNT_STACK_ERR) };
	if (!st->aggregate && n < max)
		out[n++] = (struct tt_stream_stats){ .stream = "tasks", .hook = hook,
						     .written = st->tasks_written };
	return n;
}

static void sched_destroy(void *state)
{
	struct sched_state *st = state;

	if (!st)
		return;
	sched_bpf__destroy(st->skel);
	runq_part_free(&st->rq);
	recfile_close(st->out);
	offcpu_free(st->acc);
	copied_stacks_free(st->copies);
	wait_names_free(st->names);
	retired_tasks_free(st->retired);
	ksyms_free(st->ksyms);
	free(st);
}

static struct bpf_object *sched_object(void *state)
{
	struct sched_state *st = state;

	return st && st->skel ? st->skel->obj : NULL;
}

/* --toggle-ms: the skeleton's links destroyed, or made again. */
static int sched_toggle(void *state, bool on)
{
	struct sched_state *st = state;

	return probe_toggle_skeleton(st->skel->skeleton, &st->skel->bss->runq_attach_gen, on);
}

/* A map the exporter reads, or NULL when sized down (its event off). */
static struct bpf_map *in_use(struct bpf_map *m)
{
	return bpf_map__max_entries(m) > 1 ? m : NULL;
}

/* --listen: the histograms, the thread names and who held the CPU. */
static void sched_export(void *state, struct exporter_source *src)
{
	struct sched_state *st = state;
	struct sched_bpf *s = st->skel;

	src->runq = st->rq.on ? in_use(s->maps.runq_hist) : NULL;
	src->throttled = st->rq.on ? in_use(s->maps.throttle_hist) : NULL;
	src->offcpu = in_use(s->maps.offcpu_hist);
	src->migrate = in_use(s->maps.migrate_hist);
	src->tasks = in_use(s->maps.tasks);
	src->blame = st->rq.occ_blame ? in_use(s->maps.occ_blame) : NULL;
}

/* "offcpu_stack_cache": how often the blocked switch-outs unwound, and how
 * often a cached site's stacks, taken afresh, had changed (sched.h). */
static void stack_cache_meta(const struct sched_bpf *skel, FILE *f)
{
	const struct bpf_map *c = skel->maps.sched_counters;

	if (!skel->rodata->want_stacks || skel->rodata->aggregate)
		return;
	fprintf(f, "  \"offcpu_stack_cache\": {\"on\": %s, \"budget_uses\": [%d, %d], "
		"\"unwinds\": %llu, \"refreshes\": %llu, \"refreshes_changed\": %llu},\n",
		skel->rodata->kstack_reuse ? "true" : "false", SCHED_KSTACK_REUSE,
		SCHED_KSTACK_REUSE_MAX,
		(unsigned long long)probe_counter_sum(c, SCHED_CNT_UNWIND),
		(unsigned long long)probe_counter_sum(c, SCHED_CNT_REFRESH),
		(unsigned long long)probe_counter_sum(c, SCHED_CNT_REFRESH_CHANGED));
}

static void sched_meta(void *state, FILE *f)
{
	struct sched_state *st = state;

	runq_part_meta(&st->rq, st->skel, f);
	stack_epochs_meta(&st->epochs, "offcpu_stack_epochs", f);
	stack_cache_meta(st->skel, f);
	if (st->retired) /* exited threads sent from the tasks map, which holds the live ones */
		fprintf(f, "  \"tasks_retired\": %llu,\n",
			(unsigned long long)retired_tasks_added(st->retired));
	const struct bpf_map *c = st->skel->maps.sched_counters;

	if (st->copies)
		copied_stacks_meta(st->copies, &(struct copied_stacks_bpf){
			probe_counter_sum(c, SCHED_CNT_USTACK_COPIES),
			probe_counter_sum(c, SCHED_CNT_USTACK_LOST),
			probe_counter_sum(c, SCHED_CNT_USTACK_UNCHECKED),
			probe_counter_sum(c, SCHED_CNT_USTACK_COLLISION) }, f);
	else if (st->skel->rodata->want_stacks && !st->skel->rodata->aggregate)
		fputs("  \"user_stacks\": {\"unwind\": \"frame_pointer\"},\n", f);
}

/* Its programs' cost, by event: the run-queue and occupancy programs apart. */
static const struct tt_cost_part cost_parts[] = {
	{ "runq_", "runq" }, { "occ_", "runq" }, { NULL, NULL },
};

const struct tt_probe probe_sched = {
	.name = "sched",
	.events = TT_EV_RUNQ | TT_EV_SWITCH | TT_EV_OFFCPU | TT_EV_CPU | TT_EV_IRQ,
	.cost_parts = cost_parts,
	.meta = sched_meta,
	.export = sched_export,
	.setup = sched_setup,
	.finish = sched_finish,
	.stats = sched_stats,
	.map_full = sched_map_full,
	.destroy = sched_destroy,
	.object = sched_object,
	.toggle = sched_toggle,
	.capture = sched_capture,
	.tick = sched_tick,
};
