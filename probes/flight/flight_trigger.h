/* SPDX-License-Identifier: MIT */
/*
 * flight_trigger: when a span is slow enough to capture (--trigger EXPR).
 *   latency>5ms   a fixed threshold (ns, us, ms or s)
 *   p99, p99.9    above the live percentile of the spans that ended in the
 *                 last minute, once that minute holds the warm-up count
 * The live percentile comes from one histogram per second of the last 60
 * (64 sub-buckets an octave: a value is known to within 1.6%), summed when
 * the threshold is refreshed, not at every span.
 */
#ifndef TT_FLIGHT_TRIGGER_H
#define TT_FLIGHT_TRIGGER_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct flight_trigger {
	double q;            /* 0: fixed latency_ns; else the quantile (0.99, 0.999) */
	uint64_t latency_ns; /* the fixed threshold */
	uint64_t warmup;     /* spans in the last minute before a percentile triggers */
	char text[32];       /* as given, for meta.json and messages */
};

/* Parse EXPR; warmup 0 picks 10 / (1 - q) (p99: 1,000; p99.9: 10,000). 0, or
 * -EINVAL with a one-line reason naming the accepted forms. */
int flight_trigger_parse(const char *expr, uint64_t warmup, struct flight_trigger *t, char *err,
			 size_t len);

#define FLIGHT_LIVE_SECONDS 60
#define FLIGHT_LIVE_BINS (64 + 40 * 64)

struct flight_live {
	uint64_t sec[FLIGHT_LIVE_SECONDS];  /* the second each slot holds */
	uint32_t count[FLIGHT_LIVE_SECONDS];
	uint32_t bins[FLIGHT_LIVE_SECONDS][FLIGHT_LIVE_BINS];
};

/* A span of latency_ns that ended at t_end_ns. */
void flight_live_add(struct flight_live *h, uint64_t t_end_ns, uint64_t latency_ns);
/* The q-quantile of the spans that ended in the 60 s up to now_ns, in ns; *n
 * their count. 0 when there are none. */
uint64_t flight_live_quantile(const struct flight_live *h, double q, uint64_t now_ns, uint64_t *n);
/* Bin of a value and a bin's middle value (tests). */
unsigned flight_live_bin(uint64_t v);
uint64_t flight_live_value(unsigned bin);

#endif
