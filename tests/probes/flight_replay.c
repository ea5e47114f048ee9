/* flight_replay: a recorded run's records through the flight recorder's store,
 * then one capture of a window, written as the recorder writes it
 * (flight_window_plan + flight_window_write). For the property test
 * tests/analyze/explain/test_flight_capture.py: a capture must give every request the
 * parts the whole run gives it, whatever the window, chunk size, store length
 * and arrival order.
 *
 *   flight_replay RUN_DIR OUT_DIR T0_NS T1_NS NOW_NS CHUNK_BYTES KEEP_NS POLL_MAX_NS SEED
 *
 * Records arrive as a ring buffer delivers them: each stream is polled every
 * P ns (P drawn per stream in [1 ms, POLL_MAX_NS], with its own phase), and a
 * record arrives at the first poll after it ends, in its stream's order. The
 * capture is written at NOW_NS (the recorder writes it at its slot's end, at
 * least FLIGHT_ARRIVE_NS after T1), with what has arrived by then. Prints {"r0": .., "r1": .., "oldest_ns": ..,
 * "records": {type: n}} on stdout; exit 2 on bad arguments, 1 on an error. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <recfile.h>
#include <tailtrace/records.h>
#include "flight/flight_store.h"
#include "flight/flight_window.h"

static const uint32_t replay_types[] = { TT_REC_RUNQ, TT_REC_SWITCH, TT_REC_LOCK, TT_REC_SPAN,
					 TT_REC_OCC };
#define NTYPES (sizeof(replay_types) / sizeof(replay_types[0]))

struct arrival {
	uint64_t t_ns;
	uint32_t type;
	const unsigned char *rec;
	size_t seq;             /* the record's place in its file: ties keep it */
};

static uint64_t rng_state;

static uint64_t rng_next(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static int by_arrival(const void *a, const void *b)
{
	const struct arrival *x = a, *y = b;

	if (x->t_ns != y->t_ns)
		return x->t_ns < y->t_ns ? -1 : 1;
	if (x->type != y->type)
		return x->type < y->type ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Append the arrivals of one stream's file (absent: none). */
static int load_type(const char *dir, uint32_t type, uint64_t poll_max_ns, struct arrival **a,
		     size_t *n, void **keep)
{
	char path[4096];
	size_t size = recfile_kind_size(type), cnt = 0;
	void *recs = NULL;
	uint64_t period, phase, ready = 0;
	int err;

	snprintf(path, sizeof(path), "%s/%s", dir, recfile_kind_file(type));
	err = recfile_read_all(path, type, (uint32_t)size, &recs, &cnt);
	if (err == -ENOENT)
		return 0;
	if (err)
		return err;
	*keep = recs;
	period = 1000000 + rng_next() % (poll_max_ns > 1000000 ? poll_max_ns - 1000000 : 1);
	phase = rng_next() % period;
	*a = realloc(*a, (*n + cnt) * sizeof(**a));
	if (!*a)
		return -ENOMEM;
	for (size_t i = 0; i < cnt; i++) {
		const unsigned char *r = (const unsigned char *)recs + i * size;
		uint64_t t0, t1, poll;

		if (!flight_rec_range(type, r, &t0, &t1))
			return -EINVAL;
		poll = ((t1 + period - phase) / period) * period + phase; /* the next poll */
		ready = poll > ready ? poll : ready;   /* a ring delivers in order */
		(*a)[(*n)++] = (struct arrival){ .t_ns = ready, .type = type, .rec = r, .seq = i };
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct arrival *a = NULL;
	void *files[NTYPES] = { 0 };
	uint64_t t0, t1, keep_ns, poll_max_ns, now, records[TT_REC_TYPES] = { 0 };
	size_t n = 0, chunk;
	uint32_t types = 0;
	struct flight_store *s;
	struct flight_window w;
	struct flight_store_stats ss;
	int err = 0;

	if (argc != 10) {
		fprintf(stderr, "usage: flight_replay RUN_DIR OUT_DIR T0_NS T1_NS NOW_NS CHUNK_BYTES "
			"KEEP_NS POLL_MAX_NS SEED\n");
		return 2;
	}
	t0 = strtoull(argv[3], NULL, 10);
	t1 = strtoull(argv[4], NULL, 10);
	now = strtoull(argv[5], NULL, 10);
	chunk = strtoull(argv[6], NULL, 10);
	keep_ns = strtoull(argv[7], NULL, 10);
	poll_max_ns = strtoull(argv[8], NULL, 10);
	rng_state = strtoull(argv[9], NULL, 10) * 2654435761ull + 1;
	for (size_t k = 0; k < NTYPES && !err; k++)
		err = load_type(argv[1], replay_types[k], poll_max_ns, &a, &n, &files[k]);
	if (err) {
		fprintf(stderr, "flight_replay: %s: %s\n", argv[1], strerror(-err));
		return 1;
	}
	qsort(a, n, sizeof(*a), by_arrival);
	s = flight_store_new(keep_ns, UINT64_MAX, chunk);
	for (size_t i = 0; i < n && a[i].t_ns <= now && !err; i++) {
		err = flight_store_add(s, a[i].type, a[i].rec, 1, a[i].t_ns);
		types |= 1u << a[i].type;
	}
	flight_store_expire(s, now);
	flight_window_plan(s, t0, t1, now > FLIGHT_ARRIVE_NS ? now - FLIGHT_ARRIVE_NS : 0, &w);
	err = err ?: flight_window_write(s, &w, types, argv[2], records);
	if (err) {
		fprintf(stderr, "flight_replay: %s: %s\n", argv[2], strerror(-err));
		return 1;
	}
	flight_store_stats(s, &ss);
	printf("{\"r0\": %" PRIu64 ", \"r1\": %" PRIu64 ", \"oldest_ns\": %" PRIu64
	       ", \"records\": {", w.r0, w.r1, ss.oldest_ns);
	for (uint32_t t = 1, k = 0; t < TT_REC_TYPES; t++)
		if (types & (1u << t))
			printf("%s\"%u\": %" PRIu64, k++ ? ", " : "", t, records[t]);
	printf("}}\n");
	flight_store_free(s);
	for (size_t k = 0; k < NTYPES; k++)
		free(files[k]);
	free(a);
	return 0;
}
