/* SPDX-License-Identifier: MIT */
/* Internal: per-worker memory, on the worker's node when NUMA is in effect. */
#ifndef TP_SYSTEM_H
#define TP_SYSTEM_H
#include <stdbool.h>
#include <stddef.h>
#include "tp_topology.h"

/* Zeroed memory: numa_alloc_onnode(node) when numa, else 64-byte aligned. */
void *tp_mem_alloc(size_t bytes, int node, bool numa);
void tp_mem_free(void *p, size_t bytes, bool numa);

#endif
