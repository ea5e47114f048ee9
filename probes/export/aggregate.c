// SPDX-License-Identifier: MIT
/*
 * --aggregate output: per-thread log2 histograms collected from the BPF maps
 * at the end, printed like runqlat (total per metric; per thread with -v) and
 * written to aggregate.json:
 *   {"metrics": {"runq": {"unit": "usecs", "total": H, "threads": [
 *        {"tid": T, "pid": P, "comm": C, ...H}]}, ...}}
 *   H = {"count": N, "sum_ns": S, "max_ns": M,
 *        "buckets": [{"lo": 0, "hi": 1, "count": n}, ...]}   (non-empty slots)
 */
#include "export/aggregate.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <grow.h>

#define MAX_METRICS 8

struct thread_hist {
	uint32_t tid;
	struct tt_hist h;
};

struct metric {
	char name[32];
	char unit[16];
	struct tt_hist total;
	struct thread_hist *threads;
	size_t n, cap;
};

struct task_name {
	uint32_t tid, pid;
	char comm[16];
};

static struct metric metrics[MAX_METRICS];
static int nmetrics;
static struct task_name *names;
static size_t nnames, capnames;

void aggregate_reset(void)
{
	for (int i = 0; i < nmetrics; i++)
		free(metrics[i].threads);
	memset(metrics, 0, sizeof(metrics));
	nmetrics = 0;
	free(names);
	names = NULL;
	nnames = capnames = 0;
}

static struct metric *metric_get(const char *name, const char *unit)
{
	for (int i = 0; i < nmetrics; i++)
		if (!strcmp(metrics[i].name, name))
			return &metrics[i];
	if (nmetrics == MAX_METRICS)
		return NULL;
	snprintf(metrics[nmetrics].name, sizeof(metrics[0].name), "%s", name);
	snprintf(metrics[nmetrics].unit, sizeof(metrics[0].unit), "%s", unit);
	return &metrics[nmetrics++];
}

void aggregate_hist_merge(struct tt_hist *dst, const struct tt_hist *src)
{
	for (int i = 0; i < TT_HIST_SLOTS; i++)
		dst->slots[i] += src->slots[i];
	dst->count += src->count;
	dst->sum_ns += src->sum_ns;
	if (src->max_ns > dst->max_ns)
		dst->max_ns = src->max_ns;
}

int aggregate_add(const char *metric, const char *unit, uint32_t tid, const struct tt_hist *h)
{
	struct metric *m = metric_get(metric, unit);

	if (!m)
		return -ENOSPC;
	if (TT_GROW(m->threads, m->n, m->cap, 64))
		return -ENOMEM;
	m->threads[m->n++] = (struct thread_hist){ tid, *h };
	aggregate_hist_merge(&m->total, h);
	return 0;
}

static int by_tid(const void *a, const void *b)
{
	uint32_t x = ((const struct thread_hist *)a)->tid, y = ((const struct thread_hist *)b)->tid;

	return (x > y) - (x < y);
}

void aggregate_drain_configure(struct bpf_object *obj, bool aggregate)
{
	struct bpf_program *p;

	bpf_object__for_each_program(p, obj)
		if (bpf_program__expected_attach_type(p) == BPF_TRACE_ITER) {
			bpf_program__set_autoattach(p, false); /* a link per drain */
			if (!aggregate)
				bpf_program__set_autoload(p, false);
		}
}

/* One pass of an iterator program: the work is in the program; it writes
 * nothing, so the first read ends it. */
static int drain_run(struct bpf_program *p)
{
	struct bpf_link *link = bpf_program__attach_iter(p, NULL);
	char buf[64];
	int fd, err = 0;
	ssize_t n;

	if (!link)
		return -errno;
	fd = bpf_iter_create(bpf_link__fd(link));
	if (fd < 0) {
		err = -errno;
	} else {
		while ((n = read(fd, buf, sizeof(buf))) > 0)
			;
		err = n < 0 ? -errno : 0;
		close(fd);
	}
	bpf_link__destroy(link);
	return err;
}

int aggregate_drain(struct bpf_object *obj)
{
	struct bpf_program *p;
	int err = 0, e;

	bpf_object__for_each_program(p, obj)
		if (bpf_program__expected_attach_type(p) == BPF_TRACE_ITER &&
		    bpf_program__fd(p) >= 0 && (e = drain_run(p)))
			err = err ?: e;
	return err;
}

int aggregate_map_each(struct bpf_map *map,
		       int (*fn)(void *arg, const struct tt_hist_key *key, const struct tt_hist *h),
		       void *arg)
{
	struct tt_hist_key key, next, *prev = NULL;
	struct tt_hist h;
	int err = 0;

	while (!err && !bpf_map__get_next_key(map, prev, &next, sizeof(next))) {
		key = next;
		prev = &key;
		if (!bpf_map__lookup_elem(map, &key, sizeof(key), &h, sizeof(h), 0))
			err = fn(arg, &key, &h);
	}
	return err;
}

struct thread_list {
	struct thread_hist *v;
	size_t n, cap;
};

static int thread_list_push(void *arg, const struct tt_hist_key *key, const struct tt_hist *h)
{
	struct thread_list *l = arg;

	if (TT_GROW(l->v, l->n, l->cap, 256))
		return -ENOMEM;
	l->v[l->n++] = (struct thread_hist){ key->id, *h };
	return 0;
}

/* Every entry of the map, sorted by thread. */
static int map_read_all(struct bpf_map *map, struct thread_hist **out, size_t *n)
{
	struct thread_list l = { 0 };
	int err = aggregate_map_each(map, thread_list_push, &l);

	if (!err && l.n)
		qsort(l.v, l.n, sizeof(*l.v), by_tid);
	*out = l.v;
	*n = l.n;
	return err;
}

