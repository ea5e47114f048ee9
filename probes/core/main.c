// SPDX-License-Identifier: MIT
/*
 * tailtrace: the loader. args -> preflight -> target -> run directory ->
 * open/configure/load/attach every selected probe module -> release the
 * target -> poll loop -> final drain -> finish (side files) -> meta.json ->
 * one cleanup path. Anything recorded is flushed on every exit path once the
 * probes are attached.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <sys/utsname.h>
#include <bpf/libbpf.h>

#include <recfile.h>
#include <schema.h>
#include <tt_clock.h>
#include "export/aggregate.h"
#include "spans/calibrate.h"
#include "core/cost.h"
#include "spans/disasm.h"
#include "export/exporter.h"
#include "core/features.h"
#include "flight/flight.h"
#include "flight/flight_export.h"
#include "core/meta.h"
#include "core/cpu_quota.h"
#include "core/options.h"
#include "core/registry.h"
#include "symbols/debuginfo.h"
#include "symbols/syms.h"
#include "core/target.h"
#include "core/toggle.h"
#include "core/tree.h"

#define MAX_MODS 8
#define MAX_STATS 32
#define POLL_MS 100
/* Record buffers go to disk at least this often (and when full): a recorder
 * killed outright (SIGKILL, the OOM killer) loses at most POLL_MS + FLUSH_MS
 * of records, and its run directory says it was cut (meta.json finished). */
#define FLUSH_MS 150
/* --otlp: the follower's last captures analysed and sent (its queue gets 15 s of it) */
#define OTLP_FOLLOWER_WAIT_MS 60000

static volatile sig_atomic_t exiting;
static volatile sig_atomic_t got_signal;

struct loader {
	struct tt_cli cli;
	struct tt_ctx ctx;
	struct tt_child child;
	bool have_child;
	int pidfds[TT_MAX_PIDS];  /* --pid: each target's, to see it exit (-1: /proc) */
	struct tt_tree tree;      /* the targets and the descendants found (uprobes for each) */
	bool tree_wanted;         /* a module attaches per process (uprobes) */
	const struct tt_probe *mods[MAX_MODS];
	void *states[MAX_MODS];
	int nmods;
	struct tt_meta meta;
	struct cpu_quotas quotas; /* over the targets (meta.json cpu_quotas) */
	struct tt_cost cost;
	struct tt_stream_stats stats[MAX_STATS];
	int nstats;
	unsigned events;          /* events actually traced */
	char events_str[128];     /* ... as a list, once the modules are set up (run) */
	bool target_gone;
	struct exporter *ex;      /* --listen */
	struct flight_export otlp_follower; /* --otlp: sends the captures' spans */
	double bpf_s_served;      /* the last BPF seconds served: the counter never goes back */
	bool drain_warned;
	struct tt_toggle toggle;  /* --toggle-ms */
	uint64_t lost_base[MAX_STATS]; /* --flight-recorder: lost counts at the last capture */
};

static void on_signal(int sig)
{
	if (sig != SIGCHLD) {
		got_signal = sig;
		exiting = 1;
	}
}

static int tt_verbose;

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list args)
{
	if (tt_verbose < 1 || (level == LIBBPF_DEBUG && tt_verbose < 2))
		return 0;
	return vfprintf(stderr, fmt, args);
}

static void die_line(const char *msg)
{
	fprintf(stderr, "tailtrace: %s\n", msg);
}

/* The inode of the kernel's initial PID namespace (PROC_PID_INIT_INO). */
#define HOST_PIDNS_INO 4026531836ul

/* Does tailtrace run in the host's PID namespace? The kernel's records carry the
 * host's pids; a container's own namespace numbers its processes otherwise.
 * True when it cannot be told. */
static bool host_pid_namespace(void)
{
	struct stat st;

	return stat("/proc/self/ns/pid", &st) || st.st_ino == HOST_PIDNS_INO;
}

/* In a container's PID namespace the targets given by pid cannot be found: an
 * error that says how to run it; --all, --comm and --cgroup still work. */
static int check_pid_namespace(const struct loader *L)
{
	const struct tt_opts *o = &L->cli.opts;

	if (host_pid_namespace())
		return 0;
	if (o->npids || o->nalso || L->cli.cmd) {
		die_line("runs in a PID namespace of its own (a container without the host's): the "
			 "kernel's records carry host pids, which --pid, --also-pid and -- CMD cannot "
			 "be matched to here; run it in the host's (docker run --pid=host, Kubernetes "
			 "hostPID: true), or trace by --comm, --cgroup or --all");
		return -EINVAL;
	}
	die_line("warning: runs in a PID namespace of its own: the pids in its records and "
		 "report are the host's, not this namespace's");
	return 0;
}

