/* SPDX-License-Identifier: MIT */
/*
 * flight_store: the flight recorder's memory (--flight-recorder). Records of
 * every stream, in arrival order, in chunks (1 MiB); a chunk whose newest record
 * arrived more than keep_ns ago is freed, and the oldest goes early when the
 * store would pass max_bytes (counted: the window was shorter than asked).
 * Nothing here touches the disk.
 */
#ifndef TT_FLIGHT_STORE_H
#define TT_FLIGHT_STORE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FLIGHT_CHUNK_BYTES (1u << 20)

struct flight_store;

struct flight_store_stats {
	uint64_t bytes, peak_bytes;  /* chunk memory now, and its most */
	uint64_t records;            /* held now */
	uint64_t evicted_early;      /* chunks freed before keep_ns for max_bytes */
	uint64_t refused;            /* records not kept (no memory at all) */
	uint64_t oldest_ns;          /* arrival time of the oldest record held, 0: none */
	uint64_t added_bytes;        /* every record ever kept, with its type byte */
	uint64_t max_bytes;          /* the cap now */
};

/* chunk_bytes: records a chunk holds (0: FLIGHT_CHUNK_BYTES; tests vary it). */
struct flight_store *flight_store_new(uint64_t keep_ns, uint64_t max_bytes, size_t chunk_bytes);
void flight_store_free(struct flight_store *s);
/* Keep n records of one type (records.h), arrived at now_ns or later: each
 * counts as arrived at the later of now_ns and its end (flight_rec_range).
 * 0 or -ENOMEM. */
int flight_store_add(struct flight_store *s, uint32_t type, const void *recs, size_t n,
		     uint64_t now_ns);
/* A new cap (from the next chunk on; at least one chunk). */
void flight_store_set_max(struct flight_store *s, uint64_t max_bytes);
/* Free what is older than keep_ns. */
void flight_store_expire(struct flight_store *s, uint64_t now_ns);
/* Call fn for every record of `type` held whose time range (flight_rec_range)
 * overlaps [t0, t1]; type 0: every type. Stops at a non-zero return (returned).
 * A record arrives no earlier than it ends (flight_store_add): chunks that
 * arrived before t0 are not read. */
typedef int (*flight_rec_fn)(void *arg, uint32_t type, const void *rec);
int flight_store_each(const struct flight_store *s, uint32_t type, uint64_t t0, uint64_t t1,
		      flight_rec_fn fn, void *arg);
void flight_store_stats(const struct flight_store *s, struct flight_store_stats *out);
/* The time a record covers, by its type: [*t0, *t1] (CLOCK_MONOTONIC ns). An
 * occupancy record is the start of a CPU's occupant: [t, t]. false: unknown type. */
bool flight_rec_range(uint32_t type, const void *rec, uint64_t *t0, uint64_t *t1);

#endif
