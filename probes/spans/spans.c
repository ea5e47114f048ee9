// SPDX-License-Identifier: MIT
/*
 * spans: loader side of spans.bpf.c. Each --span BIN:SYMBOL is
 * resolved to a file (path, the target's mapping, ldconfig cache, standard
 * dirs, $PATH) and planned from its machine code (span_plan.c): the entry
 * site and either a uretprobe (only where nothing can unwind through it) or
 * uprobes on every way out. Then the guards: __cxa_begin_catch and longjmp of
 * the target's libraries, so calls left by an exception or a longjmp end
 * there. Uprobes are inode-based: a library the target loads only later (a
 * command held before exec) is traced.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <json_out.h>
#include "spans/disasm.h"
#include "core/features.h"
#include "core/map_full.h"
#include "core/probe.h"
#include "spans/span_plan.h"
#include "symbols/syms.h"
#include "recfile.h"
#include "spans/spans.h"
#include "spans.skel.h"
#include "core/filter.h"
#include "core/registry.h"
#include "core/uprobe_set.h"

#define MAX_LINKS 8 /* the tcp programs (four of their eight variants load), the exit's */

/* Where the guards go: library, function, guard kind. */
static const struct {
	const char *lib, *func;
	int guard;
} guard_sites[] = {
	{ "libstdc++.so.6", "__cxa_begin_catch", SPANS_GUARD_CATCH },
	{ "libc.so.6", "longjmp", SPANS_GUARD_LONGJMP }, /* = siglongjmp, _longjmp */
	{ "libc.so.6", "__longjmp_chk", SPANS_GUARD_LONGJMP },
};
#define N_GUARDS (sizeof(guard_sites) / sizeof(guard_sites[0]))

struct spans_state {
	uint64_t calls[TT_MAX_SPANS]; /* span records, by --span index */
	struct spans_bpf *skel;
	struct bpf_link *links[MAX_LINKS]; /* the tcp programs' */
	int nlinks;
	struct uprobe_set uprobes; /* the uprobes and USDT probes, again for each descendant */
	struct span_plan plans[TT_MAX_SPANS];
	int nplans;
	int guards;              /* guard sites attached */
	bool cookies;            /* uprobes take BPF cookies (features_uprobe_cookie) */
	bool refused[TT_MAX_SPANS]; /* a --span this kernel cannot trace: not attached */
	char mangled[TT_MAX_SPANS][512]; /* a --span named demangled: its symbol in the file */
	char shown[TT_MAX_SPANS][512];   /* each span's name as people read it (demangled) */
	struct recfile *out;
	struct recfile *contexts; /* span_contexts.bin; NULL: no trace contexts read */
	int write_err;
	uint64_t tcp_stale;      /* tcp:PORT requests never answered (tcp_sweep) */
};

/* One-line reason for the loader (vsnprintf: truncation is intended). */
__attribute__((format(printf, 2, 3)))
static void spans_err(struct tt_ctx *ctx, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(ctx->err, sizeof(ctx->err), fmt, ap);
	va_end(ap);
}

_Static_assert(sizeof(struct spans_context_msg) > sizeof(struct tt_span),
	       "the events ring's messages are told apart by their size");
_Static_assert(sizeof(((struct tt_span_context *)0)->traceparent) ==
	       sizeof(((struct spans_context_msg *)0)->traceparent), "a header's value fits");
_Static_assert(sizeof(((struct tt_span_context *)0)->traceresponse) ==
	       sizeof(((struct spans_context_msg *)0)->traceresponse), "a header's value fits");
_Static_assert(sizeof(((struct tt_span_context *)0)->tracestate) ==
	       sizeof(struct spans_tracestate), "a header's value fits");
_Static_assert(sizeof(struct spans_context_state_msg) > sizeof(struct spans_context_msg),
	       "the events ring's messages are told apart by their size");

/* A header's value as the kernel copied it, up to the end of the bytes read:
 * kept to its line's end, the rest zeroed, so that no other header (a cookie, a
 * credential) reaches the run's files. */
static void context_value_copy(char *dst, const char *src, size_t size)
{
	size_t n = 0;

	while (n < size && src[n] && src[n] != '\r' && src[n] != '\n')
		n++;
	memcpy(dst, src, n);
	memset(dst + n, 0, size - n);
}

/* A tcp:PORT span with its request's trace context (state: its tracestate, or
 * NULL): the span, then the context naming the span's row. */
static void spans_write_context(struct spans_state *st, const struct spans_context_msg *m,
				const struct spans_tracestate *state)
{
	struct tt_span_context c = { .span_row = recfile_count(st->out),
				     .t_start_ns = m->span.t_start_ns, .t_end_ns = m->span.t_end_ns,
				     .tid = m->span.tid };

	context_value_copy(c.traceparent, m->traceparent, sizeof(c.traceparent));
	context_value_copy(c.traceresponse, m->traceresponse, sizeof(c.traceresponse));
	if (state)
		context_value_copy(c.tracestate, state->value, sizeof(c.tracestate));
	probe_write(st->out, &m->span, &st->write_err);
	st->calls[m->span.span_id % TT_MAX_SPANS]++;
	if (st->contexts)
		probe_write(st->contexts, &c, &st->write_err);
}

