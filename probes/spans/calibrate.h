/* SPDX-License-Identifier: MIT */
/*
 * calibrate: what a uprobe hit costs on this machine, by class (disasm.h).
 * tailtrace attaches an empty program to its own functions that start with a
 * push (emulated), a 5-byte nop (optimized) and a mov (single-stepped), and
 * to a uretprobe, calls each a few hundred times and keeps the mean extra time
 * a call: ~10 ms, once, when spans or locks are traced. The figures replace
 * disasm.h's defaults (usite_cost_ns) and go into meta.json uprobe_costs_ns.
 */
#ifndef TT_CALIBRATE_H
#define TT_CALIBRATE_H

/* Measure and install the costs. 0, or -errno (the defaults stay). */
int calibrate_uprobes(void);

#endif
