// SPDX-License-Identifier: MIT
/*
 * --listen (exporter.h): per-process series from the in-kernel histograms,
 * served as Prometheus text.
 */
#include "export/exporter.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/libbpf.h>

#include <tailtrace/records.h>
#include <tt_clock.h>
#include "export/aggregate.h"
#include "export/exporter_antagonists.h"
#include "export/exposition.h"
#include "export/http_serve.h"
#include "core/cpu_quota.h"
#include "core/target.h"
#include "sched/wait_reason.h"
#include <grow.h>

/* runq by kind, then offcpu by reason, then migrations (as a count), then the
 * run-queue waits' throttled parts */
#define IDX_MIGRATE (TT_RUNQ_SUB_NR + TT_WAIT_NR)
#define IDX_THROTTLED (IDX_MIGRATE + 1)
#define NHIST (IDX_THROTTLED + 1)
#define LE_SLOTS 25  /* buckets le = 2^1 .. 2^25 us (33.6 s), then +Inf */
#define MAX_STREAMS 16

struct counts {
	struct tt_hist h[NHIST];
};

struct proc {
	uint32_t pid;
	int series;       /* index into ex->series; -1: folded into "other" */
	int dead;         /* 1: exit seen at the last collection; its entries go at the next */
	uint64_t start;   /* with a series: the process's start time (target_start_time) */
	uint64_t tick;    /* scheduler events at this collection */
	uint64_t window;  /* ... since the last ranking */
	struct counts last; /* the map values at the last collection */
};

struct series {
	bool used;
	uint32_t pid;     /* 0: the "other" series */
	uint64_t gone_ns; /* when its process exited; 0: alive */
	char comm[16];
	char cgroup[256];
	struct counts acc;
};

struct entry {        /* one map entry read at a collection */
	uint32_t pid;
	int idx;          /* index into struct counts */
	struct tt_hist h;
};

struct exporter {
	struct http_server http;
	struct exporter_source src;
	int top_n;
	struct series *series;  /* top_n own series, then "other" at [top_n] */
	struct proc *procs;
	size_t nprocs, capprocs;
	int32_t *index;         /* open addressing pid -> procs[i]; -1 empty */
	size_t index_cap;
	struct entry *ents;
	size_t nents, capents;
	uint64_t next_collect_ns, next_rank_ns;
	double collect_s;       /* duration of the last collection */
	uint64_t pid_reuses;    /* labelled pids found naming another process */
	enum expo_format fmt;   /* of the exposition being rendered */
	struct ants *ants;        /* the cpu event: run-queue wait by antagonist */
};

static const char *const runq_kind[TT_RUNQ_SUB_NR] = { "wakeup", "preempt" };
static const char *const wait_reason[TT_WAIT_NR] = { "lock", "io", "sleep", "other" };

/* ---- the pid index ------------------------------------------------------- */

static size_t slot_of(const struct exporter *ex, uint32_t pid)
{
	return (pid * 2654435761u) & (ex->index_cap - 1);
}

static void index_put(struct exporter *ex, size_t i)
{
	size_t s = slot_of(ex, ex->procs[i].pid);

	while (ex->index[s] >= 0)
		s = (s + 1) & (ex->index_cap - 1);
	ex->index[s] = (int32_t)i;
}

