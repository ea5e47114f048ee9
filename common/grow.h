/* SPDX-License-Identifier: MIT */
/*
 * Grow-by-doubling arrays: make room for one more element.
 *
 *   if (TT_GROW(v->items, v->n, v->cap, 64))
 *           return -ENOMEM;        // v->items and v->cap unchanged
 *   v->items[v->n++] = x;
 *
 * With n < cap it does nothing; otherwise cap doubles (first: the size of an
 * empty array) and items is reallocated. 0, or -ENOMEM (also on size_t
 * overflow) with the array left as it was.
 */
#ifndef TT_GROW_H
#define TT_GROW_H
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static inline void *tt_grow_realloc(void *items, size_t *cap, size_t elem, size_t first)
{
	size_t c = *cap ? *cap * 2 : first;
	void *p;

	if (c < *cap || c > SIZE_MAX / elem)
		return NULL;
	p = realloc(items, c * elem);
	if (p)
		*cap = c;
	return p;
}

#define TT_GROW(items, n, cap, first)                                                    \
	__extension__({                                                                   \
		int tt_rc_ = 0;                                                           \
		if ((n) >= (cap)) {                                                       \
			void *tt_p_ = tt_grow_realloc((items), &(cap), sizeof(*(items)),  \
						      (first));                           \
			if (tt_p_)                                                        \
				(items) = tt_p_;                                          \
			else                                                              \
				tt_rc_ = -ENOMEM;                                         \
		}                                                                         \
		tt_rc_;                                                                   \
	})

/* Append len bytes to a byte array *buf of *n used and *cap allocated (a pool of
 * names that other records refer to by offset): the offset they start at, or
 * -ENOMEM with the array left as it was. */
static inline long tt_pool_add(char **buf, size_t *n, size_t *cap, const void *bytes, size_t len)
{
	size_t at = *n;

	if (*n + len > *cap) {
		size_t c = *cap ? *cap * 2 : 65536;
		char *p;

		while (c < *n + len)
			c *= 2;
		if (!(p = realloc(*buf, c)))
			return -ENOMEM;
		*buf = p, *cap = c;
	}
	memcpy(*buf + at, bytes, len);
	*n += len;
	return (long)at;
}

#endif