static int spans_on_event(void *arg, void *data, size_t size)
{
	struct spans_state *st = arg;

	if (size == sizeof(struct spans_context_state_msg)) {
		struct spans_context_state_msg m;

		memcpy(&m, data, sizeof(m));
		spans_write_context(st, &m.context, &m.tracestate);
	} else if (size == sizeof(struct spans_context_msg)) {
		struct spans_context_msg m;

		memcpy(&m, data, sizeof(m));
		spans_write_context(st, &m, NULL);
	} else if (size >= sizeof(struct tt_span)) {
		const struct tt_span *r = data;

		probe_write(st->out, data, &st->write_err);
		st->calls[r->span_id % TT_MAX_SPANS]++;
	}
	return 0;
}

/* A --span named as people read it ("ns::C::f", "handle(int)", a Rust path): the
 * one function of path whose demangled name it is, its mangled name into mangled. */
static int spans_find_demangled(struct tt_ctx *ctx, const struct tt_span_spec *sp,
				const char *path, char *mangled, size_t len)
{
	char cands[400];
	int err = syms_elf_demangled(path, sp->symbol, mangled, len, cands, sizeof(cands));

	if (err == -EEXIST)
		spans_err(ctx, "--span %s:%s: more than one function of %s is named %s: %s (give "
			  "the parameters, e.g. '%s(int)', or the mangled name: nm %s | grep)",
			  sp->binary, sp->symbol, path, sp->symbol, cands, sp->symbol, path);
	return err;
}

/* Resolve one --span option to a file and plan it; ctx->err says why not. */
static int spans_plan_one(struct tt_ctx *ctx, const struct tt_span_spec *sp,
			  const struct span_target *t, struct span_plan *plan, char *mangled,
			  size_t mlen)
{
	char warn[PATH_MAX + 200];
	const int pid = ctx->opts->pid; /* > 0: attaching to a running process */
	char path[PATH_MAX], near[200];
	const char *symbol = sp->symbol;
	uint64_t off;
	int err;

	if (sp->tcp)
		return span_plan_tcp(ctx->target_pid, sp->tcp_port, plan, ctx->err, sizeof(ctx->err));
	err = syms_find_library(ctx->target_pid, sp->binary, path, sizeof(path));
	if (err) {
		spans_err(ctx, "--span %s%s:%s: '%s' not found (not a file, not mapped by the target, "
			 "not in the ldconfig cache, standard lib dirs or $PATH)",
			 sp->provider ? "usdt:" : "", sp->binary, sp->symbol, sp->binary);
		return err;
	}
	if (pid > 0 && !syms_is_mapped(pid, path)) {
		spans_err(ctx, "--span %s:%s: %s is not mapped by pid %d (start it with -- CMD to "
			 "trace a library it loads later)", sp->binary, sp->symbol, path, pid);
		return -ENOENT;
	}
	if (sp->provider)
		return span_plan_usdt(path, sp->provider, sp->symbol, plan, ctx->err,
				      sizeof(ctx->err)) ?:
		       span_plan_usdt_context(plan, sp->traceparent_arg, sp->tracestate_arg,
					      ctx->err, sizeof(ctx->err));
	err = syms_elf_offset(path, sp->symbol, &off);
	if (err == -ENOENT) {
		err = spans_find_demangled(ctx, sp, path, mangled, mlen);
		if (err == -EEXIST)
			return err;
		if (!err)
			symbol = mangled;
	}
	if (err == -ENOENT) {
		if (syms_suggest(path, sp->symbol, near, sizeof(near), 5) > 0)
			spans_err(ctx, "symbol %s not found in %s (did you mean: %s)",
				 sp->symbol, path, near);
		else
			spans_err(ctx, "symbol %s not found in %s (no similar symbol)",
				 sp->symbol, path);
		return err;
	} else if (err) {
		spans_err(ctx, "--span %s:%s: cannot read ELF %s: %s",
			 sp->binary, sp->symbol, path, strerror(-err));
		return err;
	}
	err = span_plan_build(path, symbol, ctx->opts->span_exit, t, plan, ctx->err,
			      sizeof(ctx->err), warn, sizeof(warn));
	if (!err && warn[0])
		fprintf(stderr, "tailtrace: warning: %s\n", warn);
	return err;
}

static int link_add(struct tt_ctx *ctx, struct spans_state *st, struct bpf_link *l)
{
	if (st->nlinks >= MAX_LINKS) {
		bpf_link__destroy(l);
		spans_err(ctx, "spans: more than %d probe sites", MAX_LINKS);
		return -E2BIG;
	}
	st->links[st->nlinks++] = l;
	return 0;
}

static int target_pid(const struct tt_ctx *ctx)
{
	return ctx->opts->all || ctx->target_pid <= 0 ? -1 : ctx->target_pid;
}

/* Every site of one USDT probe (libbpf: semaphores, arguments). */
static int attach_usdt(struct tt_ctx *ctx, struct spans_state *st, struct bpf_program *prog,
		       const struct span_plan *p, const char *name, uint64_t cookie)
{
	struct uprobe_spec spec = { .prog = prog, .cookie = cookie, .provider = p->usdt.provider,
				    .name = name };
	int err;

	snprintf(spec.path, sizeof(spec.path), "%s", p->path);
	err = uprobe_set_attach(&st->uprobes, &spec, target_pid(ctx));
	if (err)
		spans_err(ctx, "usdt:%s:%s:%s: cannot attach: %s", p->path, p->usdt.provider, name,
			 strerror(-err));
	return err;
}

