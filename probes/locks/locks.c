// SPDX-License-Identifier: MIT
/*
 * locks: loader side of locks.bpf.c. Attaches to the libc the target maps
 * (resolved through /proc/PID/maps), streams struct tt_lock records into
 * locks.bin, and at the end writes the records of mutexes still held
 * (t_released_ns = 0) and the acquirers' user stacks to stacks.jsonl.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "spans/disasm.h"
#include "core/features.h"
#include "core/map_full.h"
#include "core/probe.h"
#include "spans/span_plan.h"
#include "symbols/syms.h"
#include "recfile.h"
#include "locks/locks.h"
#include "locks.skel.h"
#include "flight/flight_store.h"
#include "symbols/stack_epoch.h"
#include <tt_clock.h>
#include "export/aggregate.h"
#include "core/filter.h"
#include "core/registry.h"
#include "core/uprobe_set.h"

struct locks_state {
	struct locks_bpf *skel;
	struct uprobe_set uprobes;    /* mutex and cond wait uprobes, again for each descendant */
	struct bpf_link *futex_link;  /* the futex tracepoint (optional) */
	struct recfile *out;
	const struct tt_opts *opts;
	int write_err;
	uint32_t stack_pid[LOCKS_STACK_ENTRIES]; /* stack id -> a pid using it (epoch 0) */
	struct stack_epochs epochs; /* the stack maps' turns (the flight recorder) */
	char libc[PATH_MAX];
	uint64_t site_ns_sum;  /* expected cost of one hit at each attached site, summed */
	int nsites;
};

/* One-line reason for the loader (vsnprintf: truncation is intended). */
__attribute__((format(printf, 2, 3)))
static void locks_err(struct tt_ctx *ctx, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(ctx->err, sizeof(ctx->err), fmt, ap);
	va_end(ap);
}

static int locks_on_event(void *arg, void *data, size_t size)
{
	struct locks_state *st = arg;
	const struct tt_lock *r = data;

	if (size < sizeof(*r))
		return 0;
	if (r->ustack_id >= 0 && r->ustack_id < LOCKS_STACK_ENTRIES)
		st->stack_pid[r->ustack_id] = r->pid;
	probe_write(st->out, r, &st->write_err);
	return 0;
}

struct locks_func {
	const char *name;
	struct bpf_program *prog;
	bool retprobe;
	bool optional; /* absent from older glibc: skipped */
};

static int locks_attach(struct tt_ctx *ctx, struct locks_state *st)
{
	struct locks_bpf *skel = st->skel;
	const struct locks_func funcs[] = {
		{ "pthread_mutex_lock", skel->progs.mutex_lock_enter, false, false },
		{ "pthread_mutex_lock", skel->progs.mutex_lock_exit, true, false },
		{ "pthread_mutex_trylock", skel->progs.mutex_trylock_enter, false, false },
		{ "pthread_mutex_trylock", skel->progs.mutex_lock_exit, true, false },
		{ "pthread_mutex_unlock", skel->progs.mutex_unlock_enter, false, false },
		{ "pthread_cond_wait", skel->progs.cond_wait_enter, false, false },
		{ "pthread_cond_wait", skel->progs.cond_wait_exit, true, false },
		{ "pthread_cond_timedwait", skel->progs.cond_wait_enter, false, false },
		{ "pthread_cond_timedwait", skel->progs.cond_wait_exit, true, false },
		{ "pthread_cond_clockwait", skel->progs.cond_wait_enter, false, true },
		{ "pthread_cond_clockwait", skel->progs.cond_wait_exit, true, true },
	};
	int pid = st->opts->all || ctx->target_pid <= 0 ? -1 : ctx->target_pid;
	struct uprobe_spec spec = { 0 };

	snprintf(spec.path, sizeof(spec.path), "%s", st->libc);
	for (size_t i = 0; i < sizeof(funcs) / sizeof(funcs[0]); i++) {
		struct span_site site; /* past a single-stepped first instruction if it can */
		int err = span_plan_entry(st->libc, funcs[i].name, &site);
		uint64_t off = site.offset;

		if (err == -ENOENT && funcs[i].optional)
			continue;
		if (err) {
			locks_err(ctx, "locks: %s not found in %s",
				 funcs[i].name, st->libc);
			return err;
		}
		st->site_ns_sum += funcs[i].retprobe ? usite_uretprobe_ns() :
						      usite_cost_ns((enum usite_class)site.cls);
		st->nsites++;
		if (st->opts->verbose && !funcs[i].retprobe)
			fprintf(stderr, "tailtrace: locks: %s: its uprobe site is %s\n",
				funcs[i].name, usite_class_name((enum usite_class)site.cls));
		spec.prog = funcs[i].prog;
		spec.offset = off;
		spec.retprobe = funcs[i].retprobe;
		err = uprobe_set_attach(&st->uprobes, &spec, pid);
		if (err) {
			locks_err(ctx, "locks: cannot attach uprobe to %s:%s: %s",
				 st->libc, funcs[i].name, strerror(-err));
			return err;
		}
	}
	/* Optional: futex() during lock() marks the slow path. Without tracefs
	 * the wait threshold alone decides CONTENDED. */
	st->futex_link = bpf_program__attach(skel->progs.futex_enter);
	return 0;
}

