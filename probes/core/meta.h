/* SPDX-License-Identifier: MIT */
/* meta.json of a run directory (docs/architecture.md, docs/probes/README.md). */
#ifndef TT_META_H
#define TT_META_H
#include <stdbool.h>
#include <stdint.h>
#include "core/cost.h"
#include "core/probe.h"

struct cpu_quotas;

struct tt_meta {
	int argc;
	char **argv;
	const char *target_mode;     /* "command", "pid", "comm", "cgroup", "all" */
	int target_pid;
	const int *target_pids;      /* every target (the --pid list, the -- CMD child) */
	int ntargets;
	const int *tree_pids;        /* the processes of their trees found in /proc (the
				      * targets first), whose uprobes were attached; NULL: none */
	int ntree;
	const struct tt_opts *opts;
	const char *events_str;
	char wall_start[40];         /* ISO-8601 UTC */
	uint64_t mono_start_ns, mono_end_ns;
	/* the time the streams' uprobe hits and cost were counted over (a capture's
	 * counters run from the recorder's start, its records cover a window);
	 * 0: mono_start_ns..mono_end_ns */
	uint64_t counted_from_ns, counted_to_ns;
	const struct tt_stream_stats *stats;
	int nstats;
	bool incomplete;
	bool finished;               /* false in the meta.json written at the start */
	int write_err;               /* -errno of the first failed record write, or 0 */
	int exit_status;             /* CMD child's exit code, -1 if none */
	uint64_t cgroup_id;
	const struct cpu_quotas *quotas; /* over the traced processes; NULL: none read */
	const struct tt_cost *cost;  /* tailtrace's own cost; NULL: not written */
	const struct tt_probe *const *mods; /* their optional meta() members */
	void *const *states;
	int nmods;
	const struct flight *flight; /* --flight-recorder: its "flight" member */
	const char *capture_json;    /* a capture's meta.json: its "capture" member */
};

/* Above this share of one CPU spent in a stream's uprobes (hits by site class x
 * the cost measured here), the target noticeably ran slower: tailtrace warns. */
#define TT_UPROBE_WARN_SHARE 0.05

/* Uprobe hits per second of traced time of one stream (0 for non-uprobe streams). */
double meta_uprobe_rate(const struct tt_meta *m, const struct tt_stream_stats *s);
/* What a stream's uprobes cost the target, as a share of one CPU over the traced time. */
double meta_uprobe_share(const struct tt_meta *m, const struct tt_stream_stats *s);
/* Fill wall_start and mono_start_ns with the current time. */
void meta_start(struct tt_meta *m);
/* Fill them for a window that began at CLOCK_MONOTONIC mono_ns (a flight-recorder capture):
 * wall_start is the Unix time then, read from the clocks now, not the run's start plus the
 * monotonic time since (the wall clock may have been set meanwhile). */
void meta_start_at(struct tt_meta *m, uint64_t mono_ns);
/* Write DIR/meta.json atomically. 0 or -errno. */
int meta_write(const char *dir, const struct tt_meta *m);

/* Space kept for meta.json: a run that fills its disk still ends with one
 * (its records are cut to whole ones and the loss is counted in it). */
#define META_RESERVE_FILE ".meta.reserve"
#define META_RESERVE_BYTES (64u << 10)
/* Create DIR/.meta.reserve (META_RESERVE_BYTES). 0 or -errno. */
int meta_reserve(const char *dir);
/* meta_write; if that fails, frees the reserve and tries again. The
 * reserve is removed either way. 0 or -errno. */
int meta_write_reserved(const char *dir, const struct tt_meta *m);

#endif
