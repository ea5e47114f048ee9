/* SPDX-License-Identifier: MIT */
/*
 * flight_window: which records a flight-recorder capture holds (flight.c).
 *
 * A capture is asked for a trigger window [t0, t1] (a slow span and its margins,
 * coalesced triggers). The requests it holds are the spans that overlap it; a
 * request is explained only when every record of its thread over the whole span
 * is in the capture, so the records' window [r0, r1] is the trigger window
 * widened to cover those spans: back to the earliest start, on to the latest
 * end. It is kept within what is surely known: no earlier than the oldest
 * record the store still holds (older chunks may have gone; this may cut the
 * trigger window itself when the store was full), no later than what has
 * surely arrived (records arrive after they end, within FLIGHT_ARRIVE_NS), and
 * no wider than FLIGHT_WIDEN_MAX_NS each side. The recorder waits for the
 * spans that end after the window (flight.c: a capture is written once its
 * spans' records have arrived). A span still not covered is written all the
 * same; the analysis counts it as having run partly outside the recorded time
 * and leaves it out of the bands.
 *
 * Written: the spans that overlap [t0, t1] or lie inside [r0, r1]; every other
 * record that overlaps [r0, r1] (occupancy from FLIGHT_OCC_BEFORE_NS before r0:
 * who held a CPU when a wait in the window began).
 */
#ifndef TT_FLIGHT_WINDOW_H
#define TT_FLIGHT_WINDOW_H
#include <stdint.h>
#include <tailtrace/records.h>
#include "flight/flight_store.h"

#define FLIGHT_ARRIVE_NS 300000000ull        /* after a record ends, it has arrived by then
					       * (the rings wake the loader in batches; it
					       * polls every 100 ms) */
#define FLIGHT_OCC_BEFORE_NS 1000000000ull   /* occupancy records this far before r0 */
#define FLIGHT_WIDEN_MAX_NS 10000000000ull   /* r0, r1: at most this beyond t0, t1 */

struct flight_window {
	uint64_t t0, t1;    /* the trigger window */
	uint64_t r0, r1;    /* the records' window: t0..t1 widened to cover its spans */
	uint64_t span_end;  /* the latest end of the spans that overlap [t0, t1] (held) */
};

/* Plan a capture of [t0, t1] from what the store holds, every record that ended
 * before arrived_ns having arrived (now - FLIGHT_ARRIVE_NS; at the end of a
 * run, with the rings drained: now). */
void flight_window_plan(const struct flight_store *s, uint64_t t0, uint64_t t1,
			uint64_t arrived_ns, struct flight_window *w);
/* Write the window's records into dir, one file a type of the bit mask types
 * (bit t: type t arrived); records[t]: how many. 0 or -errno. */
int flight_window_write(const struct flight_store *s, const struct flight_window *w,
			uint32_t types, const char *dir, uint64_t records[TT_REC_TYPES]);

#endif
