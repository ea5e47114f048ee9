/* SPDX-License-Identifier: MIT */
/*
 * tailtrace's own cost (meta.json "cost", the "cost:" final line): BPF
 * run-time statistics of every loaded program, by program and summed per
 * module, plus the loader's CPU time, over the traced wall time.
 *
 * The kernel's statistics are not free: while anyone holds them on, every
 * BPF program run on the machine pays two clock reads and a per-CPU update
 * (~50 ns here, ~20 % of what tailtrace adds to a context switch), and so do
 * other tools' programs. By default (--bpf-stats sampled) they are on for the
 * first COST_SAMPLE_ON_MS of every COST_SAMPLE_PERIOD_MS during the first
 * COST_SAMPLE_DENSE_S of tracing, then of every COST_SAMPLE_SPARSE_MS, and
 * the total is scaled from the sampled time; `always` keeps them on (exact
 * counts), `off` never turns them on.
 */
#ifndef TT_COST_H
#define TT_COST_H
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "core/probe.h"

#define TT_COST_MAX_MODS 8
#define TT_COST_MAX_PROGS 64 /* loaded programs, all modules (sched loads ~10) */
/* Short windows, often: a run's phases (a start-up burst, then steady work)
 * are sampled alike. One 100 ms window a second put a whole short run's
 * estimate on its start-up: 1.75x the exact count on a 2 s naive/100 run. */
#define COST_SAMPLE_ON_MS 10
#define COST_SAMPLE_PERIOD_MS 100
/* ... but each window turns a kernel static key on and off: text patching,
 * IPIs to every CPU, and a loader wake-up (~5 ms of CPU a second here at 20
 * toggles a second). A long run's phases are long, so after the first
 * COST_SAMPLE_DENSE_S the windows come once every COST_SAMPLE_SPARSE_MS;
 * the exporter (--listen), a service that runs for hours, samples sparsely
 * from its start. */
#define COST_SAMPLE_DENSE_S 10
#define COST_SAMPLE_SPARSE_MS 1000

enum tt_bpf_stats {
	TT_BPF_STATS_SAMPLED = 0,
	TT_BPF_STATS_ALWAYS,
	TT_BPF_STATS_OFF,
};

struct tt_cost_mod {
	const char *name;      /* module name: "sched", "runq", "locks", "spans" */
	uint64_t run_cnt;      /* program runs while stats were on */
	uint64_t run_time_ns;  /* time spent in the programs */
	uint64_t misses;       /* runs the kernel skipped (recursion_misses): lost events */
	int nprogs;            /* loaded programs read */
};

/* One loaded program's share (meta.json cost.programs). */
struct tt_cost_prog {
	char name[48];         /* its name in the object: "runq_waking_btf" */
	char section[64];      /* its hook: "tp_btf/sched_waking" */
	const char *part;      /* whose cost it is counted in: a tt_cost_mod's name */
	uint64_t run_cnt;
	uint64_t run_time_ns;
	uint64_t misses;
};

/* Runs counted so far (a window's start, or the closed windows' sum). */
struct tt_cost_runs {
	uint64_t run_cnt;
	uint64_t run_time_ns;
};