static int preflight(struct loader *L)
{
	char err[TT_ERR_LEN];
	struct utsname u;

	if (!features_privileged()) {
		die_line("needs root (or CAP_BPF and CAP_PERFMON) to load BPF programs: run it as root");
		return -EPERM;
	}
	if (access(features_btf_path(), R_OK)) {
		snprintf(err, sizeof(err), "kernel BTF not found (%s missing: a kernel built "
			 "without CONFIG_DEBUG_INFO_BTF): give this kernel's BTF with --debug btf=PATH "
			 "(BTFHub has it for many distribution kernels)", features_btf_path());
		die_line(err);
		return -ENOENT;
	}
	if (!features_ringbuf()) {
		uname(&u);
		snprintf(err, sizeof(err), "this kernel (%s) has no BPF ring buffer, which came in "
			 "Linux 5.8: tailtrace needs 5.8 or newer (the oldest tested is 5.10: "
			 "docs/kernels.md)", u.release);
		die_line(err);
		return -ENOTSUP;
	}
	return check_pid_namespace(L);
}

static int target_prepare(struct loader *L)
{
	const struct tt_opts *o = &L->cli.opts;
	char err[TT_ERR_LEN];
	int ret = 0;

	for (int i = 0; i < TT_MAX_PIDS; i++)
		L->pidfds[i] = -1;
	if (o->pid > 0) {
		L->meta.target_mode = "pid";
		for (int i = 0; !ret && i < o->npids; i++) {
			ret = target_check_pid(o->pids[i], &L->pidfds[i], err, sizeof(err));
			L->ctx.target_pids[L->ctx.ntargets++] = o->pids[i];
		}
		L->ctx.target_pid = o->pid;
	} else if (o->cgroup) {
		L->meta.target_mode = "cgroup";
		ret = target_cgroup_id(o->cgroup, &L->ctx.cgroup_id, err, sizeof(err));
	} else if (o->comm) {
		L->meta.target_mode = "comm";
	} else if (o->all) {
		L->meta.target_mode = "all";
	} else {
		L->meta.target_mode = "command";
		ret = target_spawn_held(L->cli.cmd, &L->child, err, sizeof(err));
		L->have_child = ret == 0;
		L->ctx.target_pid = L->child.pid;
		L->ctx.target_pids[L->ctx.ntargets++] = L->child.pid;
	}
	if (ret)
		die_line(err);
	else if (o->pid > 0)
		snprintf(L->ctx.target_exe, sizeof(L->ctx.target_exe), "/proc/%d/exe", o->pid);
	else if (L->have_child &&
		 syms_find_library(0, L->cli.cmd[0], L->ctx.target_exe, sizeof(L->ctx.target_exe)))
		L->ctx.target_exe[0] = '\0';
	return ret;
}

static int mkdir_p(const char *dir)
{
	char buf[4096];
	size_t n = strlen(dir);

	if (n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, dir, n + 1);
	for (char *p = buf + 1; *p; p++)
		if (*p == '/') {
			*p = '\0';
			if (mkdir(buf, 0755) && errno != EEXIST)
				return -errno;
			*p = '/';
		}
	return mkdir(buf, 0755) && errno != EEXIST ? -errno : 0;
}

