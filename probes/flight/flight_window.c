// SPDX-License-Identifier: MIT
/*
 * flight_window: the records a capture holds (flight_window.h).
 */
#include "flight/flight_window.h"

#include <errno.h>
#include <string.h>
#include <recfile.h>

struct extent {
	uint64_t t0, t1;         /* the trigger window */
	uint64_t lo, hi;         /* its spans' earliest start and latest end */
};

static int extent_add(void *arg, uint32_t type, const void *rec)
{
	struct extent *e = arg;
	struct tt_span sp;

	(void)type;
	memcpy(&sp, rec, sizeof(sp));
	if (sp.t_start_ns < e->lo)
		e->lo = sp.t_start_ns;
	if (sp.t_end_ns > e->hi)
		e->hi = sp.t_end_ns;
	return 0;
}

void flight_window_plan(const struct flight_store *s, uint64_t t0, uint64_t t1,
			uint64_t arrived_ns, struct flight_window *w)
{
	struct extent e = { .t0 = t0, .t1 = t1, .lo = t0, .hi = t1 };
	struct flight_store_stats ss;
	uint64_t floor, ceil;

	flight_store_each(s, TT_REC_SPAN, t0, t1, extent_add, &e);
	flight_store_stats(s, &ss);
	/* a record that ended after the oldest arrival held is still held */
	floor = ss.oldest_ns ? ss.oldest_ns + 1 : t0;
	if (t0 > FLIGHT_WIDEN_MAX_NS && floor < t0 - FLIGHT_WIDEN_MAX_NS)
		floor = t0 - FLIGHT_WIDEN_MAX_NS;
	ceil = arrived_ns;
	if (ceil > t1 + FLIGHT_WIDEN_MAX_NS)
		ceil = t1 + FLIGHT_WIDEN_MAX_NS;
	*w = (struct flight_window){ .t0 = t0, .t1 = t1, .span_end = e.hi };
	w->r0 = e.lo > floor ? e.lo : floor;   /* e.lo <= t0 */
	w->r1 = e.hi < ceil ? e.hi : ceil;
	if (w->r1 < t1)
		w->r1 = t1;   /* at the end the rings are drained: t1 has arrived */
	if (w->r0 > w->r1)
		w->r0 = w->r1; /* the store no longer holds the window: nothing */
}

struct dump {
	struct recfile *out;
	const struct flight_window *w;
	uint64_t n;
	int err;
};

static int dump_one(void *arg, uint32_t type, const void *rec)
{
	struct dump *d = arg;
	int err;

	if (type == TT_REC_SPAN || type == TT_REC_SPAN_CONTEXT) {
		uint64_t t0 = 0, t1 = 0;

		flight_rec_range(type, rec, &t0, &t1);
		/* the spans of the trigger window, and those the records cover whole;
		 * the trace contexts of the same spans */
		if ((t1 < d->w->t0 || t0 > d->w->t1) && (t0 < d->w->r0 || t1 > d->w->r1))
			return 0;
	}
	err = recfile_write(d->out, rec, 1);
	d->n += !err;
	d->err = d->err ?: err;
	return 0;
}

int flight_window_write(const struct flight_store *s, const struct flight_window *w,
			uint32_t types, const char *dir, uint64_t records[TT_REC_TYPES])
{
	int err = 0;

	for (uint32_t t = 1; t < TT_REC_TYPES && !err; t++) {
		struct dump d = { .w = w };
		uint64_t r0 = w->r0;

		if (!(types & (1u << t)))
			continue;
		if (t == TT_REC_OCC)
			r0 = r0 > FLIGHT_OCC_BEFORE_NS ? r0 - FLIGHT_OCC_BEFORE_NS : 0;
		d.out = recfile_open_kind(dir, t);
		if (!d.out)
			return -errno;
		flight_store_each(s, t, r0, w->r1, dump_one, &d);
		err = recfile_close(d.out) ?: d.err;
		records[t] = d.n;
	}
	return err;
}
