/* SPDX-License-Identifier: MIT */
/*
 * perfmap: JIT code's names from the runtime's /tmp/perf-PID.map and its
 * jit-PID.dump (perfmap.c), for addresses no file mapping covers.
 */
#ifndef TT_PERFMAP_H
#define TT_PERFMAP_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct perfmap;

/* pid's perf map, found as the process sees /tmp (its mount and pid
 * namespaces); nothing is read yet, and the file need not exist yet. */
struct perfmap *perfmap_new(int pid);
/* "name+0x1c (perf-PID.map)" (or "(jit-PID.dump)") into buf: 0, or -ENOENT when no entry covers
 * addr (after reading what the runtime appended since the last look). */
int perfmap_lookup(struct perfmap *m, uint64_t addr, char *buf, size_t len);
/* Read what the runtime appended since the last read: 0 or -errno. */
int perfmap_refresh(struct perfmap *m);
void perfmap_free(struct perfmap *m);

#endif
