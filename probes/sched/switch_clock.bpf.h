/* SPDX-License-Identifier: MIT */
/*
 * One timestamp per sched_switch for every program of sched.bpf.c attached to it.
 *
 * Where two programs hook sched_switch (the classic tracepoints, or --debug
 * split-switch: the switch records' program and runq's own), each calling
 * bpf_ktime_get_ns() itself put runq's interval edges 0.4-1.5 us after the
 * switch edges (the first program's run time, with its stack capture), enough
 * to break the per-request closure of 30-50 us requests by > 1 %. So the first
 * program to run at a switch takes the time and leaves it in a per-CPU slot
 * with the (prev, next) pair; the next program at the same switch finds the
 * pair pending and uses that time. Two consecutive switches on one CPU never
 * have the same pair (the next one's prev is this one's next, and prev !=
 * next), so a stale slot never matches. When one program does both parts'
 * switch work (the default with a typed hook, runq_switch.bpf.h), it is the
 * only one at a switch and reads the clock directly (sched.bpf.c shared_clock).
 * Every program calls it at the same switches: the typed variants (tp_btf,
 * raw_tp) at every switch with a traced prev or next (all modules filter
 * alike), the classic ones at every switch, before filtering. A switch of
 * untraced tasks costs no clock read.
 */
#ifndef TT_SWITCH_CLOCK_BPF_H
#define TT_SWITCH_CLOCK_BPF_H

struct tt_switch_clock {
	__u64 ts;
	__u32 prev;
	__u32 next;
	__u32 pending;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tt_switch_clock);
} switch_clock SEC(".maps");

static __always_inline __u64 tt_switch_now(__u32 prev_tid, __u32 next_tid)
{
	__u32 zero = 0;
	struct tt_switch_clock *c = bpf_map_lookup_elem(&switch_clock, &zero);
	__u64 now;

	if (c && c->pending && c->prev == prev_tid && c->next == next_tid) {
		c->pending = 0;
		return c->ts;
	}
	now = bpf_ktime_get_ns();
	if (c) {
		c->ts = now;
		c->prev = prev_tid;
		c->next = next_tid;
		c->pending = 1;
	}
	return now;
}

#endif
