/* SPDX-License-Identifier: MIT */
/* Per-thread request record buffers, gathered and written in bulk. */
#include "records.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "recfile.h"
#include <grow.h>

int recbuf_init(struct hl_recbuf *b, size_t cap)
{
	b->n = 0;
	b->err = 0;
	b->cap = cap ? cap : 64;
	b->recs = malloc(b->cap * sizeof(*b->recs));
	if (!b->recs) {
		b->cap = 0; /* recbuf_push will try to grow it */
		return -ENOMEM;
	}
	memset(b->recs, 0, b->cap * sizeof(*b->recs)); /* fault pages in now, off the hot path */
	return 0;
}

void recbuf_push(struct hl_recbuf *b, const struct tt_request *r)
{
	if (TT_GROW(b->recs, b->n, b->cap, 64)) {
		b->err = -ENOMEM;
		return;
	}
	b->recs[b->n++] = *r;
}

void recbuf_free(struct hl_recbuf *b)
{
	free(b->recs);
	b->recs = NULL;
	b->n = b->cap = 0;
}

static int cmp_id(const void *a, const void *b)
{
	const struct tt_request *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

int records_gather(struct hl_recbuf *const *bufs, unsigned n, struct tt_request **out, size_t *count)
{
	size_t total = 0, k = 0;
	struct tt_request *all;

	for (unsigned i = 0; i < n; i++)
		total += bufs[i] ? bufs[i]->n : 0;
	all = malloc((total ? total : 1) * sizeof(*all));
	if (!all)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		if (!bufs[i] || !bufs[i]->n)
			continue;
		memcpy(all + k, bufs[i]->recs, bufs[i]->n * sizeof(*all));
		k += bufs[i]->n;
	}
	qsort(all, total, sizeof(*all), cmp_id);
	*out = all;
	*count = total;
	return 0;
}

int records_write(const char *dir, const struct tt_request *recs, size_t n)
{
	struct recfile *f = recfile_open_kind(dir, TT_REC_REQUEST);
	int err, cerr;

	if (!f)
		return -errno;
	err = recfile_write(f, recs, n);
	cerr = recfile_close(f);
	return err ? err : cerr;
}