int aggregate_add_map(struct bpf_map *map, const char *metric, const char *unit,
		      uint64_t *events)
{
	struct thread_hist *v = NULL;
	size_t n, i = 0;
	int err = map_read_all(map, &v, &n);

	while (!err && i < n) {
		struct thread_hist t = v[i++];

		for (; i < n && v[i].tid == t.tid; i++) /* the thread's other sub-kinds */
			aggregate_hist_merge(&t.h, &v[i].h);
		err = aggregate_add(metric, unit, t.tid, &t.h);
		if (events)
			*events += t.h.count;
	}
	free(v);
	return err;
}

void aggregate_note_task(uint32_t tid, uint32_t pid, const char *comm)
{
	if (TT_GROW(names, nnames, capnames, 256))
		return;
	names[nnames] = (struct task_name){ .tid = tid, .pid = pid };
	snprintf(names[nnames++].comm, sizeof(names[0].comm), "%s", comm);
}

static const struct task_name *name_of(uint32_t tid)
{
	for (size_t i = 0; i < nnames; i++)
		if (names[i].tid == tid)
			return &names[i];
	return NULL;
}

static void slot_range(int i, unsigned long long *lo, unsigned long long *hi)
{
	*lo = i ? 1ull << i : 0;
	*hi = (1ull << (i + 1)) - 1;
}

void aggregate_print_hist(FILE *out, const char *unit, const __u64 *slots, int n)
{
	int last = -1, width = 40;
	__u64 max = 0;

	for (int i = 0; i < n; i++)
		if (slots[i]) {
			last = i;
			max = slots[i] > max ? slots[i] : max;
		}
	if (last < 0) {
		fprintf(out, "     (no events)\n");
		return;
	}
	fprintf(out, "%*s%-*s : count    distribution\n", 10, "", 14, unit);
	for (int i = 0; i <= last; i++) {
		unsigned long long lo, hi;
		int stars = (int)(slots[i] * width / max);

		slot_range(i, &lo, &hi);
		fprintf(out, "%10llu -> %-10llu : %-8llu |", lo, hi, (unsigned long long)slots[i]);
		for (int s = 0; s < width; s++)
			fputc(s < stars ? '*' : ' ', out);
		fprintf(out, "|\n");
	}
}

static void json_hist(FILE *f, const struct tt_hist *h)
{
	const char *sep = "";

	fprintf(f, "\"count\": %llu, \"sum_ns\": %llu, \"max_ns\": %llu, \"buckets\": [",
		(unsigned long long)h->count, (unsigned long long)h->sum_ns,
		(unsigned long long)h->max_ns);
	for (int i = 0; i < TT_HIST_SLOTS; i++) {
		unsigned long long lo, hi;

		if (!h->slots[i])
			continue;
		slot_range(i, &lo, &hi);
		fprintf(f, "%s{\"lo\": %llu, \"hi\": %llu, \"count\": %llu}", sep, lo, hi,
			(unsigned long long)h->slots[i]);
		sep = ", ";
	}
	fprintf(f, "]");
}

static void json_comm(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++)
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	fputc('"', f);
}

static void json_metric(FILE *f, const struct metric *m)
{
	fprintf(f, "    \"%s\": {\"unit\": \"%s\", \"total\": {", m->name, m->unit);
	json_hist(f, &m->total);
	fprintf(f, "}, \"threads\": [");
	for (size_t i = 0; i < m->n; i++) {
		const struct task_name *t = name_of(m->threads[i].tid);

		fprintf(f, "%s\n      {\"tid\": %u, \"pid\": %u, \"comm\": ", i ? "," : "",
			m->threads[i].tid, m->threads[i].h.pid);
		json_comm(f, t ? t->comm : "");
		fprintf(f, ", ");
		json_hist(f, &m->threads[i].h);
		fprintf(f, "}");
	}
	fprintf(f, "]}");
}

static int write_json(const char *dir)
{
	char path[PATH_MAX];
	FILE *f;
	int err = 0;

	snprintf(path, sizeof(path), "%s/aggregate.json", dir);
	f = fopen(path, "w");
	if (!f)
		return -errno;
	fprintf(f, "{\"metrics\": {\n");
	for (int i = 0; i < nmetrics; i++) {
		json_metric(f, &metrics[i]);
		fprintf(f, "%s\n", i + 1 < nmetrics ? "," : "");
	}
	fprintf(f, "}}\n");
	if (ferror(f))
		err = -EIO;
	if (fclose(f) && !err)
		err = -errno;
	return err;
}

static const char *title(const char *metric)
{
	if (!strcmp(metric, "runq"))
		return "run-queue latency (runnable -> running)";
	if (!strcmp(metric, "offcpu"))
		return "off-CPU time, blocked (switch-out -> switch-in)";
	return metric;
}

int aggregate_write(const char *dir, FILE *out, int verbose)
{
	for (int i = 0; i < nmetrics; i++) {
		const struct metric *m = &metrics[i];

		fprintf(out, "\n%s, all %zu threads: %llu events, avg %.1f us\n", title(m->name), m->n,
			(unsigned long long)m->total.count,
			m->total.count ? m->total.sum_ns / 1e3 / m->total.count : 0.0);
		aggregate_print_hist(out, m->unit, m->total.slots, TT_HIST_SLOTS);
		for (size_t t = 0; verbose && t < m->n; t++) {
			const struct task_name *tn = name_of(m->threads[t].tid);

			fprintf(out, "\n%s, tid %u (%s): %llu events\n", m->name, m->threads[t].tid,
				tn ? tn->comm : "?", (unsigned long long)m->threads[t].h.count);
			aggregate_print_hist(out, m->unit, m->threads[t].h.slots, TT_HIST_SLOTS);
		}
	}
	return write_json(dir);
}
