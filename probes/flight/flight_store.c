// SPDX-License-Identifier: MIT
/*
 * flight_store: records in memory, oldest chunk first (flight_store.h). An
 * entry is one type byte and the record (records.h sizes), unaligned: read
 * with memcpy.
 */
#include "flight/flight_store.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <recfile.h>
#include <tailtrace/records.h>

struct chunk {
	struct chunk *next;
	uint64_t t_first_ns, t_last_ns; /* arrival times of its first and last record */
	uint64_t records;
	size_t used;
	unsigned char data[];   /* the store's chunk_bytes */
};

struct flight_store {
	struct chunk *head, *tail;      /* oldest, newest */
	uint64_t keep_ns, max_bytes;
	size_t chunk_bytes;             /* a chunk's records; mapped: that + its header */
	uint64_t bytes, peak_bytes, records, evicted_early, refused, added_bytes;
};

static size_t chunk_size(const struct flight_store *s)
{
	return sizeof(struct chunk) + s->chunk_bytes;
}

void flight_store_set_max(struct flight_store *s, uint64_t max_bytes)
{
	s->max_bytes = max_bytes < chunk_size(s) ? chunk_size(s) : max_bytes;
}

struct flight_store *flight_store_new(uint64_t keep_ns, uint64_t max_bytes, size_t chunk_bytes)
{
	struct flight_store *s = calloc(1, sizeof(*s));

	if (s) {
		s->keep_ns = keep_ns;
		s->chunk_bytes = chunk_bytes ? chunk_bytes : FLIGHT_CHUNK_BYTES;
		flight_store_set_max(s, max_bytes);
	}
	return s;
}

static void drop_head(struct flight_store *s)
{
	struct chunk *c = s->head;

	s->head = c->next;
	if (!s->head)
		s->tail = NULL;
	s->bytes -= chunk_size(s);
	s->records -= c->records;
	munmap(c, chunk_size(s));
}

void flight_store_free(struct flight_store *s)
{
	while (s && s->head)
		drop_head(s);
	free(s);
}

void flight_store_expire(struct flight_store *s, uint64_t now_ns)
{
	/* never the newest chunk: it is still being filled */
	while (s->head && s->head != s->tail && s->head->t_last_ns + s->keep_ns < now_ns)
		drop_head(s);
}

static struct chunk *chunk_add(struct flight_store *s, uint64_t now_ns)
{
	struct chunk *c;

