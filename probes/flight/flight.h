/* SPDX-License-Identifier: MIT */
/*
 * flight: tailtrace's flight recorder (--flight-recorder SECONDS --trigger
 * EXPR). Every stream's records go to memory (flight_store.c), not to the run
 * directory; each span is checked against the trigger (flight_trigger.c) as it
 * arrives. A span above it schedules a capture of [start - margin, end +
 * margin], written once the records of that window have arrived: a run
 * directory OUT/captures/NNNN with the window's records (widened to cover
 * every span that overlaps it: flight_window.h), the side files the
 * modules write for them (tasks, stacks, occupants) and meta.json "capture",
 * listed in OUT/captures.jsonl. Triggers whose windows overlap one pending
 * coalesce into it; --max-captures-per-min and --max-disk-mb skip the rest,
 * counted. docs/flight-recorder.md.
 */
#ifndef TT_FLIGHT_H
#define TT_FLIGHT_H
#include <stdint.h>
#include <stdio.h>
#include "flight/flight_store.h"
#include "flight/flight_trigger.h"
#include "core/probe.h"

struct flight;

struct flight_opts {
	double seconds;            /* what memory holds */
	uint64_t max_bytes;        /* its cap; with auto_size its ceiling */
	bool auto_size;            /* the cap follows the record rate (no --flight-mb) */
	struct flight_trigger trig;
	uint64_t margin_ns;        /* kept before and after a triggering span */
	unsigned max_per_min;      /* captures a minute */
	uint64_t max_disk_bytes;   /* all captures together */
	bool tee;                  /* --debug flight-tee: every record also to OUT/<kind>.bin */
};

/* Write a capture's side files and meta.json (the loader: every module's
 * capture hook, then meta.json with cap->json as "capture"). 0 or -errno. */
typedef int (*flight_capture_fn)(void *arg, const struct tt_capture *cap);

/* Options from the command line; 0 or -EINVAL with a one-line reason. */
int flight_opts_from(const struct tt_opts *o, struct flight_opts *fo, char *err, size_t len);
struct flight *flight_new(const struct flight_opts *fo, const char *out_dir, flight_capture_fn fn,
			  void *arg);
void flight_free(struct flight *f);
/* The recfile sink every stream writes to in this mode (recfile_open_sink). */
int flight_sink(void *arg, uint32_t rec_type, const void *recs, size_t n);
/* Refresh the live threshold, free old records, write a capture that is due.
 * now_ns: read before the loader's poll (the records it takes arrive after it).
 * Returns the ms until it wants to run again. */
int flight_tick(struct flight *f, uint64_t now_ns);
/* Tracing ends: write the captures still pending with what has arrived. */
void flight_finish(struct flight *f);
/* meta.json member "flight": settings and counters. */
void flight_meta(const struct flight *f, FILE *out);
/* One line for stderr at the end: "flight recorder: 3 captures ...". */
void flight_print(const struct flight *f, FILE *out);

/* The recorder's families for the exporter (exporter_source.extra; arg: the flight):
 * the span latency histogram with exemplars naming captures, triggers, captures by
 * the triggering thread's state, what was not captured, the threshold, memory. */
void flight_render(void *arg, FILE *out, int fmt);
/* Counters (tests, messages). */
struct flight_counts {
	uint64_t spans, triggers, captures, coalesced, skipped_rate, skipped_disk, failed;
	uint64_t threshold_ns;     /* the live or fixed threshold now, 0: warming up */
	uint64_t store_bytes;
	const char *last_capture;  /* "captures/0003", NULL: none */
	uint64_t last_latency_ns;
};
void flight_counts(const struct flight *f, struct flight_counts *out);

#endif
