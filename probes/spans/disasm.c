// SPDX-License-Identifier: MIT
/*
 * disasm: where a uprobe goes in a function and what it costs (disasm.h).
 * Capstone decodes; the classes follow the kernel's uprobe rules on the raw
 * bytes (branch_setup_xol_ops, push_setup_xol_ops and the nop table of
 * arch/x86/kernel/uprobes.c), since that is what decides the cost.
 */
#include "spans/disasm.h"

#include <errno.h>
#include <string.h>
#include <capstone/capstone.h>

#define ENTRY_WALK_MAX 16   /* instructions looked at for a cheaper entry site */
#define STUB_WALK_MAX 12    /* instructions of a stack-growth stub (Go's morestack) */

/* The kernel's x86_nops[len] (P6 nops): emulated as a jump to the next instruction. */
static const uint8_t nops[9][8] = {
	[1] = { 0x90 },
	[2] = { 0x66, 0x90 },
	[3] = { 0x0f, 0x1f, 0x00 },
	[4] = { 0x0f, 0x1f, 0x40, 0x00 },
	[5] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 },
	[6] = { 0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00 },
	[7] = { 0x0f, 0x1f, 0x80, 0x00, 0x00, 0x00, 0x00 },
	[8] = { 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00 },
};

static bool is_legacy_prefix(uint8_t b)
{
	return b == 0x66 || b == 0x67 || b == 0xf0 || b == 0xf2 || b == 0xf3 ||
	       b == 0x2e || b == 0x36 || b == 0x3e || b == 0x26 || b == 0x64 || b == 0x65;
}

static bool is_rel_branch(const uint8_t *op, size_t left)
{
	if (op[0] == 0xeb || op[0] == 0xe9 || op[0] == 0xe8 || (op[0] >= 0x70 && op[0] <= 0x7f))
		return true;
	return left >= 2 && op[0] == 0x0f && op[1] >= 0x80 && op[1] <= 0x8f;
}

enum usite_class disasm_site_class(const uint8_t *code, size_t len)
{
	size_t i = 0, nlegacy = 0;
	bool has66 = false;
	uint8_t rex = 0;

	if (!len)
		return USITE_SSTEP;
	if (len < sizeof(nops[0]) + 1 && !memcmp(code, nops[len], len))
		return len == 5 ? USITE_NOP5 : USITE_EMULATED;
	for (; i < len && is_legacy_prefix(code[i]); i++, nlegacy++)
		has66 |= code[i] == 0x66;
	if (i < len && (code[i] & 0xf0) == 0x40)
		rex = code[i++];
	if (i >= len)
		return USITE_SSTEP;
	if (code[i] == 0x90 && !rex) /* prefix* + nop */
		return USITE_EMULATED;
	if (is_rel_branch(code + i, len - i))
		return has66 ? USITE_REJECTED : USITE_EMULATED;
	if (code[i] >= 0x50 && code[i] <= 0x57 && !nlegacy && (!rex || rex == 0x41))
		return USITE_EMULATED; /* push reg */
	return USITE_SSTEP;
}

const char *usite_class_name(enum usite_class c)
{
	static const char *const names[USITE_NCLASS] = {
		[USITE_EMULATED] = "emulated", [USITE_NOP5] = "nop5",
		[USITE_SSTEP] = "single-stepped", [USITE_REJECTED] = "rejected",
	};
	return c < USITE_NCLASS ? names[c] : "?";
}

static unsigned cost_ns[USITE_NCLASS] = {
	[USITE_EMULATED] = USITE_COST_EMULATED_NS, [USITE_NOP5] = USITE_COST_NOP5_NS,
	[USITE_SSTEP] = USITE_COST_SSTEP_NS, [USITE_REJECTED] = USITE_COST_SSTEP_NS,
};
static unsigned uret_ns = USITE_COST_URETPROBE_NS;
static bool measured;

unsigned usite_cost_ns(enum usite_class c)
{
	return c < USITE_NCLASS ? cost_ns[c] : cost_ns[USITE_SSTEP];
}

unsigned usite_uretprobe_ns(void)
{
	return uret_ns;
}

void usite_set_costs(unsigned emulated, unsigned nop5, unsigned sstep, unsigned uret)
{
	cost_ns[USITE_EMULATED] = emulated;
	cost_ns[USITE_NOP5] = nop5;
	cost_ns[USITE_SSTEP] = cost_ns[USITE_REJECTED] = sstep;
	uret_ns = uret;
	measured = true;
}

bool usite_costs_measured(void)
{
	return measured;
}

/* ---- instruction predicates ---------------------------------------------- */