static struct bpf_program *prog_named(const struct spans_state *st, const char *fmt, int n)
{
	char name[64];

	snprintf(name, sizeof(name), fmt, n);
	return bpf_object__find_program_by_name(st->skel->obj, name);
}

static int attach(struct tt_ctx *ctx, struct spans_state *st, struct bpf_program *prog,
		  const char *path, uint64_t off, bool ret, uint64_t cookie, const char *what)
{
	/* without cookies the program says which site it is (and libbpf refuses a cookie) */
	struct uprobe_spec spec = { .prog = prog, .offset = off, .retprobe = ret,
				    .cookie = st->cookies ? cookie : 0 };
	int err;

	snprintf(spec.path, sizeof(spec.path), "%s", path);
	err = uprobe_set_attach(&st->uprobes, &spec, target_pid(ctx));
	if (err)
		spans_err(ctx, "%s: cannot attach a %s to %s+0x%llx: %s", what,
			 ret ? "uretprobe" : "uprobe", path, (unsigned long long)off, strerror(-err));
	return err;
}

/* A USDT span where libbpf, without cookies, must find each probe by its address
 * in the running process: a position-independent file (an executable or a library)
 * of a process not started yet (-- CMD), or of every process (--all). Refused in
 * one line; the run goes on without it. */
static void usdt_refuse(struct tt_ctx *ctx, struct spans_state *st, int i)
{
	char what[600];

	snprintf(what, sizeof(what), "--span usdt:%s:%s:%s (%s is position-independent and "
		 "its process %s)", ctx->opts->spans[i].binary, st->plans[i].usdt.provider,
		 ctx->opts->spans[i].symbol, st->plans[i].path,
		 ctx->opts->all ? "any of the machine's" : "not started yet");
	features_refuse(what, "BPF cookies on uprobes", "5.15",
			"no spans of it (--pid on the running process does without cookies)");
	st->refused[i] = true;
}

/* A --span whose exits are uprobes on its return instructions (Go, a file with
 * exception machinery, --span-exit ret): which exit fired is told by BPF cookie
 * only. Refused in one line; the run goes on without it. */
static void spans_refuse(struct spans_state *st, const struct tt_opts *o, int i)
{
	char what[600];

	snprintf(what, sizeof(what), "--span %s:%s (it ends by uprobes on its return "
		 "instructions: %s)", o->spans[i].binary, st->plans[i].symbol, st->plans[i].why);
	features_refuse(what, "BPF cookies on uprobes", "5.15",
			"no spans of it (--span-exit uretprobe does without cookies, if no C++ "
			"exception, longjmp or Go stack passes through the function)");
	st->refused[i] = true;
}

/* A USDT span's probes: its one mark, or its end then its start. */
static int attach_usdt_span(struct tt_ctx *ctx, struct spans_state *st, int i)
{
	const struct span_plan *p = &st->plans[i];
	/* the end's condition byte names its trace-context arguments */
	unsigned context = SPANS_COOKIE_CONTEXT(p->usdt.traceparent_arg, p->usdt.tracestate_arg);
	bool hash = !features_atomics();
	unsigned flags;
	int err;

	if (p->usdt.once)
		return attach_usdt(ctx, st, st->skel->progs.span_mark_once, p, p->usdt.end,
				   SPANS_COOKIE(i, SPANS_SITE_RET, context,
						p->usdt.end_nargs >= 3 ? SPANS_COOKIE_RET_ARG : 0));
	flags = (p->usdt.by_arg ? SPANS_COOKIE_BY_ARG : 0) |
		(p->usdt.end_nargs >= 2 ? SPANS_COOKIE_RET_ARG : 0);
	err = attach_usdt(ctx, st, prog_named(st, hash ? "span_mark_end_hash" : "span_mark_end", 0),
			  p, p->usdt.end, SPANS_COOKIE(i, SPANS_SITE_RET, context, flags));
	return err ?: attach_usdt(ctx, st, prog_named(st, hash ? "span_mark_start_hash" :
						      "span_mark_start", 0),
				  p, p->usdt.start, SPANS_COOKIE(i, SPANS_SITE_ENTRY, 0, flags));
}

/* Exits before the entry: a call entered while attaching then has its exit
 * hooked but no entry (counted unmatched), never an entry whose exit is missed. */
