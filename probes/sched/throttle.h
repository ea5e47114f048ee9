/* SPDX-License-Identifier: MIT */
/* Which of the kernel's throttle totals the switch program reads
 * (throttle.bpf.h); the loader picks one from the kernel's BTF
 * (features_throttle_clock) and names it in meta.json (probes.throttle). */
#ifndef TT_THROTTLE_H
#define TT_THROTTLE_H

enum tt_throttle_clock {
	TT_THROTTLE_NONE = 0, /* no CFS bandwidth control: throttled time is 0 */
	TT_THROTTLE_SELF = 1, /* cfs_rq.throttled_clock_self_time (6.6+) */
	TT_THROTTLE_PELT = 2, /* cfs_rq.throttled_clock_pelt_time (before 6.6) */
};

#endif