/* A descendant of a target (tree.c found it): the mutex uprobes for it too. */
static int locks_attach_process(struct tt_ctx *ctx, void *state, int pid)
{
	struct locks_state *st = state;
	int err = uprobe_set_attach_pid(&st->uprobes, pid);

	if (err)
		locks_err(ctx, "locks: cannot attach the uprobes for pid %d, a descendant of the "
			  "target: %s", pid, strerror(-err));
	return err;
}

static int locks_open(struct tt_ctx *ctx, struct locks_state *st)
{
	const struct tt_opts *o = st->opts;
	int err;

	st->skel = locks_bpf__open_opts(features_open_opts());
	if (!st->skel) {
		locks_err(ctx, "locks: cannot open BPF object");
		return -errno ? -errno : -EINVAL;
	}
	AGGREGATE_CONFIGURE(st->skel->rodata, o);
	FILTER_CONFIGURE(st->skel->rodata, ctx);
	probe_size_ringbuf(st->skel->maps.events, o);
	err = st->epochs.period_ns ? 0 : bpf_map__set_max_entries(st->skel->maps.stacks1, 1);
	err = err ?: locks_bpf__load(st->skel);
	if (err)
		locks_err(ctx, "locks: cannot load BPF programs: %s",
			 strerror(-err));
	return err;
}

static void locks_destroy(void *state)
{
	struct locks_state *st = state;

	if (!st)
		return;
	uprobe_set_free(&st->uprobes);
	bpf_link__destroy(st->futex_link);
	locks_bpf__destroy(st->skel);
	recfile_close(st->out);
	free(st);
}

static int locks_setup(struct tt_ctx *ctx, void **state)
{
	struct locks_state *st = calloc(1, sizeof(*st));
	int pid = ctx->opts->all ? 0 : ctx->target_pid;
	int err;

	if (!st)
		return -ENOMEM;
	st->opts = ctx->opts;
	err = syms_find_library(pid, "libc.so.6", st->libc, sizeof(st->libc));
	if (err) {
		locks_err(ctx, "locks: libc.so.6 not found for pid %d (statically linked target?)", pid);
		goto fail;
	}
	stack_epochs_init(&st->epochs, ctx, !ctx->opts->aggregate, LOCKS_STACK_ENTRIES, tt_now_ns());
	err = locks_open(ctx, st);
	if (!err)
		err = locks_attach(ctx, st);
	if (!err && !ctx->opts->aggregate) {
		st->out = probe_open_kind(ctx, TT_REC_LOCK);
		if (!st->out) {
			err = -errno;
			locks_err(ctx, "locks: cannot create %s/locks.bin: %s",
				 ctx->opts->out_dir, strerror(errno));
		}
	}
	if (!err && !ctx->opts->aggregate)
		err = probe_add_ringbuf(ctx, st->skel->maps.events, locks_on_event, st);
	if (err)
		goto fail;
	*state = st;
	return 0;
fail:
	locks_destroy(st);
	return err;
}