static int attach_span(struct tt_ctx *ctx, struct spans_state *st, int i)
{
	const struct span_plan *p = &st->plans[i];
	unsigned flags = p->go ? SPANS_COOKIE_GO : 0;
	char what[160];
	int err = 0;

	if (st->refused[i] || p->mode == SPAN_EXIT_TCP) /* TCP: attach_tracepoints, once for all */
		return 0;
	if (p->mode == SPAN_EXIT_USDT) {
		err = attach_usdt_span(ctx, st, i);
		if (err && !st->cookies && (err == -ESRCH || err == -ENOTSUP || err == -EOPNOTSUPP)) {
			usdt_refuse(ctx, st, i);
			err = 0;
		}
		return err;
	}
	snprintf(what, sizeof(what), "--span %s:%s", ctx->opts->spans[i].binary, p->symbol);
	if (p->mode == SPAN_EXIT_URET)
		err = attach(ctx, st, st->cookies ? st->skel->progs.span_exit :
				 prog_named(st, "span_exit_nc%d", i), p->path, p->entry.offset,
			     true, SPANS_COOKIE(i, SPANS_SITE_RET, 0, flags), what);
	for (int k = 0; !err && p->mode == SPAN_EXIT_RET && k < p->nexits; k++)
		err = attach(ctx, st, st->skel->progs.span_ret, p->path, p->exits[k].offset, false,
			     SPANS_COOKIE(i, p->exits[k].site, p->exits[k].cc, flags), what);
	return err ?: attach(ctx, st, st->cookies ? st->skel->progs.span_enter :
				 prog_named(st, "span_enter_nc%d", i), p->path, p->entry.offset,
			     false, SPANS_COOKIE(i, SPANS_SITE_ENTRY, 0, flags), what);
}

static bool has_mode(const struct spans_state *st, int mode)
{
	for (int i = 0; i < st->nplans; i++)
		if (!st->refused[i] && st->plans[i].mode == mode)
			return true;
	return false;
}

/* The tracepoint programs, the variants spans_select_progs loaded: the tcp:PORT
 * spans' (every port is in their settings: the close, the answer's bytes, then the
 * requests', an end watched before its start), and the threads' exit. */
static int attach_tracepoints(struct tt_ctx *ctx, struct spans_state *st)
{
	struct bpf_program *progs[] = {
		st->skel->progs.span_tcp_state_btf, st->skel->progs.span_tcp_state_raw,
		st->skel->progs.span_tcp_out_btf, st->skel->progs.span_tcp_out_raw,
		st->skel->progs.span_tcp_in_btf, st->skel->progs.span_tcp_in_raw,
		st->skel->progs.span_tcp_read_btf, st->skel->progs.span_tcp_read_raw,
		st->skel->progs.span_thread_exit_btf, st->skel->progs.span_thread_exit_raw,
	};

	for (size_t k = 0; k < sizeof(progs) / sizeof(progs[0]); k++) {
		struct bpf_link *l;
		int err;

		if (!bpf_program__autoload(progs[k]))
			continue;
		l = bpf_program__attach(progs[k]);
		err = l ? 0 : -errno;
		if (err) {
			spans_err(ctx, "--span: cannot attach %s: %s", bpf_program__section_name(progs[k]),
				  strerror(-err));
			return err;
		}
		if ((err = link_add(ctx, st, l)))
			return err;
	}
	return 0;
}

/* The unwinder, catch and longjmp sites of the target's libraries that exist
 * here; a library it does not use is simply not there (or never hit). */
static void attach_guards(struct tt_ctx *ctx, struct spans_state *st, bool any_thread)
{
	char path[PATH_MAX];
	struct span_site s;

	for (size_t g = 0; any_thread && g < N_GUARDS; g++) {
		if (syms_find_library(ctx->target_pid, guard_sites[g].lib, path, sizeof(path)) ||
		    span_plan_entry(path, guard_sites[g].func, &s))
			continue;
		struct bpf_program *prog = st->cookies ? st->skel->progs.span_guard :
			guard_sites[g].guard == SPANS_GUARD_CATCH ? st->skel->progs.span_guard_catch_nc :
			st->skel->progs.span_guard_longjmp_nc;

		if (!attach(ctx, st, prog, path, s.offset, false, (uint64_t)guard_sites[g].guard,
			    guard_sites[g].func))
			st->guards++;
		else if (ctx->opts->verbose)
			fprintf(stderr, "tailtrace: spans: %s (its exits are not watched)\n", ctx->err);
	}
}

static void spans_destroy(void *state)
{
	struct spans_state *st = state;

	if (!st)
		return;
	for (int i = 0; i < st->nlinks; i++)
		bpf_link__destroy(st->links[i]);
	uprobe_set_free(&st->uprobes);
	spans_bpf__destroy(st->skel);
	recfile_close(st->out);
	recfile_close(st->contexts);
	free(st);
}

/* Does a --span keep per-thread state in open_spans (a function span of a thread,
 * not of a goroutine, nor a USDT or TCP span)? */
static bool thread_spans(const struct spans_state *st)
{
	for (int i = 0; i < st->nplans; i++)
		if (!st->refused[i] && !st->plans[i].go && st->plans[i].mode != SPAN_EXIT_USDT &&
		    st->plans[i].mode != SPAN_EXIT_TCP)
			return true;
	return false;
}

/* open_spans' entries: 16,384, or 256 a CPU on machines with more than 64 (each
 * thread or goroutine inside a traced call holds one). */
static __u32 spans_open_entries(void)
{
	int ncpus = libbpf_num_possible_cpus();

	return ncpus > 64 ? (__u32)ncpus * 256 : 16384;
}

/* Load only what this kernel runs and the spans use: the cookie programs, or a
 * pair per --span and one per guard kind (features_uprobe_cookie); USDT with
 * the compare-and-swap fast path or without (features_atomics). */
