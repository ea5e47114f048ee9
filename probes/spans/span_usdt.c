// SPDX-License-Identifier: MIT
/*
 * span_usdt: a span from one USDT probe to another (usdt:BIN:PROVIDER:NAME),
 * or one probe at the request's end that carries its start (NAME__span(id,
 * t_start_ns[, ret]): one trap a request, preferred when the file has it).
 * The probes are found in the file's .note.stapsdt (syms_elf_usdt); libbpf
 * attaches them (every site a probe is compiled in, its semaphore counted)
 * and reads their arguments. Here: which two probes, where they sit and what
 * a hit costs (sys/sdt.h writes a 1-byte nop, emulated; a 5-byte nop is the
 * kernel's optimized uprobe).
 */
#include "spans/span_plan.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <linux/types.h>

#include "spans/disasm.h"

/* Names tried for NAME, in order: DTrace's convention first. */
static const char *const start_suffix[] = { "__start", "_start", "__begin", "_begin" };
static const char *const end_suffix[] = { "__done", "_done", "__end", "_end" };
#define N_SUFFIX 4
/* One mark at the end, the start time its second argument. */
#define ONCE_SUFFIX "__span"
#define ONCE_MIN_ARGS 2

struct usdt_scan {
	const char *provider, *path;
	char want[2][N_SUFFIX][64]; /* [start/end][candidate] */
	int nwant;                  /* candidates per end (1 when START,END given) */
	char once[64];              /* NAME__span, or "" (START,END given) */
	struct usdt_found {
		int rank;               /* best candidate seen: index, N_SUFFIX = none */
		char name[64];
		struct span_site site;  /* first site of that probe */
		int sites, nargs;
	} end[2], one;
	char others[160];           /* the provider's other probes, for the error */
	int nprovider;
};

static uint8_t site_class(const char *path, uint64_t offset, uint64_t vaddr)
{
	uint8_t code[16];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : pread(fd, code, sizeof(code), (off_t)offset);

	if (fd >= 0)
		close(fd);
	return n > 0 ? (uint8_t)disasm_insn_class(code, (size_t)n, vaddr) : USITE_SSTEP;
}

static void note_other(struct usdt_scan *s, const char *name)
{
	size_t o = strlen(s->others);

	if (strstr(s->others, name) || o + strlen(name) + 8 >= sizeof(s->others))
		return;
	snprintf(s->others + o, sizeof(s->others) - o, "%s%s", o ? ", " : "", name);
}

/* A site of the probe found as f (first site: its name, arguments and class). */
static void found_site(struct usdt_scan *s, struct usdt_found *f, const struct syms_usdt *u,
		       uint8_t site)
{
	if (f->sites++)
		return;
	snprintf(f->name, sizeof(f->name), "%s", u->name);
	f->nargs = u->nargs;
	f->site = (struct span_site){ .offset = u->offset, .vaddr = u->vaddr, .site = site,
				      .cls = site_class(s->path, u->offset, u->vaddr) };
}

static int scan_probe(const struct syms_usdt *u, void *arg)
{
	struct usdt_scan *s = arg;
	bool matched = false;

	if (strcmp(u->provider, s->provider))
		return 0;
	s->nprovider++;
	if (s->once[0] && !strcmp(u->name, s->once) && u->nargs >= ONCE_MIN_ARGS) {
		found_site(s, &s->one, u, SPANS_SITE_RET);
		return 0;
	}
	for (int e = 0; e < 2; e++)
		for (int c = 0; c < s->nwant && c <= s->end[e].rank; c++) {
			if (strcmp(u->name, s->want[e][c]))
				continue;
			matched = true;
			if (c < s->end[e].rank) { /* a better-ranked name: start over with it */
				s->end[e].rank = c;
				s->end[e].sites = 0;
			}
			found_site(s, &s->end[e], u, e ? SPANS_SITE_RET : SPANS_SITE_ENTRY);
		}
	if (!matched)
		note_other(s, u->name);
	return 0;
}