static bool is_jcc(const cs_insn *in)
{
	return in->id >= X86_INS_JAE && in->id <= X86_INS_JS && in->id != X86_INS_JMP &&
	       in->id != X86_INS_JCXZ && in->id != X86_INS_JECXZ && in->id != X86_INS_JRCXZ;
}

/* The direct target of a jmp/jcc/call, if it has one. */
static bool direct_target(const cs_insn *in, uint64_t *target)
{
	const cs_x86 *x = &in->detail->x86;

	if (x->op_count != 1 || x->operands[0].type != X86_OP_IMM)
		return false;
	*target = (uint64_t)x->operands[0].imm;
	return true;
}

static uint8_t cond_nibble(const cs_insn *in)
{
	const uint8_t *op = in->detail->x86.opcode;

	return op[0] == 0x0f ? op[1] & 0xf : op[0] & 0xf;
}

static bool writes_rsp(csh h, const cs_insn *in)
{
	cs_regs rd, wr;
	uint8_t nrd = 0, nwr = 0;

	if (cs_regs_access(h, in, rd, &nrd, wr, &nwr))
		return true; /* unknown: assume it does */
	for (int i = 0; i < nwr; i++)
		if (wr[i] == X86_REG_RSP || wr[i] == X86_REG_ESP || wr[i] == X86_REG_SP)
			return true;
	return false;
}

static bool writes_memory(const cs_insn *in)
{
	const cs_x86 *x = &in->detail->x86;

	for (int i = 0; i < x->op_count; i++)
		if (x->operands[i].type == X86_OP_MEM && (x->operands[i].access & CS_AC_WRITE))
			return true;
	return false;
}

static bool changes_flow(csh h, const cs_insn *in)
{
	return cs_insn_group(h, in, X86_GRP_JUMP) || cs_insn_group(h, in, X86_GRP_CALL) ||
	       cs_insn_group(h, in, X86_GRP_RET) || cs_insn_group(h, in, X86_GRP_INT) ||
	       cs_insn_group(h, in, X86_GRP_IRET) || in->id == X86_INS_SYSCALL ||
	       in->id == X86_INS_UD2 || in->id == X86_INS_HLT;
}

/* May the entry probe sit after this instruction? Only if it changes neither
 * the stack pointer nor memory nor the flow (endbr64, cmp, test, lea, mov to
 * a register): the probe then sees the entry stack pointer. */
static bool harmless(csh h, const cs_insn *in)
{
	return !changes_flow(h, in) && !writes_rsp(h, in) && !writes_memory(in);
}

/* ---- the function -------------------------------------------------------- */

struct walk {
	csh h;
	cs_insn *in;
	const uint8_t *code;
	size_t len;
	uint64_t vaddr;
};

/* Decode the instruction at vaddr `at` into w->in; false past the end or on bad bytes. */
static bool decode_at(struct walk *w, uint64_t at)
{
	const uint8_t *p;
	size_t left;
	uint64_t a = at;

	if (at < w->vaddr || at >= w->vaddr + w->len)
		return false;
	p = w->code + (at - w->vaddr);
	left = w->len - (at - w->vaddr);
	return cs_disasm_iter(w->h, &p, &left, &a, w->in);
}

/* Does the branch target `at` lead straight back to the function's entry (a
 * stack-growth stub: Go's `call runtime.morestack; jmp entry`)? Then the calls
 * that take it pass the entry again, and the branch can be stepped over. */
static bool loops_to_entry(struct walk *w, uint64_t at)
{
	for (int i = 0; i < STUB_WALK_MAX && decode_at(w, at); i++) {
		uint64_t t;

		if (w->in->id == X86_INS_JMP)
			return direct_target(w->in, &t) && t == w->vaddr;
		if (cs_insn_group(w->h, w->in, X86_GRP_RET) || is_jcc(w->in))
			return false;
		at += w->in->size;
	}
	return false;
}

static void site_set(struct disasm_site *s, const cs_insn *in)
{
	s->vaddr = in->address;
	s->len = (uint8_t)in->size;
	s->cls = (uint8_t)disasm_site_class(in->bytes, in->size);
}

/* The first emulated instruction every call reaches once with the entry stack
 * pointer, else the first instruction. */
