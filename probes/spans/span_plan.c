// SPDX-License-Identifier: MIT
/*
 * span_plan: the sites and the exit mode of one --span (span_plan.h).
 */
#include "spans/span_plan.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/types.h>

#include "spans/disasm.h"

#define MAX_FUNC_BYTES (1u << 20) /* larger "functions" are not disassembled */

const char *span_exit_mode_name(int mode)
{
	return mode == SPAN_EXIT_RET    ? "ret"
	       : mode == SPAN_EXIT_URET ? "uretprobe"
	       : mode == SPAN_EXIT_USDT ? "usdt"
	       : mode == SPAN_EXIT_TCP  ? "tcp"
				       : "auto";
}

int span_plan_is_go(const char *path)
{
	int r = syms_elf_has_section(path, ".go.buildinfo");

	return r ? r : syms_elf_has_section(path, ".gopclntab");
}

/* Read a function's bytes from its file and analyse them. */
static int analyse(const char *path, const struct syms_func *f, struct disasm_fn *out)
{
	uint8_t *code;
	ssize_t n;
	int fd, err;

	if (!f->size || f->size > MAX_FUNC_BYTES)
		return -EFBIG;
	code = malloc(f->size);
	if (!code)
		return -ENOMEM;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		free(code);
		return -errno;
	}
	n = pread(fd, code, f->size, (off_t)f->offset);
	err = n < 0 ? -errno : (uint64_t)n != f->size ? -EIO : 0;
	close(fd);
	if (!err)
		err = disasm_function(code, f->size, f->vaddr, out);
	free(code);
	return err;
}

static struct span_site site_of(const struct syms_func *f, const struct disasm_site *d,
				uint8_t kind)
{
	return (struct span_site){
		.offset = f->offset + (d->vaddr - f->vaddr), .vaddr = d->vaddr,
		.site = kind, .cc = d->cc, .cls = d->cls,
	};
}

static void add_site(struct span_plan *p, struct span_site s)
{
	for (int i = 0; i < p->nexits; i++)
		if (p->exits[i].offset == s.offset)
			return;
	if (p->nexits < SPAN_MAX_SITES)
		p->exits[p->nexits++] = s;
	else
		p->dropped++;
}

struct follow {
	uint64_t seen[SPAN_MAX_SITES];
	int nseen;
};

static bool seen_before(struct follow *fw, uint64_t vaddr)
{
	for (int i = 0; i < fw->nseen; i++)
		if (fw->seen[i] == vaddr)
			return true;
	if (fw->nseen < SPAN_MAX_SITES)
		fw->seen[fw->nseen++] = vaddr;
	return false;
}

/* The exits of one function (the spanned one at depth 0, then the functions
 * it jumps to, whose rets end the span when the stack level matches). */
static void plan_exits(struct span_plan *p, struct follow *fw, const struct syms_func *f,
		       const struct disasm_fn *d, int depth)
{
	p->indirect_jumps += d->indirect_jumps;
	p->dropped += d->exits_dropped;
	p->truncated |= d->truncated;
	for (int i = 0; i < d->nexits; i++) {
		const struct disasm_site *x = &d->exits[i];
		struct syms_func g;
		struct disasm_fn gd;

		if (x->kind == DISASM_RET) {
			add_site(p, site_of(f, x, depth ? SPANS_SITE_FOLLOWED : SPANS_SITE_RET));
			continue;
		}
		if (x->kind == DISASM_JMP_OUT && x->target >= p->fn.vaddr &&
		    x->target < p->fn.vaddr + p->fn.size)
			continue; /* back into the spanned function (from its .cold part) */
		if (x->kind == DISASM_JMP_OUT && depth < SPAN_FOLLOW_DEPTH &&
		    !syms_elf_func_at(p->path, x->target, &g, NULL, 0)) {
			if (seen_before(fw, g.vaddr))
				continue;
			if (!analyse(p->path, &g, &gd)) {
				p->followed++;
				plan_exits(p, fw, &g, &gd, depth + 1);
				continue;
			}
		}
		/* a jump we cannot follow (the GOT, a PLT stub, no symbol): ends there */
		add_site(p, site_of(f, x, SPANS_SITE_TAIL_END));
		p->tail_ends++;
	}
}

