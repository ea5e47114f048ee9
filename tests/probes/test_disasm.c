/* disasm.c on hand-assembled functions: the uprobe class of each instruction
 * as the kernel treats it, the entry site (past endbr64 and Go's stack check,
 * never past a re-entered instruction) and every exit (ret, jumps out, the
 * GOT), with indirect jumps counted. */
#include <stdio.h>
#include <stdlib.h>
#include "spans/disasm.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); exit(1); } } while (0)
#define CLASS(...) ({ static const uint8_t b_[] = { __VA_ARGS__ }; disasm_site_class(b_, sizeof(b_)); })

static void test_classes_follow_the_kernel(void)
{
	CHECK(CLASS(0x55) == USITE_EMULATED);                       /* push rbp */
	CHECK(CLASS(0x41, 0x54) == USITE_EMULATED);                 /* push r12 */
	CHECK(CLASS(0x48, 0x50) == USITE_SSTEP);                    /* push rax with REX.W */
	CHECK(CLASS(0xf3, 0x0f, 0x1e, 0xfa) == USITE_SSTEP);        /* endbr64 */
	CHECK(CLASS(0x0f, 0x1f, 0x44, 0x00, 0x00) == USITE_NOP5);
	CHECK(CLASS(0x0f, 0x1f, 0x40, 0x00) == USITE_EMULATED);     /* nopl 0(%rax) */
	CHECK(CLASS(0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00) == USITE_EMULATED);
	CHECK(CLASS(0x90) == USITE_EMULATED);
	CHECK(CLASS(0xc3) == USITE_SSTEP);                          /* ret: out of line */
	CHECK(CLASS(0xc2, 0x08, 0x00) == USITE_SSTEP);              /* ret 8 */
	CHECK(CLASS(0xe8, 0, 0, 0, 0) == USITE_EMULATED);           /* call rel32 */
	CHECK(CLASS(0x74, 0x05) == USITE_EMULATED);                 /* je rel8 */
	CHECK(CLASS(0x0f, 0x86, 0, 0, 0, 0) == USITE_EMULATED);     /* jbe rel32 */
	CHECK(CLASS(0x66, 0xe9, 0, 0) == USITE_REJECTED);           /* jmp with 0x66 */
	CHECK(CLASS(0x48, 0x89, 0xfd) == USITE_SSTEP);              /* mov %rdi,%rbp */
	CHECK(CLASS(0x49, 0x3b, 0x66, 0x10) == USITE_SSTEP);        /* cmp 0x10(%r14),%rsp */
	CHECK(usite_cost_ns(USITE_SSTEP) > 10 * usite_cost_ns(USITE_EMULATED));
}

static void test_go_prologue_entry_after_the_stack_check(void)
{
	static const uint8_t code[] = {
		0x49, 0x3b, 0x66, 0x10,       /* 1000 cmp 0x10(%r14),%rsp */
		0x76, 0x08,                   /* 1004 jbe 100e (morestack stub) */
		0x55,                         /* 1006 push %rbp */
		0x48, 0x89, 0xe5,             /* 1007 mov %rsp,%rbp */
		0x31, 0xc0,                   /* 100a xor %eax,%eax */
		0x5d,                         /* 100c pop %rbp */
		0xc3,                         /* 100d ret */
		0xe8, 0x00, 0x00, 0x00, 0x00, /* 100e call 1013 */
		0xeb, 0xeb,                   /* 1013 jmp 1000 */
	};
	struct disasm_fn fn;

	CHECK(disasm_function(code, sizeof(code), 0x1000, &fn) == 0);
	CHECK(fn.first_cls == USITE_SSTEP);
	CHECK(fn.entry.vaddr == 0x1006 && fn.entry.cls == USITE_EMULATED);
	CHECK(fn.nexits == 1 && fn.exits[0].vaddr == 0x100d && fn.exits[0].kind == DISASM_RET);
	CHECK(fn.exits[0].cls == USITE_SSTEP && fn.indirect_jumps == 0 && !fn.truncated);
}

static void test_c_function_every_exit(void)
{
	static const uint8_t code[] = {
		0xf3, 0x0f, 0x1e, 0xfa,             /* 2000 endbr64 */
		0x55,                               /* 2004 push %rbp */
		0x48, 0x89, 0xe5,                   /* 2005 mov %rsp,%rbp */
		0x85, 0xff,                         /* 2008 test %edi,%edi */
		0x0f, 0x85, 0xf0, 0x0f, 0x00, 0x00, /* 200a jne 3000 */
		0xff, 0x25, 0x00, 0x00, 0x00, 0x00, /* 2010 jmp *0(%rip) */
		0xff, 0xe0,                         /* 2016 jmp *%rax */
		0xe9, 0xe3, 0x1f, 0x00, 0x00,       /* 2018 jmp 4000 */
		0x5d,                               /* 201d pop %rbp */
		0xc3,                               /* 201e ret */
	};
	struct disasm_fn fn;

	CHECK(disasm_function(code, sizeof(code), 0x2000, &fn) == 0);
	CHECK(fn.entry.vaddr == 0x2004 && fn.entry.cls == USITE_EMULATED);
	CHECK(fn.nexits == 4 && fn.indirect_jumps == 1);
	CHECK(fn.exits[0].vaddr == 0x200a && fn.exits[0].kind == DISASM_JMP_OUT);
	CHECK(fn.exits[0].target == 0x3000 && fn.exits[0].cc == 1 + 5); /* jne: nibble 5 */
	CHECK(fn.exits[1].vaddr == 0x2010 && fn.exits[1].kind == DISASM_JMP_GOT);
	CHECK(fn.exits[2].vaddr == 0x2018 && fn.exits[2].kind == DISASM_JMP_OUT);
	CHECK(fn.exits[2].target == 0x4000 && fn.exits[2].cc == 0);
	CHECK(fn.exits[3].vaddr == 0x201e && fn.exits[3].kind == DISASM_RET);
}

static void test_entry_stays_first_when_re_entered_or_stack_moves(void)
{
	static const uint8_t loop[] = {
		0x48, 0x89, 0xf8, /* 5000 mov %rdi,%rax */
		0x53,             /* 5003 push %rbx */
		0x5b,             /* 5004 pop %rbx */
		0xeb, 0xfc,       /* 5005 jmp 5003: the push runs again */
	};
	static const uint8_t frame[] = {
		0x48, 0x83, 0xec, 0x18, /* sub $0x18,%rsp */
		0x55,                   /* push %rbp */
		0xc3,
	};
	struct disasm_fn fn;

	CHECK(disasm_function(loop, sizeof(loop), 0x5000, &fn) == 0);
	CHECK(fn.entry.vaddr == 0x5000 && fn.entry.cls == USITE_SSTEP);
	CHECK(disasm_function(frame, sizeof(frame), 0x6000, &fn) == 0);
	CHECK(fn.entry.vaddr == 0x6000 && fn.nexits == 1);
	CHECK(disasm_function(frame, 0, 0x6000, &fn) < 0);
}

int main(void)
{
	test_classes_follow_the_kernel();
	test_go_prologue_entry_after_the_stack_check();
	test_c_function_every_exit();
	test_entry_stays_first_when_re_entered_or_stack_moves();
	printf("test_disasm: ok\n");
	return 0;
}
