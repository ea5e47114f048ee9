/* SPDX-License-Identifier: MIT */
/*
 * Exact statistics over all request records (sorting, no histograms).
 * Percentiles are nearest-rank: the value at rank ceil(p/100 * n).
 *   latency     = t_end - t_start      (service time)
 *   e2e         = t_end - t_enqueue    (what the caller waited)
 *   queue wait  = t_start - t_enqueue
 * Failed requests are included: a timeout is a latency too.
 */
#ifndef HL_STATS_H
#define HL_STATS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <tailtrace/records.h>

struct hl_dist { /* milliseconds */
	double avg, p50, p90, p99, p999, max;
};

#define HL_MAX_ERROR_KINDS 8
struct hl_error_kind {
	int32_t status;
	uint64_t count;
};

struct hl_stats {
	uint64_t requests, errors;
	double elapsed_s, throughput_rps;
	struct hl_dist latency, e2e, queue_wait;
	double schedule_lag_ms; /* open loop: max(t_start - due time) */
	struct hl_error_kind error_kinds[HL_MAX_ERROR_KINDS]; /* most frequent first */
	unsigned n_error_kinds;
};

/* Nearest-rank percentile (p in tenths of a percent: 500 = P50, 999 = P99.9)
 * of an ascending array. 0 when n == 0. */
uint64_t stats_percentile(const uint64_t *sorted, size_t n, unsigned p_tenths);

/* All figures over recs[0..n); t_start_ns..t_end_ns is the run's span. */
int stats_compute(const struct tt_request *recs, size_t n, uint64_t t_start_ns,
		  uint64_t t_end_ns, struct hl_stats *s);

#endif
