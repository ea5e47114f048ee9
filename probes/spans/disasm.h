/* SPDX-License-Identifier: MIT */
/*
 * disasm: x86-64 code analysis for uprobe placement (capstone).
 *
 * What a uprobe costs depends on the instruction it replaces: the kernel
 * emulates a few (push, nop, jmp/jcc/call rel), optimizes a 5-byte nop into a
 * call (6.16+), and executes every other one out of line with a single-step
 * trap, which costs ~30x more on a VM (docs/probes/cost.md, "Uprobes: what a
 * hit costs").
 * disasm_site_class() mirrors the kernel's rules (arch/x86/kernel/uprobes.c).
 *
 * disasm_function() reads one function's code and finds where a span begins
 * (the cheapest instruction every call passes once with the entry stack
 * pointer) and every way it can leave: ret instructions, jumps out of the
 * function (tail calls, .cold parts), jumps through the GOT.
 */
#ifndef TT_DISASM_H
#define TT_DISASM_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum usite_class {
	USITE_EMULATED = 0, /* push reg, nop, jmp/jcc/call rel: emulated in the kernel */
	USITE_NOP5,         /* the 5-byte nop: an optimized uprobe after its first hit */
	USITE_SSTEP,        /* anything else: copied out of line and single-stepped */
	USITE_REJECTED,     /* the kernel refuses it (a branch with a 0x66 prefix) */
	USITE_NCLASS,
};

/* Cost of one hit of an empty BPF program, by class, in ns, until calibrate.c
 * measures this machine's: the project's 2-CPU VM (kernel 6.18;
 * bench/span_exit_cost.sh, docs/benchmarks.md). */
#define USITE_COST_EMULATED_NS 400
#define USITE_COST_NOP5_NS 200
#define USITE_COST_SSTEP_NS 14000
#define USITE_COST_URETPROBE_NS 500 /* the return half of a uretprobe */

enum disasm_exit_kind {
	DISASM_RET = 0,       /* ret / ret imm16 */
	DISASM_JMP_OUT,       /* direct jmp/jcc to an address outside the function */
	DISASM_JMP_GOT,       /* jmp qword ptr [rip + X]: a tail call through the GOT */
};

struct disasm_site {
	uint64_t vaddr;       /* ELF virtual address of the instruction */
	uint64_t target;      /* DISASM_JMP_OUT: where it jumps */
	uint8_t kind;         /* enum disasm_exit_kind (exits only) */
	uint8_t cls;          /* enum usite_class */
	uint8_t cc;           /* conditional: 1 + the condition nibble (jcc opcode & 0xf); 0: always */
	uint8_t len;
};

#define DISASM_MAX_EXITS 48

struct disasm_fn {
	uint64_t vaddr, size;
	struct disasm_site entry;     /* where the entry probe goes */
	uint8_t first_cls;            /* class of the function's first instruction */
	struct disasm_site exits[DISASM_MAX_EXITS];
	int nexits;
	int exits_dropped;            /* beyond DISASM_MAX_EXITS */
	int indirect_jumps;           /* jmp reg / jmp [reg]: jump tables, or tail calls that
				       * cannot be told apart: not probed */
	bool truncated;               /* bytes capstone could not decode: sites may be missing */
};

/* Class of the instruction at code[0..len) as the kernel sees it. */
enum usite_class disasm_site_class(const uint8_t *code, size_t len);
/* Class of the first instruction of code[0..len) (decoded to find its length). */
enum usite_class disasm_insn_class(const uint8_t *code, size_t len, uint64_t vaddr);
const char *usite_class_name(enum usite_class c);
/* Expected cost of one hit, ns (measured here once usite_set_costs ran). */
unsigned usite_cost_ns(enum usite_class c);
/* The return half of a uretprobe, ns. */
unsigned usite_uretprobe_ns(void);
/* Install measured costs (calibrate.c). */
void usite_set_costs(unsigned emulated_ns, unsigned nop5_ns, unsigned sstep_ns, unsigned uret_ns);
/* Were the costs measured on this machine? */
bool usite_costs_measured(void);

/* Analyse code[0..len) of a function loaded at vaddr. 0, or -ENOMEM / -EINVAL
 * (capstone could not start, or len is 0). */
int disasm_function(const uint8_t *code, size_t len, uint64_t vaddr, struct disasm_fn *fn);

#endif
