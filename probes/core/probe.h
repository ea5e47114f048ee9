/* SPDX-License-Identifier: MIT */
/*
 * The contract between the tailtrace loader (main.c) and each probe module
 * (sched.c with its runq part runq.c, locks.c, spans.c). One probe = x.bpf.c + x.c + x.h:
 *   x.h      only types shared with the BPF side (records live in records.h)
 *   x.bpf.c  the BPF programs (tp_btf / raw_tp / tracepoint variants sharing one static function)
 *   x.c      this interface: open -> configure (const volatile) -> load -> attach,
 *            ring buffer consumer, final drain, stats for meta.json.
 * Errors are returned (negative errno) with a one-line reason in ctx->err,
 * never printed from deep inside.
 */
#ifndef TT_PROBE_H
#define TT_PROBE_H
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <bpf/libbpf.h>
#include <tailtrace/records.h>

#define TT_MAX_SPANS 8
#define TT_MAX_ALSO_PIDS 4 /* --also-pid: more processes traced beside the target */
#define TT_USDT_MAX_ARG 11 /* the last USDT argument libbpf reads (BPF_USDT_MAX_ARG_CNT) */
#define TT_MAX_PIDS 8      /* --pid PID[,PID...]: the targets (== TT_TARGETS_MAX, filter.h) */

enum tt_event {
	TT_EV_RUNQ = 1u << 0,
	TT_EV_SWITCH = 1u << 1,
	TT_EV_OFFCPU = 1u << 2,
	TT_EV_LOCKS = 1u << 3,
	TT_EV_SPANS = 1u << 4,
	TT_EV_CPU = 1u << 5,   /* who held the CPU while traced threads waited (occupancy) */
	TT_EV_IRQ = 1u << 6,   /* with cpu: interrupts among what held it (opt-in) */
	TT_EV_LAST = TT_EV_IRQ,
};

struct tt_span_spec {
	const char *binary;   /* as given: path or library name (libcurl.so.4) */
	const char *symbol;   /* a function, or the USDT probe pair's NAME (or START,END) */
	const char *provider; /* usdt:BIN:PROVIDER:NAME: the USDT provider; NULL: a function */
	bool tcp;             /* tcp[:PORT]: requests on a server's TCP port (binary, symbol NULL) */
	unsigned tcp_port;    /* 0: every port the target listens on */
	/* usdt:...,traceparent=argN[,tracestate=argM]: the end probe's arguments that
	 * point to the request's W3C trace-context values, as N + 1; 0: none */
	unsigned char traceparent_arg, tracestate_arg;
};

struct tt_opts {
	int pid;              /* the first --pid target; 0: none (pids[0] when npids) */
	int pids[TT_MAX_PIDS]; /* --pid PID[,PID...]: each with its descendants */
	int npids;
	bool all;
	const char *comm;     /* filter by comm (NULL: none) */
	const char *cgroup;   /* cgroup v2 path (NULL: none) */
	const char *out_dir;  /* run directory */
	unsigned events;      /* TT_EV_* mask */
	unsigned ringbuf_mb;  /* per-stream ring buffer size */
	bool aggregate;       /* in-kernel histograms only, no records */
	const char *listen;   /* --listen ADDR:PORT: serve them to Prometheus (implies aggregate) */
	int top_n;            /* --top: processes with their own series */
	int verbose;
	int bpf_stats;        /* enum tt_bpf_stats (cost.h): sampled (0), always, off */
	uint64_t min_offcpu_us;
	unsigned user_stack_bytes; /* --user-stacks dwarf,BYTES: stack copied; 0: frame pointers */
	bool user_stacks_given;    /* --user-stacks on the command line (else the default) */
	double duration_s;    /* 0: until the target exits / SIGINT */
	unsigned toggle_ms;   /* --toggle-ms: programs attached and detached in turn (bench) */
	struct tt_span_spec spans[TT_MAX_SPANS];
	int nspans;
	int span_exit;        /* --span-exit: enum span_exit_mode (span_plan.h) */
	int also_pids[TT_MAX_ALSO_PIDS]; /* scheduler events of these tgids too */
	int nalso;
	/* --flight-recorder (flight.h): records in memory, captures on a trigger */
	double flight_s;      /* 0: off */
	unsigned flight_mb;   /* memory cap (the ceiling of the automatic one) */
	bool flight_mb_auto;  /* no --flight-mb: the cap follows the measured record rate */
	const char *trigger;
	uint64_t trigger_warmup;
	unsigned flight_margin_ms;
	unsigned max_captures_per_min;
	unsigned max_disk_mb;
	const char *otlp_url; /* --otlp: each capture's slow requests sent there (flight_export.h) */
	struct tt_debug {     /* --debug: alternative code paths (tests, old kernels) */
		int hook;             /* enum tt_hook (features.h) forced, or -1 */
		const char *btf;      /* kernel BTF file (NULL: /sys/kernel/btf/vmlinux) */
		bool split_switch;    /* one sched_switch program per event */
		bool runq_waking;     /* --aggregate: waits from sched_waking, not schedstat */
		bool exact_stacks;    /* unwind at every switch-out: no stack cache */
		unsigned stack_epoch_ms; /* the flight recorder's stack-map epoch (0: its own) */
		bool flight_tee;      /* the flight recorder also writes every record to OUT */
		unsigned without;     /* kernel features taken as missing: TT_WITHOUT_* (features.h) */
		unsigned skip_steps;  /* switch-program steps left out: enum sched_skip (bench only) */
	} debug;
};