static void spans_select_progs(struct spans_state *st)
{
	bool usdt = false, once = false, atomics = features_atomics();
	struct bpf_program *p;

	for (int i = 0; i < st->nplans; i++) {
		bool u = !st->refused[i] && st->plans[i].mode == SPAN_EXIT_USDT;

		once |= u && st->plans[i].usdt.once;
		usdt |= u && !st->plans[i].usdt.once;
	}
	bpf_object__for_each_program(p, st->skel->obj) {
		const char *name = bpf_program__name(p);
		const char *nc = strstr(name, "_nc");
		int hook = features_prog_variant(name, features_hook());
		bool load;

		if (hook >= 0) /* span_tcp_*, span_thread_exit_*: this kernel's variant */
			load = hook && (!strncmp(name, "span_tcp_", 9) ? has_mode(st, SPAN_EXIT_TCP)
								       : thread_spans(st));
		else if (!strcmp(name, "span_mark_once"))
			load = once;
		else if (!strncmp(name, "span_mark_", 10))
			load = usdt && (strstr(name, "_hash") ? !atomics : atomics);
		else if (nc && nc[3] >= '0' && nc[3] <= '9') /* span_enter_ncN, span_exit_ncN */
			load = !st->cookies && nc[3] - '0' < st->nplans &&
			       !st->refused[nc[3] - '0'] && st->plans[nc[3] - '0'].mode != SPAN_EXIT_USDT;
		else if (nc)                                 /* the guards' */
			load = !st->cookies;
		else
			load = st->cookies;
		bpf_program__set_autoload(p, load);
	}
}

_Static_assert(sizeof(((struct span_tcp *)0)->ports) / sizeof(unsigned) == SPANS_TCP_PORTS,
	       "a plan's TCP ports fit the programs' settings");

/* The tcp programs' ports, each with its --span, and the namespace they are in. */
static void spans_tcp_configure(struct spans_state *st)
{
	int n = 0;

	for (int i = 0; i < st->nplans; i++) {
		const struct span_tcp *t = &st->plans[i].tcp;

		if (st->plans[i].mode != SPAN_EXIT_TCP)
			continue;
		for (int k = 0; k < t->nports && n < SPANS_TCP_PORTS; k++, n++) {
			st->skel->rodata->tcp_port[n] = (__u16)t->ports[k];
			st->skel->rodata->tcp_span[n] = (__u8)i;
		}
		st->skel->rodata->tcp_netns = (__u32)t->netns;
	}
}

/* Whether the spans carry their requests' trace contexts (span_contexts.bin): a
 * tcp:PORT span's, read from its bytes, or a USDT span's whose end offers one. */
static bool spans_read_contexts(const struct spans_state *st)
{
	for (int i = 0; i < st->nplans; i++)
		if (st->plans[i].mode == SPAN_EXIT_USDT && st->plans[i].usdt.traceparent_arg &&
		    !st->refused[i])
			return true;
	return st->skel->rodata->tcp_context;
}

/* Each tcp:PORT request's traceparent, read from the bytes the target's read()
 * or recv() copied (the registers its syscall entered with say where to), and
 * its answer's traceresponse; under the flight recorder too (a capture keeps the
 * contexts of its spans, flight_window.c). */
static void spans_context_configure(struct tt_ctx *ctx, struct spans_state *st)
{
	unsigned thread_size;
	int how;

	if (!has_mode(st, SPAN_EXIT_TCP))
		return;
	how = features_user_regs(&thread_size);
	if (how == FEATURES_REGS_NONE) {
		features_refuse("the trace context (traceparent, tracestate, traceresponse) of "
				"tcp:PORT requests", "bpf_task_pt_regs", "5.15",
				"their spans keep trace ids of their own, outside the callers' traces");
		return;
	}
	st->skel->rodata->user_regs_how = (__u8)how;
	st->skel->rodata->kernel_thread_size = thread_size;
	st->skel->rodata->tcp_context = true;
}

static int spans_load(struct tt_ctx *ctx, struct spans_state *st)
{
	int err;

	st->skel = spans_bpf__open_opts(features_open_opts());
	if (!st->skel) {
		spans_err(ctx, "spans: cannot open BPF object");
		return -errno ? -errno : -EINVAL;
	}
	FILTER_CONFIGURE(st->skel->rodata, ctx);
	probe_size_ringbuf(st->skel->maps.events, ctx->opts);
	bpf_map__set_max_entries(st->skel->maps.open_spans, spans_open_entries());
	st->skel->rodata->rb_wakeup_bytes = probe_ringbuf_bytes(ctx->opts) / 8;
	spans_select_progs(st);
	spans_tcp_configure(st);
	spans_context_configure(ctx, st);
	err = spans_bpf__load(st->skel);
	if (err)
		spans_err(ctx, "spans: cannot load BPF programs: %s", strerror(-err));
	return err;
}

/* The span's name as people read it: its symbol demangled, else as given. */
static void spans_name(struct spans_state *st, int i)
{
	int mode = st->plans[i].mode;
	char *d = mode == SPAN_EXIT_USDT || mode == SPAN_EXIT_TCP ? NULL :
		  syms_demangle(st->plans[i].symbol);

	snprintf(st->shown[i], sizeof(st->shown[i]), "%s", d ? d : st->plans[i].symbol);
	free(d);
}

