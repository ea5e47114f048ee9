// SPDX-License-Identifier: MIT
/*
 * syms_set: one symbolizer per traced process (syms.h), made when the process
 * is first seen with a user stack, so its mappings are read while it lives:
 * stacks of a --comm or --all target that exits before tailtrace ends still
 * resolve. The off-CPU and lock stack writers share it.
 */
#include "symbols/syms.h"

#include <stdlib.h>

#define SYMS_SET_MAX 256 /* processes kept; more are symbolized at the end only */

struct tt_syms_set {
	struct {
		int pid;
		struct tt_syms *syms;
	} e[SYMS_SET_MAX];
	int n;
};

struct tt_syms_set *syms_set_new(void)
{
	return calloc(1, sizeof(struct tt_syms_set));
}

struct tt_syms *syms_set_get(struct tt_syms_set *set, int pid, bool create)
{
	if (!set || pid <= 0)
		return NULL;
	for (int i = 0; i < set->n; i++)
		if (set->e[i].pid == pid)
			return set->e[i].syms;
	if (!create || set->n == SYMS_SET_MAX)
		return NULL;
	set->e[set->n].pid = pid;
	set->e[set->n].syms = syms_new(pid); /* reads /proc/PID/maps now */
	return set->e[set->n++].syms;
}

void syms_set_refresh(struct tt_syms_set *set)
{
	for (int i = 0; set && i < set->n; i++)
		syms_refresh(set->e[i].syms);
}

void syms_set_free(struct tt_syms_set *set)
{
	for (int i = 0; set && i < set->n; i++)
		syms_free(set->e[i].syms);
	free(set);
}