static struct span_site entry_of(const struct syms_func *f, const struct disasm_fn *d)
{
	return site_of(f, &d->entry, SPANS_SITE_ENTRY);
}

/* ---- can an exception reach the spanned function? -----------------------
 *
 * An exception unwinds only through frames between a C++ (or Rust) thrower and
 * its catcher. The spanned function's own file says whether it is such code:
 * it links the C++ runtime or the unwinder itself, refers to the exception ABI
 * (__cxa_throw, the personality routines), or carries exception tables. A C
 * library or program (nginx, Redis, libcurl) has none of that even in a
 * process that loads libstdc++ for some other library. */

static const char *const unwinder_libs[] = { "libstdc++.so", "libc++.so", "libgcc_s.so",
					     "libunwind.so" };
static const char *const eh_syms[] = { "__gxx_personality_v0", "__cxa_throw",
				       "_Unwind_RaiseException", "rust_eh_personality" };

struct needs_arg {
	char *out;
	size_t len;
	const char *path;
};

static int needs_unwinder(const char *lib, void *arg)
{
	struct needs_arg *a = arg;

	for (size_t i = 0; i < sizeof(unwinder_libs) / sizeof(unwinder_libs[0]); i++)
		if (!strncmp(lib, unwinder_libs[i], strlen(unwinder_libs[i]))) {
			snprintf(a->out, a->len, "%s links %s", a->path, lib);
			return 1;
		}
	return 0;
}

/* Why exceptions can unwind through code of the ELF at path, or "" if nothing says so. */
static void eh_evidence(const char *path, char *out, size_t len)
{
	struct needs_arg a = { out, len, path };

	out[0] = '\0';
	if (syms_elf_needed(path, needs_unwinder, &a) > 0)
		return;
	for (size_t i = 0; i < sizeof(eh_syms) / sizeof(eh_syms[0]); i++)
		if (syms_elf_has_symbol(path, eh_syms[i]) > 0) {
			snprintf(out, len, "%s refers to %s", path, eh_syms[i]);
			return;
		}
	if (syms_elf_has_section(path, ".gcc_except_table") > 0)
		snprintf(out, len, "%s has exception tables", path);
}

void span_plan_target(const char *exe, int pid, struct span_target *t)
{
	(void)pid;
	memset(t, 0, sizeof(*t));
	if (exe && exe[0])
		t->go = span_plan_is_go(exe) > 0;
}

static void plan_mode(struct span_plan *p, int want, const struct span_target *t,
		      const char *unwinder, char *warn, size_t wlen)
{
	p->mode = SPAN_EXIT_RET;
	if (p->go || t->go) {
		snprintf(p->why, sizeof(p->why), "a Go program: its runtime walks and copies "
			 "goroutine stacks, and a replaced return address kills it");
		if (want == SPAN_EXIT_URET)
			snprintf(warn, wlen, "--span-exit uretprobe refused for %s: a Go program "
				 "dies of it (unknown caller pc); its returns are probed instead",
				 p->symbol);
	} else if (want == SPAN_EXIT_RET) {
		snprintf(p->why, sizeof(p->why), "--span-exit ret");
	} else if (want == SPAN_EXIT_URET) {
		p->mode = SPAN_EXIT_URET;
		snprintf(p->why, sizeof(p->why), "--span-exit uretprobe");
		if (unwinder[0])
			snprintf(warn, wlen, "--span-exit uretprobe on code that exceptions can unwind "
				 "(%s): an exception through %s will terminate the program",
				 unwinder, p->symbol);
	} else if (unwinder[0]) {
		snprintf(p->why, sizeof(p->why), "exceptions can unwind through it (%s): one "
			 "through a replaced return address would terminate the program", unwinder);
	} else {
		p->mode = SPAN_EXIT_URET;
		snprintf(p->why, sizeof(p->why), "no exception machinery in its file: a uretprobe "
			 "is safe");
	}
}