static void print_plans(struct tt_ctx *ctx, const struct spans_state *st)
{
	char desc[400];

	for (int i = 0; i < st->nplans; i++) {
		const struct span_plan *p = &st->plans[i];

		if (st->refused[i])
			continue;
		span_plan_describe(p, desc, sizeof(desc));
		fprintf(stderr, "tailtrace: span %s%s: %s\n", st->shown[i],
			p->go ? " (Go: keyed by goroutine)" : "", desc);
		if (ctx->opts->verbose && p->mode != SPAN_EXIT_USDT && p->mode != SPAN_EXIT_TCP)
			fprintf(stderr, "tailtrace: span %s ends by %s: %s\n", st->shown[i],
				p->mode == SPAN_EXIT_RET ? "uprobes on its returns" : "uretprobe",
				p->why);
	}
	if (ctx->opts->verbose)
		fprintf(stderr, "tailtrace: spans: %d catch/longjmp sites watched\n", st->guards);
}

static int spans_setup(struct tt_ctx *ctx, void **state)
{
	const struct tt_opts *o = ctx->opts;
	struct spans_state *st = calloc(1, sizeof(*st));
	struct span_target target;
	bool any_thread = false;
	int err = 0;

	if (!st)
		return -ENOMEM;
	if (o->nspans < 1 || o->nspans > TT_MAX_SPANS) {
		spans_err(ctx, "spans: give 1..%d --span BINARY:SYMBOL options", TT_MAX_SPANS);
		err = -EINVAL;
		goto fail;
	}
	span_plan_target(ctx->target_exe, o->pid, &target);
	st->cookies = features_uprobe_cookie();
	for (int i = 0; !err && i < o->nspans; i++, st->nplans++) {
		err = spans_plan_one(ctx, &o->spans[i], &target, &st->plans[i], st->mangled[i],
				     sizeof(st->mangled[i]));
		if (!err)
			spans_name(st, i);
		if (!err && !st->cookies && st->plans[i].mode == SPAN_EXIT_RET)
			spans_refuse(st, o, i);
	}
	for (int i = 0; !err && i < st->nplans; i++)
		any_thread |= !st->plans[i].go && st->plans[i].mode != SPAN_EXIT_USDT &&
			      st->plans[i].mode != SPAN_EXIT_TCP;
	err = err ?: spans_load(ctx, st);
	for (int i = 0; !err && i < st->nplans; i++)
		err = attach_span(ctx, st, i);
	err = err ?: attach_tracepoints(ctx, st);
	if (!err)
		attach_guards(ctx, st, any_thread);
	if (!err && !(st->out = probe_open_kind(ctx, TT_REC_SPAN))) {
		err = -errno;
		spans_err(ctx, "spans: cannot create %s/spans.bin: %s", o->out_dir, strerror(errno));
	}
	if (!err && spans_read_contexts(st) &&
	    !(st->contexts = probe_open_kind(ctx, TT_REC_SPAN_CONTEXT))) {
		err = -errno;
		spans_err(ctx, "spans: cannot create %s/span_contexts.bin: %s", o->out_dir,
			  strerror(errno));
	}
	if (!err)
		err = probe_add_ringbuf(ctx, st->skel->maps.events, spans_on_event, st);
	if (err)
		goto fail;
	print_plans(ctx, st);
	*state = st;
	return 0;
fail:
	spans_destroy(st);
	return err;
}

/* Requests of tcp:PORT spans unanswered this long never will be (their
 * connection vanished unseen): swept from the map, counted unmatched. */
#define TCP_STALE_NS (60 * 1000000000ull)
#define TCP_SWEEP_MS 10000

static int tcp_sweep(struct tt_ctx *ctx, void *state, uint64_t now_ns)
{
	struct spans_state *st = state;
	int fd = bpf_map__fd(st->skel->maps.tcp_open);
	int state_fd = bpf_map__fd(st->skel->maps.tcp_tracestate);
	struct spans_tcp_key k, next;
	struct spans_tcp_open o;
	bool more;

	(void)ctx;
	if (!has_mode(st, SPAN_EXIT_TCP))
		return -1;
	/* the next key before a delete: get_next_key after a deleted key starts over */
	for (more = !bpf_map_get_next_key(fd, NULL, &k); more; k = next) {
		more = !bpf_map_get_next_key(fd, &k, &next);
		if (bpf_map_lookup_elem(fd, &k, &o) || o.t_out_ns ||
		    o.t_start_ns + TCP_STALE_NS >= now_ns || bpf_map_delete_elem(fd, &k))
			continue;
		st->tcp_stale++;
		if (o.tracestate)
			bpf_map_delete_elem(state_fd, &k);
	}
	return TCP_SWEEP_MS;
}

static uint64_t spans_counter(struct spans_state *st, __u32 idx)
{
	return probe_counter_sum(st->skel->maps.counters, idx);
}

