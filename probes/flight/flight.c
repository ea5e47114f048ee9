// SPDX-License-Identifier: MIT
/*
 * flight: triggers, pending captures, writing them (flight.h).
 */
#include "flight/flight.h"

#include <errno.h>
#include <limits.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <json_out.h>
#include <recfile.h>
#include "export/exposition.h"
#include "flight/flight_window.h"
#include "sched/wait_reason.h"
#include <schema.h>
#include <tt_clock.h>

#define REFRESH_NS 250000000ull     /* the live threshold, recomputed this often */
#define MAX_WINDOW_NS 10000000000ull /* a capture coalesces triggers up to this long */
#define MAX_PENDING 8
#define SAMPLE_NS 10000000000ull     /* thresholds.jsonl: a line this often */

struct pending {
	uint64_t t0, t1, due;
	struct tt_span first;   /* the first triggering span */
	uint64_t worst_ns;      /* the slowest triggering span */
	uint64_t threshold_ns;  /* the threshold when it first triggered */
	uint64_t live_n;        /* spans the live percentile was taken from */
	unsigned nspans;        /* triggering spans in it */
};

#define HIST_N 28 /* span latency buckets: le 2^k us, k = 0..27 (134 s), then +Inf */

/* What the triggering request's own thread did over it (flight_counts, --listen). */
enum cap_state { ST_ONCPU, ST_RUNNABLE, ST_LOCK, ST_IO, ST_SLEEP, ST_OTHER, ST_UNKNOWN, ST_NR };
static const char *const state_name[ST_NR] = { "on_cpu", "runnable", "blocked_lock",
					       "blocked_io", "blocked_sleep", "blocked_other",
					       "unknown" };

struct flight {
	struct flight_opts o;
	struct flight_store *store;
	struct flight_live *live;
	char out_dir[PATH_MAX];
	flight_capture_fn write;
	void *arg;
	uint64_t threshold_ns, live_n, next_refresh, next_sample;
	struct pending cand;    /* the slowest trigger of the current slot */
	bool have_cand;
	uint64_t slot_ns, slot_end;
	struct pending q[MAX_PENDING]; /* slots' candidates waiting for their records */
	int nq;
	unsigned seq;
	uint32_t types_seen;    /* bit per record type that arrived */
	uint64_t t_start_ns;
	uint64_t tick_ns;       /* the loader's clock at the last tick, before its poll */
	uint64_t spans, triggers, captures, coalesced, skipped_rate, skipped_disk, failed;
	uint64_t disk_bytes;
	char last_dir[32];
	uint64_t last_latency_ns;
	uint64_t hist[HIST_N + 1], hist_sum_ns; /* every span's latency, for --listen */
	struct {
		char dir[32];
		uint64_t value_ns;
		double wall_s;
	} exemplar[HIST_N + 1];                   /* the last capture in each bucket */
	uint64_t by_state[ST_NR];
	struct recfile *tee[TT_REC_TYPES];  /* --debug flight-tee: the whole run's files */
	int tee_err;
	bool tee_closed;                    /* the run ended: nothing more goes there */
	uint64_t size_at_ns, size_added;   /* auto_size: the last rate reading */
	double peak_rate;                   /* bytes a second, the highest reading */
};

int flight_opts_from(const struct tt_opts *o, struct flight_opts *fo, char *err, size_t len)
{
	memset(fo, 0, sizeof(*fo));
	fo->seconds = o->flight_s;
	fo->max_bytes = (uint64_t)o->flight_mb << 20;
	fo->auto_size = o->flight_mb_auto;
	fo->margin_ns = (uint64_t)o->flight_margin_ms * 1000000ull;
	fo->max_per_min = o->max_captures_per_min;
	fo->max_disk_bytes = (uint64_t)o->max_disk_mb << 20;
	fo->tee = o->debug.flight_tee;
	if (fo->max_per_min && fo->seconds < 60.0 / fo->max_per_min + 2) {
		/* a slot's slowest request is written at the slot's end: its records must still
		 * be in memory then */
		snprintf(err, len, "--flight-recorder %g: keep at least %.0f s (a capture is written "
			 "up to 60/--max-captures-per-min = %.0f s after its request, plus 2 s)",
			 fo->seconds, 60.0 / fo->max_per_min + 2, 60.0 / fo->max_per_min);
		return -EINVAL;
	}
	return flight_trigger_parse(o->trigger, o->trigger_warmup, &fo->trig, err, len);
}