struct tt_syms_set;
struct recfile;
struct exporter_source;
struct flight;
struct flight_store;

/* One capture of the flight recorder (flight.h): a run directory for a window. */
struct tt_capture {
	const char *dir;
	uint64_t t0_ns, t1_ns;            /* the window its records overlap (flight_window.h:
					   * the trigger window widened to its spans) */
	const struct flight_store *store; /* where they are (flight_store_each) */
	const char *json;                 /* meta.json "capture": trigger, threshold, spans */
	uint64_t records[TT_REC_TYPES];   /* records written, by type */
};

/* A BPF map that can fill: the updates it refused for want of room (what they
 * would have held is not in the run), and its size. */
struct tt_map_full {
	const char *map;  /* the map's name: "tasks", "open_spans", ... */
	uint64_t refused;
	uint32_t entries;
};
#define TT_MAX_MAP_FULL 32

/* Per-stream figures for meta.json and the final line. */
struct tt_stream_stats {
	const char *stream;   /* "runq", "switch", "offcpu", "locks", "spans", ... */
	const char *hook;     /* "tp_btf", "raw_tp", "tracepoint", "uprobe" */
	uint64_t written;     /* records written to the run directory */
	uint64_t lost;        /* failed ring-buffer reservations (BPF-side counter) */
	uint64_t unmatched;   /* intervals dropped: their end never reached a hook */
	uint64_t uprobe_hits; /* uprobe/uretprobe program runs (hook "uprobe" only) */
	uint64_t uprobe_cost_ns; /* what they cost the target: hits by the class of their
				  * sites x the cost measured here (disasm.h, calibrate.c) */
};

/* An error line's room: a message names up to two paths (a binary and the file it
 * resolved to) and then the fix, which must survive the longest paths. */
#define TT_ERR_LEN (2 * PATH_MAX + 1024)

struct tt_ctx {
	const struct tt_opts *opts;
	struct ring_buffer *rb;  /* shared poller: modules add their ring maps */
	int target_pid;          /* the first target tgid (0: system-wide, comm or cgroup) */
	int target_pids[TT_MAX_PIDS]; /* every target: the --pid list, or the -- CMD child */
	int ntargets;            /* each is traced with its descendant processes */
	struct tt_syms_set *syms; /* user-space symbolizers, one per traced process seen */
	char err[TT_ERR_LEN];    /* one-line reason when a call fails */
	char target_exe[PATH_MAX]; /* the traced program's executable, "" if unknown */
	uint64_t cgroup_id;      /* resolved --cgroup (cgroup v2 id), 0: none */
	struct flight *flight;   /* --flight-recorder: records go to memory (NULL: to out_dir) */
};

/* Programs whose name starts with prefix count their cost (meta.json cost.bpf)
 * under name instead of the module's. */
struct tt_cost_part {
	const char *prefix, *name;
};

/* A probe module. setup() does open/configure/load/attach and adds its ring
 * buffer(s) to ctx->rb (creating ctx->rb if NULL). finish() is called once
 * after the final poll: it flushes records and writes side files (stacks,
 * folded stacks, aggregates). stats() fills up to max entries, returns count. */
