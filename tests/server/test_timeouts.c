/* SPDX-License-Identifier: MIT */
/* Unit tests of the orders-server timeout lists (timeouts.h): per-phase
 * timeouts, order kept by re-marking, expiry of exactly the old nodes,
 * disabled phases, and a randomised check against a brute-force scan. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "timeouts.h"

#include "check.h"

#define MS 1000000ull

/* REQUEST 100 ms, IDLE 1000 ms, LINGER 50 ms. */
static void init(struct tmo_lists *l)
{
	const uint32_t timeout_ms[TMO_PHASES] = { 100, 1000, 50 };

	tmo_init(l, timeout_ms);
}

/* Nodes on the list of phase, newest first, must be exactly want[0..n). */
static int list_is(const struct tmo_lists *l, unsigned phase, struct tmo_node **want, int n)
{
	const struct tmo_node *p = l->list[phase].newest, *prev = NULL;
	int i;

	for (i = 0; i < n; i++, prev = p, p = p->older)
		if (p != want[i] || p->newer != prev || p->phase != phase)
			return 0;
	return p == NULL && l->list[phase].oldest == (n ? want[n - 1] : NULL);
}

static void test_empty(void)
{
	struct tmo_lists l;

	init(&l);
	CHECK(tmo_expired(&l, 0) == NULL);
	CHECK(tmo_expired(&l, UINT64_MAX) == NULL);
	CHECK(tmo_any(&l) == NULL);
	CHECK(tmo_armed(&l) == 0);
}

static void test_expiry_per_phase(void)
{
	struct tmo_node a, b, c;
	struct tmo_lists l;

	init(&l);
	tmo_insert(&l, &a, TMO_REQUEST, 10 * MS);
	tmo_insert(&l, &b, TMO_IDLE, 20 * MS);
	tmo_insert(&l, &c, TMO_LINGER, 30 * MS);
	CHECK(tmo_armed(&l) == 1);
	CHECK(tmo_expired(&l, 79 * MS) == NULL);
	CHECK(tmo_expired(&l, 80 * MS) == &c); /* linger: 30 + 50 */
	tmo_remove(&l, &c);
	CHECK(tmo_expired(&l, 109 * MS) == NULL);
	CHECK(tmo_expired(&l, 110 * MS) == &a); /* request: 10 + 100 */
	tmo_mark(&l, &a, TMO_IDLE, 110 * MS);   /* answered: now idle */
	CHECK(tmo_expired(&l, 1019 * MS) == NULL);
	CHECK(tmo_expired(&l, 1020 * MS) == &b); /* idle: 20 + 1000 */
	tmo_remove(&l, &b);
	CHECK(tmo_expired(&l, 1109 * MS) == NULL);
	CHECK(tmo_expired(&l, 1110 * MS) == &a);
	tmo_remove(&l, &a);
	CHECK(tmo_any(&l) == NULL && tmo_armed(&l) == 0);
	/* A mark later than now (clock read before the mark): not expired. */
	tmo_insert(&l, &a, TMO_REQUEST, 500 * MS);
	CHECK(tmo_expired(&l, 400 * MS) == NULL);
}