struct flight *flight_new(const struct flight_opts *fo, const char *out_dir, flight_capture_fn fn,
			  void *arg)
{
	struct flight *f = calloc(1, sizeof(*f));

	if (!f)
		return NULL;
	f->o = *fo;
	f->store = flight_store_new((uint64_t)(fo->seconds * 1e9), fo->max_bytes, 0);
	f->live = fo->trig.q ? calloc(1, sizeof(*f->live)) : NULL;
	if (!f->store || (fo->trig.q && !f->live)) {
		flight_free(f);
		return NULL;
	}
	snprintf(f->out_dir, sizeof(f->out_dir), "%s", out_dir);
	f->write = fn;
	f->arg = arg;
	f->threshold_ns = fo->trig.q ? 0 : fo->trig.latency_ns;
	f->slot_ns = 60000000000ull / (fo->max_per_min ? fo->max_per_min : 1);
	f->t_start_ns = tt_now_ns();
	f->tick_ns = f->t_start_ns; /* before any record: the stamp of those before a tick */
	return f;
}

/* --debug flight-tee: the records also go to OUT/<kind>.bin, the whole run a
 * capture is checked against (tests/probes/test_flight_postgres.py). */
static void tee_write(struct flight *f, uint32_t type, const void *recs, size_t n)
{
	int err;

	if (!f->o.tee || type >= TT_REC_TYPES || f->tee_err || f->tee_closed)
		return;
	if (!f->tee[type] && !(f->tee[type] = recfile_open_kind(f->out_dir, type)))
		err = -errno;
	else
		err = recfile_write(f->tee[type], recs, n);
	if (err) {
		f->tee_err = err;
		fprintf(stderr, "tailtrace: --debug flight-tee: %s: %s (no more records written "
			"there)\n", f->out_dir, strerror(-err));
	}
}

static void tee_close(struct flight *f)
{
	for (int t = 0; t < TT_REC_TYPES; t++) {
		recfile_close(f->tee[t]);
		f->tee[t] = NULL;
	}
	f->tee_closed = true;
}

void flight_free(struct flight *f)
{
	if (!f)
		return;
	tee_close(f);
	flight_store_free(f->store);
	free(f->live);
	free(f);
}

/* ---- triggers --------------------------------------------------------------- */

/* At the end of a slot its candidate waits for the records of its window. */
static void slot_close(struct flight *f, uint64_t now_ns)
{
	if (!f->have_cand || now_ns < f->slot_end)
		return;
	f->have_cand = false;
	if (f->nq == MAX_PENDING) {
		f->skipped_rate++;
		return;
	}
	f->cand.due = f->cand.t1 + FLIGHT_ARRIVE_NS > now_ns ? f->cand.t1 + FLIGHT_ARRIVE_NS : now_ns;
	f->q[f->nq++] = f->cand;
}

/* The capture budget (--max-captures-per-min) is one capture a slot of 60 s /
 * N: a slot keeps its slowest trigger (and what overlaps it), so a burst of
 * ordinary tail requests cannot use up the captures before a real stall. */
