/* The flight recorder's pure parts, with oracles by construction:
 *   flight_trigger  the --trigger forms and errors; the live histogram's bins hold
 *                   their values to within 1/64; quantiles of known series, the
 *                   minute that slides, the warm-up default
 *   flight_store    records come back by type and window; chunks older than
 *                   keep go; the byte cap evicts the oldest first, counted */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tailtrace/records.h>
#include "flight/flight_store.h"
#include "flight/flight_trigger.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); exit(1); } } while (0)
#define S 1000000000ull
#define MS 1000000ull

static void test_trigger_forms(void)
{
	static const char *const bad[] = { "p100", "p", "p49", "latency>5", "latency>-1ms",
					   "latency>0ms", "p99x", "fast", "" };
	struct flight_trigger t;
	char err[256];

	CHECK(!flight_trigger_parse("latency>5ms", 0, &t, err, sizeof(err)));
	CHECK(t.q == 0 && t.latency_ns == 5 * MS);
	CHECK(!flight_trigger_parse("latency>250us", 0, &t, err, sizeof(err)) && t.latency_ns == 250000);
	CHECK(!flight_trigger_parse("latency>1.5s", 0, &t, err, sizeof(err)) && t.latency_ns == 1500 * MS);
	CHECK(!flight_trigger_parse("p99", 0, &t, err, sizeof(err)));
	CHECK(t.q == 0.99 && t.warmup == 1000);
	CHECK(!flight_trigger_parse("p99.9", 0, &t, err, sizeof(err)) && t.warmup == 10000);
	CHECK(!flight_trigger_parse("p99.9", 77, &t, err, sizeof(err)) && t.warmup == 77);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		CHECK(flight_trigger_parse(bad[i], 0, &t, err, sizeof(err)) < 0);
		CHECK(strstr(err, "latency>DURATION") && strstr(err, "p99.9"));
	}
}

static void test_bins_hold_their_values(void)
{
	for (uint64_t v = 1; v < 100 * S; v = v * 17 / 16 + 1) {
		uint64_t got = flight_live_value(flight_live_bin(v));
		double rel = (double)(got > v ? got - v : v - got) / (double)v;

		CHECK(rel <= 1.0 / 64);
	}
	CHECK(flight_live_bin(63) == 63 && flight_live_value(63) == 63);
	CHECK(flight_live_bin(64) == 64 && flight_live_bin(127) == 127 && flight_live_bin(128) == 128);
}

static struct flight_live live;

static void test_live_quantiles(void)
{
	uint64_t n, t0 = 1000 * S, q;

	memset(&live, 0, sizeof(live));
	CHECK(flight_live_quantile(&live, 0.99, t0, &n) == 0 && n == 0);
	/* 1..1000 us, one a ms over one second: p99 is 990 us, p50 500 us */
	for (uint64_t i = 1; i <= 1000; i++)
		flight_live_add(&live, t0 + i * MS, i * 1000);
	q = flight_live_quantile(&live, 0.99, t0 + S, &n);
	CHECK(n == 1000 && q > 990000 * 0.98 && q < 990000 * 1.02);
	q = flight_live_quantile(&live, 0.5, t0 + S, &n);
	CHECK(q > 500000 * 0.98 && q < 500000 * 1.02);
	/* 30 s later, 1000 spans of 10 ms: both seconds are in the minute */
	for (uint64_t i = 0; i < 1000; i++)
		flight_live_add(&live, t0 + 30 * S + i * MS, 10 * MS);
	q = flight_live_quantile(&live, 0.99, t0 + 31 * S, &n);
	CHECK(n == 2000 && q > 10 * MS * 0.98 && q < 10 * MS * 1.02);
	q = flight_live_quantile(&live, 0.25, t0 + 31 * S, &n);
	CHECK(q > 500000 * 0.98 && q < 500000 * 1.02);
	/* 61 s after the first second it has slid out: only the 10 ms remain */
	q = flight_live_quantile(&live, 0.01, t0 + 62 * S, &n);
	CHECK(n == 1000 && q > 10 * MS * 0.98);
	/* a slot reused a minute later starts empty */
	flight_live_add(&live, t0 + 60 * S + 5 * MS, 1000);
	q = flight_live_quantile(&live, 0.0001, t0 + 61 * S, &n); /* rank 1: the 1 us one */
	CHECK(n == 1001 && q < 1100);
}

struct seen {
	uint64_t n, ids[64];
};

static int note(void *arg, uint32_t type, const void *rec)
{
	struct seen *s = arg;
	struct tt_span sp;

	CHECK(type == TT_REC_SPAN);
	memcpy(&sp, rec, sizeof(sp));
	if (s->n < 64)
		s->ids[s->n] = sp.span_id;
	s->n++;
	return 0;
}

