// SPDX-License-Identifier: MIT
/* exporter_antagonists: occ_blame -> run-queue wait by antagonist (exporter_antagonists.h). */
#include "export/exporter_antagonists.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/libbpf.h>

#include <tailtrace/records.h>
#include "export/exposition.h"
#include "sched/occupancy.h"
#include "core/target.h"

#define FOLDED UINT32_MAX /* occ of a class's "other" row */

static const char *const class_name[OCC_CLS_NR] = {
	"sibling", "peer", "other", "kernel", "irq", "idle", "unknown",
};
static const char *const softirq_name[] = { "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK",
					    "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU" };

struct ant {
	uint32_t cls, occ;
	char name[32];
	uint64_t ns;
};

struct ant_series {
	struct ant *rows; /* top_n named, then one folded row per class at most */
	int n, named;
};

struct seen { /* an entry's value at the last read */
	struct occ_blame_key k;
	uint64_t ns;
};

struct ants {
	int nseries, top_n;
	struct ant_series *series;
	struct seen *last;
	size_t nlast;
};

struct ants *ants_new(int nseries, int top_n)
{
	struct ants *a = calloc(1, sizeof(*a));

	if (!a || !(a->series = calloc((size_t)nseries, sizeof(*a->series)))) {
		free(a);
		return NULL;
	}
	a->nseries = nseries;
	a->top_n = top_n;
	for (int i = 0; i < nseries; i++)
		if (!(a->series[i].rows = calloc((size_t)top_n + OCC_CLS_NR, sizeof(struct ant)))) {
			ants_free(a);
			return NULL;
		}
	return a;
}

void ants_free(struct ants *a)
{
	if (!a)
		return;
	for (int i = 0; i < a->nseries; i++)
		free(a->series[i].rows);
	free(a->series);
	free(a->last);
	free(a);
}

void ants_reset(struct ants *a, int series)
{
	if (a && series >= 0 && series < a->nseries)
		a->series[series].n = a->series[series].named = 0;
}

static int key_cmp(const void *x, const void *y)
{
	const struct occ_blame_key *p = x, *q = y;

	if (p->pid != q->pid)
		return p->pid < q->pid ? -1 : 1;
	if (p->cls != q->cls)
		return p->cls < q->cls ? -1 : 1;
	return p->occ < q->occ ? -1 : p->occ > q->occ;
}

/* What the antagonist is called: its process's comm, an interrupt's kind. */
static void ant_name(uint32_t cls, uint32_t occ, char *buf, size_t len)
{
	uint32_t num = occ >> TT_OCC_IRQ_SHIFT;

	if (cls == OCC_CLS_IDLE || cls == OCC_CLS_UNKNOWN) {
		snprintf(buf, len, "%s", class_name[cls]);
	} else if (cls == OCC_CLS_IRQ && (occ & TT_OCC_SOFTIRQ)) {
		if (num < sizeof(softirq_name) / sizeof(softirq_name[0]))
			snprintf(buf, len, "softirq %s", softirq_name[num]);
		else
			snprintf(buf, len, "softirq %u", num);
	} else if (cls == OCC_CLS_IRQ) {
		if (num == TT_OCC_IRQ_TIMER)
			snprintf(buf, len, "timer interrupt");
		else
			snprintf(buf, len, "irq %u", num);
	} else {
		buf[0] = '\0';
		target_proc_line((int)occ, "comm", "", buf, len);
		if (!buf[0])
			snprintf(buf, len, "pid %u", occ);
	}
}

/* ns more for (cls, occ) in series si: its own row while fewer than top_n are
 * named, else its class's folded row (one per class: the rows always fit). */
