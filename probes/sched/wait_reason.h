/* SPDX-License-Identifier: MIT */
/*
 * Why a thread blocked, from the syscall it slept in: the classes of
 * analyze/explain/waits.py (REASONS, same order), shared by the BPF side (--listen's
 * off-CPU histograms by reason) and the loader. x86_64 syscall numbers, as
 * everywhere the probes read registers; elsewhere every wait is "other".
 * tests/probes/test_exporter.py checks this table against analyze/explain/waits.py.
 */
#ifndef TT_WAIT_REASON_H
#define TT_WAIT_REASON_H

enum tt_wait_reason { TT_WAIT_LOCK, TT_WAIT_IO, TT_WAIT_SLEEP, TT_WAIT_OTHER, TT_WAIT_NR };

#ifdef __VMLINUX_H__
#define TT_WAIT_INLINE static __always_inline
#else
#define TT_WAIT_INLINE static inline
#endif

TT_WAIT_INLINE unsigned int tt_wait_reason(long nr)
{
#if defined(__TARGET_ARCH_x86) || defined(__x86_64__)
	switch (nr) {
	case 202: case 449: /* futex, futex_waitv */
		return TT_WAIT_LOCK;
	case 34: case 35: case 230: /* pause, nanosleep, clock_nanosleep */
		return TT_WAIT_SLEEP;
	case 0: case 1: case 7: case 17: case 18: case 19: case 20: case 23: /* read .. select */
	case 40: case 42: case 43: case 44: case 45: case 46: case 47: /* sendfile .. recvmsg */
	case 74: case 232: case 270: case 271: case 281: case 288: /* fsync .. accept4 */
	case 295: case 299: case 307: case 441: /* preadv, recvmmsg, sendmmsg, epoll_pwait2 */
		return TT_WAIT_IO;
	}
#endif
	return TT_WAIT_OTHER;
}

#endif
