// SPDX-License-Identifier: MIT
/* calibrate: measured uprobe costs by class (calibrate.h). */
#include "spans/calibrate.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include <bpf/libbpf.h>

#include "calib.skel.h"
#include "core/features.h"
#include "spans/disasm.h"
#include "symbols/syms.h"

/* The sites, as the kernel sees their first instruction (test_disasm.c checks
 * the classes of these bytes). Naked: nothing the compiler adds before them. */
__attribute__((naked, noinline, used)) void tt_calib_push(void)
{
	__asm__ volatile("push %rbp\n\tpop %rbp\n\tret");
}

__attribute__((naked, noinline, used)) void tt_calib_nop5(void)
{
	__asm__ volatile(".byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n\tret");
}

__attribute__((naked, noinline, used)) void tt_calib_mov(void)
{
	__asm__ volatile("mov %rdi, %rax\n\tret");
}

typedef void (*calib_fn)(void);

#define CALIB_ROUNDS 3 /* the least of these: a round the machine's load slowed is not it */

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ns of this thread's CPU a call of fn takes, over n calls, the least of
 * CALIB_ROUNDS rounds (after warm calls: a 5-byte nop is optimized on its first
 * hits). CPU time, not wall time: a uprobe's trap runs on the calling thread,
 * and the time others held the CPU (a busy server's threads) is not the probe's. */
static double per_call_ns(calib_fn fn, int n)
{
	calib_fn volatile f = fn;
	double best = -1;

	for (int i = 0; i < 8; i++)
		f();
	for (int r = 0; r < CALIB_ROUNDS; r++) {
		uint64_t t0 = thread_cpu_ns();

		for (int i = 0; i < n; i++)
			f();
		double ns = (double)(thread_cpu_ns() - t0) / n;

		if (best < 0 || ns < best)
			best = ns;
	}
	return best;
}

/* Extra ns a call with prog attached at fn (as a uretprobe if ret). */
static int measure(struct calib_bpf *skel, const char *self, const char *sym, calib_fn fn,
		   bool ret, int n, double *ns)
{
	LIBBPF_OPTS(bpf_uprobe_opts, uo, .retprobe = ret);
	struct bpf_link *link;
	uint64_t off;
	double base;
	int err = syms_elf_offset(self, sym, &off);

	if (err)
		return err;
	base = per_call_ns(fn, n);
	link = bpf_program__attach_uprobe_opts(ret ? skel->progs.calib_ret : skel->progs.calib_hit,
					       getpid(), self, off, &uo);
	if (!link)
		return -errno;
	*ns = per_call_ns(fn, n) - base;
	bpf_link__destroy(link);
	return *ns > 0 ? 0 : -ERANGE;
}

int calibrate_uprobes(void)
{
	char self[PATH_MAX];
	ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	struct calib_bpf *skel;
	double emu = 0, nop5 = 0, sstep = 0, uret = 0;
	int err;

	if (len <= 0)
		return -errno;
	self[len] = '\0';
	skel = calib_bpf__open_opts(features_open_opts());
	if (skel && calib_bpf__load(skel)) {
		calib_bpf__destroy(skel);
		skel = NULL;
	}
	if (!skel)
		return -errno;
	err = measure(skel, self, "tt_calib_push", tt_calib_push, false, 2000, &emu);
	err = err ?: measure(skel, self, "tt_calib_nop5", tt_calib_nop5, false, 2000, &nop5);
	err = err ?: measure(skel, self, "tt_calib_mov", tt_calib_mov, false, 200, &sstep);
	/* entry and return of one call: the return's part is what exceeds the entry's */
	err = err ?: measure(skel, self, "tt_calib_push", tt_calib_push, true, 2000, &uret);
	calib_bpf__destroy(skel);
	if (!err)
		usite_set_costs((unsigned)emu, (unsigned)nop5, (unsigned)sstep,
				(unsigned)(uret > emu ? uret - emu : uret));
	return err;
}
