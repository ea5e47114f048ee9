/* SPDX-License-Identifier: MIT */
/*
 * The BPF maps that can fill, by object: the index of each one's count in its
 * object's map_full array (core/counter.bpf.h, tt_count_full). The loader reads
 * them (probe_map_full_collect) into meta.json "map_full", the final lines and the
 * exporter's tailtrace_map_full_total. Only these constants: included by both sides.
 */
#ifndef TT_MAP_FULL_H
#define TT_MAP_FULL_H

/* sched.bpf.c */
enum sched_map {
	SCHED_MAP_TASKS = 0, /* tasks: a thread's comm and ids (tasks.bin) */
	SCHED_MAP_OFF_IDS,   /* off_ids: a thread's switch-out state (raw_tp, classic) */
	SCHED_MAP_START_IDS, /* start_ids: a thread's run-queue state (raw_tp, classic) */
	SCHED_MAP_TRACKED,   /* tracked: the classic hook's traced threads */
	SCHED_MAP_OCC_NAMES, /* occ_names: the cpu event's names of a CPU's holders */
	SCHED_MAP_OCC_BLAME, /* occ_blame: --listen's run-queue wait by antagonist */
	SCHED_MAP_NR,
};

/* spans.bpf.c */
enum spans_map {
	SPANS_MAP_OPEN_SPANS = 0, /* open_spans: a thread's or goroutine's open calls */
	SPANS_MAP_OPEN_MARKS,     /* open_marks: USDT requests started, not ended */
	SPANS_MAP_TCP_OPEN,       /* tcp_open: TCP requests in progress, by socket */
	SPANS_MAP_TCP_TRACESTATE, /* tcp_tracestate: those requests' tracestate headers */
	SPANS_MAP_NR,
};

/* locks.bpf.c */
enum locks_map {
	LOCKS_MAP_PENDING = 0, /* pending: a lock call under way, by thread */
	LOCKS_MAP_HELD,        /* held: a mutex held, by mutex and thread */
	LOCKS_MAP_TRYFAILED,   /* tryfailed: a trylock that failed, by mutex and thread */
	LOCKS_MAP_CONDWAIT,    /* condwait: the mutex a condition wait gave up */
	LOCKS_MAP_NR,
};

#endif
