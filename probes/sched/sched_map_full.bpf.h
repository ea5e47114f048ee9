/* SPDX-License-Identifier: MIT */
/*
 * The sched object's count of the updates its maps refused for want of room
 * (core/map_full.h, enum sched_map). Included by every part of the object that
 * makes entries: sched.bpf.c, runq_switch.bpf.h, occupancy.bpf.h.
 */
#ifndef TT_SCHED_MAP_FULL_BPF_H
#define TT_SCHED_MAP_FULL_BPF_H
#include <bpf/bpf_helpers.h>
#include "core/counter.bpf.h"
#include "core/map_full.h"

TT_MAP_FULL_COUNTS(SCHED_MAP_NR);

#endif