static void trigger(struct flight *f, const struct tt_span *s, uint64_t lat)
{
	uint64_t t0 = s->t_start_ns > f->o.margin_ns ? s->t_start_ns - f->o.margin_ns : 0;
	uint64_t t1 = s->t_end_ns + f->o.margin_ns;
	struct pending *c = &f->cand;

	/* slots run on the requests' clock, not on when their records are read: a loader
	 * that falls behind (a capture being written) reads two slots' triggers at once */
	slot_close(f, s->t_end_ns);
	f->triggers++;
	if (f->have_cand && t0 <= c->t1 && t1 >= c->t0 &&
	    (t1 > c->t1 ? t1 : c->t1) - (t0 < c->t0 ? t0 : c->t0) <= MAX_WINDOW_NS) {
		c->t0 = t0 < c->t0 ? t0 : c->t0;  /* overlaps it: one capture */
		c->t1 = t1 > c->t1 ? t1 : c->t1;
		if (lat > c->worst_ns) {
			c->worst_ns = lat;
			c->first = *s;
		}
		c->nspans++;
		f->coalesced++;
		return;
	}
	if (f->o.max_disk_bytes && f->disk_bytes >= f->o.max_disk_bytes) {
		f->skipped_disk++;
		return;
	}
	if (f->have_cand) {
		f->skipped_rate++; /* one of the two goes: the faster */
		if (lat <= c->worst_ns)
			return;
	} else if (f->slot_end <= s->t_end_ns) {
		f->slot_end = s->t_end_ns + f->slot_ns;
	}
	*c = (struct pending){ .t0 = t0, .t1 = t1, .first = *s, .worst_ns = lat,
			       .threshold_ns = f->threshold_ns, .live_n = f->live_n, .nspans = 1 };
	f->have_cand = true;
}

static unsigned hist_bucket(uint64_t ns)
{
	uint64_t us = (ns + 999) / 1000;
	unsigned k = 0;

	while (k < HIST_N && (1ull << k) < us)
		k++;
	return k;
}

static void on_span(struct flight *f, const struct tt_span *s)
{
	uint64_t lat = s->t_end_ns > s->t_start_ns ? s->t_end_ns - s->t_start_ns : 0;

	if (s->depth)
		return; /* the request is the outermost call */
	f->spans++;
	f->hist[hist_bucket(lat)]++;
	f->hist_sum_ns += lat;
	if (f->live)
		flight_live_add(f->live, s->t_end_ns, lat);
	if (f->threshold_ns && lat > f->threshold_ns)
		trigger(f, s, lat);
}

int flight_sink(void *arg, uint32_t rec_type, const void *recs, size_t n)
{
	struct flight *f = arg;
	/* the records arrived after the last tick's clock (they count as arrived
	 * no earlier than they end, flight_store_add): no clock read a batch */
	int err = flight_store_add(f->store, rec_type, recs, n, f->tick_ns);

	if (rec_type < 32)
		f->types_seen |= 1u << rec_type;
	tee_write(f, rec_type, recs, n);
	for (size_t i = 0; rec_type == TT_REC_SPAN && i < n; i++) {
		struct tt_span s;

		memcpy(&s, (const char *)recs + i * sizeof(s), sizeof(s));
		on_span(f, &s);
	}
	return err;
}

/* OUT/thresholds.jsonl: the live threshold every SAMPLE_NS, to check it against the
 * requests' own percentile (bench/flight_stalls.sh). */
static void sample_threshold(struct flight *f, uint64_t now_ns, uint64_t value)
{
	char path[PATH_MAX + 32];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/thresholds.jsonl", f->out_dir);
	if (!(fp = fopen(path, "ae")))
		return;
	fprintf(fp, "{\"t_ns\": %llu, \"quantile_ns\": %llu, \"threshold_ns\": %llu, "
		"\"live_spans\": %llu}\n", (unsigned long long)now_ns, (unsigned long long)value,
		(unsigned long long)f->threshold_ns, (unsigned long long)f->live_n);
	fclose(fp);
}

static void refresh(struct flight *f, uint64_t now_ns)
{
	uint64_t v;

	if (!f->live)
		return;
	v = flight_live_quantile(f->live, f->o.trig.q, now_ns, &f->live_n);
	f->threshold_ns = f->live_n >= f->o.trig.warmup ? v : 0;
	if (now_ns >= f->next_sample) {
		sample_threshold(f, now_ns, v);
		f->next_sample = now_ns + SAMPLE_NS;
	}
}

