/* grow.h: doubling from the first size, contents kept, nothing done while
 * there is room, and an impossible size refused with the array intact. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "grow.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); exit(1); } } while (0)

struct item {
	uint64_t a, b;
};

static void test_doubling_keeps_contents(void)
{
	struct item *v = NULL;
	size_t n = 0, cap = 0, caps[8], ncaps = 0;

	for (uint64_t i = 0; i < 1000; i++) {
		size_t before = cap;

		CHECK(TT_GROW(v, n, cap, 64) == 0);
		if (cap != before) {
			CHECK(ncaps < 8);
			caps[ncaps++] = cap;
		}
		v[n++] = (struct item){ i, ~i };
	}
	CHECK(ncaps == 5 && caps[0] == 64 && caps[1] == 128 && caps[4] == 1024);
	for (uint64_t i = 0; i < 1000; i++)
		CHECK(v[i].a == i && v[i].b == ~i);
	free(v);
}

static void test_no_change_while_room(void)
{
	struct item *v = malloc(4 * sizeof(*v)), *orig = v;
	size_t cap = 4;

	CHECK(v);
	CHECK(TT_GROW(v, 3, cap, 64) == 0 && v == orig && cap == 4);
	free(v);
}

static void test_overflow_refused(void)
{
	struct item *v = malloc(sizeof(*v)), *orig = v;
	size_t cap = SIZE_MAX / sizeof(*v) / 2 + 1; /* doubling would overflow */

	CHECK(v);
	CHECK(TT_GROW(v, cap, cap, 64) == -ENOMEM);
	CHECK(v == orig && cap == SIZE_MAX / sizeof(*v) / 2 + 1);
	free(v);
}

int main(void)
{
	test_doubling_keeps_contents();
	test_no_change_while_room();
	test_overflow_refused();
	puts("test_grow: ok");
	return 0;
}