struct tt_cost {
	enum tt_bpf_stats mode;
	bool others_on;        /* another holder kept the statistics on: counted always */
	int stats_fd;          /* BPF_ENABLE_STATS fd: stats are on while open; -1 */
	int stats_errno;       /* why enabling failed (0: enabled); EPERM-like or ENODATA (off) */
	uint64_t on_since_ns;  /* CLOCK_MONOTONIC: the open window's start */
	uint64_t next_on_ns;   /* sampled, stats off: when the next window opens */
	uint64_t t_start_ns;   /* CLOCK_MONOTONIC: tracing started (cost_start_clock) */
	uint64_t dense_ns;     /* windows every COST_SAMPLE_PERIOD_MS this long, then sparse */
	uint64_t sampled_ns;   /* closed windows, within the traced time */
	uint64_t cpu_start_ns; /* loader user+system CPU at cost_start_clock */
	uint64_t cpu_loop_ns;  /* ... when the poll loop started (cost_loop_start) */
	uint64_t cpu_end_ns;   /* ... when it ended (cost_loop_end) */
	uint64_t t_end_ns;     /* CLOCK_MONOTONIC then */
	struct tt_cost_mod mods[TT_COST_MAX_MODS]; /* the programs summed by part */
	int nmods;
	struct tt_cost_prog progs[TT_COST_MAX_PROGS];
	int nprogs;
	/* Runs are counted inside our own windows only: each window's difference
	 * of run_cnt/run_time_ns (read as it opens and as it closes) is added to
	 * acc. Not setup's runs (attach to cost_start_clock), which one window
	 * would scale up 10x, nor those of another holder's windows (another
	 * tailtrace sampling on the same machine). */
	const struct tt_probe *const *pmods; /* what cost_start_clock was given */
	void *const *pstates;
	int pnmods;
	struct tt_cost_runs win[TT_COST_MAX_PROGS]; /* by program: read as the open window opened */
	struct tt_cost_runs acc[TT_COST_MAX_PROGS]; /* by program: closed windows' runs */
	unsigned windows;      /* windows opened (meta.json cost.bpf_windows) */
	uint64_t bpf_measured_ns;  /* run_time_ns summed: inside the windows */
	uint64_t bpf_total_ns;     /* over the traced time (measured, scaled when sampled) */
	uint64_t bpf_total_runs;   /* run_cnt summed (inside the windows) */
	uint64_t bpf_sampled_ns;   /* the windows' total */
	uint64_t loader_cpu_ns;  /* loader user+system CPU in the poll loop (while tracing) */
	uint64_t startup_cpu_ns; /* before it: releasing the target, reading its symbols */
	uint64_t finish_cpu_ns;  /* after it: final drain, stacks, files */
	uint64_t traced_wall_ns;
	long ncpus;
};

/* Turn BPF run-time statistics on (after load, before attach) unless mode is
 * off. Never fails: without them (old kernel, EPERM) the BPF figures are
 * reported as null. service: a long-running exporter, sampled sparsely from
 * the start. */
void cost_enable(struct tt_cost *c, enum tt_bpf_stats mode, bool service);
/* Start of tracing (now: its CLOCK_MONOTONIC time): note the loader's CPU
 * time so far (loading excluded) and the programs' runs so far (setup's, not
 * counted); the first window starts here. */
void cost_start_clock(struct tt_cost *c, uint64_t now_ns, const struct tt_probe *const *mods,
		      void *const *states, int nmods);
/* In the poll loop: close or open a sampling window when due. Returns the ms
 * until the next change (the poll timeout's upper bound), or -1: none due. */
int cost_tick(struct tt_cost *c, uint64_t now_ns);
/* End of tracing: close the open window (statistics off). */
void cost_stats_stop(struct tt_cost *c, uint64_t now_ns);
/* Around the poll loop: the loader's own cost share counts only the CPU it
 * used while the target ran, not its start-up or the files it writes after. */
void cost_loop_start(struct tt_cost *c);
void cost_loop_end(struct tt_cost *c);
/* After the final drain, before destroy: read every module's programs. A
 * window still open counts up to c->t_end_ns (the exporter reads mid-run). */
void cost_collect(struct tt_cost *c, const struct tt_probe *const *mods, void *const *states,
		  int nmods, uint64_t traced_wall_ns);
/* Turn the statistics off again (closes the fd). */
void cost_disable(struct tt_cost *c);
const char *cost_mode_name(enum tt_bpf_stats mode);
/* bpf_total_ns was scaled up from sampled windows (not the whole time). */
bool cost_scaled(const struct tt_cost *c);
/* "sampled" / "always" / "off" -> mode; -1: none of them. */
int cost_mode_parse(const char *s);
/* (BPF + loader CPU) / (traced wall x CPUs); < 0 when unknown. */
double cost_cpu_share(const struct tt_cost *c);
/* The "cost" object for meta.json (value only, no key). */
void cost_write_json(FILE *f, const struct tt_cost *c);
/* "tailtrace: cost: BPF ... = x% of the machine" */
void cost_print(FILE *f, const struct tt_cost *c);

#endif