	flight_store_expire(s, now_ns);
	while (s->head && s->bytes + chunk_size(s) > s->max_bytes) {
		drop_head(s);
		s->evicted_early++;
	}
	/* mapped, not malloc'd: a freed chunk goes back to the system at once (glibc
	 * would soon serve 1 MiB blocks from its heap and keep them), so the
	 * loader's memory follows what the store holds */
	c = mmap(NULL, chunk_size(s), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (c == MAP_FAILED)
		return NULL;
	c->next = NULL;
	c->used = 0;
	c->records = 0;
	c->t_first_ns = now_ns;
	if (s->tail)
		s->tail->next = c;
	else
		s->head = c;
	s->tail = c;
	s->bytes += chunk_size(s);
	if (s->bytes > s->peak_bytes)
		s->peak_bytes = s->bytes;
	return c;
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

/* A record arrived no earlier than it ended (each is written at its end), nor
 * than now_ns, a time the caller read before it (the loader's clock before
 * its poll: one clock read a poll, not one a record). An end further ahead
 * than an hour is no time (a torn record): now_ns then. */
#define ARRIVAL_AHEAD_MAX_NS (3600ull * 1000000000ull)
static uint64_t arrival(uint32_t type, const void *rec, uint64_t now_ns)
{
	uint64_t t0, t1;

	if (!flight_rec_range(type, rec, &t0, &t1) || t1 <= now_ns ||
	    t1 - now_ns > ARRIVAL_AHEAD_MAX_NS)
		return now_ns;
	return t1;
}

int flight_store_add(struct flight_store *s, uint32_t type, const void *recs, size_t n,
		     uint64_t now_ns)
{
	size_t size = recfile_kind_size(type);
	const unsigned char *r = recs;

	if (!size || type > 255 || 1 + size > s->chunk_bytes)
		return -EINVAL;
	for (size_t i = 0; i < n; i++, r += size) {
		struct chunk *c = s->tail;
		uint64_t at = arrival(type, r, now_ns);

		if (!c || c->used + 1 + size > s->chunk_bytes)
			c = chunk_add(s, at);
		if (!c) {
			s->refused += n - i;
			return -ENOMEM;
		}
		c->data[c->used] = (unsigned char)type;
		memcpy(c->data + c->used + 1, r, size);
		c->used += 1 + size;
		c->records++;
		c->t_last_ns = max_u64(c->t_last_ns, at);
		s->records++;
	}
	s->added_bytes += n * (1 + size);
	return 0;
}

bool flight_rec_range(uint32_t type, const void *rec, uint64_t *t0, uint64_t *t1)
{
	union {
		struct tt_runq q;
		struct tt_switch w;
		struct tt_lock l;
		struct tt_span s;
		struct tt_span_context c;
		struct tt_occ o;
		struct tt_request r;
	} u;
	size_t size = recfile_kind_size(type);

	if (!size || size > sizeof(u))
		return false;
	memcpy(&u, rec, size);
	switch (type) {
	case TT_REC_RUNQ: *t0 = u.q.t_runnable_ns; *t1 = u.q.t_run_ns; return true;
	case TT_REC_SWITCH: *t0 = u.w.t_off_ns; *t1 = u.w.t_on_ns; return true;
	case TT_REC_LOCK:
		*t0 = u.l.t_request_ns;
		*t1 = max_u64(u.l.t_acquired_ns, u.l.t_released_ns);
		return true;
	case TT_REC_SPAN: *t0 = u.s.t_start_ns; *t1 = u.s.t_end_ns; return true;
	case TT_REC_SPAN_CONTEXT: *t0 = u.c.t_start_ns; *t1 = u.c.t_end_ns; return true;
	case TT_REC_OCC: *t0 = *t1 = u.o.t_ns; return true;
	case TT_REC_REQUEST: *t0 = u.r.t_enqueue_ns; *t1 = u.r.t_end_ns; return true;
	default: return false;
	}
}

int flight_store_each(const struct flight_store *s, uint32_t type, uint64_t t0, uint64_t t1,
		      flight_rec_fn fn, void *arg)
{
	for (const struct chunk *c = s->head; c; c = c->next) {
		/* a record arrives after it ends (each is written at its end): a chunk
		 * whose last arrival precedes t0 holds nothing that reaches t0. A
		 * capture reads the last few chunks, not the whole window of them. */
		if (c->t_last_ns < t0)
			continue;
		for (size_t off = 0; off < c->used;) {
			uint32_t ty = c->data[off];
			size_t size = recfile_kind_size(ty);
			const void *rec = c->data + off + 1;
			uint64_t a, b;
			int r;

			off += 1 + size;
			if ((type && ty != type) || !flight_rec_range(ty, rec, &a, &b) ||
			    b < t0 || a > t1)
				continue;
			if ((r = fn(arg, ty, rec)))
				return r;
		}
	}
	return 0;
}

void flight_store_stats(const struct flight_store *s, struct flight_store_stats *out)
{
	*out = (struct flight_store_stats){
		.bytes = s->bytes, .peak_bytes = s->peak_bytes, .records = s->records,
		.evicted_early = s->evicted_early, .refused = s->refused,
		.oldest_ns = s->head ? s->head->t_first_ns : 0,
		.added_bytes = s->added_bytes, .max_bytes = s->max_bytes,
	};
}