static int out_prepare(struct loader *L)
{
	static const char *const stale[] = { "stacks.jsonl", "offcpu.folded", "aggregate.json",
					     "locks_hist.txt" };
	const char *dir = L->cli.opts.out_dir;
	char path[PATH_MAX], err[TT_ERR_LEN];
	int ret = mkdir_p(dir);

	for (unsigned i = 0; !ret && i < sizeof(stale) / sizeof(stale[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, stale[i]);
		unlink(path);
	}
	ret = ret ?: schema_write_dir(dir);
	ret = ret ?: meta_reserve(dir);
	if (ret) {
		snprintf(err, sizeof(err), "cannot create run directory %s: %s (choose another --out)",
			 dir, strerror(-ret));
		die_line(err);
	}
	return ret;
}

/* Events asked for that this build can trace; an explicitly requested one
 * that is missing is an error. */
static int events_resolve(struct loader *L)
{
	unsigned want = L->cli.opts.events;
	char err[TT_ERR_LEN];

	L->events = 0;
	for (unsigned bit = 1; bit <= TT_EV_LAST; bit <<= 1) {
		if (!(want & bit))
			continue;
		if (registry_has_event(bit)) {
			L->events |= bit;
		} else if (L->cli.events_given || bit == TT_EV_SPANS) {
			char name[32];

			snprintf(err, sizeof(err), "event '%s' is not built into this tailtrace: "
				 "drop it from --events", options_events_str(bit, name, sizeof(name)));
			die_line(err);
			return -EOPNOTSUPP;
		}
	}
	L->cli.opts.events = L->events;
	return 0;
}

/* Optional modules (locks by default only) may fail without stopping the run. */
static bool optional_module(const struct loader *L, const struct tt_probe *m)
{
	return !L->cli.events_given && !(m->events & (TT_EV_RUNQ | TT_EV_SWITCH | TT_EV_OFFCPU)) &&
	       !(m->events & TT_EV_SPANS & L->events);
}

static int modules_setup(struct loader *L)
{
	const struct tt_probe *all[MAX_MODS];
	int n = registry_modules(all, MAX_MODS);

	for (int i = 0; i < n; i++) {
		int k = L->nmods, err;

		if (!(all[i]->events & L->events))
			continue;
		L->mods[k] = all[i];
		L->ctx.err[0] = '\0';
		err = all[i]->setup(&L->ctx, &L->states[k]);
		L->nmods++;
		if (!err)
			continue;
		if (!L->ctx.err[0])
			snprintf(L->ctx.err, sizeof(L->ctx.err), "%s: setup failed: %s", all[i]->name,
				 strerror(-err));
		if (optional_module(L, all[i])) {
			fprintf(stderr, "tailtrace: %s (continuing without %s)\n", L->ctx.err, all[i]->name);
			all[i]->destroy(L->states[k]);
			L->states[k] = NULL;
			L->nmods--;
			L->events &= ~all[i]->events;
			continue;
		}
		die_line(L->ctx.err);
		return err;
	}
	return 0;
}

/* --listen: bind first, so a taken port fails before anything is loaded. */
static int exporter_prepare(struct loader *L)
{
	const struct tt_opts *o = &L->cli.opts;
	char err[TT_ERR_LEN];
	int ret;

	if (!o->listen)
		return 0;
	ret = exporter_open(&L->ex, o->listen, o->top_n, err, sizeof(err));
	if (ret)
		die_line(err);
	return ret;
}

static void stats_collect(struct loader *L);

/* ---- --flight-recorder ---------------------------------------------------- */

static const struct { const char *stream; int type; } stream_types[] = {
	{ "runq", TT_REC_RUNQ }, { "switch", TT_REC_SWITCH }, { "offcpu", TT_REC_SWITCH },
	{ "locks", TT_REC_LOCK }, { "spans", TT_REC_SPAN }, { "cpu", TT_REC_OCC },
};

/* A capture's stream figures: its records, and what was lost since the last one. */
static void capture_stats(struct loader *L, const struct tt_capture *cap)
{
	stats_collect(L);
	for (int i = 0; i < L->nstats; i++) {
		struct tt_stream_stats *s = &L->stats[i];
		uint64_t lost = s->lost;

		for (size_t k = 0; k < sizeof(stream_types) / sizeof(stream_types[0]); k++)
			if (!strcmp(s->stream, stream_types[k].stream))
				s->written = cap->records[stream_types[k].type];
		s->lost = lost - L->lost_base[i];
		s->unmatched = 0;
		L->lost_base[i] = lost;
	}
}

/* flight.c's writer: every module's side files, then meta.json with "capture". */
static int capture_write(void *arg, const struct tt_capture *cap)
{
	struct loader *L = arg;
	struct tt_meta m = L->meta;
	int err = 0;

	for (int i = 0; i < L->nmods; i++) {
		int e;

		if (!L->mods[i]->capture || !L->states[i])
			continue;
		L->ctx.err[0] = '\0';
		e = L->mods[i]->capture(&L->ctx, L->states[i], cap);
		if (e && L->ctx.err[0])
			fprintf(stderr, "tailtrace: %s\n", L->ctx.err);
		err = err ?: e;
	}
	capture_stats(L, cap);
	m.stats = L->stats;
	m.nstats = L->nstats;
	meta_start_at(&m, cap->t0_ns);
	m.mono_end_ns = cap->t1_ns;
	m.counted_from_ns = L->meta.mono_start_ns; /* the uprobe counters: since the start */
	m.counted_to_ns = tt_now_ns();
	m.cost = NULL;
	m.capture_json = cap->json;
	m.mods = L->mods;
	m.states = L->states;
	m.nmods = L->nmods;
	m.exit_status = -1;
	m.finished = true;
	return err ?: meta_write(cap->dir, &m);
}

/* MemAvailable in MiB, 0 if unknown. */
static uint64_t mem_available_mb(void)
{
	char line[128];
	unsigned long long kb = 0;
	FILE *f = fopen("/proc/meminfo", "re");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb / 1024;
}

static int flight_prepare(struct loader *L)
{
	const struct tt_opts *o = &L->cli.opts;
	struct flight_opts fo;
	uint64_t avail = mem_available_mb();
	char err[TT_ERR_LEN];

	if (!o->flight_s)
		return 0;
	if (flight_opts_from(o, &fo, err, sizeof(err))) {
		die_line(err);
		return -EINVAL;
	}
	if (o->flight_mb_auto && avail && fo.max_bytes > (avail << 20) / 2)
		fo.max_bytes = (avail << 20) / 2; /* the automatic cap's ceiling */
	if (!o->flight_mb_auto && avail && o->flight_mb > avail) {
		snprintf(err, sizeof(err), "--flight-mb %u: only %llu MB of memory are available "
			 "here: give less", o->flight_mb, (unsigned long long)avail);
		die_line(err);
		return -ENOMEM;
	}
	L->ctx.flight = flight_new(&fo, o->out_dir, capture_write, L);
	if (!L->ctx.flight) {
		die_line("flight recorder: out of memory");
		return -ENOMEM;
	}
	L->meta.flight = L->ctx.flight;
	if (o->otlp_url && flight_export_start(&L->otlp_follower, o->out_dir, o->otlp_url, err,
					       sizeof(err))) {
		die_line(err);
		return -EINVAL;
	}
	fprintf(stderr, "tailtrace: flight recorder: the last %g s in memory (at most %llu MB%s), "
		"trigger %s%s, captures into %s/captures\n", o->flight_s,
		(unsigned long long)(fo.max_bytes >> 20),
		o->flight_mb_auto ? ", twice what the busiest second's rate needs" : "", fo.trig.text,
		fo.trig.q ? " of the last minute" : "", o->out_dir);
	return 0;
}

/* --aggregate: the threads' own histograms (tp_btf) moved into the maps,
 * before they are read and every AGGREGATE_DRAIN_MS in a long run. */
static void drain_all(void *arg)
{
	struct loader *L = arg;

	for (int i = 0; i < L->nmods; i++) {
		struct bpf_object *obj = L->mods[i]->object ? L->mods[i]->object(L->states[i]) : NULL;
		int err = obj ? aggregate_drain(obj) : 0;

		if (err && !L->drain_warned) {
			fprintf(stderr, "tailtrace: warning: %s: cannot collect the threads' "
				"histograms (%s); the counts since the last collection stay in "
				"the kernel\n", L->mods[i]->name, strerror(-err));
			L->drain_warned = true;
		}
	}
}

static int exporter_stats(void *arg, struct tt_stream_stats *out, int max)
{
	struct loader *L = arg;

	stats_collect(L);
	max = L->nstats < max ? L->nstats : max;
	memcpy(out, L->stats, (size_t)max * sizeof(*out));
	return max;
}

static int exporter_map_full(void *arg, struct tt_map_full *out, int max)
{
	struct loader *L = arg;

	return probe_map_full_collect(L->mods, L->states, L->nmods, out, max);
}

static void exporter_self_cpu(void *arg, double *bpf_s, double *loader_s)
{
	struct loader *L = arg;
	struct tt_cost c = L->cost;

	cost_loop_end(&c);
	cost_collect(&c, L->mods, L->states, L->nmods, c.t_end_ns - L->meta.mono_start_ns);
	/* Sampled, the scaled total can dip inside a window where the programs
	 * run less than on average; a Prometheus counter must not. */
	*bpf_s = c.bpf_total_ns / 1e9 > L->bpf_s_served ? c.bpf_total_ns / 1e9 : L->bpf_s_served;
	L->bpf_s_served = *bpf_s;
	*loader_s = (c.startup_cpu_ns + c.loader_cpu_ns) / 1e9;
}

/* --flight-recorder --listen: the recorder's families after tailtrace's own. */
static void exporter_extra(void *arg, FILE *f, int fmt)
{
	struct loader *L = arg;

	if (L->ctx.flight)
		flight_render(L->ctx.flight, f, fmt);
}

static void exporter_connect(struct loader *L)
{
	struct exporter_source src = {
		.stats = exporter_stats, .map_full = exporter_map_full,
		.drain = L->cli.opts.aggregate ? drain_all : NULL, .self_cpu = exporter_self_cpu, .extra = exporter_extra, .arg = L };

	if (!L->ex)
		return;
	for (int i = 0; i < L->nmods; i++) /* the maps it serves, from their modules */
		if (L->mods[i]->export)
			L->mods[i]->export(L->states[i], &src);
	exporter_set_source(L->ex, &src);
	fprintf(stderr, "tailtrace: serving metrics on http://%s/metrics\n", exporter_address(L->ex));
}

static void print_ready(struct loader *L)
{
	const struct tt_opts *o = &L->cli.opts;
	const char *ev = L->events_str;

	if (L->ctx.target_pid > 0) {
		fprintf(stderr, "tailtrace: attached to PID");
		for (int i = 0; i < L->ctx.ntargets; i++)
			fprintf(stderr, "%s%d", i ? "," : " ", L->ctx.target_pids[i]);
		fprintf(stderr, " and %s descendants (", L->ctx.ntargets > 1 ? "their" : "its");
		if (L->tree.n > L->tree.ntargets)
			fprintf(stderr, "%d processes now; ", L->tree.n);
		fprintf(stderr, "events: %s)\n", ev);
	} else if (o->comm)
		fprintf(stderr, "tailtrace: attached to comm %s (events: %s)\n", o->comm, ev);
	else if (o->cgroup)
		fprintf(stderr, "tailtrace: attached to cgroup %s (events: %s)\n", o->cgroup, ev);
	else
		fprintf(stderr, "tailtrace: attached system-wide (events: %s)\n", ev);
	fprintf(stderr, "tailtrace: hook %s, output %s\n", features_hook_name(features_hook()),
		o->out_dir);
}

static bool target_finished(struct loader *L)
{
	if (L->have_child)
		return target_child_exited(&L->child);
	for (int i = 0; L->cli.opts.pid > 0 && i < L->cli.opts.npids; i++)
		if (!target_pid_exited(L->cli.opts.pids[i], L->pidfds[i]))
			return false;
	return L->cli.opts.pid > 0;   /* every --pid target has exited */
}

/* A descendant found in /proc: the modules' per-process probes for it. A
 * process gone before it could be attached is no error. */
static void tree_on_fresh(void *arg, int pid)
{
	struct loader *L = arg;

	for (int i = 0; i < L->nmods; i++) {
		if (!L->mods[i]->attach_process || !L->states[i])
			continue;
		L->ctx.err[0] = '\0';
		if (L->mods[i]->attach_process(&L->ctx, L->states[i], pid) && L->ctx.err[0] &&
		    !target_pid_exited(pid, -1))
			fprintf(stderr, "tailtrace: %s\n", L->ctx.err);
	}
}

/* The targets' trees: which processes the modules attach per process for. The
 * first target is the one setup() attached for; the other targets and every
 * descendant found get attach_process. */
static int tree_prepare(struct loader *L)
{
	L->tree_wanted = false;
	for (int i = 0; i < L->nmods; i++)
		L->tree_wanted |= L->mods[i]->attach_process && L->states[i];
	if (tree_init(&L->tree, L->ctx.target_pids, L->ctx.ntargets)) {
		die_line("out of memory");
		return -ENOMEM;
	}
	if (!L->tree_wanted || L->ctx.target_pid <= 0 || L->cli.opts.all)
		return 0;
	for (int i = 1; i < L->ctx.ntargets; i++)
		tree_on_fresh(L, L->ctx.target_pids[i]);
	return tree_scan(&L->tree, tree_on_fresh, L) < 0 ? -ENOMEM : 0;
}

static int poll_loop(struct loader *L)
{
	double dur = L->cli.opts.duration_s;
	uint64_t deadline = dur > 0 ? L->meta.mono_start_ns + (uint64_t)(dur * 1e9) : 0;
	/* Symbols: the target maps its libraries just after exec, and may live
	 * only briefly: refresh soon, then less and less often. */
	uint64_t refresh_every = SYMS_FIRST_REFRESH_NS, next_refresh = tt_now_ns() + refresh_every;
	uint64_t next_drain = tt_now_ns() + AGGREGATE_DRAIN_MS * 1000000ull;
	uint64_t next_flush = tt_now_ns() + FLUSH_MS * 1000000ull;
	uint64_t next_tree = tt_now_ns() + TREE_SCAN_MS * 1000000ull;

	while (!exiting) {
		uint64_t now = tt_now_ns();
		int timeout_ms = POLL_MS, err, stats_ms = cost_tick(&L->cost, now);
		int toggle_ms = toggle_tick(&L->toggle, L->mods, L->states, L->nmods, now,
					    L->ctx.err, sizeof(L->ctx.err));

		if (toggle_ms < -1) {
			die_line(L->ctx.err);
			return toggle_ms;
		}
		if (toggle_ms >= 0 && toggle_ms < timeout_ms)
			timeout_ms = toggle_ms;

		if (L->ctx.syms && next_refresh > now && (next_refresh - now) / 1000000 < POLL_MS)
			timeout_ms = (int)((next_refresh - now) / 1000000) + 1;
		if (stats_ms >= 0 && stats_ms < timeout_ms)
			timeout_ms = stats_ms;
		if (now >= next_flush) {
			recfile_flush_all(); /* errors stay in each file: its module reports them */
			next_flush = now + FLUSH_MS * 1000000ull;
		}
		for (int i = 0; i < L->nmods; i++) {
			int ms = L->mods[i]->tick && L->states[i] ?
					 L->mods[i]->tick(&L->ctx, L->states[i], now) : -1;

			timeout_ms = ms >= 0 && ms < timeout_ms ? ms : timeout_ms;
		}
		if (L->ctx.flight) {
			int fl_ms = flight_tick(L->ctx.flight, now);

			timeout_ms = fl_ms < timeout_ms ? fl_ms : timeout_ms;
		}
		if (L->ex) {
			err = L->ctx.rb ? ring_buffer__poll(L->ctx.rb, 0) : 0;
			exporter_poll(L->ex, timeout_ms);
		} else {
			err = L->ctx.rb ? ring_buffer__poll(L->ctx.rb, timeout_ms) :
					  usleep(timeout_ms * 1000);
		}
		/* The programs wake the poll only once a batch waits (filter.bpf.h
		 * tt_rb_flags), and a poll consumes only the rings that woke it:
		 * the rest is taken here, so nothing waits longer than POLL_MS. */
		if (L->ctx.rb && err >= 0)
			ring_buffer__consume(L->ctx.rb);
		now = tt_now_ns();

		if (err < 0 && err != -EINTR && errno != EINTR) {
			fprintf(stderr, "tailtrace: polling ring buffers: %s\n", strerror(-err));
			return err;
		}
		if (target_finished(L)) {
			L->target_gone = true;
			break;
		}
		if (probe_write_error()) {
			fprintf(stderr, "tailtrace: stopping: cannot write records to %s: %s (the "
				"records written so far are kept; free space or choose another --out)\n",
				L->cli.opts.out_dir, strerror(-probe_write_error()));
			return probe_write_error();
		}
		if (deadline && now >= deadline)
			break;
		if (L->cli.opts.aggregate && !L->ex && now >= next_drain) {
			drain_all(L); /* the exporter drains at each collection */
			next_drain = now + AGGREGATE_DRAIN_MS * 1000000ull;
		}
		if (L->tree_wanted && L->ctx.target_pid > 0 && now >= next_tree) {
			tree_scan(&L->tree, tree_on_fresh, L);
			next_tree = now + TREE_SCAN_MS * 1000000ull;
		}
		if (L->ctx.syms && now >= next_refresh) {
			syms_set_refresh(L->ctx.syms);
			if (refresh_every < SYMS_REFRESH_NS)
				refresh_every *= 2;
			next_refresh = now + refresh_every;
		}
	}
	return 0;
}

static void stats_collect(struct loader *L)
{
	L->nstats = 0;
	for (int i = 0; i < L->nmods; i++)
		L->nstats += L->mods[i]->stats(L->states[i], L->stats + L->nstats,
					       MAX_STATS - L->nstats);
}

static void print_final(struct loader *L)
{
	uint64_t unmatched = 0;

	fprintf(stderr, "tailtrace: events %s", L->cli.opts.aggregate ? "counted" : "written");
	for (int i = 0; i < L->nstats; i++)
		fprintf(stderr, " %s=%llu", L->stats[i].stream, (unsigned long long)L->stats[i].written);
	fprintf(stderr, "; lost");
	for (int i = 0; i < L->nstats; i++)
		fprintf(stderr, " %s=%llu", L->stats[i].stream, (unsigned long long)L->stats[i].lost);
	for (int i = 0; i < L->nstats; i++)
		unmatched += L->stats[i].unmatched;
	if (unmatched) {
		fprintf(stderr, "; unmatched (end never seen)");
		for (int i = 0; i < L->nstats; i++)
			if (L->stats[i].unmatched)
				fprintf(stderr, " %s=%llu", L->stats[i].stream,
					(unsigned long long)L->stats[i].unmatched);
	}
	fprintf(stderr, "\n");
}

/* n with thousands separators (27600 -> "27,600"). */
static const char *fmt_thousands(uint64_t n, char *buf, size_t len)
{
	char digits[32];
	int nd = snprintf(digits, sizeof(digits), "%llu", (unsigned long long)n), o = 0;

	for (int i = 0; i < nd && o + 2 < (int)len; i++) {
		if (i && (nd - i) % 3 == 0)
			buf[o++] = ',';
		buf[o++] = digits[i];
	}
	buf[o] = '\0';
	return buf;
}

/* The maps that refused entries for want of room, in one line: what they would
 * have held is not in the run. */
static void print_map_full(struct loader *L)
{
	struct tt_map_full v[TT_MAX_MAP_FULL];
	int n = probe_map_full_collect(L->mods, L->states, L->nmods, v, TT_MAX_MAP_FULL), said = 0;
	char a[32], b[32];

	for (int i = 0; i < n; i++) {
		if (!v[i].refused)
			continue;
		fprintf(stderr, "%s%s refused %s updates (it holds %s entries)",
			said++ ? ", " : "tailtrace: warning: BPF maps full: ", v[i].map,
			fmt_thousands(v[i].refused, a, sizeof(a)), fmt_thousands(v[i].entries, b, sizeof(b)));
	}
	if (said)
		fprintf(stderr, "; what they would have held is not in the run (meta.json map_full)\n");
}

/* The observer effect, said out loud: a stream whose uprobes (hits by the class of
 * their sites x the cost measured here) took more than TT_UPROBE_WARN_SHARE of a
 * CPU made the target measurably slower than it runs untraced. */
static void print_uprobe_warnings(struct loader *L)
{
	char rate[32];

	for (int i = 0; i < L->nstats; i++) {
		const struct tt_stream_stats *s = &L->stats[i];
		double share = meta_uprobe_share(&L->meta, s), r = meta_uprobe_rate(&L->meta, s);
		bool locks = !strcmp(s->stream, "locks");

		if (share <= TT_UPROBE_WARN_SHARE || !s->uprobe_hits)
			continue;
		fprintf(stderr, "tailtrace: warning: %s: %s uprobe hits/s on the %s at ~%.1f us each "
			"(%s) took ~%.0f%% of a CPU, so %s ran slower while traced — compare with %s\n",
			s->stream, fmt_thousands((uint64_t)(r + 0.5), rate, sizeof(rate)),
			L->ctx.target_pid > 0 ? "target" : "traced processes",
			(double)s->uprobe_cost_ns / s->uprobe_hits / 1e3,
			usite_costs_measured() ? "measured here" : "a VM's figure", share * 100,
			locks ? "lock-heavy code" : "the spanned calls",
			locks ? "--events runq,switch,offcpu,cpu" : "the program's own timing untraced");
	}
}

/* What a uprobe hit costs here, before the uprobe modules plan their sites. */
static void calibrate_costs(struct loader *L)
{
	int err = calibrate_uprobes();

	if (err)
		fprintf(stderr, "tailtrace: could not measure uprobe costs here (%s): estimates use "
			"a VM's figures\n", strerror(-err));
	else if (L->cli.opts.verbose)
		fprintf(stderr, "tailtrace: a uprobe hit costs here: %.2f us emulated, %.2f us a "
			"5-byte nop, %.1f us single-stepped; a uretprobe's return %.2f us\n",
			usite_cost_ns(USITE_EMULATED) / 1e3, usite_cost_ns(USITE_NOP5) / 1e3,
			usite_cost_ns(USITE_SSTEP) / 1e3, usite_uretprobe_ns() / 1e3);
}

static void print_aggregate(struct loader *L)
{
	int err = aggregate_write(L->cli.opts.out_dir, stdout, L->cli.opts.verbose);

	fflush(stdout);
	if (err)
		fprintf(stderr, "tailtrace: writing aggregate.json: %s\n", strerror(-err));
}

/* --otlp: the follower sends what the last captures hold (meta.json now says the
 * recording has finished), then exits; one line when it could not send it all. */
static void otlp_follower_finish(struct loader *L)
{
	int status;

	if (!L->otlp_follower.pid)
		return;
	status = flight_export_finish(&L->otlp_follower, OTLP_FOLLOWER_WAIT_MS);
	if (status)
		fprintf(stderr, "tailtrace: --otlp: %s; what was sent and dropped is in "
			"%s/otlp.json\n", status < 0 ? "the follower was stopped before it had sent "
			"every capture" : "not every capture's spans were sent",
			L->cli.opts.out_dir);
}

/* After the probes are attached: every path ends here. */
static int run_finish(struct loader *L, int status)
{
	int err;

	/* the kernel's throttle counts as the last records are read: the same window */
	cpu_quotas_end(&L->quotas);
	if (L->ctx.rb)
		ring_buffer__consume(L->ctx.rb);
	if (L->ctx.syms && !L->target_gone)
		syms_set_refresh(L->ctx.syms);
	if (L->ctx.flight)
		flight_finish(L->ctx.flight); /* pending captures, with what has arrived */
	for (int i = 0; i < L->nmods; i++) {
		L->ctx.err[0] = '\0';
		if (L->mods[i]->finish(&L->ctx, L->states[i])) {
			fprintf(stderr, "tailtrace: %s\n", L->ctx.err[0] ? L->ctx.err : "finish failed");
			status = status ?: 1;
		}
	}
	if (L->cli.opts.aggregate)
		print_aggregate(L);
	stats_collect(L);
	for (int i = 0; i < L->meta.ntargets; i++) /* quotas found since: their start unknown */
		cpu_quotas_note(&L->quotas, L->meta.target_pids[i], 1);
	for (int i = 0; i < L->tree.n; i++)
		cpu_quotas_note(&L->quotas, L->tree.pids[i], 1);
	L->meta.mono_end_ns = tt_now_ns();
	if (!L->cost.t_end_ns) /* ended before the poll loop */
		cost_loop_end(&L->cost);
	cost_stats_stop(&L->cost, L->cost.t_end_ns);
	cost_collect(&L->cost, L->mods, L->states, L->nmods,
		     L->cost.t_end_ns - L->meta.mono_start_ns);
	L->meta.cost = &L->cost;
	L->meta.mods = L->mods;
	L->meta.states = L->states;
	L->meta.nmods = L->nmods;
	L->meta.stats = L->stats;
	L->meta.nstats = L->nstats;
	L->meta.incomplete = (got_signal && (L->have_child || L->cli.opts.pid > 0) &&
			      !L->target_gone) || probe_write_error();
	L->meta.write_err = probe_write_error();
	L->meta.exit_status = L->have_child ? target_exit_code(&L->child) : -1;
	L->meta.finished = true;
	L->meta.tree_pids = L->tree_wanted ? L->tree.pids : NULL;
	L->meta.ntree = L->tree.n;
	if ((err = meta_write_reserved(L->cli.opts.out_dir, &L->meta))) {
		fprintf(stderr, "tailtrace: cannot write %s/meta.json: %s\n", L->cli.opts.out_dir,
			strerror(-err));
		status = status ?: 1;
	}
	cost_print(stderr, &L->cost); /* the events line stays the last one */
	if (L->ctx.flight)
		flight_print(L->ctx.flight, stderr);
	print_final(L);
	print_map_full(L);
	print_uprobe_warnings(L);
	otlp_follower_finish(L);
	return status;
}

static void cleanup(struct loader *L)
{
	ring_buffer__free(L->ctx.rb);
	for (int i = L->nmods - 1; i >= 0; i--)
		L->mods[i]->destroy(L->states[i]);
	cost_disable(&L->cost);
	syms_set_free(L->ctx.syms);
	if (L->have_child && !L->child.reaped)
		target_child_stop(&L->child, 2000);
	for (int i = 0; i < TT_MAX_PIDS; i++)
		if (L->pidfds[i] >= 0)
			close(L->pidfds[i]);
	tree_free(&L->tree);
	exporter_free(L->ex);
	flight_export_finish(&L->otlp_follower, 0); /* an error path: it goes too */
	flight_free(L->ctx.flight);
	aggregate_reset();
}

static void signals_install(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGCHLD, &sa, NULL); /* interrupts the poll when the child exits */
}

