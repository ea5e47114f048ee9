// SPDX-License-Identifier: MIT
/*
 * Uprobe cost calibration (calibrate.c): the emptiest uprobe and uretprobe
 * programs, attached to tailtrace's own test functions, so that what a hit
 * costs on this machine is measured, not assumed.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

__u64 hits = 0;

SEC("uprobe")
int calib_hit(void *ctx)
{
	hits++;
	return 0;
}

SEC("uretprobe")
int calib_ret(void *ctx)
{
	hits++;
	return 0;
}
