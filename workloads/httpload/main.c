/* SPDX-License-Identifier: MIT */
/*
 * httpload: a libcurl load client in three models (naive, pool, async) that
 * records every request (struct tt_request) for the tailtrace analysis.
 * See options.c for the command line and docs/workloads.md for the models.
 *
 * Exit: 0; 1 when every request failed (or nothing ran, or results could
 * not be written); 2 on a usage error (one line naming the fix).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "http.h"
#include "models.h"
#include "progress.h"
#include "schema.h"
#include "stats.h"
#include "summary.h"
#include "tt_clock.h"

static void on_signal(int sig)
{
	atomic_store_explicit(&hl_stop, 1, memory_order_relaxed);
}

static void signals_install(void)
{
	struct sigaction sa = { .sa_handler = on_signal }; /* no SA_RESTART */

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* mkdir -p, then check we can write there: fail before the run, not after. */
static int out_dir_prepare(const char *dir)
{
	char path[4096];
	size_t len = strlen(dir);

	if (len >= sizeof(path))
		return -ENAMETOOLONG;
	memcpy(path, dir, len + 1);
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, 0755) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(path, 0755) && errno != EEXIST)
		return -errno;
	return access(path, W_OK | X_OK) ? -errno : 0;
}

static int model_run(struct hl_run *r)
{
	switch (r->o->model) {
	case HL_NAIVE: return model_naive_run(r);
	case HL_POOL: return model_pool_run(r);
	default: return model_async_run(r);
	}
}

static int out_write(const struct hl_run *r, const struct hl_stats *s)
{
	const char *dir = r->o->out_dir;
	int err = records_write(dir, r->recs, r->nrecs);

	if (err) {
		fprintf(stderr, "httpload: writing %s/requests.bin: %s\n", dir, strerror(-err));
		return 1;
	}
	err = schema_write_dir(dir);
	if (err) {
		fprintf(stderr, "httpload: writing %s/schema.json: %s\n", dir, strerror(-err));
		return 1;
	}
	err = summary_write_workload(dir, r, s);
	if (err) {
		fprintf(stderr, "httpload: writing %s/workload.json: %s\n", dir, strerror(-err));
		return 1;
	}
	return 0;
}

/* Report, write the run directory, choose the exit code. */
static int finish(struct hl_run *r)
{
	struct hl_stats s;
	int rc = 0;

	if (stats_compute(r->recs, r->nrecs, r->t_start_ns, r->t_end_ns, &s)) {
		fprintf(stderr, "httpload: out of memory computing statistics\n");
		return 1;
	}
	if (r->o->json) {
		summary_json(stdout, r, &s, false);
		summary_print(stderr, r, &s);
	} else {
		summary_print(stdout, r, &s);
	}
	fflush(stdout);
	if (r->rec_err)
		fprintf(stderr, "httpload: out of memory: some request records were lost\n");
	if (r->o->out_dir)
		rc = out_write(r, &s);
	if (s.requests == 0) {
		fprintf(stderr, "httpload: no request was issued\n");
		return 1;
	}
	if (s.errors == s.requests) {
		fprintf(stderr, "httpload: every request failed (%s): is the server up at %s?\n",
			s.error_kinds[0].status < 0 ? curl_easy_strerror((CURLcode)-s.error_kinds[0].status)
						    : "HTTP error", r->o->url);
		return 1;
	}
	return rc;
}

int main(int argc, char **argv)
{
	struct hl_progress *progress = NULL;
	struct hl_opts o;
	struct hl_run r;
	int rc = opts_parse(argc, argv, &o);

	if (rc)
		return rc < 0 ? 0 : rc;
	if (o.out_dir && (rc = out_dir_prepare(o.out_dir))) {
		fprintf(stderr, "httpload: --out %s: %s: give a writable directory\n",
			o.out_dir, strerror(-rc));
		return 2;
	}
	signals_install();
	if (http_global_init()) {
		fprintf(stderr, "httpload: libcurl initialisation failed\n");
		return 1;
	}
	run_init(&r, &o);
	if (o.progress)
		progress = progress_start(&r);
	rc = model_run(&r);
	r.t_end_ns = tt_now_ns();
	progress_stop(progress);
	if (rc == 0)
		rc = finish(&r);
	else if (r.recs && o.out_dir) /* start-up failed part-way: keep what ran */
		out_write(&r, &(struct hl_stats){ 0 });
	free(r.recs);
	free(r.bufs); /* run_collect freed it; a model that failed at start-up did not */
	http_global_cleanup();
	return rc;
}