static void find_entry(struct walk *w, struct disasm_fn *fn)
{
	uint64_t at = w->vaddr, t;

	if (!decode_at(w, at))
		return;
	site_set(&fn->entry, w->in);
	fn->first_cls = fn->entry.cls;
	for (int i = 0; i < ENTRY_WALK_MAX && decode_at(w, at); i++) {
		uint64_t next = at + w->in->size;

		if (is_jcc(w->in) && direct_target(w->in, &t) && loops_to_entry(w, t)) {
			at = next; /* the growth stub re-enters: step over the check */
			continue;
		}
		decode_at(w, at);
		if (disasm_site_class(w->in->bytes, w->in->size) <= USITE_NOP5) {
			if (at != w->vaddr)
				site_set(&fn->entry, w->in);
			return;
		}
		if (!harmless(w->h, w->in))
			return;
		at = next;
	}
}

static void exit_add(struct disasm_fn *fn, const cs_insn *in, uint8_t kind, uint64_t target,
		     uint8_t cc)
{
	struct disasm_site *s;

	if (fn->nexits >= DISASM_MAX_EXITS) {
		fn->exits_dropped++;
		return;
	}
	s = &fn->exits[fn->nexits++];
	site_set(s, in);
	s->kind = kind;
	s->target = target;
	s->cc = cc;
}

/* One jump: an exit if it leaves the function; *inner_target set if it stays. */
static void scan_jump(struct disasm_fn *fn, const cs_insn *in, uint64_t lo, uint64_t hi,
		      uint64_t *inner_target)
{
	const cs_x86 *x = &in->detail->x86;
	uint64_t t;

	if (direct_target(in, &t)) {
		if (t < lo || t >= hi)
			exit_add(fn, in, DISASM_JMP_OUT, t, is_jcc(in) ? 1 + cond_nibble(in) : 0);
		else
			*inner_target = t;
	} else if (in->id == X86_INS_JMP && x->op_count == 1 && x->operands[0].type == X86_OP_MEM &&
		   x->operands[0].mem.base == X86_REG_RIP && x->operands[0].mem.index == X86_REG_INVALID) {
		exit_add(fn, in, DISASM_JMP_GOT, 0, 0);
	} else if (in->id == X86_INS_JMP) {
		fn->indirect_jumps++;
	}
}

/* Linear sweep: exits, and whether any branch re-enters between the entry and
 * the chosen entry site (then the probe must stay on the first instruction). */
static void scan_exits(struct walk *w, struct disasm_fn *fn)
{
	const uint8_t *p = w->code;
	size_t left = w->len;
	uint64_t a = w->vaddr, hi = w->vaddr + w->len;
	bool reenters = false;

	while (left) {
		uint64_t inner = 0;

		if (!cs_disasm_iter(w->h, &p, &left, &a, w->in)) {
			fn->truncated = true;
			break;
		}
		if (cs_insn_group(w->h, w->in, X86_GRP_RET))
			exit_add(fn, w->in, DISASM_RET, 0, 0);
		else if (cs_insn_group(w->h, w->in, X86_GRP_JUMP))
			scan_jump(fn, w->in, w->vaddr, hi, &inner);
		else if (cs_insn_group(w->h, w->in, X86_GRP_CALL))
			direct_target(w->in, &inner);
		if (inner > w->vaddr && inner <= fn->entry.vaddr)
			reenters = true;
	}
	if (reenters && fn->entry.vaddr != w->vaddr && decode_at(w, w->vaddr))
		site_set(&fn->entry, w->in);
}

int disasm_function(const uint8_t *code, size_t len, uint64_t vaddr, struct disasm_fn *fn)
{
	struct walk w = { .code = code, .len = len, .vaddr = vaddr };

	memset(fn, 0, sizeof(*fn));
	fn->vaddr = vaddr;
	fn->size = len;
	fn->entry.vaddr = vaddr;
	fn->entry.cls = fn->first_cls = USITE_SSTEP;
	if (!len)
		return -EINVAL;
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &w.h) != CS_ERR_OK)
		return -EINVAL;
	cs_option(w.h, CS_OPT_DETAIL, CS_OPT_ON);
	w.in = cs_malloc(w.h);
	if (!w.in) {
		cs_close(&w.h);
		return -ENOMEM;
	}
	find_entry(&w, fn);
	scan_exits(&w, fn);
	cs_free(w.in, 1);
	cs_close(&w.h);
	return 0;
}

enum usite_class disasm_insn_class(const uint8_t *code, size_t len, uint64_t vaddr)
{
	enum usite_class c = USITE_SSTEP;
	cs_insn *in = NULL;
	csh h;

	if (cs_open(CS_ARCH_X86, CS_MODE_64, &h) != CS_ERR_OK)
		return c;
	if (cs_disasm(h, code, len, vaddr, 1, &in) == 1)
		c = disasm_site_class(code, in->size);
	cs_free(in, 1);
	cs_close(&h);
	return c;
}
