/* SPDX-License-Identifier: MIT */
/*
 * A target's process tree as the loader knows it: the targets and every
 * descendant process found under them in /proc (each thread's
 * task/TID/children), up to TT_TREE_DEPTH levels, as the BPF filter follows
 * them (filter.bpf.h). The scheduler events of a descendant need nothing of
 * this: the filter reads its ancestry at every event. Its uprobes do: a
 * uprobe attached for one pid does not reach the processes it forks, so the
 * loader attaches them for each process found here (tree_scan at start, then
 * every TREE_SCAN_MS).
 */
#ifndef TT_TREE_H
#define TT_TREE_H
#include <stdint.h>

#define TREE_SCAN_MS 100

struct tt_tree {
	int *pids;           /* every process found, the targets first */
	uint64_t *started;   /* each one's start time (a reused pid is another process) */
	int n, cap;
	int ntargets;
};

/* The tree of these targets, found so far: the targets alone. 0 or -ENOMEM. */
int tree_init(struct tt_tree *t, const int *targets, int ntargets);
/* Walk the tree again; fresh(arg, pid) for each process not seen before,
 * descendants of a process before its own children. Returns how many were
 * new, or -ENOMEM. */
int tree_scan(struct tt_tree *t, void (*fresh)(void *arg, int pid), void *arg);
void tree_free(struct tt_tree *t);

#endif