static void test_mark_keeps_order(void)
{
	struct tmo_node n[4];
	struct tmo_lists l;
	int i;

	init(&l);
	for (i = 0; i < 4; i++)
		tmo_insert(&l, &n[i], TMO_IDLE, (uint64_t)i * MS);
	{
		struct tmo_node *want[] = { &n[3], &n[2], &n[1], &n[0] };

		CHECK(list_is(&l, TMO_IDLE, want, 4));
	}
	tmo_mark(&l, &n[1], TMO_IDLE, 10 * MS); /* middle -> head */
	tmo_mark(&l, &n[0], TMO_IDLE, 11 * MS); /* tail -> head */
	tmo_mark(&l, &n[0], TMO_IDLE, 12 * MS); /* head stays head */
	{
		struct tmo_node *want[] = { &n[0], &n[1], &n[3], &n[2] };

		CHECK(list_is(&l, TMO_IDLE, want, 4));
		CHECK(n[0].t_mark_ns == 12 * MS);
	}
	tmo_mark(&l, &n[3], TMO_REQUEST, 13 * MS); /* to another phase */
	{
		struct tmo_node *idle[] = { &n[0], &n[1], &n[2] }, *req[] = { &n[3] };

		CHECK(list_is(&l, TMO_IDLE, idle, 3));
		CHECK(list_is(&l, TMO_REQUEST, req, 1));
	}
	/* n[3] (request, 13 ms) expires at 113 ms; the oldest idle is n[2]
	 * (2 ms): at 1002 ms, then n[1] (10 ms) at 1010. */
	CHECK(tmo_expired(&l, 112 * MS) == NULL);
	CHECK(tmo_expired(&l, 113 * MS) == &n[3]);
	tmo_remove(&l, &n[3]);
	CHECK(tmo_expired(&l, 1001 * MS) == NULL);
	CHECK(tmo_expired(&l, 1002 * MS) == &n[2]);
	tmo_remove(&l, &n[2]);
	CHECK(tmo_expired(&l, 1009 * MS) == NULL);
	CHECK(tmo_expired(&l, 1010 * MS) == &n[1]);
}

static void test_disabled_phase(void)
{
	const uint32_t timeout_ms[TMO_PHASES] = { 0, 0, 50 };
	struct tmo_node a, b;
	struct tmo_lists l;

	tmo_init(&l, timeout_ms);
	tmo_insert(&l, &a, TMO_REQUEST, 0);
	tmo_insert(&l, &b, TMO_IDLE, 0);
	CHECK(tmo_armed(&l) == 0);
	CHECK(tmo_expired(&l, UINT64_MAX) == NULL);
	CHECK(tmo_any(&l) != NULL);
	tmo_mark(&l, &b, TMO_LINGER, 10 * MS);
	CHECK(tmo_armed(&l) == 1);
	CHECK(tmo_expired(&l, 60 * MS) == &b);
}

/* Random inserts, marks and removals with a monotonic clock; after each
 * step, draining tmo_expired() must give exactly the nodes a brute-force
 * check finds expired. */
static void test_random_against_brute_force(void)
{
	enum { N = 64, STEPS = 20000 };
	static struct tmo_node n[N];
	int on[N] = { 0 }, i, step, expired, brute;
	struct tmo_lists l;
	uint64_t now = 0;
	struct tmo_node *e;

	init(&l);
	srand(7);
	for (step = 0; step < STEPS; step++) {
		i = rand() % N;
		now += (uint64_t)(rand() % 20) * MS;
		if (!on[i]) {
			tmo_insert(&l, &n[i], (unsigned)(rand() % TMO_PHASES), now);
			on[i] = 1;
		} else if (rand() % 4 == 0) {
			tmo_remove(&l, &n[i]);
			on[i] = 0;
		} else {
			tmo_mark(&l, &n[i], (unsigned)(rand() % TMO_PHASES), now);
		}
		brute = 0;
		for (i = 0; i < N; i++)
			brute += on[i] && now - n[i].t_mark_ns >= l.timeout_ns[n[i].phase];
		for (expired = 0; (e = tmo_expired(&l, now)); expired++) {
			CHECK(now - e->t_mark_ns >= l.timeout_ns[e->phase]);
			tmo_remove(&l, e);
			on[e - n] = 0;
		}
		CHECK(expired == brute);
	}
}

int main(void)
{
	test_empty();
	test_expiry_per_phase();
	test_mark_keeps_order();
	test_disabled_phase();
	test_random_against_brute_force();
	if (failures) {
		fprintf(stderr, "test_timeouts: %d failures\n", failures);
		return 1;
	}
	printf("test_timeouts: ok\n");
	return 0;
}
