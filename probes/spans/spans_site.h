/* SPDX-License-Identifier: MIT */
/*
 * spans_site: the kinds of site a span's uprobes sit on. span_plan.c picks
 * them from the function's code, spans.c puts them in each program's cookie
 * (spans.h SPANS_COOKIE), spans.bpf.c tells them apart. Only this enum: the
 * planner needs it without the BPF side's types (spans.h), and spans.c needs
 * the planner (span_plan.h).
 */
#ifndef TT_SPANS_SITE_H
#define TT_SPANS_SITE_H

/* What a span program's site is (bits 8..15 of its BPF cookie). */
enum spans_site {
	SPANS_SITE_ENTRY = 0,
	SPANS_SITE_RET,       /* a ret of the spanned function */
	SPANS_SITE_FOLLOWED,  /* a ret of a function it jumps to (tail call, .cold part):
			       * not ours unless the stack level matches */
	SPANS_SITE_TAIL_END,  /* a jump to code not followed: the span ends there */
};

#endif
