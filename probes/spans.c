// SPDX-License-Identifier: MIT
/*
 * spans: loader side of spans.bpf.c. Each --span BINARY_OR_LIB:SYMBOL is
 * resolved to a file (path, the target's mapping, ldconfig cache, standard
 * dirs, $PATH) and a file offset, then gets a uprobe + uretprobe with the
 * option index as cookie. Uprobes are inode-based, so a library the target
 * loads only later (a command held before exec) is traced as well.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "probe.h"
#include "syms.h"
#include "recfile.h"
#include "spans.h"
#include "spans.skel.h"
#include "filter.h"
#include "registry.h"

struct spans_state {
	struct spans_bpf *skel;
	struct bpf_link *links[2 * TT_MAX_SPANS];
	struct recfile *out;
	int write_err;
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

static int spans_on_event(void *arg, void *data, size_t size)
{
	struct spans_state *st = arg;

	if (size >= sizeof(struct tt_span))
		probe_write(st->out, data, &st->write_err);
	return 0;
}

/* Resolve one --span option to (path, offset); ctx->err says why not. */
static int spans_resolve(struct tt_ctx *ctx, const struct tt_span_spec *sp,
			 char *path, size_t len, uint64_t *off)
{
	const int pid = ctx->opts->pid; /* > 0: attaching to a running process */
	char near[200];
	int err;

	err = syms_find_library(ctx->target_pid, sp->binary, path, len);
	if (err) {
		spans_err(ctx, "--span %s:%s: '%s' not found (not a file, not mapped by the target, "
			 "not in the ldconfig cache, standard lib dirs or $PATH)",
			 sp->binary, sp->symbol, sp->binary);
		return err;
	}
	if (pid > 0 && !syms_is_mapped(pid, path)) {
		spans_err(ctx, "--span %s:%s: %s is not mapped by pid %d (start it with -- CMD to "
			 "trace a library it loads later)", sp->binary, sp->symbol, path, pid);
		return -ENOENT;
	}
	err = syms_elf_offset(path, sp->symbol, off);
	if (err == -ENOENT) {
		if (syms_suggest(path, sp->symbol, near, sizeof(near), 5) > 0)
			spans_err(ctx, "symbol %s not found in %s (did you mean: %s)",
				 sp->symbol, path, near);
		else
			spans_err(ctx, "symbol %s not found in %s (no similar symbol)",
				 sp->symbol, path);
	} else if (err) {
		spans_err(ctx, "--span %s:%s: cannot read ELF %s: %s",
			 sp->binary, sp->symbol, path, strerror(-err));
	}
	return err;
}

static int spans_attach_one(struct tt_ctx *ctx, struct spans_state *st, int i)
{
	const struct tt_span_spec *sp = &ctx->opts->spans[i];
	int pid = ctx->opts->all || ctx->target_pid <= 0 ? -1 : ctx->target_pid;
	char path[PATH_MAX];
	uint64_t off;
	int err = spans_resolve(ctx, sp, path, sizeof(path), &off);

	/* Return probe first: a call entered between the two attaches then has its
	 * return hooked but no entry (counted unmatched), never an entry whose
	 * return is missed. */
	for (int ret = 1; !err && ret >= 0; ret--) {
		LIBBPF_OPTS(bpf_uprobe_opts, uo, .retprobe = ret, .bpf_cookie = (__u64)i);
		struct bpf_program *prog = ret ? st->skel->progs.span_exit : st->skel->progs.span_enter;

		st->links[2 * i + ret] = bpf_program__attach_uprobe_opts(prog, pid, path, off, &uo);
		if (!st->links[2 * i + ret]) {
			err = -errno;
			spans_err(ctx, "--span %s:%s: cannot attach %s to %s+0x%llx: %s",
				 sp->binary, sp->symbol, ret ? "uretprobe" : "uprobe", path,
				 (unsigned long long)off, strerror(-err));
		}
	}
	return err;
}

static void spans_destroy(void *state)
{
	struct spans_state *st = state;

	if (!st)
		return;
	for (int i = 0; i < 2 * TT_MAX_SPANS; i++)
		bpf_link__destroy(st->links[i]);
	spans_bpf__destroy(st->skel);
	recfile_close(st->out);
	free(st);
}

static int spans_setup(struct tt_ctx *ctx, void **state)
{
	const struct tt_opts *o = ctx->opts;
	struct spans_state *st = calloc(1, sizeof(*st));
	int err = 0;

	if (!st)
		return -ENOMEM;
	if (o->nspans < 1 || o->nspans > TT_MAX_SPANS) {
		spans_err(ctx, "spans: give 1..%d --span BINARY:SYMBOL options",
			 TT_MAX_SPANS);
		err = -EINVAL;
		goto fail;
	}
	st->skel = spans_bpf__open();
	if (!st->skel) {
		err = -errno ? -errno : -EINVAL;
		spans_err(ctx, "spans: cannot open BPF object");
		goto fail;
	}
	FILTER_CONFIGURE(st->skel->rodata, ctx);
	probe_size_ringbuf(st->skel->maps.events, o);
	err = spans_bpf__load(st->skel);
	if (err) {
		spans_err(ctx, "spans: cannot load BPF programs: %s", strerror(-err));
		goto fail;
	}
	for (int i = 0; !err && i < o->nspans; i++)
		err = spans_attach_one(ctx, st, i);
	if (!err && !(st->out = recfile_open_kind(o->out_dir, TT_REC_SPAN))) {
		err = -errno;
		spans_err(ctx, "spans: cannot create %s/spans.bin: %s",
			 o->out_dir, strerror(errno));
	}
	if (!err)
		err = probe_add_ringbuf(ctx, st->skel->maps.events, spans_on_event, st);
	if (err)
		goto fail;
	*state = st;
	return 0;
fail:
	spans_destroy(st);
	return err;
}

static uint64_t spans_counter(struct spans_state *st, __u32 idx)
{
	return probe_counter_sum(st->skel->maps.counters, idx);
}

static int spans_finish(struct tt_ctx *ctx, void *state)
{
	struct spans_state *st = state;
	int err = probe_flush(st->out, &st->write_err);

	if (ctx->opts->verbose)
		fprintf(stderr, "tailtrace: spans: %llu calls nested deeper than %d, %llu returns "
			"without an entry, %llu entries whose return was never seen, "
			"%llu state-map overflows\n",
			(unsigned long long)spans_counter(st, SPANS_CNT_TOO_DEEP), SPANS_MAX_DEPTH,
			(unsigned long long)spans_counter(st, SPANS_CNT_UNMATCHED),
			(unsigned long long)spans_counter(st, SPANS_CNT_STALE),
			(unsigned long long)spans_counter(st, SPANS_CNT_STATE_FULL));
	if (err)
		spans_err(ctx, "spans: writing %s/spans.bin: %s",
			 ctx->opts->out_dir, strerror(-err));
	return err;
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
		.unmatched = spans_counter(st, SPANS_CNT_STALE) + spans_counter(st, SPANS_CNT_UNMATCHED),
		.uprobe_hits = spans_counter(st, SPANS_CNT_HITS),
	};
	return 1;
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
	.destroy = spans_destroy,
	.object = spans_object,
};