static int stacks_write_all(struct tt_ctx *ctx, struct locks_state *st);

static uint64_t locks_counter(struct locks_state *st, __u32 idx)
{
	return probe_counter_sum(st->skel->maps.counters, idx);
}

/* Mutexes still held at the end: one record each, t_released_ns = 0. */
static int locks_write_held(struct locks_state *st)
{
	struct bpf_map *m = st->skel->maps.held;
	struct locks_held_key key, next, *prev = NULL;
	struct locks_held h;
	int err = 0;

	while (!err && !bpf_map__get_next_key(m, prev, &next, sizeof(next))) {
		key = next;
		prev = &key;
		if (bpf_map__lookup_elem(m, &key, sizeof(key), &h, sizeof(h), 0))
			continue;
		struct tt_lock r = {
			.mutex = key.mutex, .t_request_ns = h.t_request_ns,
			.t_acquired_ns = h.t_acquired_ns, .t_released_ns = 0,
			.pid = h.pid, .tid = key.tid, .ustack_id = h.ustack_id, .flags = h.flags,
		};
		locks_on_event(st, &r, sizeof(r));
		err = st->write_err;
	}
	return err;
}

static int locks_finish(struct tt_ctx *ctx, void *state)
{
	struct locks_state *st = state;
	int err = 0, e;

	if (ctx->opts->verbose)
		fprintf(stderr, "tailtrace: locks: %llu failed trylocks, %llu unlocks of mutexes "
			"not seen locked, %llu state-map overflows\n",
			(unsigned long long)locks_counter(st, LOCKS_CNT_TRYFAIL),
			(unsigned long long)locks_counter(st, LOCKS_CNT_UNMATCHED),
			(unsigned long long)locks_counter(st, LOCKS_CNT_STATE_FULL));
	if (ctx->opts->aggregate) {
		err = aggregate_add_map(st->skel->maps.wait_hists, "lock_wait", "usecs", NULL);
		e = aggregate_add_map(st->skel->maps.hold_hists, "lock_hold", "usecs", NULL);
		return err ? err : e;
	}
	err = locks_write_held(st);
	e = probe_flush(st->out, &st->write_err);
	err = err ? err : e;
	e = ctx->flight ? 0 : /* the flight recorder: each capture has them */
		    stacks_write_all(ctx, st);
	err = err ? err : e;
	if (err)
		locks_err(ctx, "locks: writing %s: %s", ctx->opts->out_dir,
			 strerror(-err));
	return err;
}

static int locks_map_full(void *state, struct tt_map_full *out, int max)
{
	struct locks_state *st = state;
	int n = 0;

	if (!st->skel)
		return 0;
	struct bpf_map *const counted[LOCKS_MAP_NR] = {
		[LOCKS_MAP_PENDING] = st->skel->maps.pending, [LOCKS_MAP_HELD] = st->skel->maps.held,
		[LOCKS_MAP_TRYFAILED] = st->skel->maps.tryfailed,
		[LOCKS_MAP_CONDWAIT] = st->skel->maps.condwait,
	};

	probe_map_full_counts(out, &n, max, st->skel->maps.map_full, counted, LOCKS_MAP_NR);
	return n;
}

static int locks_stats(void *state, struct tt_stream_stats *out, int max)
{
	struct locks_state *st = state;

	if (max < 1)
		return 0;
	out[0] = (struct tt_stream_stats){
		.stream = "locks", .hook = "uprobe",
		.written = st->out ? recfile_count(st->out) : 0,
		.lost = locks_counter(st, LOCKS_CNT_LOST) + recfile_dropped(st->out) +
			probe_counter_sum(st->skel->maps.hist_refused, TT_HIST_LOCKS),
		.uprobe_hits = locks_counter(st, LOCKS_CNT_HITS),
		/* the hits spread over the sites: their mean cost */
		.uprobe_cost_ns = st->nsites ? locks_counter(st, LOCKS_CNT_HITS) * st->site_ns_sum /
						      st->nsites : 0,
	};
	return 1;
}

