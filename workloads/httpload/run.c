/* SPDX-License-Identifier: MIT */
/* Run state: request ids, the open-loop schedule, the stop flag. */
#include "run.h"

#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "tt_clock.h"

#define DISPATCH_SLEEP_MAX_NS 50000000ull /* re-check the stop flag every 50 ms */

atomic_int hl_stop;

void run_init(struct hl_run *r, const struct hl_opts *o)
{
	*r = (struct hl_run){ .o = o, .pid = getpid() };
	r->total = o->duration_s > 0 ? UINT64_MAX : o->requests;
}

void run_begin(struct hl_run *r)
{
	clock_gettime(CLOCK_REALTIME, &r->wall_start);
	r->t_start_ns = tt_now_ns();
	if (r->o->duration_s > 0)
		r->deadline_ns = r->t_start_ns + (uint64_t)(r->o->duration_s * 1e9);
}

bool run_stopped(void)
{
	return atomic_load_explicit(&hl_stop, memory_order_relaxed) != 0;
}

bool run_claim(struct hl_run *r, uint32_t conn, uint64_t *seq, uint64_t *id)
{
	if (run_stopped())
		return false;
	if (r->deadline_ns) {
		if (tt_now_ns() >= r->deadline_ns)
			return false;
		*id = __atomic_fetch_add(&r->next_id, 1, __ATOMIC_RELAXED);
	} else {
		*id = conn + *seq * r->o->conns;
		if (*id >= r->total)
			return false;
	}
	(*seq)++;
	return true;
}

uint64_t run_due_ns(const struct hl_run *r, uint64_t id)
{
	return r->t_start_ns + (uint64_t)((double)id * 1e9 / r->o->rate);
}

bool run_open_has(const struct hl_run *r, uint64_t id)
{
	if (r->deadline_ns)
		return run_due_ns(r, id) < r->deadline_ns;
	return id < r->total;
}

void run_count_done(struct hl_run *r)
{
	__atomic_fetch_add(&r->done, 1, __ATOMIC_RELAXED);
}

uint64_t run_done(const struct hl_run *r)
{
	return __atomic_load_n(&r->done, __ATOMIC_RELAXED);
}

void run_dispatch(struct hl_run *r, void (*fn)(uint64_t, uint64_t, void *), void *arg)
{
	for (uint64_t id = 0; run_open_has(r, id); id++) {
		uint64_t due = run_due_ns(r, id), now;

		while (!run_stopped() && (now = tt_now_ns()) < due)
			tt_sleep_until_ns(due - now > DISPATCH_SLEEP_MAX_NS ? now + DISPATCH_SLEEP_MAX_NS : due);
		if (run_stopped())
			return;
		fn(id, due, arg);
	}
}

size_t run_initial_cap(const struct hl_run *r, unsigned nthreads)
{
	double expect = r->deadline_ns ? (r->o->rate > 0 ? r->o->rate * r->o->duration_s : 65536)
				       : (double)r->total;
	double share = expect / (nthreads ? nthreads : 1);

	/* shares are uneven (whoever is free takes the next one): 2x + slack */
	if (share > 1e6)
		share = 1e6;
	return (size_t)(2 * share) + 64;
}

int run_collect(struct hl_run *r)
{
	int err = records_gather(r->bufs, r->nthreads, &r->recs, &r->nrecs);

	for (unsigned i = 0; i < r->nthreads; i++) {
		if (!r->bufs[i])
			continue;
		if (r->bufs[i]->err)
			r->rec_err = r->bufs[i]->err;
		recbuf_free(r->bufs[i]);
	}
	free(r->bufs);
	r->bufs = NULL;
	return err;
}