/* How much of NAME names the span: a probe's own full name (request__span, the one
 * mark; request__start or request__done, an end of the pair; as the errors list the
 * probes) stands for the span it marks, request. */
static size_t usdt_stem_len(const char *name)
{
	size_t n = strlen(name);
	const char *const *lists[] = { start_suffix, end_suffix };

	if (n > strlen(ONCE_SUFFIX) && !strcmp(name + n - strlen(ONCE_SUFFIX), ONCE_SUFFIX))
		return n - strlen(ONCE_SUFFIX);
	for (int l = 0; l < 2; l++)
		for (int c = 0; c < N_SUFFIX; c++) {
			size_t k = strlen(lists[l][c]);

			if (n > k && !strcmp(name + n - k, lists[l][c]))
				return n - k;
		}
	return n;
}

static int split_names(struct usdt_scan *s, const char *name, char *err, size_t len)
{
	const char *comma = strchr(name, ',');

	if (comma) {
		if (comma == name || !comma[1] || strchr(comma + 1, ',') || comma - name >= 64) {
			snprintf(err, len, "usdt span '%s': give NAME or START,END", name);
			return -EINVAL;
		}
		snprintf(s->want[0][0], 64, "%.*s", (int)(comma - name), name);
		snprintf(s->want[1][0], 64, "%s", comma + 1);
		s->nwant = 1;
		return 0;
	}
	size_t stem = usdt_stem_len(name);

	for (int c = 0; c < N_SUFFIX; c++) {
		snprintf(s->want[0][c], 64, "%.*s%s", (int)stem, name, start_suffix[c]);
		snprintf(s->want[1][c], 64, "%.*s%s", (int)stem, name, end_suffix[c]);
	}
	snprintf(s->once, sizeof(s->once), "%.*s%s", (int)stem, name, ONCE_SUFFIX);
	s->nwant = N_SUFFIX;
	/* one end of a pair named: the pair, not the one mark */
	if (stem < strlen(name) && strcmp(name + stem, ONCE_SUFFIX))
		s->once[0] = '\0';
	return 0;
}

/* The span is one mark, NAME__span(id, t_start_ns[, ret]), at its end. */
static int plan_once(const struct usdt_scan *s, const char *path, const char *name,
		     struct span_plan *p)
{
	snprintf(p->path, sizeof(p->path), "%s", path);
	p->symbol = name;
	p->mode = SPAN_EXIT_USDT;
	p->entry = s->one.site;
	p->first_cls = p->entry.cls;
	p->fn.vaddr = p->entry.vaddr;
	p->usdt = (struct span_usdt_pair){ .provider = s->provider, .once = true,
					   .end_sites = s->one.sites, .end_nargs = s->one.nargs };
	snprintf(p->usdt.end, sizeof(p->usdt.end), "%s", s->one.name);
	snprintf(p->why, sizeof(p->why), "USDT %s:%s, one mark at the end carrying the start",
		 s->provider, p->usdt.end);
	return 0;
}

