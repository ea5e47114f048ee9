/* SPDX-License-Identifier: MIT */
/*
 * USDT probes in tailtrace's own workloads, as sys/sdt.h writes them (a
 * .note.stapsdt per site: bpftrace, perf, libbpf and `tailtrace --span
 * usdt:BIN:PROVIDER:NAME` find them) but on a 5-byte nop instead of sdt.h's
 * 1-byte one: the kernel turns a uprobe on a 5-byte nop into a call (optimized
 * uprobes, 6.16+), ~0.2 us a hit instead of ~0.4 (docs/probes/spans.md).
 *
 * Convention (docs/third-party.md): NAME__start(id, ...) and NAME__done(id,
 * status); id names the request among those in flight in the process. Where the
 * program knows when the request began, NAME__span(id, t_start_ns, status) at its
 * end (t_start_ns on CLOCK_MONOTONIC) makes the whole span one mark: one trap a
 * request instead of two, and no state kept between the marks. Arguments after
 * those may point to the request's W3C traceparent and tracestate values (NULL
 * without): `--span usdt:BIN:PROVIDER:NAME,traceparent=arg3,tracestate=arg4`
 * puts its span in the caller's trace.
 */
#ifndef TT_USDT_H
#define TT_USDT_H
/* Arguments in registers (or constants), never in memory: libbpf reads a register
 * argument from the saved registers, a memory one with a user-memory read as well
 * (request__span's BPF time a hit: 0.80 us against 1.16, docs/benchmarks.md). */
#define STAP_SDT_ARG_CONSTRAINT nr
#include <sys/sdt.h>

/* Spelled as bytes: the assembler shortens "nopl 0x0(%rax,%rax,1)" to 4. */
#undef _SDT_NOP
#define _SDT_NOP .byte 0x0f; .byte 0x1f; .byte 0x44; .byte 0x00; .byte 0x00

#define TT_USDT2(provider, name, a, b) STAP_PROBE2(provider, name, a, b)
#define TT_USDT3(provider, name, a, b, c) STAP_PROBE3(provider, name, a, b, c)
#define TT_USDT4(provider, name, a, b, c, d) STAP_PROBE4(provider, name, a, b, c, d)
#define TT_USDT5(provider, name, a, b, c, d, e) STAP_PROBE5(provider, name, a, b, c, d, e)

#endif
