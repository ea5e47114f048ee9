/* SPDX-License-Identifier: MIT */
/* Human summary, --json object and workload.json. */
#include "summary.h"

#include <curl/curl.h>
#include <string.h>
#include <time.h>

#include <json_out.h>

/* Threads that executed requests: naive one per connection, pool W, async
 * one per event loop. */
static unsigned summary_workers(const struct hl_run *r)
{
	switch (r->o->model) {
	case HL_NAIVE: return r->o->conns;
	case HL_POOL: return r->o->workers;
	default: return r->nthreads ? r->nthreads : 1;
	}
}

static const char *status_text(int32_t status)
{
	static __thread char buf[32];

	if (status < 0)
		return curl_easy_strerror((CURLcode)-status);
	snprintf(buf, sizeof(buf), "HTTP %d", status);
	return buf;
}

void summary_print(FILE *f, const struct hl_run *r, const struct hl_stats *s)
{
	const struct hl_dist *l = &s->latency, *e = &s->e2e, *q = &s->queue_wait;

	fprintf(f, "httpload: model %s, %u connections, %u workers, %s loop%s, %s\n",
		opts_model_name(r->o->model), r->o->conns, summary_workers(r),
		r->o->rate > 0 ? "open" : "closed", run_stopped() ? " (stopped early)" : "", r->o->url);
	fprintf(f, "  requests %llu in %.3f s, throughput %.1f req/s, errors %llu\n",
		(unsigned long long)s->requests, s->elapsed_s, s->throughput_rps,
		(unsigned long long)s->errors);
	for (unsigned i = 0; i < s->n_error_kinds; i++)
		fprintf(f, "    %llu x status %d (%s)\n", (unsigned long long)s->error_kinds[i].count,
			s->error_kinds[i].status, status_text(s->error_kinds[i].status));
	fprintf(f, "  latency ms (t_end - t_start): avg %.3f p50 %.3f p90 %.3f p99 %.3f p99.9 %.3f max %.3f\n",
		l->avg, l->p50, l->p90, l->p99, l->p999, l->max);
	fprintf(f, "  e2e ms (t_end - t_enqueue):   avg %.3f p50 %.3f p99 %.3f max %.3f\n",
		e->avg, e->p50, e->p99, e->max);
	fprintf(f, "  queue wait ms (t_start - t_enqueue): p50 %.3f p99 %.3f max %.3f\n",
		q->p50, q->p99, q->max);
	if (r->o->rate > 0)
		fprintf(f, "  schedule: %.1f req/s due, fell behind by up to %.3f ms\n",
			r->o->rate, s->schedule_lag_ms);
}

static void json_params(FILE *f, const struct hl_run *r)
{
	char wall[64];
	struct tm tm;

	gmtime_r(&r->wall_start.tv_sec, &tm);
	strftime(wall, sizeof(wall), "%Y-%m-%dT%H:%M:%S", &tm);
	fprintf(f, ", \"url\": ");
	json_write_string(f, r->o->url);
	if (r->o->rate > 0)
		fprintf(f, ", \"rate\": %.6g", r->o->rate);
	else
		fprintf(f, ", \"rate\": null");
	fprintf(f, ", \"cpus\": ");
	if (r->o->cpus_arg)
		json_write_string(f, r->o->cpus_arg);
	else
		fprintf(f, "null");
	fprintf(f, ", \"numa\": %s, \"numa_active\": %s", r->o->numa ? "true" : "false",
		r->numa_active ? "true" : "false");
	if (r->o->duration_s > 0)
		fprintf(f, ", \"duration_s\": %.6g, \"requests_planned\": null", r->o->duration_s);
	else
		fprintf(f, ", \"duration_s\": null, \"requests_planned\": %llu",
			(unsigned long long)r->o->requests);
	fprintf(f, ", \"timeout_ms\": %ld, \"stopped_early\": %s", r->o->timeout_ms,
		run_stopped() ? "true" : "false");
	fprintf(f, ", \"t_start_mono_ns\": %llu, \"t_end_mono_ns\": %llu",
		(unsigned long long)r->t_start_ns, (unsigned long long)r->t_end_ns);
	fprintf(f, ", \"wall_start\": \"%s.%06ldZ\", \"pid\": %d", wall,
		r->wall_start.tv_nsec / 1000, (int)r->pid);
}

void summary_json(FILE *f, const struct hl_run *r, const struct hl_stats *s, bool params)
{
	const struct hl_dist *l = &s->latency, *e = &s->e2e, *q = &s->queue_wait;

	fprintf(f, "{\"model\": \"%s\", \"conns\": %u, \"workers\": %u, \"requests\": %llu, "
		"\"errors\": %llu, \"throughput_rps\": %.3f",
		opts_model_name(r->o->model), r->o->conns, summary_workers(r),
		(unsigned long long)s->requests, (unsigned long long)s->errors, s->throughput_rps);
	fprintf(f, ", \"latency_ms\": {\"avg\": %.6f, \"p50\": %.6f, \"p90\": %.6f, \"p99\": %.6f, "
		"\"p999\": %.6f, \"max\": %.6f}", l->avg, l->p50, l->p90, l->p99, l->p999, l->max);
	fprintf(f, ", \"e2e_ms\": {\"avg\": %.6f, \"p50\": %.6f, \"p99\": %.6f, \"max\": %.6f}",
		e->avg, e->p50, e->p99, e->max);
	fprintf(f, ", \"queue_wait_ms\": {\"p50\": %.6f, \"p99\": %.6f, \"max\": %.6f}",
		q->p50, q->p99, q->max);
	if (r->o->rate > 0)
		fprintf(f, ", \"schedule_lag_ms\": %.6f", s->schedule_lag_ms);
	if (params)
		json_params(f, r);
	fprintf(f, "}\n");
}

struct workload_json {
	const struct hl_run *r;
	const struct hl_stats *s;
};

static int workload_body(FILE *f, const void *arg)
{
	const struct workload_json *w = arg;

	summary_json(f, w->r, w->s, true);
	return 0;
}

int summary_write_workload(const char *dir, const struct hl_run *r, const struct hl_stats *s)
{
	struct workload_json w = { r, s };

	return json_write_file(dir, "workload.json", workload_body, &w);
}
