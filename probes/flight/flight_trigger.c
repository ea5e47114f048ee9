// SPDX-License-Identifier: MIT
/* flight_trigger: the --trigger expression and the live percentile. */
#include "flight/flight_trigger.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SUB_BITS 6 /* 64 sub-buckets an octave */
#define SUB (1u << SUB_BITS)

static int parse_duration_ns(const char *s, uint64_t *ns)
{
	static const struct { const char *unit; double mul; } units[] = {
		{ "ns", 1 }, { "us", 1e3 }, { "ms", 1e6 }, { "s", 1e9 },
	};
	char *end;
	double v = strtod(s, &end);

	if (end == s || !(v > 0) || !isfinite(v))
		return -EINVAL;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcmp(end, units[i].unit)) {
			*ns = (uint64_t)(v * units[i].mul + 0.5);
			return *ns ? 0 : -EINVAL;
		}
	return -EINVAL;
}

int flight_trigger_parse(const char *expr, uint64_t warmup, struct flight_trigger *t, char *err,
			 size_t len)
{
	char *end;

	memset(t, 0, sizeof(*t));
	snprintf(t->text, sizeof(t->text), "%s", expr ? expr : "");
	if (expr && !strncmp(expr, "latency>", 8) && !parse_duration_ns(expr + 8, &t->latency_ns))
		return 0;
	if (expr && expr[0] == 'p') {
		double p = strtod(expr + 1, &end);

		if (end != expr + 1 && !*end && p >= 50 && p < 100) {
			t->q = p / 100;
			t->warmup = warmup ? warmup : (uint64_t)ceil(10 / (1 - t->q) - 1e-6);
			return 0;
		}
	}
	snprintf(err, len, "--trigger '%s': give latency>DURATION (e.g. latency>5ms; ns, us, ms, "
		 "s) or a live percentile p50..p99.99 (e.g. p99, p99.9)", expr ? expr : "");
	return -EINVAL;
}

unsigned flight_live_bin(uint64_t v)
{
	int msb;
	unsigned b;

	if (v < SUB)
		return (unsigned)v;
	msb = 63 - __builtin_clzll(v); /* >= SUB_BITS: octave msb - SUB_BITS, SUB sub-buckets */
	b = SUB + (unsigned)(msb - SUB_BITS) * SUB + (unsigned)((v >> (msb - SUB_BITS)) - SUB);
	return b < FLIGHT_LIVE_BINS ? b : FLIGHT_LIVE_BINS - 1;
}

uint64_t flight_live_value(unsigned bin)
{
	unsigned oct, sub;
	uint64_t lo, width;

	if (bin < SUB)
		return bin;
	oct = (bin - SUB) / SUB;
	sub = (bin - SUB) % SUB;
	lo = (uint64_t)(SUB + sub) << oct;
	width = 1ull << oct;
	return lo + width / 2;
}

void flight_live_add(struct flight_live *h, uint64_t t_end_ns, uint64_t latency_ns)
{
	uint64_t s = t_end_ns / 1000000000ull;
	unsigned slot = (unsigned)(s % FLIGHT_LIVE_SECONDS);

	if (h->sec[slot] != s) {
		if (h->sec[slot] > s)
			return; /* older than the minute the slot holds now */
		h->sec[slot] = s;
		h->count[slot] = 0;
		memset(h->bins[slot], 0, sizeof(h->bins[slot]));
	}
	h->count[slot]++;
	h->bins[slot][flight_live_bin(latency_ns)]++;
}

uint64_t flight_live_quantile(const struct flight_live *h, double q, uint64_t now_ns, uint64_t *n)
{
	uint64_t now_s = now_ns / 1000000000ull, total = 0, rank, seen = 0;
	bool use[FLIGHT_LIVE_SECONDS];

	for (unsigned i = 0; i < FLIGHT_LIVE_SECONDS; i++) {
		use[i] = h->count[i] && h->sec[i] + FLIGHT_LIVE_SECONDS > now_s && h->sec[i] <= now_s;
		total += use[i] ? h->count[i] : 0;
	}
	*n = total;
	if (!total)
		return 0;
	rank = (uint64_t)ceil(q * (double)total); /* the smallest value with >= q below or at it */
	rank = rank ? rank : 1;
	for (unsigned b = 0; b < FLIGHT_LIVE_BINS; b++) {
		for (unsigned i = 0; i < FLIGHT_LIVE_SECONDS; i++)
			seen += use[i] ? h->bins[i][b] : 0;
		if (seen >= rank)
			return flight_live_value(b);
	}
	return flight_live_value(FLIGHT_LIVE_BINS - 1);
}
