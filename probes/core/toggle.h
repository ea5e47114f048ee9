/* SPDX-License-Identifier: MIT */
/*
 * --toggle-ms: the programs attached and detached in turn, for overhead
 * benchmarks that compare the traced and untraced halves of one workload run
 * (bench/overhead_interleave.sh) instead of separate runs that the
 * machine's drift keeps apart. Every change goes to OUT/toggles.txt as
 * "<begin ns> <end ns> on|off" (CLOCK_MONOTONIC): an attach can take seconds
 * on a busy machine (the kernel waits for RCU grace periods), and between
 * begin and end some programs run and others not yet. The next change comes
 * period_ms after the end of this one.
 */
#ifndef TT_TOGGLE_H
#define TT_TOGGLE_H
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "core/probe.h"

struct tt_toggle {
	unsigned period_ms; /* 0: off */
	bool on;            /* the programs are attached */
	uint64_t next_ns;   /* CLOCK_MONOTONIC: the next change */
	FILE *log;
};

/* Start toggling (programs attached now, at now_ns): opens out_dir/toggles.txt.
 * 0 or a negative errno. */
int toggle_start(struct tt_toggle *t, unsigned period_ms, const char *out_dir, uint64_t now_ns);
/* In the poll loop: make the change that is due. Returns the ms until the
 * next one (the poll timeout's upper bound), -1 when not toggling, or a
 * negative errno below -1 when a module could not attach again (then err
 * holds one line). */
int toggle_tick(struct tt_toggle *t, const struct tt_probe *const *mods, void *const *states,
		int nmods, uint64_t now_ns, char *err, size_t len);
/* Attach again if detached (the run's end reads the maps alike) and close
 * the log. */
void toggle_stop(struct tt_toggle *t, const struct tt_probe *const *mods, void *const *states,
		 int nmods);

#endif
