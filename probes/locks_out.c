// SPDX-License-Identifier: MIT
/* locks side file: acquirers' user stacks, appended to stacks.jsonl. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>

#include "stacks_out.h"
#include "syms.h"
#include "locks.h"

int locks_stacks_write(const char *out_dir, struct tt_syms_set *syms, int stacks_fd,
		       const uint32_t *stack_pid, int n)
{
	static char frames[LOCKS_STACK_DEPTH][STACKS_FRAME_LEN];
	__u64 ips[LOCKS_STACK_DEPTH];
	int err = 0;
	FILE *f = stacks_json_open(out_dir); /* the offcpu module writes there too */

	if (!f)
		return -errno;
	for (__u32 id = 0; id < (__u32)n; id++) {
		if (!stack_pid[id])
			continue;
		memset(ips, 0, sizeof(ips));
		if (bpf_map_lookup_elem(stacks_fd, &id, ips))
			continue;
		stacks_json_write(f, "locks", id, true, frames,
				  stacks_resolve(ips, LOCKS_STACK_DEPTH, true,
						 syms_set_get(syms, (int)stack_pid[id], true), NULL,
						 frames));
	}
	if (fclose(f))
		err = -errno;
	return err;
}
