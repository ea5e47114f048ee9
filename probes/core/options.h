/* SPDX-License-Identifier: MIT */
/* tailtrace command line -> struct tt_opts (probe.h) + the command to run. */
#ifndef TT_OPTIONS_H
#define TT_OPTIONS_H
#include <stddef.h>
#include "core/probe.h"

/* Tracepoints only: lock waits come from the wait reasons at sched_switch; the locks
 * uprobes (exact hold times, three hits a lock/unlock pair) are opt-in. */
#define TT_DEFAULT_EVENTS (TT_EV_RUNQ | TT_EV_SWITCH | TT_EV_OFFCPU | TT_EV_CPU)
#define TT_DEFAULT_RINGBUF_MB 32
/* The largest ring whose size in bytes a map's max_entries (a __u32) holds, a power of two. */
#define TT_MAX_RINGBUF_MB 2048
#define TT_DEFAULT_MIN_OFFCPU_ALL_US 1000
/* --flight-recorder defaults (docs/flight-recorder.md) */
#define TT_DEFAULT_TRIGGER "p99.9"
#define TT_DEFAULT_FLIGHT_MB 1024
#define TT_DEFAULT_MARGIN_MS 20
#define TT_DEFAULT_CAPTURES_PER_MIN 6
#define TT_DEFAULT_MAX_DISK_MB 1024

struct tt_cli {
	struct tt_opts opts;
	char **cmd;            /* -- CMD ARGS (NULL-terminated), or NULL */
	bool events_given;     /* --events used (else defaults) */
	bool min_offcpu_given;
	bool top_given;
	char out_buf[256];     /* default run directory */
	char span_buf[TT_MAX_SPANS][1024]; /* --span copies, split in place (argv stays whole) */
	int argc;
	char **argv;           /* whole command line, for meta.json */
};

/* 0: parsed; 1: --help printed (exit 0); <0: bad input, one line in err. */
int options_parse(int argc, char **argv, struct tt_cli *cli, char *err, size_t len);
void options_usage(FILE *out);
/* "runq,switch,..." for an event mask. */
const char *options_events_str(unsigned events, char *buf, size_t len);

#endif