/* ---- captures --------------------------------------------------------------- */

/* ---- what the triggering thread did: on CPU, runnable or blocked (and why) ------ */

struct state_acc {
	uint32_t tid;
	uint64_t t0, t1;
	uint64_t off_ns, runnable_ns, why_ns[TT_WAIT_NR];
	bool seen;
};

static uint64_t overlap(uint64_t a0, uint64_t a1, uint64_t b0, uint64_t b1)
{
	uint64_t lo = a0 > b0 ? a0 : b0, hi = a1 < b1 ? a1 : b1;

	return hi > lo ? hi - lo : 0;
}

static int state_add(void *arg, uint32_t type, const void *rec)
{
	struct state_acc *a = arg;

	if (type == TT_REC_SWITCH) {
		struct tt_switch w;
		uint64_t o;

		memcpy(&w, rec, sizeof(w));
		if (w.tid != a->tid || w.unmatched)
			return 0;
		o = overlap(w.t_off_ns, w.t_on_ns, a->t0, a->t1);
		a->seen = true;
		a->off_ns += o;
		if (w.voluntary)
			a->why_ns[tt_wait_reason(w.syscall)] += o;
	} else if (type == TT_REC_RUNQ) {
		struct tt_runq q;

		memcpy(&q, rec, sizeof(q));
		if (q.tid == a->tid)
			a->runnable_ns += overlap(q.t_runnable_ns, q.t_run_ns, a->t0, a->t1);
	}
	return 0;
}

/* The largest part of the triggering span on its own thread (the capture's report
 * follows the waits to their cause; this is what the exporter can count at once). */
static enum cap_state capture_state(const struct flight *f, const struct tt_span *s)
{
	struct state_acc a = { .tid = s->tid, .t0 = s->t_start_ns, .t1 = s->t_end_ns };
	uint64_t win = s->t_end_ns - s->t_start_ns, best, blocked, why = 0;
	enum cap_state st = ST_ONCPU;

	flight_store_each(f->store, TT_REC_SWITCH, a.t0, a.t1, state_add, &a);
	flight_store_each(f->store, TT_REC_RUNQ, a.t0, a.t1, state_add, &a);
	if (!a.seen || !win)
		return ST_UNKNOWN;
	blocked = a.off_ns > a.runnable_ns ? a.off_ns - a.runnable_ns : 0;
	best = win > a.off_ns ? win - a.off_ns : 0; /* on CPU */
	if (a.runnable_ns > best) {
		best = a.runnable_ns;
		st = ST_RUNNABLE;
	}
	for (int r = 1; r < TT_WAIT_NR; r++)
		why = a.why_ns[r] > a.why_ns[why] ? (uint64_t)r : why;
	if (blocked > best)
		st = (enum cap_state)(ST_LOCK + why);
	return st;
}

static uint64_t dir_bytes(const char *dir)
{
	static const char *const names[] = { "runq.bin", "switches.bin", "locks.bin", "spans.bin",
					     "span_contexts.bin", "occupancy.bin", "occupants.bin",
					     "tasks.bin",
					     "stacks.jsonl", "offcpu.folded", "meta.json",
					     "schema.json" };
	char path[PATH_MAX + 128];
	uint64_t n = 0;
	struct stat st;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (snprintf(path, sizeof(path), "%s/%s", dir, names[i]) >= (int)sizeof(path))
			continue;
		if (!stat(path, &st))
			n += (uint64_t)st.st_size;
	}
	return n;
}

#define ULL(x) ((unsigned long long)(x))

