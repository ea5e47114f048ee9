/* SPDX-License-Identifier: MIT */
/*
 * sched_stacks: the geometry of the scheduler's off-CPU stack maps, which
 * sched.bpf.c fills, sched.c sizes and offcpu.c reads (ids to maps and keys).
 * Only these constants: offcpu reads the maps without sched's types (sched.h),
 * and sched.c drives offcpu (offcpu.h).
 */
#ifndef TT_SCHED_STACKS_H
#define TT_SCHED_STACKS_H

#define SCHED_STACK_DEPTH 64      /* frames kept per stack */
#define SCHED_STACK_ENTRIES 16384 /* distinct stacks (stack map size) */
/* A stack map has one stack per bucket (hash of the frames, no chaining): a
 * second stack hashing to a taken bucket is refused (-EEXIST), even with the
 * map nearly empty (33 distinct stacks collide in ~3% of pool/100 runs). Such
 * a stack goes to the first spill map, a third one of that bucket to the
 * second (the same bucket index in maps of one size: each level holds one
 * more stack per bucket); their ids are offset by SCHED_STACK_ENTRIES and
 * 2 x SCHED_STACK_ENTRIES. */
#define SCHED_STACK_LEVELS 3 /* the map and its two spill maps */
#define SCHED_STACK_IDS (SCHED_STACK_LEVELS * SCHED_STACK_ENTRIES)
/* The flight recorder's maps take turns (stack_epoch.h): a second generation
 * of the three, and ids epoch x SCHED_STACK_IDS + the id above. */
#define SCHED_STACK_GENS 2
#define SCHED_STACK_MAPS (SCHED_STACK_GENS * SCHED_STACK_LEVELS)

#endif
