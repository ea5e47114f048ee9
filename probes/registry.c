// SPDX-License-Identifier: MIT
/*
 * The probe modules. locks and spans come from another part of the tree and
 * are weak: the loader builds and runs with or without them.
 */
#include <errno.h>
#include <unistd.h>

#include "registry.h"

extern const struct tt_probe probe_sched;
extern const struct tt_probe probe_runq;
extern const struct tt_probe probe_locks __attribute__((weak));
extern const struct tt_probe probe_spans __attribute__((weak));

int registry_modules(const struct tt_probe **out, int max)
{
	/* sched first: it owns the thread table every stream refers to. */
	const struct tt_probe *all[] = { &probe_sched, &probe_runq, &probe_locks, &probe_spans };
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

int probe_share_switch_clock_before_load(struct tt_ctx *ctx, struct bpf_map *map)
{
	return ctx->switch_clock_set ? bpf_map__reuse_fd(map, ctx->switch_clock_fd) : 0;
}

void probe_share_switch_clock_after_load(struct tt_ctx *ctx, struct bpf_map *map)
{
	int fd;

	if (ctx->switch_clock_set)
		return;
	fd = dup(bpf_map__fd(map)); /* outlives the module's skeleton */
	if (fd >= 0) {
		ctx->switch_clock_fd = fd;
		ctx->switch_clock_set = true;
	}
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