static void capture_json(const struct flight *f, const struct pending *p, char *buf, size_t len)
{
	const struct tt_span *s = &p->first;

	snprintf(buf, len,
		 "{\"seq\": %u, \"trigger\": \"%s\", \"threshold_ns\": %llu, \"live_spans\": %llu, "
		 "\"margin_ns\": %llu, \"t0_ns\": %llu, \"t1_ns\": %llu, \"spans_triggered\": %u, "
		 "\"worst_ns\": %llu, \"span\": {\"pid\": %u, \"tid\": %u, \"span_id\": %u, "
		 "\"t_start_ns\": %llu, \"t_end_ns\": %llu, \"latency_ns\": %llu}}",
		 f->seq, f->o.trig.text, ULL(p->threshold_ns), ULL(p->live_n), ULL(f->o.margin_ns),
		 ULL(p->t0), ULL(p->t1), p->nspans, ULL(p->worst_ns), s->pid, s->tid, s->span_id,
		 ULL(s->t_start_ns), ULL(s->t_end_ns), ULL(s->t_end_ns - s->t_start_ns));
}

static void index_line(struct flight *f, const struct pending *p, const char *rel,
		       uint64_t bytes, int err)
{
	char path[PATH_MAX + 32];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/captures.jsonl", f->out_dir);
	fp = fopen(path, "ae");
	if (!fp)
		return;
	fprintf(fp, "{\"dir\": \"%s\", \"t_start_ns\": %llu, \"latency_ns\": %llu, "
		"\"worst_ns\": %llu, \"threshold_ns\": %llu, \"spans\": %u, \"bytes\": %llu, "
		"\"error\": ", rel, ULL(p->first.t_start_ns),
		ULL(p->first.t_end_ns - p->first.t_start_ns), ULL(p->worst_ns), ULL(p->threshold_ns),
		p->nspans, ULL(bytes));
	if (err)
		json_write_string(fp, strerror(-err));
	else
		fputs("null", fp);
	fputs("}\n", fp);
	fclose(fp);
}

static int make_dirs(const char *out, const char *rel, char *dir, size_t len)
{
	snprintf(dir, len, "%s/captures", out);
	if (mkdir(dir, 0755) && errno != EEXIST)
		return -errno;
	snprintf(dir, len, "%s/%s", out, rel);
	return mkdir(dir, 0755) && errno != EEXIST ? -errno : 0;
}

/* Writing a capture takes CPU the traced program may need (symbolizing its
 * stacks, a few ms): the loader does it at nice CAPTURE_NICE, and returns to
 * its own after. Not SCHED_IDLE: beside two CPU hogs a SCHED_IDLE loader got
 * ~0.3% of a CPU, the captures waited for minutes and the ring buffers filled
 * meanwhile; at nice 10 it yields ~90% of a contended CPU and still finishes. */
#define CAPTURE_NICE 10
static void capture(struct flight *f, const struct pending *p, const struct flight_window *w);

static void capture_niced(struct flight *f, const struct pending *p,
			  const struct flight_window *w)
{
	pid_t tid = (pid_t)syscall(SYS_gettid);
	int old;

	errno = 0;
	old = getpriority(PRIO_PROCESS, (id_t)tid);
	bool lowered = !errno && old < CAPTURE_NICE &&
		       !setpriority(PRIO_PROCESS, (id_t)tid, CAPTURE_NICE);

	capture(f, p, w);
	if (lowered)
		setpriority(PRIO_PROCESS, (id_t)tid, old);
}

