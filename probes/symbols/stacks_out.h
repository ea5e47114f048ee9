/* SPDX-License-Identifier: MIT */
/*
 * Stacks for the run directory, for every module that takes them (offcpu,
 * locks): instruction pointers read from a BPF stack map -> symbolized frames
 * -> one stacks.jsonl line {"stream","id","kind","frames"[,"mangled"]}
 * (docs/architecture.md).
 */
#ifndef TT_STACKS_OUT_H
#define TT_STACKS_OUT_H
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <linux/types.h>

#include "symbols/syms.h"

#define STACKS_FRAME_LEN 512 /* demangled C++ names run long */
#define STACKS_MAX_FRAMES 128 /* a stack's frames, with the functions inlined in them */

/* The frames of ips[0..depth) (leaf first, up to the first 0) into frames:
 * user frames with syms (the process's symbolizer; NULL: addresses only),
 * kernel frames with ksyms, without the tracing machinery that ran the BPF
 * program on top. A user frame in a function that others were inlined into
 * (DWARF says so) is preceded by theirs, innermost first, as perf shows them:
 * "wait_for_work (inlined) (app)"; frames holds STACKS_MAX_FRAMES. C++ and Rust
 * names are demangled; mangled[i] (if mangled is not NULL, user stacks) is then
 * frame i's symbol as the file names it, else NULL. Returns the count. */
int stacks_resolve(const __u64 *ips, int depth, bool user, struct tt_syms *syms,
		   struct tt_ksyms *ksyms, char frames[][STACKS_FRAME_LEN], const char **mangled);
/* One stacks.jsonl line; "mangled": {"i": name} for the frames that were
 * demangled (mangled may be NULL). */
void stacks_json_write(FILE *f, const char *stream, int64_t id, bool user,
		       char frames[][STACKS_FRAME_LEN], const char *const *mangled, int n);
/* The length of a frame's function name: "ns::f(int, char)+0x1a (app)" -> the
 * length of "ns::f(int, char)"; "[unknown] (0x7f..)" -> of "[unknown]". */
size_t stacks_frame_func_len(const char *frame);
/* DIR/stacks.jsonl opened for appending (each module adds its own lines): a
 * FILE, or NULL with errno. */
FILE *stacks_json_open(const char *dir);

#endif