/* Index procs[0..nprocs), sized for room processes. */
static int index_rebuild(struct exporter *ex, size_t room)
{
	size_t cap = 1024;

	while (cap < 2 * room + 2)
		cap *= 2;
	if (cap != ex->index_cap) {
		int32_t *p = realloc(ex->index, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		ex->index = p;
		ex->index_cap = cap;
	}
	memset(ex->index, 0xff, cap * sizeof(*ex->index));
	for (size_t i = 0; i < ex->nprocs; i++)
		index_put(ex, i);
	return 0;
}

static struct proc *proc_find(struct exporter *ex, uint32_t pid)
{
	for (size_t s = slot_of(ex, pid); ex->index[s] >= 0; s = (s + 1) & (ex->index_cap - 1))
		if (ex->procs[ex->index[s]].pid == pid)
			return &ex->procs[ex->index[s]];
	return NULL;
}

static struct proc *proc_get(struct exporter *ex, uint32_t pid)
{
	struct proc *p = proc_find(ex, pid);

	if (p)
		return p;
	if (TT_GROW(ex->procs, ex->nprocs, ex->capprocs, 256))
		return NULL;
	if (2 * (ex->nprocs + 1) + 2 > ex->index_cap && index_rebuild(ex, 2 * ex->nprocs + 2))
		return NULL;
	p = &ex->procs[ex->nprocs];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	p->series = -1;
	index_put(ex, ex->nprocs++);
	return p;
}

/* ---- reading the maps ---------------------------------------------------- */

static int ents_push(struct exporter *ex, uint32_t pid, int idx, const struct tt_hist *h)
{
	if (TT_GROW(ex->ents, ex->nents, ex->capents, 512))
		return -ENOMEM;
	ex->ents[ex->nents++] = (struct entry){ .pid = pid, .idx = idx, .h = *h };
	return 0;
}

struct map_read {
	struct exporter *ex;
	int base, nsub; /* sub-kinds go to counts base.. base+nsub-1 */
};

static int map_read_push(void *arg, const struct tt_hist_key *key, const struct tt_hist *h)
{
	const struct map_read *r = arg;

	if (key->sub >= (uint32_t)r->nsub)
		return 0;
	return ents_push(r->ex, key->id, r->base + (int)key->sub, h);
}

static void read_map(struct exporter *ex, struct bpf_map *map, int base, int nsub)
{
	struct map_read r = { ex, base, nsub };

	if (map)
		aggregate_map_each(map, map_read_push, &r);
}

/* How much a count grew since the last read. A count below the last one
 * means the entry was made anew (its pid reused): all of it is new. */
static uint64_t count_increase(uint64_t now, uint64_t last)
{
	return now >= last ? now - last : now;
}

/* What the entry adds since the last read (count_increase, slot by slot). */
static void hist_delta(struct tt_hist *d, const struct tt_hist *now, const struct tt_hist *last)
{
	*d = *now;
	if (now->count < last->count)
		return;
	for (int i = 0; i < TT_HIST_SLOTS; i++)
		d->slots[i] = now->slots[i] >= last->slots[i] ? now->slots[i] - last->slots[i] : 0;
	d->count = now->count - last->count;
	d->sum_ns = now->sum_ns >= last->sum_ns ? now->sum_ns - last->sum_ns : 0;
}

struct candidate {
	struct proc *p;
	uint64_t events;
};

static int by_events(const void *a, const void *b)
{
	uint64_t x = ((const struct candidate *)a)->events, y = ((const struct candidate *)b)->events;

	return (x < y) - (x > y);
}

/* Its name from /proc, or, when it is gone already, from the BPF side's
 * tasks map (the group leader's comm at its first switch). */
static void series_init(struct exporter *ex, struct series *s, uint32_t pid)
{
	struct tt_task t;

	memset(s, 0, sizeof(*s));
	ants_reset(ex->ants, (int)(s - ex->series));
	s->used = true;
	s->pid = pid;
	target_proc_line((int)pid, "comm", "", s->comm, sizeof(s->comm));
	if (!cpu_cgroup_path((int)pid, s->cgroup, sizeof(s->cgroup)))
		s->cgroup[0] = '\0';
	if (!s->comm[0] && ex->src.tasks &&
	    !bpf_map__lookup_elem(ex->src.tasks, &pid, sizeof(pid), &t, sizeof(t), 0))
		snprintf(s->comm, sizeof(s->comm), "%s", t.comm);
	if (!s->comm[0])
		snprintf(s->comm, sizeof(s->comm), "?");
}

static int free_series(const struct exporter *ex)
{
	for (int i = 0; i < ex->top_n; i++)
		if (!ex->series[i].used)
			return i;
	return -1;
}

/* Give free slots to the live processes with the most events: at this
 * collection (tick), or since the last ranking (window). */
static void admit(struct exporter *ex, bool by_window)
{
	struct candidate *c = malloc(ex->nprocs * sizeof(*c) + 1);
	size_t n = 0;
	int slot;

	if (!c)
		return;
	for (size_t i = 0; i < ex->nprocs; i++) {
		struct proc *p = &ex->procs[i];
		uint64_t events = by_window ? p->window : p->tick;

		if (p->series < 0 && !p->dead && events)
			c[n++] = (struct candidate){ p, events };
	}
	qsort(c, n, sizeof(*c), by_events);
	for (size_t i = 0; i < n && (slot = free_series(ex)) >= 0; i++) {
		series_init(ex, &ex->series[slot], c[i].p->pid);
		c[i].p->series = slot;
		c[i].p->start = target_start_time((int)c[i].p->pid);
	}
	free(c);
}

/* A labelled process whose pid now names another process: it exited and the
 * pid was reused between two collections, so the map entries (keyed by pid)
 * carry on for the new one. Its series starts anew under the new name (a
 * counter reset to Prometheus); the counts of that one interval, the old
 * process's last and the new one's first, go to the new series. A process
 * whose name changed (it exec'd after it was labelled) restarts its series
 * under the new name the same way. */
static void check_reuse(struct exporter *ex)
{
	for (size_t i = 0; i < ex->nprocs; i++) {
		struct proc *p = &ex->procs[i];
		struct series *s = p->series >= 0 ? &ex->series[p->series] : NULL;
		char comm[16] = "";
		uint64_t start;

		if (!s || !p->start)
			continue;
		start = target_start_time((int)p->pid);
		if (!start)
			continue; /* gone (prune sees it) */
		if (start == p->start) {
			/* the same process; named before its exec (a fork that had not run
			 * the program yet): its series restarts under the program's name */
			target_proc_line((int)p->pid, "comm", "", comm, sizeof(comm));
			if (comm[0] && strcmp(comm, s->comm))
				series_init(ex, s, p->pid);
			continue;
		}
		series_init(ex, s, p->pid);
		p->start = start;
		p->dead = 0;
		ex->pid_reuses++;
	}
}

static void distribute(struct exporter *ex)
{
	for (size_t i = 0; i < ex->nents; i++) {
		struct entry *e = &ex->ents[i];
		struct proc *p = proc_find(ex, e->pid);
		struct tt_hist d;

		if (!p)
			continue;
		hist_delta(&d, &e->h, &p->last.h[e->idx]);
		aggregate_hist_merge(&ex->series[p->series >= 0 ? p->series : ex->top_n].acc.h[e->idx], &d);
		p->last.h[e->idx] = e->h;
	}
}

static void delete_entries(struct exporter *ex, uint32_t pid)
{
	struct bpf_map *maps[] = { ex->src.runq, ex->src.offcpu, ex->src.migrate };

	for (int m = 0; m < 3; m++)
		for (uint32_t sub = 0; maps[m] && sub < TT_WAIT_NR; sub++) {
			struct tt_hist_key k = { .id = pid, .sub = sub };

			bpf_map__delete_elem(maps[m], &k, sizeof(k), 0);
		}
	if (ex->src.tasks)
		bpf_map__delete_elem(ex->src.tasks, &pid, sizeof(pid), 0);
	ants_forget(ex->ants, ex->src.blame, pid);
}

/* Processes that exited: mark now, forget once their last counts were read. */
static void prune(struct exporter *ex, uint64_t now)
{
	size_t out = 0;

	for (size_t i = 0; i < ex->nprocs; i++) {
		struct proc *p = &ex->procs[i];

		if (p->dead) {
			delete_entries(ex, p->pid);
			if (p->series >= 0)
				ex->series[p->series].gone_ns = now;
			continue;
		}
		if (kill((pid_t)p->pid, 0) && errno == ESRCH)
			p->dead = 1;
		ex->procs[out++] = *p;
	}
	ex->nprocs = out;
	index_rebuild(ex, ex->nprocs);
}

/* Every EXPORTER_RANK_S: slots of processes gone a whole period, or idle
 * while others were active, go to the most active others. */
static void rank(struct exporter *ex, uint64_t now)
{
	bool others_active = false;

	for (size_t i = 0; i < ex->nprocs; i++)
		others_active |= ex->procs[i].series < 0 && ex->procs[i].window;
	for (int i = 0; i < ex->top_n; i++) {
		struct series *s = &ex->series[i];
		struct proc *p = s->used ? proc_find(ex, s->pid) : NULL;
		bool gone = s->gone_ns && now - s->gone_ns >= EXPORTER_RANK_S * 1000000000ull;

		if (!s->used || !(gone || (p && !p->window && others_active)))
			continue;
		if (p)
			p->series = -1;
		s->used = false;
	}
	admit(ex, true);
	for (size_t i = 0; i < ex->nprocs; i++)
		ex->procs[i].window = 0;
}

/* The series a process's counts go to: its own, or "other". */
static int series_of(void *arg, uint32_t pid)
{
	struct exporter *ex = arg;
	struct proc *p = proc_find(ex, pid);

	return p && p->series >= 0 ? p->series : ex->top_n;
}

void exporter_collect(struct exporter *ex)
{
	uint64_t t0 = tt_now_ns();

	ex->nents = 0;
	if (ex->src.drain)
		ex->src.drain(ex->src.arg);
	read_map(ex, ex->src.runq, 0, TT_RUNQ_SUB_NR);
	read_map(ex, ex->src.offcpu, TT_RUNQ_SUB_NR, TT_WAIT_NR);
	read_map(ex, ex->src.migrate, IDX_MIGRATE, 1);
	read_map(ex, ex->src.throttled, IDX_THROTTLED, 1);
	for (size_t i = 0; i < ex->nents; i++) {
		struct entry *e = &ex->ents[i];
		struct proc *p = proc_get(ex, e->pid);

		if (p && e->idx < IDX_MIGRATE) /* scheduler events: not their throttled parts */
			p->tick += count_increase(e->h.count, p->last.h[e->idx].count);
	}
	admit(ex, false);
	check_reuse(ex);
	distribute(ex);
	if (ex->src.blame)
		ants_collect(ex->ants, ex->src.blame, series_of, ex);
	for (size_t i = 0; i < ex->nprocs; i++) {
		ex->procs[i].window += ex->procs[i].tick;
		ex->procs[i].tick = 0;
	}
	prune(ex, t0);
	if (t0 >= ex->next_rank_ns) {
		rank(ex, t0);
		ex->next_rank_ns = t0 + EXPORTER_RANK_S * 1000000000ull;
	}
	ex->next_collect_ns = tt_now_ns() + EXPORTER_COLLECT_MS * 1000000ull;
	ex->collect_s = (tt_now_ns() - t0) / 1e9;
}

/* ---- the exposition ------------------------------------------------------ */

static void put_labels(FILE *f, const struct series *s, const char *key, const char *val)
{
	fputs("{comm=\"", f);
	if (s->pid) {
		expo_label_value(f, s->comm);
		fprintf(f, "\",pid=\"%u\",cgroup=\"", s->pid);
		expo_label_value(f, s->cgroup);
	} else {
		fputs("other\",pid=\"\",cgroup=\"", f);
	}
	fputc('"', f);
	if (key)
		fprintf(f, ",%s=\"%s\"", key, val);
}

static int series_used(void *arg, int i)
{
	return ((struct exporter *)arg)->series[i].used;
}

static void series_labels(void *arg, FILE *f, int i)
{
	put_labels(f, &((struct exporter *)arg)->series[i], NULL, NULL);
}

static void put_hist(FILE *f, const char *name, const struct series *s, const char *key,
		     const char *val, const struct tt_hist *h)
{
	uint64_t cum = 0;

	for (int k = 0; k < LE_SLOTS; k++) {
		cum += h->slots[k];
		fprintf(f, "%s_bucket", name);
		put_labels(f, s, key, val);
		fprintf(f, ",le=\"%.9g\"} %llu\n", (double)(2ull << k) * 1e-6, (unsigned long long)cum);
	}
	fprintf(f, "%s_bucket", name);
	put_labels(f, s, key, val);
	fprintf(f, ",le=\"+Inf\"} %llu\n%s_sum", (unsigned long long)h->count, name);
	put_labels(f, s, key, val);
	fprintf(f, "} %.9f\n%s_count", h->sum_ns / 1e9, name);
	put_labels(f, s, key, val);
	fprintf(f, "} %llu\n", (unsigned long long)h->count);
}

/* HELP and TYPE of a metric family, in the format being rendered. */
static void header(const struct exporter *ex, FILE *f, const char *name, const char *type,
		   const char *help)
{
	expo_family(f, ex->fmt, name, type, help);
}

static void render_hists(struct exporter *ex, FILE *f, const char *name, int base, int n,
			 const char *key, const char *const *vals)
{
	for (int i = 0; i <= ex->top_n; i++)
		for (int k = 0; ex->series[i].used && k < n; k++)
			if (ex->series[i].acc.h[base + k].count)
				put_hist(f, name, &ex->series[i], key, vals ? vals[k] : NULL,
					 &ex->series[i].acc.h[base + k]);
}

static void render_switches(struct exporter *ex, FILE *f)
{
	header(ex, f, "tailtrace_context_switches_total", "counter",
	       "Context switches out of the process's threads: voluntary (blocked) and "
	       "involuntary (preempted while runnable).");
	for (int i = 0; i <= ex->top_n; i++) {
		const struct series *s = &ex->series[i];
		uint64_t vol = 0;

		if (!s->used)
			continue;
		for (int k = 0; k < TT_WAIT_NR; k++)
			vol += s->acc.h[TT_RUNQ_SUB_NR + k].count;
		fputs("tailtrace_context_switches_total", f);
		put_labels(f, s, "kind", "voluntary");
		fprintf(f, "} %llu\ntailtrace_context_switches_total", (unsigned long long)vol);
		put_labels(f, s, "kind", "involuntary");
		fprintf(f, "} %llu\n", (unsigned long long)s->acc.h[TT_RUNQ_SUB_PREEMPT].count);
	}
	header(ex, f, "tailtrace_migrations_total", "counter",
	       "Migrations of the process's threads to another CPU.");
	for (int i = 0; i <= ex->top_n; i++)
		if (ex->series[i].used) {
			fputs("tailtrace_migrations_total", f);
			put_labels(f, &ex->series[i], NULL, NULL);
			fprintf(f, "} %llu\n", (unsigned long long)ex->series[i].acc.h[IDX_MIGRATE].count);
		}
}

static void render_map_full(struct exporter *ex, FILE *f)
{
	struct tt_map_full v[TT_MAX_MAP_FULL];
	int n = ex->src.map_full ? ex->src.map_full(ex->src.arg, v, TT_MAX_MAP_FULL) : 0;

	header(ex, f, "tailtrace_map_full_total", "counter",
	       "Entries a BPF map of tailtrace's refused for want of room (what they would have "
	       "held is not counted), by map.");
	for (int i = 0; i < n; i++)
		fprintf(f, "tailtrace_map_full_total{map=\"%s\"} %llu\n", v[i].map,
			(unsigned long long)v[i].refused);
	header(ex, f, "tailtrace_map_entries", "gauge", "The size of each BPF map counted in "
	       "tailtrace_map_full_total: the entries it holds at most.");
	for (int i = 0; i < n; i++)
		fprintf(f, "tailtrace_map_entries{map=\"%s\"} %u\n", v[i].map, v[i].entries);
}

static void render_self(struct exporter *ex, FILE *f)
{
	struct tt_stream_stats st[MAX_STREAMS];
	int n = ex->src.stats ? ex->src.stats(ex->src.arg, st, MAX_STREAMS) : 0;
	double bpf_s = 0, loader_s = 0;
	size_t labelled = 0, folded = 0;

	header(ex, f, "tailtrace_lost_events_total", "counter",
	       "Kernel events tailtrace could not count (full map or buffer, skipped program runs).");
	for (int i = 0; i < n; i++)
		fprintf(f, "tailtrace_lost_events_total{stream=\"%s\"} %llu\n", st[i].stream,
			(unsigned long long)st[i].lost);
	header(ex, f, "tailtrace_unmatched_events_total", "counter",
	       "Intervals dropped because the kernel never reported their end "
	       "(docs/probes/sched.md).");
	for (int i = 0; i < n; i++)
		fprintf(f, "tailtrace_unmatched_events_total{stream=\"%s\"} %llu\n", st[i].stream,
			(unsigned long long)st[i].unmatched);
	render_map_full(ex, f);
	if (ex->src.self_cpu)
		ex->src.self_cpu(ex->src.arg, &bpf_s, &loader_s);
	header(ex, f, "tailtrace_cpu_seconds_total", "counter",
	       "tailtrace's own CPU time: its BPF programs (kernel run-time statistics) and its loader.");
	fprintf(f, "tailtrace_cpu_seconds_total{part=\"bpf\"} %.6f\n", bpf_s);
	fprintf(f, "tailtrace_cpu_seconds_total{part=\"loader\"} %.6f\n", loader_s);
	for (int i = 0; i < ex->top_n; i++)
		labelled += ex->series[i].used;
	for (size_t i = 0; i < ex->nprocs; i++)
		folded += ex->procs[i].series < 0;
	header(ex, f, "tailtrace_processes", "gauge",
	       "Processes with their own series (labelled, exited ones until their slot is "
	       "reused) and live ones counted in comm=\"other\" (folded).");
	fprintf(f, "tailtrace_processes{state=\"labelled\"} %zu\n", labelled);
	fprintf(f, "tailtrace_processes{state=\"folded\"} %zu\n", folded);
	header(ex, f, "tailtrace_pid_reuses_total", "counter",
	       "Labelled processes whose pid was taken by a new process between two reads; "
	       "each such series restarted under the new process.");
	fprintf(f, "tailtrace_pid_reuses_total %llu\n", (unsigned long long)ex->pid_reuses);
	header(ex, f, "tailtrace_collect_duration_seconds", "gauge",
	       "Time the last read of the BPF maps took.");
	fprintf(f, "tailtrace_collect_duration_seconds %.6f\n", ex->collect_s);
	header(ex, f, "tailtrace_http_connections_total", "counter",
	       "Connections to this exporter, by outcome: answered, dropped (closed before an "
	       "answer), timed_out (no request within the deadline) or refused (over the cap of "
	       "open connections).");
	fprintf(f, "tailtrace_http_connections_total{outcome=\"answered\"} %llu\n",
		ex->http.served);
	fprintf(f, "tailtrace_http_connections_total{outcome=\"dropped\"} %llu\n",
		ex->http.errors - ex->http.timed_out - ex->http.refused);
	fprintf(f, "tailtrace_http_connections_total{outcome=\"timed_out\"} %llu\n",
		ex->http.timed_out);
	fprintf(f, "tailtrace_http_connections_total{outcome=\"refused\"} %llu\n",
		ex->http.refused);
	header(ex, f, "tailtrace_build_info", "gauge", "tailtrace's version.");
	fprintf(f, "tailtrace_build_info{version=\"%s\"} 1\n", TT_VERSION);
}

int exporter_render(struct exporter *ex, enum expo_format fmt, char **text, size_t *len)
{
	FILE *f = open_memstream(text, len);

	if (!f)
		return -errno;
	ex->fmt = fmt;
	header(ex, f, "tailtrace_runqueue_latency_seconds", "histogram",
	       "Time threads spent runnable before running: after a wakeup, or after a preemption.");
	render_hists(ex, f, "tailtrace_runqueue_latency_seconds", 0, TT_RUNQ_SUB_NR, "kind",
		     runq_kind);
	header(ex, f, "tailtrace_offcpu_seconds", "histogram",
	       "Off-CPU intervals of blocked threads (switch-out to switch-in, the run-queue wait "
	       "after the wakeup included), by the syscall they blocked in: lock (futex), io, "
	       "sleep, other.");
	render_hists(ex, f, "tailtrace_offcpu_seconds", TT_RUNQ_SUB_NR, TT_WAIT_NR, "reason",
		     wait_reason);
	if (ex->src.throttled) {
		header(ex, f, "tailtrace_throttled_seconds", "histogram",
		       "The part of each run-queue wait (counted whole in "
		       "tailtrace_runqueue_latency_seconds) during which the thread's cgroup, or "
		       "an ancestor, was throttled by its CPU quota (CFS bandwidth control); "
		       "waits without one are not counted.");
		render_hists(ex, f, "tailtrace_throttled_seconds", IDX_THROTTLED, 1, NULL, NULL);
	}
	render_switches(ex, f);
	if (ex->src.blame) {
		header(ex, f, "tailtrace_runqueue_wait_by_antagonist_seconds_total", "counter",
		       "Time the process's threads waited for a CPU, by what held that CPU "
		       "meanwhile: class sibling (its own threads), peer (another traced "
		       "process), other, kernel, irq, idle, unknown; the top antagonists by "
		       "name, the rest of a class as antagonist=\"other\".");
		ants_render(ex->ants, f, series_used, series_labels, ex);
	}
	render_self(ex, f);
	if (ex->src.extra)
		ex->src.extra(ex->src.arg, f, (int)fmt);
	if (fmt == EXPO_OPENMETRICS)
		fputs("# EOF\n", f);
	if (fclose(f))
		return -errno;
	return 0;
}

/* ---- serving ------------------------------------------------------------- */

static int handle(void *arg, const char *path, const char *accept, char **body, size_t *len,
		  const char **type)
{
	struct exporter *ex = arg;
	enum expo_format fmt;

	if (!strcmp(path, "/")) {
		static const char page[] = "tailtrace exporter: metrics at /metrics\n";

		*body = strdup(page);
		*len = *body ? strlen(page) : 0;
		return *body ? 200 : 500;
	}
	if (strcmp(path, "/metrics"))
		return 404;
	exporter_collect(ex);
	fmt = expo_negotiate(accept);
	*type = fmt == EXPO_OPENMETRICS ?
			"application/openmetrics-text; version=1.0.0; charset=utf-8" :
			"text/plain; version=0.0.4; charset=utf-8";
	return exporter_render(ex, fmt, body, len) ? 500 : 200;
}

int exporter_open(struct exporter **out, const char *addr, int top_n, char *err, size_t len)
{
	struct exporter *ex = calloc(1, sizeof(*ex));
	int ret;

	*out = NULL;
	if (ex)
		http_server_init(&ex->http);
	if (!ex || !(ex->series = calloc((size_t)top_n + 1, sizeof(*ex->series))) ||
	    index_rebuild(ex, 0)) {
		exporter_free(ex);
		snprintf(err, len, "--listen: out of memory");
		return -ENOMEM;
	}
	ex->top_n = top_n;
	ex->series[top_n].used = true; /* "other" */
	ex->http.handler = handle;
	ex->http.arg = ex;
	ret = http_listen(&ex->http, addr, err, len);
	if (ret) {
		exporter_free(ex);
		return ret;
	}
	*out = ex;
	return 0;
}

void exporter_set_source(struct exporter *ex, const struct exporter_source *src)
{
	ex->src = *src;
	if (src->blame && !ex->ants && !(ex->ants = ants_new(ex->top_n + 1, ex->top_n)))
		ex->src.blame = NULL; /* out of memory: the family is left out */
}

const char *exporter_address(const struct exporter *ex)
{
	return ex->http.bound;
}

void exporter_poll(struct exporter *ex, int timeout_ms)
{
	struct pollfd fds[1 + HTTP_MAX_CLIENTS];
	int n = http_serve_poll_fds(&ex->http, fds);

	if (poll(fds, (nfds_t)n, http_serve_timeout_ms(&ex->http, timeout_ms)) >= 0)
		http_serve(&ex->http);
	if (tt_now_ns() >= ex->next_collect_ns)
		exporter_collect(ex);
}

void exporter_free(struct exporter *ex)
{
	if (!ex)
		return;
	http_close(&ex->http);
	free(ex->series);
	free(ex->procs);
	free(ex->index);
	free(ex->ents);
	ants_free(ex->ants);
	free(ex);
}