/* The loader's thread runs at LOADER_NICE once the target runs (the target
 * keeps its own: nice is per thread and set after its fork). At nice 0, one
 * thread among a target's busy ones gets a share of one in a hundred
 * (naive/100): it fell seconds behind, its ring buffers filled and the
 * recorder lost ~20% of the run-queue and CPU records a run, while the work it
 * has (a few tens of ns a record) is small. Captures lower it (flight.c). */
#define LOADER_NICE -10
static void loader_priority_raise(void)
{
	pid_t tid = (pid_t)syscall(SYS_gettid);

	if (setpriority(PRIO_PROCESS, (id_t)tid, LOADER_NICE))
		fprintf(stderr, "tailtrace: cannot raise the loader's priority (nice %d): %s; on a "
			"busy machine it may fall behind and lose events (counted)\n", LOADER_NICE,
			strerror(errno));
}

/* Attached: release the target, trace, finish. Returns the exit code. */
static int run(struct loader *L)
{
	char err[TT_ERR_LEN];
	int status = 0, toggle_err;

	/* the events traced: a module that could not be set up dropped its own */
	L->meta.events_str = options_events_str(L->events, L->events_str, sizeof(L->events_str));
	/* the recorded time starts before "attached" is said: what a caller starts on
	 * reading it falls inside the run */
	meta_start(&L->meta);
	print_ready(L);
	exporter_connect(L);
	cost_start_clock(&L->cost, L->meta.mono_start_ns, L->mods, L->states, L->nmods);
	/* what a cut run keeps: this meta.json says "finished": false until the end */
	L->meta.mono_end_ns = L->meta.mono_start_ns;
	if (!L->ctx.flight && meta_write(L->cli.opts.out_dir, &L->meta))
		fprintf(stderr, "tailtrace: cannot write %s/meta.json yet (it is tried again at the "
			"end)\n", L->cli.opts.out_dir);
	if (L->have_child && target_release(&L->child, L->cli.cmd, err, sizeof(err))) {
		die_line(err);
		target_child_stop(&L->child, 1000);
		L->target_gone = true;
		run_finish(L, 127);
		return 127;
	}
	/* The target's maps from now on (other processes' when the modules first
	 * see them with a user stack): its exec has happened. */
	if (L->ctx.target_pid > 0)
		syms_set_get(L->ctx.syms, L->ctx.target_pid, true);
	loader_priority_raise();
	cost_loop_start(&L->cost);
	toggle_err = toggle_start(&L->toggle, L->cli.opts.toggle_ms, L->cli.opts.out_dir,
				  tt_now_ns());
	if (toggle_err) {
		fprintf(stderr, "tailtrace: --toggle-ms: cannot write %s/toggles.txt: %s\n",
			L->cli.opts.out_dir, strerror(-toggle_err));
		status = 1;
	} else if (poll_loop(L)) {
		status = 1;
	}
	toggle_stop(&L->toggle, L->mods, L->states, L->nmods);
	cost_loop_end(&L->cost);
	cost_stats_stop(&L->cost, L->cost.t_end_ns);
	if (L->have_child && !target_child_exited(&L->child))
		target_child_stop(&L->child, 2000); /* --duration or a signal ended the run */
	status = run_finish(L, status);
	if (L->have_child && !status)
		status = target_exit_code(&L->child);
	return status;
}