static void capture(struct flight *f, const struct pending *p, const struct flight_window *w)
{
	char rel[32], dir[PATH_MAX + 64], json[1024];
	struct tt_capture cap = { .dir = dir, .t0_ns = w->r0, .t1_ns = w->r1, .store = f->store,
				  .json = json };
	uint64_t bytes;
	int err;

	f->seq++;
	snprintf(rel, sizeof(rel), "captures/%04u", f->seq);
	capture_json(f, p, json, sizeof(json));
	err = make_dirs(f->out_dir, rel, dir, sizeof(dir));
	err = err ?: schema_write_dir(dir);
	err = err ?: flight_window_write(f->store, w, f->types_seen, dir, cap.records);
	err = err ?: f->write(f->arg, &cap);
	bytes = dir_bytes(dir);
	f->disk_bytes += bytes;
	index_line(f, p, rel, bytes, err);
	if (err) {
		f->failed++;
		fprintf(stderr, "tailtrace: flight recorder: capture %s failed: %s (counted; the "
			"recorder goes on)\n", rel, strerror(-err));
		return;
	}
	f->captures++;
	snprintf(f->last_dir, sizeof(f->last_dir), "%s", rel);
	f->last_latency_ns = p->worst_ns;
	f->by_state[capture_state(f, &p->first)]++;
	{
		unsigned b = hist_bucket(p->worst_ns);
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts); /* an exemplar's timestamp is wall time */
		snprintf(f->exemplar[b].dir, sizeof(f->exemplar[b].dir), "%s", rel);
		f->exemplar[b].value_ns = p->worst_ns;
		f->exemplar[b].wall_s = ts.tv_sec + ts.tv_nsec / 1e9;
	}
	fprintf(stderr, "tailtrace: flight recorder: %s: a span of %.3f ms (%s: > %.3f ms)%s, "
		"%llu switch and %llu run-queue records, %.1f MB\n", rel, p->worst_ns / 1e6,
		f->o.trig.text, p->threshold_ns / 1e6, p->nspans > 1 ? " and others coalesced" : "",
		ULL(cap.records[TT_REC_SWITCH]), ULL(cap.records[TT_REC_RUNQ]), bytes / 1048576.0);
}

/* Write the first capture in the queue, once the records of its spans have
 * arrived: a span that overlaps its window and ended less than FLIGHT_ARRIVE_NS
 * ago puts it off until they have (up to FLIGHT_WIDEN_MAX_NS past the window).
 * At the end of a run (final) the rings are drained: nothing waits. */
static void capture_head(struct flight *f, uint64_t now_ns, bool final)
{
	struct pending p = f->q[0];
	uint64_t arrived = final || now_ns < FLIGHT_ARRIVE_NS ? now_ns : now_ns - FLIGHT_ARRIVE_NS;
	uint64_t latest = p.t1 + FLIGHT_WIDEN_MAX_NS;
	struct flight_window w;

	flight_window_plan(f->store, p.t0, p.t1, arrived, &w);
	if (!final && w.span_end > w.r1 && w.r1 < latest) {
		f->q[0].due = (w.span_end < latest ? w.span_end : latest) + FLIGHT_ARRIVE_NS;
		return;
	}
	memmove(f->q, f->q + 1, (size_t)(f->nq - 1) * sizeof(f->q[0]));
	f->nq--;
	capture_niced(f, &p, &w);
}

/* Without --flight-mb, the cap is twice what SECONDS of the highest record
 * rate seen (read every second) take: at least AUTO_MIN_BYTES, at most the
 * ceiling (--flight-mb's default, or half the memory available). It only
 * grows, so a burst beyond twice the busiest second goes early, counted. */
#define AUTO_MIN_BYTES (64ull << 20)
static void auto_size(struct flight *f, uint64_t now_ns)
{
	struct flight_store_stats ss;
	double rate;
	uint64_t cap;

	if (!f->o.auto_size || now_ns < f->size_at_ns + 1000000000ull)
		return;
	flight_store_stats(f->store, &ss);
	if (f->size_at_ns) {
		rate = (ss.added_bytes - f->size_added) * 1e9 / (double)(now_ns - f->size_at_ns);
		if (rate > f->peak_rate)
			f->peak_rate = rate;
		cap = (uint64_t)(2 * f->peak_rate * f->o.seconds) + FLIGHT_CHUNK_BYTES;
		cap = cap < AUTO_MIN_BYTES ? AUTO_MIN_BYTES : cap;
		flight_store_set_max(f->store, cap < f->o.max_bytes ? cap : f->o.max_bytes);
	}
	f->size_at_ns = now_ns;
	f->size_added = ss.added_bytes;
}

