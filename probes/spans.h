/* SPDX-License-Identifier: MIT */
/*
 * spans: --span BINARY_OR_LIB:SYMBOL -> uprobe + uretprobe pairs, one
 * struct tt_span (records.h) per call. Types shared with spans.bpf.c.
 */
#ifndef TT_SPANS_H
#define TT_SPANS_H

#define SPANS_MAX_DEPTH 16 /* nested span calls tracked per thread */

enum spans_counter {
	SPANS_CNT_LOST = 0,  /* ring buffer full: record dropped */
	SPANS_CNT_TOO_DEEP,  /* nesting deeper than SPANS_MAX_DEPTH: not recorded */
	SPANS_CNT_UNMATCHED, /* return without a matching entry */
	SPANS_CNT_STATE_FULL,
	SPANS_CNT_STALE,     /* open frame whose return was never seen, dropped */
	SPANS_CNT_HITS,      /* uprobe/uretprobe program runs (their cost) */
	SPANS_CNT_NR,
};

struct spans_frame {
	__u64 t_start_ns;
	__u64 sp;       /* user stack pointer at entry: the return address slot */
	__u32 span_id;
	__u32 pad;
};

/* Open span calls of one thread (key: tid), innermost last. */
struct spans_stack {
	__u32 depth;
	__u32 pad;
	struct spans_frame f[SPANS_MAX_DEPTH];
};

#endif