static int spans_finish(struct tt_ctx *ctx, void *state)
{
	struct spans_state *st = state;
	int err = probe_flush(st->out, &st->write_err);

	if (st->contexts)
		err = probe_flush(st->contexts, &st->write_err);

	if (ctx->opts->verbose)
		fprintf(stderr, "tailtrace: spans: %llu calls nested deeper than %d, %llu returns "
			"without an entry, %llu entries whose return was never seen, "
			"%llu state-map overflows, %llu unreadable goroutines, %llu unreadable "
			"jmp_bufs, %llu unreadable USDT arguments, %llu one-mark starts "
			"that were not a time, %llu TCP requests begun\n",
			(unsigned long long)spans_counter(st, SPANS_CNT_TOO_DEEP), SPANS_MAX_DEPTH,
			(unsigned long long)spans_counter(st, SPANS_CNT_UNMATCHED),
			(unsigned long long)spans_counter(st, SPANS_CNT_STALE),
			(unsigned long long)spans_counter(st, SPANS_CNT_STATE_FULL),
			(unsigned long long)spans_counter(st, SPANS_CNT_NO_G),
			(unsigned long long)spans_counter(st, SPANS_CNT_BAD_JMPBUF),
			(unsigned long long)spans_counter(st, SPANS_CNT_NO_ARG),
			(unsigned long long)spans_counter(st, SPANS_CNT_BAD_START),
			(unsigned long long)spans_counter(st, SPANS_CNT_TCP_IN));
	if (!ctx->opts->verbose && spans_counter(st, SPANS_CNT_STATE_FULL))
		fprintf(stderr, "tailtrace: spans: %llu spans not recorded: more were open at once "
			"than the kernel's tables hold (%u threads or goroutines inside a traced "
			"call; open USDT or TCP requests: 16384 and %u; meta.json spans_state_full)\n",
			(unsigned long long)spans_counter(st, SPANS_CNT_STATE_FULL),
			spans_open_entries(), SPANS_TCP_SOCKETS);
	if (!ctx->opts->verbose && spans_counter(st, SPANS_CNT_BAD_START))
		fprintf(stderr, "tailtrace: spans: %llu one-mark spans dropped: their second "
			"argument is not a CLOCK_MONOTONIC start before their end (NAME__span(id, "
			"t_start_ns, ret), docs/third-party.md)\n",
			(unsigned long long)spans_counter(st, SPANS_CNT_BAD_START));
	if (err)
		spans_err(ctx, "spans: writing %s/spans.bin%s: %s", ctx->opts->out_dir,
			  st->contexts ? " and span_contexts.bin" : "", strerror(-err));
	return err;
}

/* Each span's calls at its plan's cost (entry and exit sites, this machine's costs). */
static uint64_t spans_cost_ns(const struct spans_state *st)
{
	uint64_t ns = 0;

	for (int i = 0; i < st->nplans; i++)
		ns += st->calls[i] * span_plan_cost_ns(&st->plans[i]);
	return ns;
}

static int spans_map_full(void *state, struct tt_map_full *out, int max)
{
	struct spans_state *st = state;
	int n = 0;

	if (!st->skel)
		return 0;
	struct bpf_map *const counted[SPANS_MAP_NR] = {
		[SPANS_MAP_OPEN_SPANS] = st->skel->maps.open_spans,
		[SPANS_MAP_OPEN_MARKS] = st->skel->maps.open_marks,
		[SPANS_MAP_TCP_OPEN] = st->skel->maps.tcp_open,
		[SPANS_MAP_TCP_TRACESTATE] = st->skel->maps.tcp_tracestate,
	};

	probe_map_full_counts(out, &n, max, st->skel->maps.map_full, counted, SPANS_MAP_NR);
	return n;
}

static int spans_stats(void *state, struct tt_stream_stats *out, int max)
{
	struct spans_state *st = state;

	if (max < 1)
		return 0;
	out[0] = (struct tt_stream_stats){
		.stream = "spans", .hook = "uprobe",
		.written = recfile_count(st->out),
		.lost = spans_counter(st, SPANS_CNT_LOST) + recfile_dropped(st->out),
		/* calls seen at one end only: entry without return, return without entry */
		.unmatched = spans_counter(st, SPANS_CNT_STALE) + spans_counter(st, SPANS_CNT_UNMATCHED) +
			     st->tcp_stale,
		.uprobe_hits = spans_counter(st, SPANS_CNT_HITS) + spans_counter(st, SPANS_CNT_GUARD_HITS),
		.uprobe_cost_ns = spans_cost_ns(st),
	};
	return 1;
}

static void site_json(FILE *f, const struct span_plan *p, const struct span_site *s)
{
	fprintf(f, "{\"offset\": %llu, \"at\": %llu, \"class\": \"%s\"}",
		(unsigned long long)s->offset, (unsigned long long)(s->vaddr - p->fn.vaddr),
		usite_class_name((enum usite_class)s->cls));
}

/* A tcp:PORT span: no sites, its ports and their namespace. */
static void tcp_json(FILE *f, const struct span_tcp *t)
{
	fprintf(f, "\"\", \"tcp\": {\"ports\": [");
	for (int k = 0; k < t->nports; k++)
		fprintf(f, "%s%u", k ? ", " : "", t->ports[k]);
	fprintf(f, "], \"netns\": %lu, \"start\": \"tcp_probe\", \"end\": \"net_dev_queue\"}, "
		"\"cost_ns_per_call\": 0}", t->netns);
}

/* meta.json "span_sites": how each span was planned (docs/probes/spans.md). */
/* A USDT argument kept as N + 1: N, or null for none. */
static void json_write_arg(FILE *f, unsigned arg)
{
	if (arg)
		fprintf(f, "%u", arg - 1);
	else
		fputs("null", f);
}

