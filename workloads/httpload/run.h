/* SPDX-License-Identifier: MIT */
/*
 * One load run: shared by the models, the progress reporter and main.
 *
 * Closed loop: a connection claims the next request id when its previous
 * request completed (run_claim). Open loop (--rate R): request i is due at
 * t_start_ns + i / R (run_due_ns); a dispatcher (or the async timer) hands
 * it to a free connection/worker and t_enqueue_ns is that due time.
 */
#ifndef HL_RUN_H
#define HL_RUN_H
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "options.h"
#include "records.h"

struct hl_run {
	const struct hl_opts *o;
	uint64_t t_start_ns;   /* CLOCK_MONOTONIC, before the first request */
	uint64_t t_end_ns;     /* after the last one completed */
	struct timespec wall_start; /* CLOCK_REALTIME at t_start_ns */
	uint64_t deadline_ns;  /* --duration: t_start + S; 0 with --requests */
	uint64_t total;        /* --requests N; UINT64_MAX with --duration */
	uint64_t next_id;      /* --duration: next id to hand out (atomic) */
	uint64_t done;         /* completed requests (atomic, for --progress) */
	pid_t pid;
	unsigned nthreads;     /* threads that execute requests */
	bool numa_active;      /* pool: --numa on took effect (>= 2 nodes) */
	struct hl_recbuf **bufs; /* one record buffer per such thread */
	struct tt_request *recs; /* run_collect(): all records, sorted by id */
	size_t nrecs;
	int rec_err;             /* a record was lost (out of memory) */
};

/* Set by SIGINT/SIGTERM: stop issuing, finish in-flight, write results.
 * Atomic (lock-free, so signal-safe): every connection thread reads it. */
extern atomic_int hl_stop;

void run_init(struct hl_run *r, const struct hl_opts *o);
/* Closed loop: the next request id of connection conn, whose *seq requests
 * so far the caller keeps. With --requests N each connection sends its share,
 * ids conn, conn + conns, conn + 2 conns, ... < N; with --duration ids are
 * handed out in completion order. false when the run is over (share done,
 * duration passed, or stopped). */
bool run_claim(struct hl_run *r, uint32_t conn, uint64_t *seq, uint64_t *id);
/* Open loop: the due time of request id, and whether it is part of the run. */
uint64_t run_due_ns(const struct hl_run *r, uint64_t id);
bool run_open_has(const struct hl_run *r, uint64_t id);
/* The load starts now: t_start_ns (open loop: request 0 is due) and the
 * --duration deadline. Each model calls it once it is ready to issue. */
void run_begin(struct hl_run *r);
bool run_stopped(void);
void run_count_done(struct hl_run *r);
uint64_t run_done(const struct hl_run *r);
/* Open loop dispatcher: for each id in schedule order, sleep until it is due
 * and call fn(id, due_ns, arg). Returns when the schedule ends or on stop. */
void run_dispatch(struct hl_run *r, void (*fn)(uint64_t id, uint64_t due_ns, void *arg), void *arg);
/* After the executing threads are joined: gather their buffers into
 * r->recs (sorted by id), free the buffers and r->bufs. */
int run_collect(struct hl_run *r);
/* Initial record capacity for one of nthreads executing threads. */
size_t run_initial_cap(const struct hl_run *r, unsigned nthreads);

#endif