int main(int argc, char **argv)
{
	struct loader L = { .child.pid = -1, .cost.stats_fd = -1 };
	char err[TT_ERR_LEN];
	int ret;

	ret = options_parse(argc, argv, &L.cli, err, sizeof(err));
	if (ret)
		return ret > 0 ? 0 : (die_line(err), 2);
	tt_verbose = L.cli.opts.verbose;
	L.ctx.opts = &L.cli.opts;
	L.meta.argc = argc;
	L.meta.argv = argv;
	L.meta.opts = &L.cli.opts;
	libbpf_set_print(libbpf_print);
	features_set_btf_path(L.cli.opts.debug.btf);
	features_set_without(L.cli.opts.debug.without);
	signals_install();
	if (preflight(&L) || events_resolve(&L))
		return 1;
	if (features_probe(L.cli.opts.debug.hook, err, sizeof(err))) {
		die_line(err);
		return 1;
	}
	if (exporter_prepare(&L) || target_prepare(&L)) {
		exporter_free(L.ex);
		return 1;
	}
	L.meta.target_pid = L.ctx.target_pid;
	L.meta.target_pids = L.ctx.target_pids;
	L.meta.ntargets = L.ctx.ntargets;
	L.meta.cgroup_id = L.ctx.cgroup_id;
	/* Stats on before the first attach (setup loads and attaches). */
	ret = out_prepare(&L);
	if (!ret)
		cost_enable(&L.cost, L.cli.opts.bpf_stats, L.cli.opts.listen != NULL);
	if (!ret && (L.events & (TT_EV_SPANS | TT_EV_LOCKS)))
		calibrate_costs(&L);
	if (!ret && flight_prepare(&L))
		ret = 1;
	/* Only the off-CPU and lock stacks need symbols, and --aggregate takes no
	 * stacks: its refreshes would reread /proc/PID/maps for nothing. */
	if (!ret && !L.cli.opts.aggregate) {
		debuginfo_bound_waits();
		L.ctx.syms = syms_set_new();
	}
	ret = ret ?: modules_setup(&L);
	/* the kernel's throttle counts as the records begin (the scheduler programs attached) */
	for (int i = 0; !ret && i < L.meta.ntargets; i++)
		cpu_quotas_note(&L.quotas, L.meta.target_pids[i], 0);
	L.meta.quotas = &L.quotas;
	ret = ret ?: tree_prepare(&L);
	ret = ret ? 1 : run(&L);
	cleanup(&L);
	return ret;
}
