/* SPDX-License-Identifier: MIT */
/*
 * --listen: the in-kernel histograms of --aggregate served to Prometheus.
 *
 * The BPF side keeps one log2 histogram per process (hist_by_process) and
 * sub-kind; at each scrape (and every EXPORTER_COLLECT_MS without one) the
 * exporter reads the maps, takes each process's increase since the last
 * read and adds it to that process's series, or to the "other" series when
 * the process has none: at most top_n processes get their own series, so a
 * busy host cannot blow up the series count, and every series only grows
 * (Prometheus counters). Slots go to the most active processes (scheduler
 * events): free ones at once, and every EXPORTER_RANK_S a process that was
 * idle the whole time yields its slot to an active one. An exited process's
 * series stays for one more ranking period, then goes. Its map entries are
 * deleted once read after its exit, so the maps hold live processes only.
 * Format: Prometheus text exposition 0.0.4 (docs/fleet.md lists the series).
 */
#ifndef TT_EXPORTER_H
#define TT_EXPORTER_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "export/exposition.h"
#include "core/probe.h"

#define EXPORTER_DEFAULT_TOP 20
#define EXPORTER_MAX_TOP 1000
#define EXPORTER_COLLECT_MS 5000
#define EXPORTER_RANK_S 60

struct bpf_map;

struct exporter_source {
	struct bpf_map *runq;    /* key {tgid, enum tt_runq_sub}; NULL: not traced */
	struct bpf_map *throttled; /* key {tgid, 0}: the waits' throttled parts; NULL: none */
	struct bpf_map *offcpu;  /* key {tgid, enum tt_wait_reason} */
	struct bpf_map *migrate; /* key {tgid, 0}: the count is the migrations */
	struct bpf_map *tasks;   /* tid -> struct tt_task: names of exited processes */
	struct bpf_map *blame;   /* the cpu event: occ_blame (occupancy.h); NULL: off */
	/* read at each scrape: per-stream lost/unmatched counts, and tailtrace's
	 * own CPU time so far (BPF programs, loader) in seconds */
	int (*stats)(void *arg, struct tt_stream_stats *out, int max);
	/* read at each scrape: the maps that can fill, with their refusals */
	int (*map_full)(void *arg, struct tt_map_full *out, int max);
	void (*self_cpu)(void *arg, double *bpf_s, double *loader_s);
	/* called before the maps are read: the threads' own histograms into
	 * them (aggregate_drain); NULL: nothing to do */
	void (*drain)(void *arg);
	/* more families, rendered after tailtrace's own (the flight recorder's); NULL:
	 * none. fmt: enum expo_format (exposition.h) */
	void (*extra)(void *arg, FILE *f, int fmt);
	void *arg;
};

struct exporter;

/* Listen on addr (http_serve.h); top_n processes get their own series.
 * 0, or -errno with one line in err. */
int exporter_open(struct exporter **ex, const char *addr, int top_n, char *err, size_t len);
void exporter_set_source(struct exporter *ex, const struct exporter_source *src);
/* "127.0.0.1:9431": where it listens (a port of 0 resolved). */
const char *exporter_address(const struct exporter *ex);
/* Wait up to timeout_ms for scrapes and answer them; collect when due. */
void exporter_poll(struct exporter *ex, int timeout_ms);
/* Read the maps now (the final collection before the run ends). */
void exporter_collect(struct exporter *ex);
/* The exposition (malloc'd) in that format, after a collection. 0 or -errno. */
int exporter_render(struct exporter *ex, enum expo_format fmt, char **text, size_t *len);
void exporter_free(struct exporter *ex);

#endif