int span_plan_build(const char *path, const char *symbol, int want, const struct span_target *t,
		    struct span_plan *p, char *err, size_t len, char *warn, size_t wlen)
{
	char unwinder[PATH_MAX + 64];
	struct disasm_fn d;
	struct follow fw = { .nseen = 0 };
	int r;

	memset(p, 0, sizeof(*p));
	warn[0] = '\0';
	snprintf(p->path, sizeof(p->path), "%s", path);
	p->symbol = symbol;
	r = syms_elf_func(path, symbol, &p->fn);
	if (r) {
		snprintf(err, len, "symbol %s: cannot read its address in %s: %s", symbol, path,
			 strerror(-r));
		return r;
	}
	p->go = span_plan_is_go(path) > 0;
	eh_evidence(path, unwinder, sizeof(unwinder));
	plan_mode(p, want, t, unwinder, warn, wlen);
	r = analyse(path, &p->fn, &d);
	if (r && p->mode == SPAN_EXIT_RET) {
		snprintf(err, len, "--span %s:%s: cannot disassemble it (%s%s): its returns cannot "
			 "be found%s", path, symbol, r == -EFBIG ? "size " : "",
			 r == -EFBIG ? (p->fn.size ? "too large" : "unknown") : strerror(-r),
			 p->go ? "" : "; use --span-exit uretprobe");
		return r;
	}
	if (r) { /* URET needs no exits: the entry stays on the first instruction */
		p->entry = (struct span_site){ .offset = p->fn.offset, .vaddr = p->fn.vaddr,
					       .cls = USITE_SSTEP };
		p->first_cls = USITE_SSTEP;
		return 0;
	}
	p->entry = entry_of(&p->fn, &d);
	p->first_cls = d.first_cls;
	if (p->mode == SPAN_EXIT_RET) {
		seen_before(&fw, p->fn.vaddr);
		plan_exits(p, &fw, &p->fn, &d, 0);
		if (!p->nexits)
			snprintf(warn, wlen, "%s has no return instruction: its calls end only by a "
				 "C++ exception or a longjmp (or leave through indirect jumps, unseen)",
				 symbol);
	}
	return 0;
}

int span_plan_entry(const char *path, const char *symbol, struct span_site *site)
{
	struct syms_func f;
	struct disasm_fn d;
	int r = syms_elf_func(path, symbol, &f);

	if (r)
		return r;
	if (analyse(path, &f, &d)) {
		*site = (struct span_site){ .offset = f.offset, .vaddr = f.vaddr, .cls = USITE_SSTEP };
		return 0;
	}
	*site = entry_of(&f, &d);
	return 0;
}

uint64_t span_plan_cost_ns(const struct span_plan *p)
{
	uint64_t exit_ns = 0;

	if (p->mode == SPAN_EXIT_URET)
		return usite_cost_ns(p->entry.cls) + usite_uretprobe_ns();
	if (p->mode == SPAN_EXIT_TCP)
		return 0; /* no uprobe: tracepoints the BPF run time counts */
	if (p->mode == SPAN_EXIT_USDT && p->usdt.once)
		return usite_cost_ns(p->entry.cls);
	for (int i = 0; i < p->nexits; i++)
		if (usite_cost_ns(p->exits[i].cls) > exit_ns)
			exit_ns = usite_cost_ns(p->exits[i].cls);
	return usite_cost_ns(p->entry.cls) + exit_ns;
}

