/* httpload statistics and records on inline fixtures with exact answers. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recfile.h"
#include "records.h"
#include "stats.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); exit(1); } } while (0)
#define NEAR(a, b) (fabs((a) - (b)) < 1e-9)

static void test_percentile_nearest_rank(void)
{
	uint64_t v[1000];

	for (unsigned i = 0; i < 1000; i++)
		v[i] = i + 1; /* 1..1000 */
	CHECK(stats_percentile(v, 1000, 500) == 500);
	CHECK(stats_percentile(v, 1000, 990) == 990);
	CHECK(stats_percentile(v, 1000, 999) == 999);
	CHECK(stats_percentile(v, 1000, 1000) == 1000);
	/* 10 values: P50 = 5th, P90 = 9th, P99 and P99.9 = 10th (the max) */
	CHECK(stats_percentile(v, 10, 500) == 5);
	CHECK(stats_percentile(v, 10, 900) == 9);
	CHECK(stats_percentile(v, 10, 990) == 10);
	CHECK(stats_percentile(v, 10, 999) == 10);
	CHECK(stats_percentile(v, 1, 500) == 1);
	CHECK(stats_percentile(v, 0, 500) == 0);
}

/* Four requests, times in ms (x 1e6 ns):
 *   id enqueue start end  status   service  e2e  queue
 *   0    0       1    3    200        2       3     1
 *   1    0       0    4    200        4       4     0
 *   2    1       5   11    503        6      10     4
 *   3    2       2    3    -7         1       1     0        */
static void fixture(struct tt_request *r)
{
	static const int t[4][4] = { { 0, 1, 3, 200 }, { 0, 0, 4, 200 }, { 1, 5, 11, 503 }, { 2, 2, 3, -7 } };

	for (int i = 0; i < 4; i++)
		r[i] = (struct tt_request){ .id = (uint64_t)i, .t_enqueue_ns = t[i][0] * 1000000ull,
					    .t_start_ns = t[i][1] * 1000000ull,
					    .t_end_ns = t[i][2] * 1000000ull, .status = t[i][3] };
}

static void test_stats_fixture(void)
{
	struct tt_request r[4];
	struct hl_stats s;

	fixture(r);
	CHECK(stats_compute(r, 4, 0, 2000000000ull, &s) == 0);
	CHECK(s.requests == 4 && s.errors == 2);          /* 503 and -7 */
	CHECK(NEAR(s.elapsed_s, 2.0) && NEAR(s.throughput_rps, 2.0));
	CHECK(NEAR(s.latency.avg, 13.0 / 4));             /* 2+4+6+1 */
	CHECK(NEAR(s.latency.p50, 2) && NEAR(s.latency.p90, 6) && NEAR(s.latency.max, 6));
	CHECK(NEAR(s.e2e.avg, 18.0 / 4) && NEAR(s.e2e.p50, 3) && NEAR(s.e2e.p99, 10));
	CHECK(NEAR(s.queue_wait.p50, 0) && NEAR(s.queue_wait.max, 4));
	CHECK(NEAR(s.schedule_lag_ms, 4));
	CHECK(s.n_error_kinds == 2);
	CHECK(s.error_kinds[0].count == 1 && s.error_kinds[1].count == 1);
	CHECK(stats_compute(r, 0, 0, 0, &s) == 0 && s.requests == 0 && s.latency.max == 0);
}

/* Records from three "threads", out of order, gathered sorted, written with
 * recfile and read back identical. */
static void test_records_roundtrip(const char *dir)
{
	struct hl_recbuf a, b, c, *bufs[3] = { &a, &b, &c };
	struct tt_request *all, *back;
	size_t n, nback;
	char path[4096];

	CHECK(recbuf_init(&a, 1) == 0 && recbuf_init(&b, 1) == 0 && recbuf_init(&c, 0) == 0);
	for (uint64_t id = 0; id < 3000; id++) { /* forces growth from capacity 1 */
		struct tt_request r = { .id = id, .conn = (uint32_t)(id % 3), .tid = 100 + (uint32_t)(id % 3),
					.t_enqueue_ns = id, .t_start_ns = id + 1, .t_end_ns = id + 2,
					.status = 200, .bytes = 40 };

		recbuf_push(id % 3 == 0 ? &a : id % 3 == 1 ? &b : &c, &r);
	}
	CHECK(a.n == 1000 && b.n == 1000 && c.n == 1000 && !a.err);
	CHECK(records_gather(bufs, 3, &all, &n) == 0 && n == 3000);
	for (size_t i = 0; i < n; i++)
		CHECK(all[i].id == i && all[i].tid == 100 + i % 3);
	CHECK(records_write(dir, all, n) == 0);
	snprintf(path, sizeof(path), "%s/requests.bin", dir);
	CHECK(recfile_read_all(path, TT_REC_REQUEST, sizeof(struct tt_request), (void **)&back, &nback) == 0);
	CHECK(nback == n && !memcmp(back, all, n * sizeof(*all)));
	CHECK(records_write("/nonexistent-dir/x", all, n) == -ENOENT);
	free(back);
	free(all);
	recbuf_free(&a);
	recbuf_free(&b);
	recbuf_free(&c);
}

int main(int argc, char **argv)
{
	CHECK(argc > 1);
	test_percentile_nearest_rank();
	test_stats_fixture();
	test_records_roundtrip(argv[1]);
	printf("test_hl_stats: ok\n");
	return 0;
}
