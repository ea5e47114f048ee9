/* SPDX-License-Identifier: MIT */
/*
 * occupancy_out: the loader side of the occupancy stream (occupancy.h).
 * Records from the BPF ring become occupancy.bin (compact: time, CPU, task)
 * and one occupants.bin row per task named (comm, process, cgroup id); at
 * the end the cgroup ids are named by their paths (meta.json "cgroups").
 */
#ifndef TT_OCCUPANCY_OUT_H
#define TT_OCCUPANCY_OUT_H
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct occ_out;
struct tt_ctx;

struct bpf_object;
struct tt_opts;

/* Is the occupancy stream on (the cpu event, records, a typed hook)? */
bool occ_wanted(const struct tt_opts *o);
/* Size an object's occupancy maps (occ_ring: OCC_RING slots per possible CPU,
 * occ_rb: --ringbuf-mb), or shrink them when the stream is off. 0 or -errno. */
int occ_configure(struct bpf_object *obj, const struct tt_opts *o);
/* Create DIR/occupancy.bin; NULL with errno set. */
struct occ_out *occ_out_open(const char *dir);
/* A ring-buffer callback (libbpf ring_buffer_sample_fn) taking struct occ_slot. */
int occ_out_sample(void *state, void *data, size_t size);
/* Flush occupancy.bin, write DIR/occupants.bin, name the cgroups. 0 or -errno. */
int occ_out_finish(struct occ_out *o, const char *dir);
uint64_t occ_out_written(const struct occ_out *o);
uint64_t occ_out_dropped(const struct occ_out *o);
uint64_t occ_out_reused(const struct occ_out *o);
/* meta.json member: "cgroups": {"ID": "/path" or null (gone)}. */
void occ_out_meta(const struct occ_out *o, FILE *f);
void occ_out_free(struct occ_out *o);

#endif
