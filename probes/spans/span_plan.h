/* SPDX-License-Identifier: MIT */
/*
 * span_plan: where the uprobes of one --span go and how its calls end,
 * decided from the function's machine code (disasm.c) before anything is
 * attached. docs/third-party.md says what each mode does to the target.
 *
 *   URET  entry uprobe + uretprobe: cheapest, but the kernel replaces the
 *         return address on the target's stack while the call runs, and an
 *         unwinder that meets it (a C++ exception, Go's runtime) kills the
 *         program. Only where the function's own file has no exception
 *         machinery (C: nginx, Redis, libcurl).
 *   RET   entry uprobe + uprobes on every ret of the function and of the
 *         functions it jumps to. Nothing on the stack is touched; a ret is
 *         single-stepped by the kernel (~14 us a hit on a VM). Go, and code
 *         that exceptions can unwind (C++, Rust).
 */
#ifndef TT_SPAN_PLAN_H
#define TT_SPAN_PLAN_H
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "spans/spans_site.h"
#include "symbols/syms.h"

enum span_exit_mode {
	SPAN_EXIT_AUTO = 0, SPAN_EXIT_URET, SPAN_EXIT_RET,
	SPAN_EXIT_USDT, /* not a choice: a span between two USDT probes (span_usdt.c) */
	SPAN_EXIT_TCP,  /* not a choice: a request on a TCP port, seen by the kernel (span_tcp.c) */
};

#define SPAN_MAX_SITES 64
#define SPAN_FOLLOW_DEPTH 2 /* jumps out of a jumped-to function are followed this deep */

struct span_site {
	uint64_t offset;  /* file offset: where the uprobe goes */
	uint64_t vaddr;
	uint8_t site;     /* enum spans_site */
	uint8_t cc;       /* conditional jump: 1 + condition nibble; 0: always */
	uint8_t cls;      /* enum usite_class */
};

struct span_plan {
	char path[PATH_MAX];
	const char *symbol;
	struct syms_func fn;
	bool go;                  /* a Go binary (.go.buildinfo): keyed by goroutine */
	int mode;                 /* SPAN_EXIT_URET or SPAN_EXIT_RET */
	char why[PATH_MAX + 128]; /* why that mode */
	struct span_site entry;
	uint8_t first_cls;        /* class of the function's first instruction */
	struct span_site exits[SPAN_MAX_SITES];
	int nexits;
	int followed;             /* functions jumped to whose rets end the span too */
	int tail_ends;            /* jumps the span ends at (not followed: GOT, other files) */
	int indirect_jumps;       /* jmp reg/[reg] out of reach: a span leaving by one is lost */
	int dropped;              /* sites beyond SPAN_MAX_SITES */
	bool truncated;           /* undecodable bytes in the function */
	struct span_usdt_pair {   /* SPAN_EXIT_USDT: entry = a start site, exits[0] = an end site;
				   * once: entry = the one mark's site, no exits */
		const char *provider;
		bool once;            /* one mark at the end, NAME__span(id, t_start_ns[, ret]) */
		char start[64], end[64];  /* probe names (once: end only) */
		int start_sites, end_sites; /* places each is compiled in (all are probed) */
		int start_nargs, end_nargs;
		bool by_arg;          /* paired by the first argument, else by thread */
		/* the end probe's arguments pointing to the request's traceparent and
		 * tracestate values, as N + 1 (tt_span_spec); 0: none */
		unsigned char traceparent_arg, tracestate_arg;
	} usdt;
	struct span_tcp {         /* SPAN_EXIT_TCP: no sites, two tracepoints for every span */
		char name[64];        /* "tcp:3000" (symbol points here) */
		unsigned ports[8];    /* the target's listening ports it covers (SPANS_TCP_PORTS) */
		int nports;
		unsigned long netns;  /* the target's network namespace (inode), 0 = unknown */
	} tcp;
};

/* What the traced program is made of (span_plan_target). */
struct span_target {
	bool go;                  /* its executable is a Go binary */
};

/* Read the program's executable. */
void span_plan_target(const char *exe, int pid, struct span_target *t);
/* Plan the span symbol in the ELF file at path (resolved already). want is the
 * --span-exit choice. 0, or -errno with a one-line reason in err; a warning
 * for the user (forced uretprobes where they are unsafe) in warn, or "". */
int span_plan_build(const char *path, const char *symbol, int want, const struct span_target *t,
		    struct span_plan *p, char *err, size_t len, char *warn, size_t wlen);
/* Plan a span between USDT probes of provider in the ELF file at path: name
 * is "START,END" or a base (NAME__span if the file has it, else NAME__start ..
 * NAME__done, docs/third-party.md).
 * 0, or -errno with a one-line reason (the probes it has) in err. */
int span_plan_usdt(const char *path, const char *provider, const char *name, struct span_plan *p,
		   char *err, size_t len);
/* The end probe's arguments (N + 1; 0: none) that point to the request's trace
 * context, checked against what the probe has and what the span reads itself. 0,
 * or -EINVAL with a one-line reason in err. */
int span_plan_usdt_context(struct span_plan *p, unsigned traceparent_arg, unsigned tracestate_arg,
			   char *err, size_t len);
/* Plan a span of the requests on TCP port `port` of process pid (0: each port
 * it listens on; pid 0: any process, port needed). 0, or -errno with a
 * one-line reason in err. */
int span_plan_tcp(int pid, unsigned port, struct span_plan *p, char *err, size_t len);
/* Expected cost of one call in ns: entry + the dearest exit (+ the uretprobe). */
uint64_t span_plan_cost_ns(const struct span_plan *p);
/* One line: "entry +0x4 push (emulated); exit: uretprobe; ~0.9 us a call". */
void span_plan_describe(const struct span_plan *p, char *buf, size_t len);
/* Is the ELF file a Go binary? 1, 0 or -errno. */
int span_plan_is_go(const char *path);
/* The cheapest entry site of a function (the unwinder and longjmp guards). */
int span_plan_entry(const char *path, const char *symbol, struct span_site *site);
const char *span_exit_mode_name(int mode);

#endif
