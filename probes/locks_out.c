// SPDX-License-Identifier: MIT
/* locks side file: acquirers' user stacks, appended to stacks.jsonl. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <json_out.h>

#include "syms.h"
#include "locks.h"

static void stack_write(FILE *f, struct tt_syms *syms, __u32 id, const __u64 *ips, int depth)
{
	char buf[512];

	fprintf(f, "{\"stream\":\"locks\",\"id\":%u,\"kind\":\"user\",\"frames\":[", id);
	for (int i = 0; i < depth && ips[i]; i++) {
		if (i)
			fputc(',', f);
		json_write_string(f, syms_resolve(syms, ips[i], buf, sizeof(buf)));
	}
	fputs("]}\n", f);
}

int locks_stacks_write(const char *out_dir, struct tt_syms_set *syms, int stacks_fd,
		       const uint32_t *stack_pid, int n)
{
	__u64 ips[LOCKS_STACK_DEPTH];
	char path[PATH_MAX];
	int err = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/stacks.jsonl", out_dir);
	f = fopen(path, "ae"); /* the offcpu module writes here too */
	if (!f)
		return -errno;
	for (__u32 id = 0; id < (__u32)n; id++) {
		if (!stack_pid[id])
			continue;
		memset(ips, 0, sizeof(ips));
		if (bpf_map_lookup_elem(stacks_fd, &id, ips))
			continue;
		stack_write(f, syms_set_get(syms, (int)stack_pid[id], true), id, ips,
			    LOCKS_STACK_DEPTH);
	}
	if (fclose(f))
		err = -errno;
	return err;
}