static void spans_meta(void *state, FILE *f)
{
	struct spans_state *st = state;

	fprintf(f, "  \"span_sites\": [");
	for (int i = 0; i < st->nplans; i++) {
		const struct span_plan *p = &st->plans[i];

		fprintf(f, "%s{\"symbol\": ", i ? ", " : "");
		json_write_string(f, p->symbol);
		fprintf(f, ", \"name\": ");
		json_write_string(f, st->shown[i]);
		fprintf(f, ", \"path\": ");
		json_write_string(f, p->path);
		fprintf(f, ", \"go\": %s, \"exit\": \"%s\", \"why\": ", p->go ? "true" : "false",
			span_exit_mode_name(p->mode));
		if (p->mode == SPAN_EXIT_TCP) {
			tcp_json(f, &p->tcp);
			continue;
		}
		json_write_string(f, p->why);
		fprintf(f, ", \"entry\": ");
		site_json(f, p, &p->entry);
		fprintf(f, ", \"first_class\": \"%s\", \"exits\": [",
			usite_class_name((enum usite_class)p->first_cls));
		for (int k = 0; p->mode != SPAN_EXIT_URET && k < p->nexits; k++) {
			fputs(k ? ", " : "", f);
			site_json(f, p, &p->exits[k]);
		}
		if (p->mode == SPAN_EXIT_USDT) {
			fprintf(f, "], \"usdt\": {\"provider\": ");
			json_write_string(f, p->usdt.provider);
			fprintf(f, ", \"start\": ");
			if (p->usdt.once)
				fputs("null", f);
			else
				json_write_string(f, p->usdt.start);
			fprintf(f, ", \"end\": ");
			json_write_string(f, p->usdt.end);
			fprintf(f, ", \"start_sites\": %d, \"end_sites\": %d, \"paired_by\": \"%s\"",
				p->usdt.start_sites, p->usdt.end_sites,
				p->usdt.once ? "one_mark" : p->usdt.by_arg ? "argument" : "thread");
			/* the end's arguments holding the request's trace context, or null */
			fprintf(f, ", \"traceparent_arg\": ");
			json_write_arg(f, p->usdt.traceparent_arg);
			fprintf(f, ", \"tracestate_arg\": ");
			json_write_arg(f, p->usdt.tracestate_arg);
			fputc('}', f);
		}
		fprintf(f, "%s, \"followed\": %d, \"tail_ends\": %d, \"indirect_jumps\": %d, "
			"\"cost_ns_per_call\": %llu}", p->mode == SPAN_EXIT_USDT ? "" : "]", p->followed, p->tail_ends, p->indirect_jumps,
			(unsigned long long)span_plan_cost_ns(p));
	}
	fprintf(f, "],\n  \"span_guards\": %d,\n", st->guards);
	/* calls not recorded: their thread or goroutine found the table of open spans full */
	fprintf(f, "  \"spans_state_full\": %llu, \"spans_state_entries\": %u,\n",
		(unsigned long long)spans_counter(st, SPANS_CNT_STATE_FULL), spans_open_entries());
	/* the requests' trace contexts (tcp:PORT requests, USDT ends that offer one):
	 * looked at, how many carried a traceparent, how many answers a traceresponse */
	if (st->skel && spans_read_contexts(st))
		fprintf(f, "  \"trace_contexts\": {\"requests\": %llu, \"traceparent\": %llu, "
			"\"tracestate\": %llu, \"unread\": %llu, \"traceresponse\": %llu, "
			"\"answers_unread\": %llu, \"answers_not_http\": %llu, \"written\": %llu},\n",
			(unsigned long long)(spans_counter(st, SPANS_CNT_TCP_IN) +
					     spans_counter(st, SPANS_CNT_USDT_CONTEXT)),
			(unsigned long long)spans_counter(st, SPANS_CNT_CONTEXT),
			(unsigned long long)spans_counter(st, SPANS_CNT_TRACESTATE),
			(unsigned long long)spans_counter(st, SPANS_CNT_CONTEXT_UNREAD),
			(unsigned long long)spans_counter(st, SPANS_CNT_RESPONSE_CONTEXT),
			(unsigned long long)spans_counter(st, SPANS_CNT_RESPONSE_UNREAD),
			(unsigned long long)spans_counter(st, SPANS_CNT_RESPONSE_NOT_HTTP),
			(unsigned long long)recfile_count(st->contexts));
}

/* A descendant of a target (tree.c found it): the spans' uprobes for it too. */
static int spans_attach_process(struct tt_ctx *ctx, void *state, int pid)
{
	struct spans_state *st = state;
	int err = uprobe_set_attach_pid(&st->uprobes, pid);

	if (err)
		spans_err(ctx, "spans: cannot attach the uprobes for pid %d, a descendant of the "
			  "target: %s", pid, strerror(-err));
	return err;
}

static struct bpf_object *spans_object(void *state)
{
	struct spans_state *st = state;

	return st && st->skel ? st->skel->obj : NULL;
}

const struct tt_probe probe_spans = {
	.name = "spans",
	.events = TT_EV_SPANS,
	.setup = spans_setup,
	.finish = spans_finish,
	.stats = spans_stats,
	.map_full = spans_map_full,
	.destroy = spans_destroy,
	.object = spans_object,
	.meta = spans_meta,
	.tick = tcp_sweep,
	.attach_process = spans_attach_process,
};