static struct bpf_object *locks_object(void *state)
{
	struct locks_state *st = state;

	return st && st->skel ? st->skel->obj : NULL;
}

struct stack_list {
	struct locks_stack *v;
	size_t n, cap;
};

static int stack_list_add(void *arg, uint32_t type, const void *rec)
{
	struct stack_list *l = arg;
	struct tt_lock r;

	(void)type;
	memcpy(&r, rec, sizeof(r)); /* the flight store keeps records unaligned */
	if (r.ustack_id < 0)
		return 0;
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 256;
		struct locks_stack *v = realloc(l->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = (struct locks_stack){ r.ustack_id, r.pid };
	return 0;
}

static int cmp_stack(const void *a, const void *b)
{
	const struct locks_stack *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

/* DIR/stacks.jsonl: the stacks of ids[0..n) (repeats allowed; sorted here). */
static int stacks_write(struct tt_ctx *ctx, struct locks_state *st, const char *dir,
			struct locks_stack *ids, size_t n)
{
	int fds[2] = { bpf_map__fd(st->skel->maps.stacks), bpf_map__fd(st->skel->maps.stacks1) };
	size_t k = 0;

	if (n)
		qsort(ids, n, sizeof(*ids), cmp_stack);
	for (size_t i = 0; i < n; i++) /* distinct ids */
		if (!k || ids[i].id != ids[k - 1].id)
			ids[k++] = ids[i];
	return locks_stacks_write(dir, ctx->syms, fds, &st->epochs, st->skel->bss->stack_epoch,
				  ids, k);
}

/* The run's DIR/stacks.jsonl: every stack its records used (one epoch: not the recorder). */
static int stacks_write_all(struct tt_ctx *ctx, struct locks_state *st)
{
	struct locks_stack *all = calloc(LOCKS_STACK_ENTRIES, sizeof(*all));
	size_t n = 0;
	int err;

	if (!all)
		return -ENOMEM;
	for (int32_t id = 0; id < LOCKS_STACK_ENTRIES; id++)
		if (st->stack_pid[id])
			all[n++] = (struct locks_stack){ id, st->stack_pid[id] };
	err = stacks_write(ctx, st, ctx->opts->out_dir, all, n);
	free(all);
	return err;
}

/* A flight-recorder capture: the stacks its acquisitions used. */
static int locks_capture(struct tt_ctx *ctx, void *state, const struct tt_capture *cap)
{
	struct locks_state *st = state;
	struct stack_list l = { 0 };
	int err = flight_store_each(cap->store, TT_REC_LOCK, cap->t0_ns, cap->t1_ns,
				    stack_list_add, &l);

	err = err ?: stacks_write(ctx, st, cap->dir, l.v, l.n);
	if (err)
		locks_err(ctx, "locks: writing %s/stacks.jsonl: %s", cap->dir, strerror(-err));
	free(l.v);
	return err;
}

/* The stack maps' next epoch, when due (stack_epoch.h). */
static int locks_tick(struct tt_ctx *ctx, void *state, uint64_t now_ns)
{
	struct locks_state *st = state;
	int fds[2] = { bpf_map__fd(st->skel->maps.stacks), bpf_map__fd(st->skel->maps.stacks1) };
	const int *gens[2] = { fds, fds + 1 };

	(void)ctx;
	return stack_epochs_tick(&st->epochs, &st->skel->bss->stack_epoch, gens, 1, now_ns);
}

static void locks_meta(void *state, FILE *f)
{
	struct locks_state *st = state;

	stack_epochs_meta(&st->epochs, "locks_stack_epochs", f);
}

const struct tt_probe probe_locks = {
	.name = "locks",
	.events = TT_EV_LOCKS,
	.setup = locks_setup,
	.finish = locks_finish,
	.stats = locks_stats,
	.map_full = locks_map_full,
	.destroy = locks_destroy,
	.object = locks_object,
	.capture = locks_capture,
	.tick = locks_tick,
	.meta = locks_meta,
	.attach_process = locks_attach_process,
};
