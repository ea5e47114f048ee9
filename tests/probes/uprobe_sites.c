// SPDX-License-Identifier: MIT
/*
 * uprobe_sites NAME N: calls site_NAME() N times and prints "ns_per_call X".
 * Each site_* function starts with one kind of instruction, as the kernel's
 * uprobe code classes them (probes/spans/disasm.c): push (emulated), nop (emulated),
 * nop5 (the 5-byte nop: optimized), mov and endbr64 (single-stepped), and
 * mov_push: a mov, then a push before any branch, where tailtrace's entry
 * probe moves to the push. Ground truth for the uprobe cost model
 * (tests/probes/test_uprobe_cost.py, bench/uprobe_classes.py).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tt_clock.h>

#define SITE(name, body) \
	__attribute__((naked, noinline, used)) void site_##name(void) { __asm__ volatile(body); }

SITE(push, "push %rbp\n\tpop %rbp\n\tret")
SITE(nop, "nop\n\tret")
SITE(nop5, ".byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n\tret")
SITE(mov, "mov %rdi, %rax\n\tret")
SITE(endbr, ".byte 0xf3, 0x0f, 0x1e, 0xfa\n\tret")
SITE(mov_push, "mov %rdi, %rax\n\tpush %rbx\n\tpop %rbx\n\tret")

static const struct {
	const char *name;
	void (*fn)(void);
} sites[] = {
	{ "push", site_push }, { "nop", site_nop }, { "nop5", site_nop5 },
	{ "mov", site_mov },   { "endbr", site_endbr }, { "mov_push", site_mov_push },
};

int main(int argc, char **argv)
{
	long n = argc == 3 ? atol(argv[2]) : 0;

	for (size_t i = 0; n > 0 && i < sizeof(sites) / sizeof(sites[0]); i++) {
		void (*volatile f)(void) = sites[i].fn;
		uint64_t t0;

		if (strcmp(argv[1], sites[i].name))
			continue;
		for (int k = 0; k < 16; k++) /* warm: a 5-byte nop is optimized on its first hits */
			f();
		t0 = tt_now_ns();
		for (long k = 0; k < n; k++)
			f();
		printf("ns_per_call %.1f\n", (double)(tt_now_ns() - t0) / n);
		return 0;
	}
	fprintf(stderr, "usage: uprobe_sites push|nop|nop5|mov|endbr|mov_push N\n");
	return 2;
}