int span_plan_usdt(const char *path, const char *provider, const char *name, struct span_plan *p,
		   char *err, size_t len)
{
	struct usdt_scan s = { .provider = provider, .path = path,
			       .end = { { .rank = N_SUFFIX }, { .rank = N_SUFFIX } } };
	int r;

	memset(p, 0, sizeof(*p));
	r = split_names(&s, name, err, len);
	if (r)
		return r;
	r = syms_elf_usdt(path, scan_probe, &s);
	if (r < 0) {
		snprintf(err, len, "usdt:%s:%s:%s: cannot read ELF %s: %s", path, provider, name,
			 path, strerror(-r));
		return r;
	}
	if (s.one.sites)
		return plan_once(&s, path, name, p);
	if (!s.end[0].sites || !s.end[1].sites) {
		const char *which = s.end[0].sites ? "an end" : s.end[1].sites ? "a start" : "start or end";

		if (!s.nprovider)
			snprintf(err, len, "usdt:%s:%s:%s: %s has no USDT probes of provider '%s' "
				 "(list them: readelf -n %s)", path, provider, name, path, provider, path);
		else
			snprintf(err, len, "usdt:%s:%s:%s: no %s probe (tried %s%s%s); provider %s "
				 "has: %s", path, provider, name, which,
				 s.want[!s.end[0].sites ? 0 : 1][0], s.nwant > 1 ? ", " : "",
				 s.nwant > 1 ? s.want[!s.end[0].sites ? 0 : 1][1] : "", provider,
				 s.others[0] ? s.others : "(only the other end)");
		return -ENOENT;
	}
	snprintf(p->path, sizeof(p->path), "%s", path);
	p->symbol = name;
	p->mode = SPAN_EXIT_USDT;
	p->entry = s.end[0].site;
	p->first_cls = p->entry.cls;
	p->exits[0] = s.end[1].site;
	p->nexits = 1;
	p->fn.vaddr = p->entry.vaddr; /* offsets in meta.json count from the start probe */
	p->usdt = (struct span_usdt_pair){
		.provider = provider, .start_sites = s.end[0].sites, .end_sites = s.end[1].sites,
		.start_nargs = s.end[0].nargs, .end_nargs = s.end[1].nargs,
		.by_arg = s.end[0].nargs >= 1 && s.end[1].nargs >= 1,
	};
	snprintf(p->usdt.start, sizeof(p->usdt.start), "%s", s.end[0].name);
	snprintf(p->usdt.end, sizeof(p->usdt.end), "%s", s.end[1].name);
	snprintf(p->why, sizeof(p->why), "USDT %s:%s to %s:%s, paired by %s", provider,
		 p->usdt.start, provider, p->usdt.end,
		 p->usdt.by_arg ? "their first argument" : "thread (a probe has no argument)");
	return 0;
}

/* The end probe's arguments the span reads itself: the request's id, the start
 * time of the one mark, the return value. */
static unsigned usdt_args_used(const struct span_usdt_pair *u)
{
	unsigned own = u->once ? 3 : 2;

	return (unsigned)u->end_nargs < own ? (unsigned)u->end_nargs : own;
}

static int check_context_arg(const struct span_plan *p, const char *header, unsigned arg,
			     char *err, size_t len)
{
	const struct span_usdt_pair *u = &p->usdt;
	unsigned n = arg - 1;

	if (n >= (unsigned)u->end_nargs) {
		if (u->end_nargs)
			snprintf(err, len, "usdt %s:%s: %s=arg%u, but %s has %d argument%s "
				 "(arg0..arg%d)", u->provider, p->symbol, header, n, u->end,
				 u->end_nargs, u->end_nargs == 1 ? "" : "s", u->end_nargs - 1);
		else
			snprintf(err, len, "usdt %s:%s: %s=arg%u, but %s has no arguments",
				 u->provider, p->symbol, header, n, u->end);
		return -EINVAL;
	}
	if (n < usdt_args_used(u)) {
		snprintf(err, len, "usdt %s:%s: %s=arg%u, but arg0..arg%u of %s are the span's own "
			 "(%s): name an argument after them", u->provider, p->symbol, header, n,
			 usdt_args_used(u) - 1, u->end, u->once ? "request id, start time, return value" :
			 "request id, return value");
		return -EINVAL;
	}
	return 0;
}

int span_plan_usdt_context(struct span_plan *p, unsigned traceparent_arg, unsigned tracestate_arg,
			   char *err, size_t len)
{
	int r;

	if (!traceparent_arg)
		return 0;
	r = check_context_arg(p, "traceparent", traceparent_arg, err, len);
	if (!r && tracestate_arg)
		r = check_context_arg(p, "tracestate", tracestate_arg, err, len);
	if (r)
		return r;
	p->usdt.traceparent_arg = (unsigned char)traceparent_arg;
	p->usdt.tracestate_arg = (unsigned char)tracestate_arg;
	return 0;
}
