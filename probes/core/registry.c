// SPDX-License-Identifier: MIT
/*
 * The probe modules. locks and spans come from another part of the tree and
 * are weak: the loader builds and runs with or without them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/features.h"
#include "flight/flight.h"
#include "recfile.h"
#include "core/registry.h"
#include "core/cpu_quota.h"
#include "sched/throttle.h"

extern const struct tt_probe probe_sched;
extern const struct tt_probe probe_locks __attribute__((weak));
extern const struct tt_probe probe_spans __attribute__((weak));

int registry_modules(const struct tt_probe **out, int max)
{
	/* sched first: it owns the thread table every stream refers to. */
	const struct tt_probe *all[] = { &probe_sched, &probe_locks, &probe_spans };
	int n = 0;

	for (unsigned i = 0; i < sizeof(all) / sizeof(all[0]) && n < max; i++)
		if (all[i])
			out[n++] = all[i];
	return n;
}

bool registry_has_event(unsigned event)
{
	const struct tt_probe *mods[8];
	int n = registry_modules(mods, 8);

	for (int i = 0; i < n; i++)
		if (mods[i]->events & event)
			return true;
	return false;
}

unsigned registry_untoggled_events(void)
{
	const struct tt_probe *mods[8];
	int n = registry_modules(mods, 8);
	unsigned events = 0;

	for (int i = 0; i < n; i++)
		if (!mods[i]->toggle)
			events |= mods[i]->events;
	return events;
}

unsigned long probe_ringbuf_bytes(const struct tt_opts *opts)
{
	unsigned long page = (unsigned long)sysconf(_SC_PAGESIZE);
	unsigned long want = (unsigned long)opts->ringbuf_mb << 20, sz = page;

	while (sz < want)
		sz <<= 1;
	return sz;
}

int probe_size_ringbuf(struct bpf_map *map, const struct tt_opts *opts)
{
	return bpf_map__set_max_entries(map, (__u32)probe_ringbuf_bytes(opts));
}

int probe_add_ringbuf(struct tt_ctx *ctx, struct bpf_map *map, ring_buffer_sample_fn fn, void *state)
{
	int fd = bpf_map__fd(map), err;

	if (fd < 0)
		return -EINVAL;
	if (!ctx->rb) {
		ctx->rb = ring_buffer__new(fd, fn, state, NULL);
		return ctx->rb ? 0 : -errno;
	}
	err = ring_buffer__add(ctx->rb, fd, fn, state);
	return err < 0 ? err : 0;
}

static int write_error; /* the first, of any module */

/* err, if any, becomes the module's first error and the run's. */
static void keep_first_error(int *write_err, int err)
{
	if (err && !*write_err)
		*write_err = err;
	if (err && !write_error)
		write_error = err;
}

struct recfile *probe_open_kind(const struct tt_ctx *ctx, enum tt_rec_type type)
{
	if (ctx->flight)
		return recfile_open_sink(type, flight_sink, ctx->flight);
	return recfile_open_kind(ctx->opts->out_dir, type);
}

void probe_write(struct recfile *f, const void *rec, int *write_err)
{
	/* after an error recfile_write only counts the record as dropped */
	keep_first_error(write_err, recfile_write(f, rec, 1));
}

int probe_flush(struct recfile *f, int *write_err)
{
	keep_first_error(write_err, recfile_flush(f));
	if (*write_err && !write_error) /* also an earlier error that was not a write */
		write_error = *write_err;
	return *write_err;
}

int probe_write_error(void)
{
	return write_error;
}

bool probe_runq_in_sched(const struct tt_opts *opts)
{
	return (opts->events & TT_EV_RUNQ) && features_hook() != TT_HOOK_TRACEPOINT &&
	       !opts->debug.split_switch;
}

bool probe_runq_kacct(const struct tt_opts *opts)
{
	return opts->aggregate && (opts->events & TT_EV_RUNQ) && features_hook() == TT_HOOK_TP_BTF &&
	       features_sched_info() && !opts->debug.runq_waking;
}

/* Does a target start under a CPU quota? The --pid targets, or for -- CMD tailtrace's
 * own cgroup (the child's); targets picked by --all, --comm or --cgroup are not known
 * before they run: yes. */
static bool targets_under_quota(const struct tt_opts *opts)
{
	if (opts->all || opts->comm || opts->cgroup)
		return true;
	if (!opts->npids)
		return cpu_quota_over(getpid());
	for (int i = 0; i < opts->npids; i++)
		if (cpu_quota_over(opts->pids[i]))
			return true;
	return false;
}

int probe_throttle_clock(const struct tt_opts *opts)
{
	static int cached = -1;

	if (cached >= 0)
		return cached;
	if (!(opts->events & TT_EV_RUNQ) || features_hook() == TT_HOOK_TRACEPOINT ||
	    !targets_under_quota(opts))
		return cached = TT_THROTTLE_NONE;
	return cached = features_throttle_clock();
}

int probe_toggle_skeleton(struct bpf_object_skeleton *skel, __u32 *attach_gen, bool on)
{
	if (on) {
		(*attach_gen)++;
		return bpf_object__attach_skeleton(skel);
	}
	bpf_object__detach_skeleton(skel);
	return 0;
}

uint64_t probe_counter_sum(const struct bpf_map *map, __u32 idx)
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t sum = 0;

	if (ncpu <= 0)
		return 0;
	uint64_t vals[ncpu];

	if (bpf_map__lookup_elem(map, &idx, sizeof(idx), vals, sizeof(vals), 0))
		return 0;
	for (int i = 0; i < ncpu; i++)
		sum += vals[i];
	return sum;
}

void probe_map_full_add(struct tt_map_full *out, int *n, int max, const struct bpf_map *map,
			uint64_t refused)
{
	if (!map || *n >= max || bpf_map__max_entries(map) <= 1)
		return;
	out[(*n)++] = (struct tt_map_full){ .map = bpf_map__name(map), .refused = refused,
					    .entries = bpf_map__max_entries(map) };
}

void probe_map_full_counts(struct tt_map_full *out, int *n, int max, const struct bpf_map *counts,
			   struct bpf_map *const *maps, int nmaps)
{
	for (int i = 0; i < nmaps; i++)
		probe_map_full_add(out, n, max, maps[i], probe_counter_sum(counts, (__u32)i));
}

int probe_map_full_collect(const struct tt_probe *const *mods, void *const *states, int nmods,
			   struct tt_map_full *out, int max)
{
	int n = 0;

	for (int i = 0; i < nmods; i++)
		if (mods[i]->map_full && states[i])
			n += mods[i]->map_full(states[i], out + n, max - n);
	return n;
}
