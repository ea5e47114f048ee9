/* SPDX-License-Identifier: MIT */
/*
 * tailtrace's own cost (meta.json "cost", the "cost:" final line): BPF
 * run-time statistics of every loaded program, summed per module, plus the
 * loader's CPU time, over the traced wall time.
 */
#ifndef TT_COST_H
#define TT_COST_H
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "probe.h"

#define TT_COST_MAX_MODS 8

struct tt_cost_mod {
	const char *name;      /* module name: "sched", "runq", "locks", "spans" */
	uint64_t run_cnt;      /* program runs while stats were on */
	uint64_t run_time_ns;  /* time spent in the programs */
	uint64_t misses;       /* runs the kernel skipped (recursion_misses): lost events */
	int nprogs;            /* loaded programs read */
};

struct tt_cost {
	int stats_fd;          /* BPF_ENABLE_STATS fd: stats are on while open; -1 */
	int stats_errno;       /* why enabling failed (0: enabled) */
	uint64_t cpu_start_ns; /* loader user+system CPU at cost_start_clock */
	uint64_t cpu_loop_ns;  /* ... when the poll loop started (cost_loop_start) */
	uint64_t cpu_end_ns;   /* ... when it ended (cost_loop_end) */
	uint64_t t_end_ns;     /* CLOCK_MONOTONIC then */
	struct tt_cost_mod mods[TT_COST_MAX_MODS];
	int nmods;
	uint64_t bpf_total_ns, bpf_total_runs;
	uint64_t loader_cpu_ns;  /* loader user+system CPU in the poll loop (while tracing) */
	uint64_t startup_cpu_ns; /* before it: releasing the target, reading its symbols */
	uint64_t finish_cpu_ns;  /* after it: final drain, stacks, files */
	uint64_t traced_wall_ns;
	long ncpus;
};

/* Turn BPF run-time statistics on (after load, before attach). Never fails:
 * without them (old kernel, EPERM) the BPF figures are reported as null. */
void cost_enable(struct tt_cost *c);
/* Start of tracing: note the loader's CPU time so far (loading excluded). */
void cost_start_clock(struct tt_cost *c);
/* Around the poll loop: the loader's own cost share counts only the CPU it
 * used while the target ran, not its start-up or the files it writes after. */
void cost_loop_start(struct tt_cost *c);
void cost_loop_end(struct tt_cost *c);
/* After the final drain, before destroy: read every module's programs. */
void cost_collect(struct tt_cost *c, const struct tt_probe *const *mods, void *const *states,
		  int nmods, uint64_t traced_wall_ns);
/* Turn the statistics off again (closes the fd). */
void cost_disable(struct tt_cost *c);
/* (BPF + loader CPU) / (traced wall x CPUs); < 0 when unknown. */
double cost_cpu_share(const struct tt_cost *c);
/* The "cost" object for meta.json (value only, no key). */
void cost_write_json(FILE *f, const struct tt_cost *c);
/* "tailtrace: cost: BPF ... = x% of the machine" */
void cost_print(FILE *f, const struct tt_cost *c);

#endif
