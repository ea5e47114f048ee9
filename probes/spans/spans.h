/* SPDX-License-Identifier: MIT */
/*
 * spans: --span BIN:SYMBOL -> one struct tt_span (records.h) per
 * call. Types shared with spans.bpf.c.
 *
 * A span opens at the function's entry site and closes at one of its exit
 * sites: a uretprobe (URET mode), or uprobes on its ret instructions and
 * jumps out of it (RET mode: nothing on the target's stack is touched), or
 * where a C++ exception is caught or a longjmp lands (guards).
 * Frames are keyed by thread, or for Go by goroutine (runtime.g in r14),
 * and matched by stack level, so nesting, recursion and stack copying pair.
 * A USDT span (usdt:BIN:PROVIDER:NAME) opens at a start probe and closes at
 * an end probe of the same request: same first argument, or same thread; or
 * it is one probe at the end whose second argument is the start time.
 * A TCP span (tcp:PORT) is a request on a server's port: from its first byte
 * in (tcp_probe) to its answer's last byte out (net_dev_queue), known once the
 * next request arrives or the connection closes (inet_sock_set_state).
 */
#ifndef TT_SPANS_H
#define TT_SPANS_H
#include "spans/spans_site.h"

#define SPANS_MAX_DEPTH 16 /* nested span calls tracked per thread or goroutine */

enum spans_counter {
	SPANS_CNT_LOST = 0,  /* ring buffer full: record dropped */
	SPANS_CNT_TOO_DEEP,  /* nesting deeper than SPANS_MAX_DEPTH: not recorded */
	SPANS_CNT_UNMATCHED, /* return without a matching entry */
	SPANS_CNT_STATE_FULL, /* calls not recorded: open_spans or open_marks full */
	SPANS_CNT_STALE,     /* open frame whose end was never seen, dropped */
	SPANS_CNT_HITS,      /* program runs at span sites (their cost) */
	SPANS_CNT_GUARD_HITS, /* program runs at catch and longjmp sites with a span open */
	SPANS_CNT_BAD_JMPBUF, /* longjmp whose target stack could not be read */
	SPANS_CNT_NO_G,      /* Go site whose goroutine could not be read */
	SPANS_CNT_NO_ARG,    /* USDT site whose argument could not be read */
	SPANS_CNT_BAD_START, /* one-mark USDT span whose start is not a time before its end */
	SPANS_CNT_TCP_IN,    /* tcp:PORT requests whose first bytes arrived */
	SPANS_CNT_CONTEXT,   /* requests that carried a traceparent: a tcp:PORT request's
			      * header, a USDT end's argument pointing to one */
	SPANS_CNT_TRACESTATE, /* of them, those that carried a tracestate too */
	SPANS_CNT_CONTEXT_UNREAD, /* requests whose first bytes no read() or recv() was seen
			      * to copy (another call, io_uring, or read before it began);
			      * USDT ends whose traceparent could not be read */
	SPANS_CNT_RESPONSE_CONTEXT, /* tcp:PORT answers that carried a traceresponse header */
	SPANS_CNT_RESPONSE_UNREAD, /* answers whose first bytes no write() or send() of the
			      * target's was seen to send (sent from softirq, sendfile, a
			      * buffer past the first of a vector) */
	SPANS_CNT_RESPONSE_NOT_HTTP, /* answers whose first bytes are not an HTTP status line
			      * (another protocol on the port: nothing to scan) */
	SPANS_CNT_USDT_CONTEXT, /* ends of USDT spans whose traceparent argument was looked at */
	SPANS_CNT_NR,
};

/* Cookie: span index, site, condition (1 + jcc nibble: the site is a
 * conditional jump, taken only when it holds; 0: always), flags. */
#define SPANS_COOKIE_GO 0x1u     /* keyed by goroutine */
#define SPANS_COOKIE_BY_ARG 0x2u /* USDT: paired by the probes' first argument, not the thread */
#define SPANS_COOKIE_RET_ARG 0x4u /* USDT end: its second argument is the return value */
#define SPANS_COOKIE(span, site, cc, flags)                                        \
	((__u64)(span) | (__u64)(site) << 8 | (__u64)(cc) << 16 | (__u64)(flags) << 24)
#define SPANS_COOKIE_SPAN(c) ((__u32)(c) & 0xff)
#define SPANS_COOKIE_SITE(c) ((__u32)((c) >> 8) & 0xff)
#define SPANS_COOKIE_CC(c) ((__u32)((c) >> 16) & 0xff)
#define SPANS_COOKIE_FLAGS(c) ((__u32)((c) >> 24) & 0xff)
/* A USDT end's condition byte (it has no jump): the arguments pointing to its
 * request's traceparent and tracestate, as N + 1 (0: none). */
#define SPANS_COOKIE_CONTEXT(traceparent, tracestate) ((traceparent) | (tracestate) << 4)
#define SPANS_COOKIE_TRACEPARENT(c) (SPANS_COOKIE_CC(c) & 0xf)
#define SPANS_COOKIE_TRACESTATE(c) (SPANS_COOKIE_CC(c) >> 4)