/* A USDT span's trace-context arguments, after its description in buf. */
static void usdt_describe_context(const struct span_plan *p, char *buf, size_t len)
{
	size_t n = strlen(buf);

	if (!p->usdt.traceparent_arg || n >= len)
		return;
	n += (size_t)snprintf(buf + n, len - n, "; the caller's traceparent from arg%u",
			      p->usdt.traceparent_arg - 1u);
	if (p->usdt.tracestate_arg && n < len)
		snprintf(buf + n, len - n, ", its tracestate from arg%u", p->usdt.tracestate_arg - 1u);
}

void span_plan_describe(const struct span_plan *p, char *buf, size_t len)
{
	int n = 0, by_cls[USITE_NCLASS] = { 0 };
	size_t o;

	if (p->mode == SPAN_EXIT_TCP) {
		snprintf(buf, len, "requests on TCP port%s %s: from a request's first byte in "
			 "(tcp_probe) to its answer's last byte out (net_dev_queue); nothing in "
			 "the target is touched", p->tcp.nports > 1 ? "s" : "", p->symbol + 4);
		return;
	}
	if (p->mode == SPAN_EXIT_USDT && p->usdt.once) {
		snprintf(buf, len, "USDT %s (%d site%s, %s), one mark carrying the start: "
			 "~%.1f us a call", p->usdt.end, p->usdt.end_sites,
			 p->usdt.end_sites == 1 ? "" : "s", usite_class_name(p->entry.cls),
			 span_plan_cost_ns(p) / 1000.0);
		usdt_describe_context(p, buf, len);
		return;
	}
	if (p->mode == SPAN_EXIT_USDT) {
		snprintf(buf, len, "USDT %s (%d site%s, %s) to %s (%d site%s, %s), paired by %s: "
			 "~%.1f us a call", p->usdt.start, p->usdt.start_sites,
			 p->usdt.start_sites == 1 ? "" : "s", usite_class_name(p->entry.cls),
			 p->usdt.end, p->usdt.end_sites, p->usdt.end_sites == 1 ? "" : "s",
			 usite_class_name(p->exits[0].cls),
			 p->usdt.by_arg ? "first argument" : "thread", span_plan_cost_ns(p) / 1000.0);
		usdt_describe_context(p, buf, len);
		return;
	}
	o = (size_t)snprintf(buf, len, "entry +0x%llx (%s)",
			     (unsigned long long)(p->entry.vaddr - p->fn.vaddr),
			     usite_class_name(p->entry.cls));
	if (p->mode == SPAN_EXIT_URET) {
		o += (size_t)snprintf(buf + o, o < len ? len - o : 0, ", exit by uretprobe");
	} else {
		for (int i = 0; i < p->nexits; i++)
			by_cls[p->exits[i].cls < USITE_NCLASS ? p->exits[i].cls : USITE_SSTEP]++;
		o += (size_t)snprintf(buf + o, o < len ? len - o : 0, ", %d exit site%s (", p->nexits,
				      p->nexits == 1 ? "" : "s");
		for (int c = 0; c < USITE_NCLASS; c++)
			if (by_cls[c])
				o += (size_t)snprintf(buf + o, o < len ? len - o : 0, "%s%d %s",
						      n++ ? ", " : "", by_cls[c],
						      usite_class_name((enum usite_class)c));
		o += (size_t)snprintf(buf + o, o < len ? len - o : 0, ")");
		if (p->followed)
			o += (size_t)snprintf(buf + o, o < len ? len - o : 0,
					      ", %d jumped-to function%s followed", p->followed,
					      p->followed == 1 ? "" : "s");
		if (p->tail_ends)
			o += (size_t)snprintf(buf + o, o < len ? len - o : 0,
					      ", %d tail call%s end it", p->tail_ends,
					      p->tail_ends == 1 ? "" : "s");
		if (p->indirect_jumps)
			o += (size_t)snprintf(buf + o, o < len ? len - o : 0,
					      ", %d indirect jump%s not covered", p->indirect_jumps,
					      p->indirect_jumps == 1 ? "" : "s");
	}
	snprintf(buf + o, o < len ? len - o : 0, ": ~%.1f us a call",
		 span_plan_cost_ns(p) / 1000.0);
}
