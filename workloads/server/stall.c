// SPDX-License-Identifier: MIT
/* The ledger lock and its stalls (stall.h). */
#include "stall.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>

#include "tt_clock.h"

static pthread_mutex_t ledger = PTHREAD_MUTEX_INITIALIZER;
static pthread_t thread;
static bool on;
static atomic_bool stopping;
static struct stall_config cfg;
static FILE *log_f;
static uint64_t orders;

void stall_order(void)
{
	if (!on)
		return;
	pthread_mutex_lock(&ledger);
	orders++;
	pthread_mutex_unlock(&ledger);
}

static void *ledger_main(void *arg)
{
	uint64_t next = tt_now_ns() + (uint64_t)cfg.every_ms * 1000000ull;

	(void)arg;
	pthread_setname_np(pthread_self(), "orders-ledger");
	while (!atomic_load(&stopping)) {
		uint64_t t0, t1;

		tt_sleep_until_ns(next);
		if (atomic_load(&stopping))
			break;
		pthread_mutex_lock(&ledger);
		t0 = tt_now_ns();
		tt_sleep_until_ns(t0 + (uint64_t)cfg.hold_ms * 1000000ull);
		t1 = tt_now_ns();
		pthread_mutex_unlock(&ledger);
		fprintf(log_f, "stall %llu %llu\n", (unsigned long long)t0, (unsigned long long)t1);
		fflush(log_f);
		next = t0 + (uint64_t)cfg.every_ms * 1000000ull;
	}
	return NULL;
}

int stall_start(const struct stall_config *c)
{
	int err;

	if (!c->hold_ms)
		return 0;
	cfg = *c;
	log_f = c->log_path ? fopen(c->log_path, "we") : stderr;
	if (!log_f)
		return -errno;
	on = true;
	err = pthread_create(&thread, NULL, ledger_main, NULL);
	if (err) {
		on = false;
		return -err;
	}
	return 0;
}

void stall_stop(void)
{
	if (!on)
		return;
	atomic_store(&stopping, true);
	pthread_join(thread, NULL);
	if (log_f != stderr)
		fclose(log_f);
}
