/* SPDX-License-Identifier: MIT */
/*
 * occupancy_out: the loader side of the occupancy stream (occupancy.h). The
 * slots that come with the runq records become occupancy.bin (time, CPU,
 * task); at the end the names BPF kept (occ_names) become occupants.bin (comm,
 * process, cgroup id) and the cgroup ids are named by their paths
 * (meta.json "cgroups").
 */
#ifndef TT_OCCUPANCY_OUT_H
#define TT_OCCUPANCY_OUT_H
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct bpf_map;
struct bpf_object;
struct occ_out;
struct occ_rec;
struct tt_ctx;
struct tt_opts;

/* Is the occupancy stream on (the cpu event; records or --listen; a typed hook)? */
bool occ_wanted(const struct tt_opts *o);
/* With records (occupancy.bin), not --listen's in-kernel split (occ_blame)? */
bool occ_records_wanted(const struct tt_opts *o);
/* And the irq event (interrupts noted among the occupants)? */
bool occ_irq_wanted(const struct tt_opts *o);
/* Shrink an object's occupancy maps when the stream or its records are off;
 * the irq event's programs (occ_*, after features_select_progs chose their
 * variant) load only with it. 0 or -errno. */
int occ_configure(struct bpf_object *obj, const struct tt_opts *o);
/* Create OUT/occupancy.bin (or its flight-recorder stream); NULL with errno set. */
struct occ_out *occ_out_open(const struct tt_ctx *ctx);
/* n slots of one CPU. */
void occ_out_write(struct occ_out *o, uint32_t cpu, const struct occ_rec *recs, uint32_t n);
/* The slots of each CPU's last batch a wait wanted (occupancy.h), from the
 * per-CPU map occ_cpu: so far if it is still filling, all of it if it filled
 * (it may have gone out after the ring buffer was last read). Those an earlier
 * call wrote are not written again; the batch itself may be too (the analysis
 * counts a slot written twice once). 0 or -errno. */
int occ_out_pending(struct occ_out *o, const struct bpf_map *cpus);
/* Flush occupancy.bin, write DIR/occupants.bin from the names map, name the
 * cgroups. 0 or -errno. */
int occ_out_finish(struct occ_out *o, const char *dir, const struct bpf_map *names);
/* DIR/occupants.bin from the names map (a capture's). 0 or -errno. */
int occ_out_occupants(struct occ_out *o, const char *dir, const struct bpf_map *names);
uint64_t occ_out_written(const struct occ_out *o);
uint64_t occ_out_dropped(const struct occ_out *o);
/* meta.json members: "cgroups": {"ID": "/path" or null (gone)}, "occupant_tids_reused". */
void occ_out_meta(const struct occ_out *o, FILE *f);
void occ_out_free(struct occ_out *o);

#endif
