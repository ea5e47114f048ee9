/* SPDX-License-Identifier: MIT */
/*
 * Target filter settings, shared by the BPF side (filter.bpf.h) and the
 * loader (filter_configure() sets a skeleton's const volatile copies).
 */
#ifndef TT_FILTER_H
#define TT_FILTER_H

#define TT_FILTER_TGID   0x1 /* task->tgid is one of tt_targ_tgids (threads follow) */
#define TT_FILTER_COMM   0x2 /* task->group_leader->comm == tt_targ_comm */
#define TT_FILTER_CGROUP 0x4 /* task's cgroup v2 id == tt_targ_cgid */
#define TT_FILTER_TREE   0x8 /* with TGID: the targets' descendant processes too */
#define TT_COMM_LEN 16
#define TT_ALSO_MAX 4    /* == TT_MAX_ALSO_PIDS (probe.h): --also-pid tgids */
#define TT_TARGETS_MAX 8 /* == TT_MAX_PIDS (probe.h): the --pid list */
/* Parents followed up from a task to find a target among its ancestors: a
 * master's workers are one level down, a shell's grandchildren two; a deeper
 * descendant is not traced (docs/probes/README.md, "Process trees"). */
#define TT_TREE_DEPTH 8

#ifndef __VMLINUX_H__
#include <string.h>
#include <unistd.h>
#include "core/probe.h"

_Static_assert(TT_TARGETS_MAX == TT_MAX_PIDS, "one size for the --pid list");
_Static_assert(TT_ALSO_MAX == TT_MAX_ALSO_PIDS, "one size for the --also-pid list");

/* Set the filter globals of any skeleton whose .bpf.c includes filter.bpf.h. */
#define FILTER_CONFIGURE(rodata, ctx)                                            \
	do {                                                                     \
		const struct tt_opts *o__ = (ctx)->opts;                          \
		(rodata)->tt_self_tgid = (__u32)getpid();                        \
		(rodata)->tt_filter = 0;                                         \
		if ((ctx)->target_pid > 0) {                                     \
			(rodata)->tt_filter |= TT_FILTER_TGID | TT_FILTER_TREE;  \
			for (int t__ = 0; t__ < (ctx)->ntargets; t__++)          \
				(rodata)->tt_targ_tgids[t__] = (__u32)(ctx)->target_pids[t__]; \
			for (int a__ = 0; a__ < o__->nalso; a__++)               \
				(rodata)->tt_also_tgid[a__] = (__u32)o__->also_pids[a__]; \
		}                                                                \
		if (o__->comm) {                                                 \
			(rodata)->tt_filter |= TT_FILTER_COMM;                   \
			strncpy((char *)(rodata)->tt_targ_comm, o__->comm,       \
				TT_COMM_LEN - 1);                                \
		}                                                                \
		if ((ctx)->cgroup_id) {                                          \
			(rodata)->tt_filter |= TT_FILTER_CGROUP;                 \
			(rodata)->tt_targ_cgid = (ctx)->cgroup_id;               \
		}                                                                \
	} while (0)
#endif

#endif