int flight_tick(struct flight *f, uint64_t now_ns)
{
	uint64_t next;

	f->tick_ns = now_ns;
	if (now_ns >= f->next_refresh) {
		refresh(f, now_ns);
		auto_size(f, now_ns);
		flight_store_expire(f->store, now_ns);
		f->next_refresh = now_ns + REFRESH_NS;
	}
	slot_close(f, now_ns);
	while (f->nq && now_ns >= f->q[0].due)
		capture_head(f, now_ns, false);
	next = f->next_refresh;
	if (f->have_cand && f->slot_end < next)
		next = f->slot_end;
	if (f->nq && f->q[0].due < next)
		next = f->q[0].due;
	return next > now_ns ? (int)((next - now_ns + 999999) / 1000000) : 0;
}

void flight_finish(struct flight *f)
{
	f->slot_end = 0;
	slot_close(f, tt_now_ns());
	while (f->nq)
		capture_head(f, tt_now_ns(), true);
	tee_close(f);
}

void flight_counts(const struct flight *f, struct flight_counts *out)
{
	struct flight_store_stats ss;

	flight_store_stats(f->store, &ss);
	*out = (struct flight_counts){
		.spans = f->spans, .triggers = f->triggers, .captures = f->captures,
		.coalesced = f->coalesced, .skipped_rate = f->skipped_rate,
		.skipped_disk = f->skipped_disk, .failed = f->failed,
		.threshold_ns = f->threshold_ns, .store_bytes = ss.bytes,
		.last_capture = f->last_dir[0] ? f->last_dir : NULL,
		.last_latency_ns = f->last_latency_ns,
	};
}

void flight_meta(const struct flight *f, FILE *out)
{
	struct flight_store_stats ss;

	flight_store_stats(f->store, &ss);
	fprintf(out, "  \"flight\": {\"seconds\": %g, \"max_mb\": %llu, \"auto_size\": %s, "
		"\"peak_rate_mb_s\": %.3f, \"trigger\": ", f->o.seconds, ULL(ss.max_bytes >> 20),
		f->o.auto_size ? "true" : "false", f->peak_rate / (1 << 20));
	json_write_string(out, f->o.trig.text);
	fprintf(out, ", \"warmup\": %llu, \"margin_ns\": %llu, \"max_captures_per_min\": %u, "
		"\"max_disk_mb\": %llu, \"threshold_ns\": %llu, \"live_spans\": %llu, \"spans\": %llu, "
		"\"triggers\": %llu, \"captures\": %llu, \"coalesced\": %llu, \"skipped_rate\": %llu, "
		"\"skipped_disk\": %llu, \"failed\": %llu, \"disk_bytes\": %llu, "
		"\"memory_bytes\": %llu, \"memory_peak_bytes\": %llu, \"evicted_early\": %llu, "
		"\"refused\": %llu, \"held_s\": %.3f},\n",
		ULL(f->o.trig.warmup), ULL(f->o.margin_ns), f->o.max_per_min,
		ULL(f->o.max_disk_bytes >> 20), ULL(f->threshold_ns), ULL(f->live_n), ULL(f->spans),
		ULL(f->triggers), ULL(f->captures), ULL(f->coalesced), ULL(f->skipped_rate),
		ULL(f->skipped_disk), ULL(f->failed), ULL(f->disk_bytes), ULL(ss.bytes),
		ULL(ss.peak_bytes), ULL(ss.evicted_early), ULL(ss.refused),
		ss.oldest_ns ? (tt_now_ns() - ss.oldest_ns) / 1e9 : 0.0);
}

void flight_print(const struct flight *f, FILE *out)
{
	struct flight_store_stats ss;

	flight_store_stats(f->store, &ss);
	fprintf(out, "tailtrace: flight recorder: %llu spans, %llu above the trigger (%s), %llu "
		"captures (%llu coalesced, %llu skipped by --max-captures-per-min, %llu by "
		"--max-disk-mb, %llu failed), %.1f MB on disk; memory peak %.0f MB%s\n",
		ULL(f->spans), ULL(f->triggers), f->o.trig.text, ULL(f->captures), ULL(f->coalesced),
		ULL(f->skipped_rate), ULL(f->skipped_disk), ULL(f->failed),
		f->disk_bytes / 1048576.0, ss.peak_bytes / 1048576.0,
		ss.evicted_early ? " (full: records left before --flight-recorder SECONDS; raise "
				   "--flight-mb)" : "");
}

