/* SPDX-License-Identifier: MIT */
/*
 * exporter_antagonists: --listen with the cpu event. The kernel splits every
 * traced run-queue wait by what held the CPU meanwhile and adds the time up
 * by (waiting process, class, occupant) in occ_blame (occupancy.h); this
 * turns the map into the counter family
 *
 *   tailtrace_runqueue_wait_by_antagonist_seconds_total{comm, pid, cgroup,
 *       class, antagonist, antagonist_pid}
 *
 * one set per exporter series (the waiting process, or "other"), with at most
 * top_n named antagonists each: later ones are folded into antagonist="other"
 * of their class. Each read adds what every entry grew since the last one.
 */
#ifndef TT_EXPORTER_ANTAGONISTS_H
#define TT_EXPORTER_ANTAGONISTS_H
#include <stdint.h>
#include <stdio.h>

struct bpf_map;
struct ants;

/* nseries series (the exporter's, "other" included), top_n named antagonists
 * each; NULL when out of memory. */
struct ants *ants_new(int nseries, int top_n);
void ants_free(struct ants *a);
/* Read the map: each entry's growth goes to series series_of(arg, pid). */
void ants_collect(struct ants *a, struct bpf_map *map, int (*series_of)(void *arg, uint32_t pid),
		  void *arg);
/* A series slot now labels another process: its antagonists start anew. */
void ants_reset(struct ants *a, int series);
/* A waiting process is gone: its map entries go (after their last read). */
void ants_forget(struct ants *a, struct bpf_map *map, uint32_t pid);
/* The family: used(arg, i) says whether series i is shown, labels(arg, f, i)
 * writes its victim labels (without the braces' close). */
void ants_render(const struct ants *a, FILE *f, int (*used)(void *arg, int series),
		 void (*labels)(void *arg, FILE *f, int series), void *arg);

#endif