static void series_add(struct ants *a, int si, uint32_t cls, uint32_t occ, uint64_t ns)
{
	struct ant_series *s = &a->series[si];
	bool named = false;

	for (int i = 0; i < s->n; i++)
		if (s->rows[i].cls == cls && s->rows[i].occ == occ) {
			s->rows[i].ns += ns;
			return;
		}
	if (s->named < a->top_n)
		named = true;
	else
		for (int i = 0; i < s->n; i++)
			if (s->rows[i].cls == cls && s->rows[i].occ == FOLDED) {
				s->rows[i].ns += ns;
				return;
			}
	if (s->n >= a->top_n + OCC_CLS_NR)
		return;
	s->rows[s->n] = (struct ant){ .cls = cls, .occ = named ? occ : FOLDED, .ns = ns };
	if (named)
		ant_name(cls, occ, s->rows[s->n].name, sizeof(s->rows[s->n].name));
	else
		snprintf(s->rows[s->n].name, sizeof(s->rows[s->n].name), "other");
	s->named += named;
	s->n++;
}

void ants_collect(struct ants *a, struct bpf_map *map, int (*series_of)(void *arg, uint32_t pid),
		  void *arg)
{
	size_t cap = 256, n = 0;
	struct seen *cur = malloc(cap * sizeof(*cur));
	struct occ_blame_key k, next, *prev = NULL;

	if (!a || !map || !cur) {
		free(cur);
		return;
	}
	while (!bpf_map__get_next_key(map, prev, &next, sizeof(next))) {
		k = next;
		prev = &k;
		if (n == cap) {
			struct seen *m = realloc(cur, 2 * cap * sizeof(*cur));

			if (!m)
				break;
			cur = m;
			cap *= 2;
		}
		cur[n].k = k;
		if (!bpf_map__lookup_elem(map, &k, sizeof(k), &cur[n].ns, sizeof(cur[n].ns), 0))
			n++;
	}
	qsort(cur, n, sizeof(*cur), key_cmp);
	for (size_t i = 0; i < n; i++) {
		struct seen *was = a->last ? bsearch(&cur[i].k, a->last, a->nlast, sizeof(*a->last),
						      key_cmp) : NULL;
		uint64_t d = was && was->ns <= cur[i].ns ? cur[i].ns - was->ns : cur[i].ns;
		int si = series_of(arg, cur[i].k.pid);

		if (d && cur[i].k.cls < OCC_CLS_NR)
			series_add(a, si >= 0 && si < a->nseries ? si : a->nseries - 1, cur[i].k.cls,
				   cur[i].k.occ, d);
	}
	free(a->last);
	a->last = cur;
	a->nlast = n;
}

void ants_forget(struct ants *a, struct bpf_map *map, uint32_t pid)
{
	size_t out = 0;

	if (!a || !map)
		return;
	for (size_t i = 0; i < a->nlast; i++) {
		if (a->last[i].k.pid == pid) {
			bpf_map__delete_elem(map, &a->last[i].k, sizeof(a->last[i].k), 0);
			continue;
		}
		a->last[out++] = a->last[i];
	}
	a->nlast = out;
}

void ants_render(const struct ants *a, FILE *f, int (*used)(void *arg, int series),
		 void (*labels)(void *arg, FILE *f, int series), void *arg)
{
	for (int si = 0; a && si < a->nseries; si++) {
		const struct ant_series *s = &a->series[si];

		for (int i = 0; used(arg, si) && i < s->n; i++) {
			const struct ant *r = &s->rows[i];
			bool process = r->occ != FOLDED && r->cls != OCC_CLS_IRQ &&
				       r->cls != OCC_CLS_IDLE && r->cls != OCC_CLS_UNKNOWN;

			fputs("tailtrace_runqueue_wait_by_antagonist_seconds_total", f);
			labels(arg, f, si);
			fprintf(f, ",class=\"%s\",antagonist=\"", class_name[r->cls]);
			expo_label_value(f, r->name);
			if (process)
				fprintf(f, "\",antagonist_pid=\"%u\"} %.9f\n", r->occ, r->ns / 1e9);
			else
				fprintf(f, "\",antagonist_pid=\"\"} %.9f\n", r->ns / 1e9);
		}
	}
}
