/* SPDX-License-Identifier: MIT */
/* Exact percentiles over request records. */
#include "stats.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

uint64_t stats_percentile(const uint64_t *v, size_t n, unsigned p_tenths)
{
	size_t rank;

	if (n == 0)
		return 0;
	rank = ((size_t)p_tenths * n + 999) / 1000; /* ceil(p * n) */
	return v[rank ? rank - 1 : 0];
}

static void dist_of(uint64_t *v, size_t n, struct hl_dist *d)
{
	long double sum = 0;

	memset(d, 0, sizeof(*d));
	if (n == 0)
		return;
	qsort(v, n, sizeof(*v), cmp_u64);
	for (size_t i = 0; i < n; i++)
		sum += v[i];
	d->avg = (double)(sum / n) / 1e6;
	d->p50 = (double)stats_percentile(v, n, 500) / 1e6;
	d->p90 = (double)stats_percentile(v, n, 900) / 1e6;
	d->p99 = (double)stats_percentile(v, n, 990) / 1e6;
	d->p999 = (double)stats_percentile(v, n, 999) / 1e6;
	d->max = (double)v[n - 1] / 1e6;
}

static uint64_t diff(uint64_t later, uint64_t earlier)
{
	return later > earlier ? later - earlier : 0;
}

static void count_error(struct hl_stats *s, int32_t status)
{
	unsigned i;

	s->errors++;
	for (i = 0; i < s->n_error_kinds; i++)
		if (s->error_kinds[i].status == status)
			break;
	if (i == s->n_error_kinds) {
		if (i == HL_MAX_ERROR_KINDS)
			return;
		s->error_kinds[s->n_error_kinds++] = (struct hl_error_kind){ status, 0 };
	}
	s->error_kinds[i].count++;
	for (; i > 0 && s->error_kinds[i].count > s->error_kinds[i - 1].count; i--) {
		struct hl_error_kind t = s->error_kinds[i];

		s->error_kinds[i] = s->error_kinds[i - 1];
		s->error_kinds[i - 1] = t;
	}
}

int stats_compute(const struct tt_request *recs, size_t n, uint64_t t_start_ns,
		  uint64_t t_end_ns, struct hl_stats *s)
{
	uint64_t *v = malloc((n ? n : 1) * sizeof(*v));

	memset(s, 0, sizeof(*s));
	if (!v)
		return -ENOMEM;
	s->requests = n;
	s->elapsed_s = (double)diff(t_end_ns, t_start_ns) / 1e9;
	s->throughput_rps = s->elapsed_s > 0 ? (double)n / s->elapsed_s : 0;
	for (size_t i = 0; i < n; i++)
		if (http_failed(recs[i].status))
			count_error(s, recs[i].status);
	for (size_t i = 0; i < n; i++)
		v[i] = diff(recs[i].t_end_ns, recs[i].t_start_ns);
	dist_of(v, n, &s->latency);
	for (size_t i = 0; i < n; i++)
		v[i] = diff(recs[i].t_end_ns, recs[i].t_enqueue_ns);
	dist_of(v, n, &s->e2e);
	for (size_t i = 0; i < n; i++)
		v[i] = diff(recs[i].t_start_ns, recs[i].t_enqueue_ns);
	dist_of(v, n, &s->queue_wait);
	s->schedule_lag_ms = s->queue_wait.max;
	free(v);
	return 0;
}