/* ---- --listen ------------------------------------------------------------------ */

void flight_render(void *arg, FILE *out, int fmt)
{
	const struct flight *f = arg;
	bool om = fmt == EXPO_OPENMETRICS;
	struct flight_store_stats ss;
	uint64_t cum = 0;

	expo_family(out, fmt, "tailtrace_span_latency_seconds", "histogram",
		    "Latency of the spans (requests) the flight recorder saw; with OpenMetrics, "
		    "each bucket's exemplar names the last capture of a request in it.");
	for (unsigned k = 0; k <= HIST_N; k++) {
		cum += f->hist[k];
		if (k < HIST_N)
			fprintf(out, "tailtrace_span_latency_seconds_bucket{le=\"%g\"} %llu",
				(double)(1ull << k) / 1e6, ULL(cum));
		else
			fprintf(out, "tailtrace_span_latency_seconds_bucket{le=\"+Inf\"} %llu",
				ULL(cum));
		if (om && f->exemplar[k].dir[0])
			fprintf(out, " # {capture=\"%s\"} %.9f %.3f", f->exemplar[k].dir,
				f->exemplar[k].value_ns / 1e9, f->exemplar[k].wall_s);
		fputc('\n', out);
	}
	fprintf(out, "tailtrace_span_latency_seconds_sum %.9f\n", f->hist_sum_ns / 1e9);
	fprintf(out, "tailtrace_span_latency_seconds_count %llu\n", ULL(cum));
	expo_family(out, fmt, "tailtrace_flight_triggers_total", "counter",
		    "Spans that ended above the trigger.");
	fprintf(out, "tailtrace_flight_triggers_total{trigger=\"%s\"} %llu\n", f->o.trig.text,
		ULL(f->triggers));
	expo_family(out, fmt, "tailtrace_flight_captures_total", "counter",
		    "Captures written, by what the triggering request's own thread did most "
		    "(on_cpu, runnable, blocked_lock/io/sleep/other; the capture's report "
		    "follows the waits to their cause).");
	for (int k = 0; k < ST_NR; k++)
		fprintf(out, "tailtrace_flight_captures_total{trigger=\"%s\",state=\"%s\"} %llu\n",
			f->o.trig.text, state_name[k], ULL(f->by_state[k]));
	expo_family(out, fmt, "tailtrace_flight_not_captured_total", "counter",
		    "Triggers without a capture of their own: coalesced into an overlapping one, "
		    "skipped by --max-captures-per-min or --max-disk-mb, or failed to write.");
	fprintf(out, "tailtrace_flight_not_captured_total{reason=\"coalesced\"} %llu\n"
		"tailtrace_flight_not_captured_total{reason=\"budget\"} %llu\n"
		"tailtrace_flight_not_captured_total{reason=\"disk\"} %llu\n"
		"tailtrace_flight_not_captured_total{reason=\"failed\"} %llu\n",
		ULL(f->coalesced), ULL(f->skipped_rate), ULL(f->skipped_disk), ULL(f->failed));
	expo_family(out, fmt, "tailtrace_flight_threshold_seconds", "gauge",
		    "The trigger's threshold now (0 while a percentile warms up).");
	fprintf(out, "tailtrace_flight_threshold_seconds %.9f\n", f->threshold_ns / 1e9);
	flight_store_stats(f->store, &ss);
	expo_family(out, fmt, "tailtrace_flight_memory_bytes", "gauge",
		    "Memory holding the recent records.");
	fprintf(out, "tailtrace_flight_memory_bytes %llu\n", ULL(ss.bytes));
}
