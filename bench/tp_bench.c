/* SPDX-License-Identifier: MIT */
/*
 * tp_bench: thread pool overhead. Empty tasks through pools of 1, 2, 4
 * workers, submitted one by one and in batches; reports jobs/s (first
 * submit -> drained) and the submit call's latency p50/p99.
 *
 *   tp_bench [--tasks N (1000000)] [--workers LIST (1,2,4)] [--batch B (64)] [--json]
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "threadpool.h"
#include "tt_clock.h"

struct bench_opts {
	unsigned long tasks;
	int workers[16];
	int nworkers;
	unsigned batch;
	int json;
};

struct bench_result {
	double jobs_per_s;
	double submit_p50_ns, submit_p99_ns; /* per submit call */
};

static void empty_task(void *arg, struct tp_worker_ctx *w)
{
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of a sorted array. */
static double pct(const uint64_t *v, size_t n, double p)
{
	size_t rank = (size_t)((p / 100.0) * (double)n + 0.999999);

	return n ? (double)v[rank ? rank - 1 : 0] : 0.0;
}

static int bench_run(const struct bench_opts *o, unsigned workers, unsigned batch,
		     struct bench_result *res)
{
	struct tp_config cfg = { .workers = workers, .name_prefix = "bench" };
	size_t calls = (o->tasks + batch - 1) / batch, k = 0;
	uint64_t *lat = malloc(calls * sizeof(*lat)), t0, t_end;
	struct tp_task *tasks = malloc(batch * sizeof(*tasks));
	struct tp_pool *pool;
	char err[200];

	if (!lat || !tasks || tp_create(&pool, &cfg, err, sizeof(err))) {
		fprintf(stderr, "tp_bench: %s\n", lat && tasks ? err : "out of memory");
		free(lat);
		free(tasks);
		return -1;
	}
	for (unsigned i = 0; i < batch; i++)
		tasks[i] = (struct tp_task){ empty_task, NULL };
	t0 = tt_now_ns();
	for (unsigned long done = 0; done < o->tasks; done += batch, k++) {
		size_t n = o->tasks - done < batch ? o->tasks - done : batch;
		uint64_t s = tt_now_ns();

		if (batch == 1)
			tp_submit(pool, empty_task, NULL);
		else
			tp_submit_batch(pool, tasks, n);
		lat[k] = tt_now_ns() - s;
	}
	tp_shutdown(pool, TP_DRAIN);
	t_end = tt_now_ns();
	qsort(lat, k, sizeof(*lat), cmp_u64);
	res->jobs_per_s = (double)o->tasks * 1e9 / (double)(t_end - t0);
	res->submit_p50_ns = pct(lat, k, 50);
	res->submit_p99_ns = pct(lat, k, 99);
	tp_destroy(pool);
	free(lat);
	free(tasks);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: tp_bench [--tasks N (1000000)] [--workers LIST (1,2,4)] "
		   "[--batch B (64)] [--json]\n");
}

static int parse_args(int argc, char **argv, struct bench_opts *o)
{
	static const struct option lo[] = {
		{ "tasks", required_argument, 0, 't' }, { "workers", required_argument, 0, 'w' },
		{ "batch", required_argument, 0, 'b' }, { "json", no_argument, 0, 'j' },
		{ "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
	};
	int c;

	*o = (struct bench_opts){ .tasks = 1000000, .workers = { 1, 2, 4 }, .nworkers = 3, .batch = 64 };
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 't': o->tasks = strtoul(optarg, NULL, 10); break;
		case 'b': o->batch = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'j': o->json = 1; break;
		case 'w': o->nworkers = tp_cpulist_parse(optarg, o->workers, 16); break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); return -1;
		}
	}
	if (o->tasks == 0 || o->batch < 2 || o->nworkers <= 0) {
		fprintf(stderr, "tp_bench: --tasks >= 1, --batch >= 2 and --workers like 1,2,4 are required\n");
		return -1;
	}
	for (int i = 0; i < o->nworkers; i++)
		if (o->workers[i] < 1) {
			fprintf(stderr, "tp_bench: worker counts must be >= 1 (e.g. --workers 1,2,4)\n");
			return -1;
		}
	return 0;
}

int main(int argc, char **argv)
{
	struct bench_opts o;
	const char *sep = "";

	if (parse_args(argc, argv, &o))
		return 2;
	if (o.json)
		printf("[");
	else
		printf("%-8s %-7s %6s %14s %16s %16s\n", "workers", "submit", "batch", "jobs/s",
		       "submit_p50_ns", "submit_p99_ns");
	for (int i = 0; i < o.nworkers; i++) {
		for (int mode = 0; mode < 2; mode++) {
			unsigned batch = mode ? o.batch : 1;
			struct bench_result r;

			if (bench_run(&o, (unsigned)o.workers[i], batch, &r))
				return 1;
			if (o.json)
				printf("%s\n {\"workers\": %d, \"submit\": \"%s\", \"batch\": %u, \"tasks\": %lu, "
				       "\"jobs_per_s\": %.0f, \"submit_p50_ns\": %.0f, \"submit_p99_ns\": %.0f}",
				       sep, o.workers[i], mode ? "batch" : "single", batch, o.tasks,
				       r.jobs_per_s, r.submit_p50_ns, r.submit_p99_ns);
			else
				printf("%-8d %-7s %6u %14.0f %16.0f %16.0f\n", o.workers[i],
				       mode ? "batch" : "single", batch, r.jobs_per_s, r.submit_p50_ns,
				       r.submit_p99_ns);
			sep = ",";
			fflush(stdout);
		}
	}
	if (o.json)
		printf("\n]\n");
	return 0;
}