/* Programs a kernel without BPF cookies gets per --span (span_enter_ncN,
 * span_exit_ncN): TT_MAX_SPANS (probe.h). */
#define SPANS_NO_COOKIE_PROGS 8

/* Which site a guard program sits on (its cookie). */
enum spans_guard {
	SPANS_GUARD_CATCH = 0,  /* __cxa_begin_catch */
	SPANS_GUARD_LONGJMP,    /* longjmp, siglongjmp, __longjmp_chk */
};

struct spans_key {
	__u64 id;  /* tid, or the goroutine's runtime.g address */
	__u32 pid;
	__u32 go;
};

struct spans_frame {
	__u64 t_start_ns;
	__u64 level;     /* depth on its stack, larger = deeper: 0 - sp for a thread,
			  * stack.hi - sp for a goroutine (a copied stack keeps it) */
	__u32 span_id;
	__u32 tid;       /* thread at entry */
};

/* An open USDT span (usdt:BIN:PROVIDER:NAME): its start was seen. */
struct spans_mark_key {
	__u64 id;        /* the probes' first argument, or the thread id */
	__u32 pid;
	__u32 span_id;
};

struct spans_mark {
	__u64 t_start_ns;
	__u32 tid;       /* thread at the start */
	__u32 pad;
};

/* A slot of the open-mark table (spans.bpf.c): the common case, a start and
 * its end, without a hash update and delete. tag: the key's id + 1 while the
 * slot holds an open mark, 0 when free (taken with a compare-and-swap). */
struct spans_mark_slot {
	__u64 tag;
	__u64 t_start_ns;
	__u32 pid, span_id;
	__u32 tid, pad;
};
#define SPANS_MARK_SLOTS 16384 /* a power of two */

/* tcp:PORT: the ports (the target's listening sockets) in the programs' settings. */
#define SPANS_TCP_PORTS 8

/* A server socket with a request open: the socket, and its ports (a socket
 * freed and reused for another connection is another key). */
struct spans_tcp_key {
	__u64 sk;
	__u32 ports;     /* skc_portpair: remote port, local port */
	__u32 pad;
};

/* The first bytes of a request or an answer the trace-context scans read
 * (spans.bpf.c tcp_read, tcp_answer_read): HTTP/1.x headers up to there. A
 * power of two. */
#define SPANS_CONTEXT_SCAN 2048
#define SPANS_TRACEPARENT_BYTES 64
/* A tracestate header's value: 511 bytes of it (the W3C asks a vendor to pass on
 * at least 512 characters; the analysis cuts a longer one at its last whole
 * member). A power of two. */
#define SPANS_TRACESTATE_BYTES 512
/* Requests open at once whose tracestate is kept (tcp_tracestate): more are
 * counted refused (map_full), their traceparent still read. */
#define SPANS_TCP_TRACESTATES 4096

enum spans_context_state {
	SPANS_CONTEXT_OFF = 0,    /* not looked for */
	SPANS_CONTEXT_WANTED = 1, /* the request's first bytes not read by the target yet */
	SPANS_CONTEXT_DONE = 2,   /* looked for: traceparent[0] != 0 when found */
};

struct spans_tcp_open {
	__u64 t_start_ns; /* the request's first byte arrived */
	__u64 t_out_ns;   /* its answer's last byte so far left; 0: unanswered */
	__u32 span_id;
	__u32 tid;        /* the last of the target's threads that sent its answer */
	__u32 pid;
	__u32 context;    /* enum spans_context_state */
	__u32 req_seq;    /* the TCP sequence number of the request's first byte */
	__u32 read_seq;   /* how far the target had read the socket when last seen */
	__u32 tracestate; /* its tracestate header is in tcp_tracestate, by the same key */
	__u32 pad;
	char traceparent[SPANS_TRACEPARENT_BYTES]; /* the header's value as it came */
	/* the answer's traceresponse header (W3C Trace Context Level 2): the id of the
	 * server's own span, when the target's tracing sends it */
	char traceresponse[SPANS_TRACEPARENT_BYTES];
};

/* A span with the trace context its request and its answer carried (a tcp:PORT
 * request's headers, a USDT end's arguments): the span and the values, one ring
 * message (the loader writes both files). */
struct spans_context_msg {
	struct tt_span span;
	char traceparent[SPANS_TRACEPARENT_BYTES];
	char traceresponse[SPANS_TRACEPARENT_BYTES];
};

/* A request's tracestate header's value, as it came (NUL-padded). */
struct spans_tracestate {
	char value[SPANS_TRACESTATE_BYTES];
};

/* The same with the request's tracestate: a message of its own size, so that a
 * request without one sends no more than before. */
struct spans_context_state_msg {
	struct spans_context_msg context;
	struct spans_tracestate tracestate;
};
#define SPANS_TCP_SOCKETS 65536 /* connections with a request open or answered */

/* Open span calls of one thread or goroutine, innermost last. */
struct spans_stack {
	__u32 depth;
	__u32 pad;
	struct spans_frame f[SPANS_MAX_DEPTH];
};

#endif
