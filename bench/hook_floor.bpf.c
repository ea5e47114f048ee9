// SPDX-License-Identifier: MIT
/*
 * The floor under every tracer of the scheduler: empty programs on the two
 * hooks tailtrace's --aggregate uses (tp_btf sched_switch and sched_waking).
 * What they cost is what the kernel charges for running any BPF program there;
 * what tailtrace costs above them is its programs' bodies (docs/benchmarks.md).
 * With --usdt, an empty program on USDT probes instead: the floor under a span
 * of USDT marks (the trap each hit costs, and running any program there).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/usdt.bpf.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

SEC("tp_btf/sched_switch")
int BPF_PROG(floor_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return 0;
}

SEC("tp_btf/sched_waking")
int BPF_PROG(floor_waking, struct task_struct *p)
{
	return 0;
}

/* --usdt: the floor under any span of USDT marks (attached by the loader) */
SEC("usdt")
int floor_usdt(struct pt_regs *ctx)
{
	return 0;
}
