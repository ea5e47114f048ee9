/* SPDX-License-Identifier: MIT */
/* Live progress on stderr from its own thread. */
#include "progress.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tt_clock.h"

struct hl_progress {
	const struct hl_run *run;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	bool stop, tty;
	uint64_t t0_ns;
};

static void progress_line(struct hl_progress *p)
{
	const struct hl_run *r = p->run;
	double elapsed = (double)(tt_now_ns() - p->t0_ns) / 1e9;
	unsigned long long done = run_done(r);

	if (r->o->duration_s > 0)
		fprintf(stderr, "%s%llu done, %.1f / %.1f s%s", p->tty ? "\r\033[K" : "", done,
			elapsed, r->o->duration_s, p->tty ? "" : "\n");
	else
		fprintf(stderr, "%s%llu/%llu done, %.1f s elapsed%s", p->tty ? "\r\033[K" : "", done,
			(unsigned long long)r->total, elapsed, p->tty ? "" : "\n");
	fflush(stderr);
}

static void *progress_main(void *arg)
{
	struct hl_progress *p = arg;
	uint64_t period_ns = p->tty ? 500000000ull : 2000000000ull;

	pthread_setname_np(pthread_self(), "progress");
	pthread_mutex_lock(&p->lock);
	while (!p->stop) {
		struct timespec ts = tt_timespec_of_ns(tt_now_ns() + period_ns);

		while (!p->stop && pthread_cond_timedwait(&p->wake, &p->lock, &ts) == 0)
			;
		if (!p->stop)
			progress_line(p);
	}
	pthread_mutex_unlock(&p->lock);
	progress_line(p); /* the final state */
	if (p->tty)
		fputc('\n', stderr);
	return NULL;
}

struct hl_progress *progress_start(const struct hl_run *r)
{
	struct hl_progress *p = calloc(1, sizeof(*p));
	pthread_condattr_t ca;

	if (!p)
		return NULL;
	p->run = r;
	p->tty = isatty(STDERR_FILENO);
	p->t0_ns = tt_now_ns();
	pthread_mutex_init(&p->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->wake, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&p->thread, NULL, progress_main, p)) {
		free(p);
		return NULL;
	}
	return p;
}

void progress_stop(struct hl_progress *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_signal(&p->wake);
	pthread_mutex_unlock(&p->lock);
	pthread_join(p->thread, NULL);
	pthread_cond_destroy(&p->wake);
	pthread_mutex_destroy(&p->lock);
	free(p);
}
