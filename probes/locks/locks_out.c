// SPDX-License-Identifier: MIT
/* locks side file: acquirers' user stacks, appended to stacks.jsonl. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>

#include "symbols/stacks_out.h"
#include "symbols/syms.h"
#include "locks/locks.h"
#include "symbols/stack_epoch.h"

int locks_stacks_write(const char *out_dir, struct tt_syms_set *syms, const int fds[2],
		       struct stack_epochs *epochs, uint32_t epoch,
		       const struct locks_stack *ids, size_t n)
{
	static char frames[STACKS_MAX_FRAMES][STACKS_FRAME_LEN];
	static const char *mangled[STACKS_MAX_FRAMES];
	__u64 ips[LOCKS_STACK_DEPTH];
	int err = 0;
	FILE *f = stacks_json_open(out_dir); /* the offcpu module writes there too */

	if (!f)
		return -errno;
	for (size_t i = 0; i < n; i++) {
		int64_t slot = stack_epochs_slot(epochs, epoch, ids[i].id);
		__u32 key = (__u32)(slot % LOCKS_STACK_ENTRIES);

		memset(ips, 0, sizeof(ips));
		if (slot < 0 || bpf_map_lookup_elem(fds[slot / LOCKS_STACK_ENTRIES], &key, ips))
			continue;
		int nf = stacks_resolve(ips, LOCKS_STACK_DEPTH, true,
					syms_set_get(syms, (int)ids[i].pid, true), NULL, frames, mangled);

		stacks_json_write(f, "locks", ids[i].id, true, frames, mangled, nf);
	}
	if (fclose(f))
		err = -errno;
	return err;
}