struct tt_probe {
	const char *name;
	unsigned events;  /* which TT_EV_* bits select this module */
	int (*setup)(struct tt_ctx *ctx, void **state);
	int (*finish)(struct tt_ctx *ctx, void *state);
	int (*stats)(void *state, struct tt_stream_stats *out, int max);
	/* Optional: its maps that can fill (struct tt_map_full), up to max; the count. */
	int (*map_full)(void *state, struct tt_map_full *out, int max);
	void (*destroy)(void *state);
	/* Optional: the module's loaded BPF object (its programs' run-time
	 * statistics go into meta.json cost); NULL hook or return: none. */
	struct bpf_object *(*object)(void *state);
	/* Optional: detach (on false) or attach again (on true) every program
	 * setup() attached (--toggle-ms); 0 or a negative errno. */
	int (*toggle)(void *state, bool on);
	/* Optional: members of meta.json ("key": value,\n lines, two-space indent). */
	void (*meta)(void *state, FILE *f);
	/* Optional (--flight-recorder): the side files finish() would write, for
	 * the records of one capture, into cap->dir (its records are there). */
	int (*capture)(struct tt_ctx *ctx, void *state, const struct tt_capture *cap);
	/* Optional: upkeep in the poll loop (now_ns: CLOCK_MONOTONIC); returns the
	 * ms until it wants to run again, -1: never. */
	int (*tick)(struct tt_ctx *ctx, void *state, uint64_t now_ns);
	/* Optional (--listen): the module's maps the exporter serves, into src. */
	void (*export)(void *state, struct exporter_source *src);
	/* Optional: cost by program-name prefix, up to a { NULL } entry. */
	const struct tt_cost_part *cost_parts;
	/* Optional: a target's descendant process (core/tree.h found it): attach
	 * what setup() attached for the target alone (uprobes) for it too. 0 or
	 * a negative errno with ctx->err. */
	int (*attach_process)(struct tt_ctx *ctx, void *state, int pid);
};

/* A module's record stream: DIR/<kind>.bin, or the flight recorder's memory. */
struct recfile *probe_open_kind(const struct tt_ctx *ctx, enum tt_rec_type type);

/* Helper for modules: add a ring buffer map to ctx->rb, creating it if needed. */
int probe_add_ringbuf(struct tt_ctx *ctx, struct bpf_map *map, ring_buffer_sample_fn fn, void *state);
/* Append one record from a ring-buffer callback. The first error is kept in
 * *write_err and in probe_write_error(), which makes the loader stop the run
 * (disk full: the records so far stay readable, the rest count as lost). */
void probe_write(struct recfile *f, const void *rec, int *write_err);
/* Flush at finish: *write_err, else the flush's error (noted the same way). */
int probe_flush(struct recfile *f, int *write_err);
int probe_write_error(void);
/* Helper for modules: one __u64 counter of a PERCPU_ARRAY map, summed over
 * the CPUs; 0 if it cannot be read. */
/* Does sched's switch program do runq's switch work (runq_switch.bpf.h)? With
 * runq traced and a typed hook (tp_btf, raw_tp), unless --debug split-switch
 * is set (runq's own switch program beside it, for comparisons). */
bool probe_runq_in_sched(const struct tt_opts *opts);
/* Are run-queue waits read from the kernel's own accounting
 * (runq_switch.bpf.h, runq_kacct)? With --aggregate under tp_btf on a kernel
 * with sched_info (features_sched_info), unless --debug runq-waking
 * (waits from sched_waking, as the records measure them). */
bool probe_runq_kacct(const struct tt_opts *opts);
/* Which throttle total the run-queue records' throttled part is read from
 * (enum tt_throttle_clock, sched/throttle.bpf.h): the kernel's
 * (features_throttle_clock) with runq records under a typed hook, else none. */
int probe_throttle_clock(const struct tt_opts *opts);
/* A module's tt_probe.toggle for its skeleton: detach every program, or bump
 * its runq_attach_gen (runq_switch.bpf.h: switch-outs from before the
 * detached stretch are stale) and attach them again. 0 or a negative errno. */
int probe_toggle_skeleton(struct bpf_object_skeleton *skel, __u32 *attach_gen, bool on);

uint64_t probe_counter_sum(const struct bpf_map *map, __u32 idx);
/* One map that can fill, refused updates counted elsewhere, into out[*n] (if room):
 * a map sized down to one entry (its event off) is left out. */
void probe_map_full_add(struct tt_map_full *out, int *n, int max, const struct bpf_map *map,
			uint64_t refused);
/* The maps of an object counted in its map_full array (core/counter.bpf.h), maps[i]
 * at index i, into out from *n on. */
void probe_map_full_counts(struct tt_map_full *out, int *n, int max, const struct bpf_map *counts,
			   struct bpf_map *const *maps, int nmaps);
/* Every module's maps that can fill (tt_probe.map_full): the count. */
int probe_map_full_collect(const struct tt_probe *const *mods, void *const *states, int nmods,
			   struct tt_map_full *out, int max);

#endif