static void test_store_windows_and_eviction(void)
{
	struct flight_store *st = flight_store_new(10 * S, 64ull << 20, 0);
	struct flight_store_stats ss;
	struct tt_span sp = { 0 };
	struct tt_runq rq = { .t_runnable_ns = 5 * S, .t_run_ns = 5 * S + 1 };
	struct seen s = { 0 };

	CHECK(st);
	/* spans [i s, i s + 100 ms], ids i, arriving at i s */
	for (uint32_t i = 1; i <= 20; i++) {
		sp.t_start_ns = i * S;
		sp.t_end_ns = i * S + 100 * MS;
		sp.span_id = i;
		CHECK(!flight_store_add(st, TT_REC_SPAN, &sp, 1, i * S));
		CHECK(!flight_store_add(st, TT_REC_RUNQ, &rq, 1, i * S));
	}
	flight_store_each(st, TT_REC_SPAN, 3 * S + 50 * MS, 5 * S, note, &s);
	CHECK(s.n == 3 && s.ids[0] == 3 && s.ids[1] == 4 && s.ids[2] == 5);
	flight_store_stats(st, &ss);
	CHECK(ss.records == 40 && ss.bytes == ss.peak_bytes && ss.evicted_early == 0);
	flight_store_free(st);

	/* keep 100 s: three chunks filled at 0, 20 and 40 s; at 111 s the first goes */
	st = flight_store_new(100 * S, 64ull << 20, 0);
	for (uint64_t t = 0; t < 3; t++) {
		struct tt_switch w = { .t_off_ns = t * S, .t_on_ns = t * S }; /* ended by arrival */
		size_t per = FLIGHT_CHUNK_BYTES / (1 + sizeof(w));

		for (size_t k = 0; k < per; k++)
			CHECK(!flight_store_add(st, TT_REC_SWITCH, &w, 1, t * 20 * S));
	}
	flight_store_stats(st, &ss);
	CHECK(ss.bytes >= 3 * FLIGHT_CHUNK_BYTES && ss.oldest_ns == 0);
	flight_store_expire(st, 111 * S);
	flight_store_stats(st, &ss);
	CHECK(ss.oldest_ns == 20 * S && ss.bytes < 3 * FLIGHT_CHUNK_BYTES);
	flight_store_free(st);

	/* chunks that arrived before the window are skipped, nothing in the window is:
	 * three full chunks arriving at 10, 20 and 30 s, records ending when they
	 * arrive; one of the last chunk reaches back to 1 s */
	st = flight_store_new(3600 * S, 64ull << 20, 0);
	for (uint64_t t = 1; t <= 3; t++) {
		struct tt_span w = { .t_start_ns = t * 10 * S - MS, .t_end_ns = t * 10 * S,
				     .span_id = (uint32_t)t };
		size_t per = FLIGHT_CHUNK_BYTES / (1 + sizeof(w));

		for (size_t k = 0; k < per; k++) {
			if (t == 3 && k == per / 2) {
				struct tt_span longer = { .t_start_ns = 1 * S, .t_end_ns = 30 * S,
							  .span_id = 99 };

				CHECK(!flight_store_add(st, TT_REC_SPAN, &longer, 1, 30 * S));
				continue;
			}
			CHECK(!flight_store_add(st, TT_REC_SPAN, &w, 1, t * 10 * S));
		}
	}
	memset(&s, 0, sizeof(s));
	flight_store_each(st, TT_REC_SPAN, 5 * S, 6 * S, note, &s);
	CHECK(s.n == 1 && s.ids[0] == 99);              /* only the long one reaches back */
	memset(&s, 0, sizeof(s));
	flight_store_each(st, TT_REC_SPAN, 20 * S, 20 * S, note, &s);
	CHECK(s.n == FLIGHT_CHUNK_BYTES / (1 + sizeof(sp)) + 1 && s.ids[0] == 2);
	flight_store_free(st);

	/* the caller's clock, read before its poll, precedes the records' ends: each
	 * counts as arrived at its end, and a window after that clock still finds
	 * them; an end past an hour ahead is no time (a torn record) */
	st = flight_store_new(3600 * S, 64ull << 20, 0);
	{
		struct tt_span late = { .t_start_ns = 7 * S, .t_end_ns = 10 * S, .span_id = 7 };
		struct tt_span torn = { .t_start_ns = 0, .t_end_ns = UINT64_MAX, .span_id = 8 };

		CHECK(!flight_store_add(st, TT_REC_SPAN, &late, 1, 5 * S));
		flight_store_stats(st, &ss);
		CHECK(ss.oldest_ns == 10 * S);
		CHECK(!flight_store_add(st, TT_REC_SPAN, &torn, 1, 5 * S));
		memset(&s, 0, sizeof(s));
		flight_store_each(st, TT_REC_SPAN, 8 * S, 9 * S, note, &s);
		CHECK(s.n == 2 && s.ids[0] == 7 && s.ids[1] == 8);
		flight_store_free(st);
		st = flight_store_new(3600 * S, 64ull << 20, 0);
		CHECK(!flight_store_add(st, TT_REC_SPAN, &torn, 1, 5 * S));
		flight_store_stats(st, &ss);
		CHECK(ss.oldest_ns == 5 * S);
	}
	flight_store_free(st);

	/* a cap of two chunks: the oldest goes first, counted */
	st = flight_store_new(3600 * S, 2 * (FLIGHT_CHUNK_BYTES + 4096), 0);
	for (uint64_t k = 0; k < 5 * FLIGHT_CHUNK_BYTES / (1 + sizeof(sp)); k++) {
		sp.t_start_ns = k;
		CHECK(!flight_store_add(st, TT_REC_SPAN, &sp, 1, k));
	}
	flight_store_stats(st, &ss);
	CHECK(ss.evicted_early >= 3 && ss.bytes <= 2 * (FLIGHT_CHUNK_BYTES + 4096));
	flight_store_free(st);
}

int main(void)
{
	test_trigger_forms();
	test_bins_hold_their_values();
	test_live_quantiles();
	test_store_windows_and_eviction();
	printf("flight: ok\n");
	return 0;
}
