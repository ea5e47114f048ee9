/* SPDX-License-Identifier: MIT */
/*
 * stack_epoch: stack maps that take turns, for the flight recorder, which
 * runs for hours while a BPF stack map only fills. A module keeps its stack
 * maps in two generations and its BPF side a global stack_epoch: an epoch's
 * stacks go to generation epoch & 1, emptied before the epoch begins, and a
 * stack id carries its epoch (id = epoch x ids + the id in its generation),
 * so an id of an emptied epoch never names a later stack. The loader reads
 * the ids of the current and the previous epoch; older ones have expired.
 * Epochs wrap at an even count with every id below 2^31.
 */
#ifndef TT_STACK_EPOCH_H
#define TT_STACK_EPOCH_H
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct tt_ctx;

struct stack_epochs {
	uint64_t period_ns;   /* an epoch's length, 0: one epoch for the run */
	uint64_t next_ns;     /* when the next one begins */
	uint64_t begun;       /* epochs begun after the first */
	uint64_t expired;     /* ids of an emptied epoch a capture met */
	uint32_t ids;         /* ids an epoch has (its generation's maps) */
	uint32_t wrap;        /* epochs before they start again from 0 */
};

/* Taking turns: only under the flight recorder, with stacks wanted (period:
 * twice what memory holds, at least a minute, or --debug stack-epoch-ms). */
void stack_epochs_init(struct stack_epochs *e, const struct tt_ctx *ctx, bool stacks,
		       uint32_t ids, uint64_t now_ns);
/* The next epoch, when due: the generation it uses emptied (gen_fds: its
 * nfds maps), then *epoch (the BPF global) set. Returns the ms until the next
 * one, -1: never. No program still uses that generation: it was the current
 * one an epoch ago. */
int stack_epochs_tick(struct stack_epochs *e, uint32_t *epoch, const int *const gen_fds[2],
		      int nfds, uint64_t now_ns);
/* Where a stack id's stack is: its generation (0, 1) and the id within it,
 * gen x ids + that; -1 for no stack or an expired one (counted). */
int64_t stack_epochs_slot(struct stack_epochs *e, uint32_t epoch, int32_t id);
/* meta.json member "NAME": {"period_ms", "begun", "expired"}, when taking turns. */
void stack_epochs_meta(const struct stack_epochs *e, const char *name, FILE *f);

#endif
