/* SPDX-License-Identifier: MIT */
/*
 * Request records: each executing thread appends to its own buffer
 * (preallocated, no locks); at the end they are gathered, sorted by id and
 * written in bulk to DIR/requests.bin.
 */
#ifndef HL_RECORDS_H
#define HL_RECORDS_H
#include <stddef.h>
#include <tailtrace/records.h>

struct hl_recbuf {
	struct tt_request *recs;
	size_t n, cap;
	int err; /* -ENOMEM if a record had to be dropped */
};

int recbuf_init(struct hl_recbuf *b, size_t cap);
void recbuf_push(struct hl_recbuf *b, const struct tt_request *r);
void recbuf_free(struct hl_recbuf *b);

/* Concatenate the buffers into one malloc'ed array sorted by id. */
int records_gather(struct hl_recbuf *const *bufs, unsigned n, struct tt_request **out, size_t *count);
/* DIR/requests.bin via recfile. 0 or -errno. */
int records_write(const char *dir, const struct tt_request *recs, size_t n);

#endif
