// SPDX-License-Identifier: MIT
/* Function symbols from debug files and MiniDebugInfo (debuginfo.h). */
#include "symbols/debuginfo.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <gelf.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <tt_clock.h>

static char *debuginfo_path; /* NULL: libdwfl's default, ":.debug:/usr/lib/debug" */

static const Dwfl_Callbacks offline_callbacks = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
	.section_address = dwfl_offline_section_address,
	.debuginfo_path = &debuginfo_path,
};

bool debuginfo_sym_wanted(const GElf_Sym *s, bool objects)
{
	int type = GELF_ST_TYPE(s->st_info);

	if (s->st_shndx == SHN_UNDEF || !s->st_value)
		return false;
	return objects ? type == STT_OBJECT && s->st_size
		       : type == STT_FUNC || type == STT_GNU_IFUNC;
}

/* Does the module's symbol table come from elsewhere than the file itself (a
 * debug file, or MiniDebugInfo beside its .dynsym)? */
static bool symbols_elsewhere(Dwfl_Module *m, Elf *main_elf, int n)
{
	for (int i = 1; i < n; i++) {
		GElf_Sym s;
		GElf_Addr addr, bias;
		GElf_Word shndx;
		Elf *elf = NULL;

		if (dwfl_module_getsym_info(m, i, &s, &addr, &shndx, &elf, &bias) && elf != main_elf)
			return true;
	}
	return false;
}

/* A debug file where the build id says, that libdwfl did not take (not an ELF
 * file, or another build's): said once, in a line. */
static void note_unusable(Dwfl_Module *m, const char *path)
{
	const unsigned char *id;
	GElf_Addr vaddr;
	char file[PATH_MAX];
	int n = dwfl_module_build_id(m, &id, &vaddr), at;

	if (n < 2)
		return;
	at = snprintf(file, sizeof(file), "/usr/lib/debug/.build-id/%02x/", id[0]);
	for (int i = 1; i < n && at < (int)sizeof(file) - 8; i++)
		at += snprintf(file + at, sizeof(file) - (size_t)at, "%02x", id[i]);
	snprintf(file + at, sizeof(file) - (size_t)at, ".debug");
	if (access(file, R_OK) == 0)
		fprintf(stderr, "tailtrace: %s: not a usable debug file for %s (corrupt, or another "
			"build's): its symbols come from the file itself\n", file, path);
}

/* debuginfod that has not answered within SLOW_NS is asked no more this run: the
 * rest of the symbols come from local files (its waits are bounded, but a server
 * that is down costs each file its timeout). */
#define SLOW_NS 3000000000ull

static void note_slow_server(uint64_t t0)
{
	const char *urls = getenv("DEBUGINFOD_URLS");

	if (!urls || !*urls || tt_now_ns() - t0 < SLOW_NS)
		return;
	fprintf(stderr, "tailtrace: debuginfod (%s) took %.1f s for one file: not asked again, "
		"the other symbols come from local files\n", urls, (double)(tt_now_ns() - t0) / 1e9);
	unsetenv("DEBUGINFOD_URLS");
}

int debuginfo_each_sym(const char *path, bool objects, debuginfo_func_fn fn, void *arg)
{
	Dwfl *d = dwfl_begin(&offline_callbacks);
	Dwfl_Module *m;
	GElf_Addr bias;
	Elf *main_elf;
	uint64_t t0 = tt_now_ns();
	int n, r = -ENOENT;

	if (!d)
		return -ENOMEM;
	m = dwfl_report_offline(d, "", path, -1);
	dwfl_report_end(d, NULL, NULL);
	main_elf = m ? dwfl_module_getelf(m, &bias) : NULL;
	n = main_elf ? dwfl_module_getsymtab(m) : -1;
	note_slow_server(t0);
	if (n > 1 && !symbols_elsewhere(m, main_elf, n) && !objects)
		note_unusable(m, path);
	if (n > 1 && symbols_elsewhere(m, main_elf, n)) {
		r = 0;
		for (int i = 1; i < n && !r; i++) {
			GElf_Sym s;
			GElf_Addr addr;
			GElf_Word shndx;
			const char *name = dwfl_module_getsym_info(m, i, &s, &addr, &shndx, NULL, &bias);

			if (name && *name && debuginfo_sym_wanted(&s, objects))
				r = fn(name, s.st_value, s.st_size,
				       GELF_ST_BIND(s.st_info) != STB_LOCAL, arg);
		}
	}
	dwfl_end(d);
	return r;
}

/* An address's inlined functions, once found: a stack's return addresses recur
 * in many stacks, and a scope walk of a large unit (CPython's ceval.c) costs
 * most of a millisecond. */
struct inlined_memo {
	uint64_t vaddr;  /* + 1: 0 is a free slot */
	int n;
	char *names;     /* n names, each ended by its NUL */
};

struct debuginfo_lines {
	Dwfl *dwfl;
	Dwfl_Module *mod;
	GElf_Addr base; /* the module's address of the file's vaddr 0 */
	struct inlined_memo *memo;
	size_t memo_cap, memo_used;
};

struct debuginfo_lines *debuginfo_lines_open(const char *path)
{
	struct debuginfo_lines *l = calloc(1, sizeof(*l));
	GElf_Addr bias;
	uint64_t t0 = tt_now_ns();

	if (!l || !(l->dwfl = dwfl_begin(&offline_callbacks)))
		goto fail;
	l->mod = dwfl_report_offline(l->dwfl, "", path, -1);
	dwfl_report_end(l->dwfl, NULL, NULL);
	bool found = l->mod && dwfl_module_getelf(l->mod, &l->base) &&
		     dwfl_module_getdwarf(l->mod, &bias);

	note_slow_server(t0);
	if (found)
		return l;
fail:
	debuginfo_lines_free(l);
	return NULL;
}

/* An inlined instance's name: its abstract origin's linkage name (mangled, for
 * C++ and Rust), else its DW_AT_name. */
static const char *inlined_name(Dwarf_Die *die)
{
	Dwarf_Attribute a;
	const char *name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &a));

	if (!name)
		name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &a));
	return name ? name : "[inlined]";
}

static int scopes_inlined(struct debuginfo_lines *l, uint64_t vaddr, char *out, size_t len,
			  int max)
{
	Dwarf_Addr bias, addr;
	Dwarf_Die *cu, *scopes = NULL;
	int nscopes, n = 0;

	addr = vaddr + l->base;
	cu = dwfl_module_addrdie(l->mod, addr, &bias);
	if (!cu)
		return 0;
	/* the innermost scope at the address; an inlined instance's own scopes go on
	 * into its abstract definition, so its callers are read from the concrete
	 * tree it sits in (dwarf_getscopes_die), as eu-addr2line -i does */
	nscopes = dwarf_getscopes(cu, addr - bias, &scopes);
	for (int i = 0; i < nscopes; i++) {
		int tag = dwarf_tag(&scopes[i]);

		if (tag == DW_TAG_subprogram)
			break;
		if (tag != DW_TAG_inlined_subroutine)
			continue;
		Dwarf_Die *chain = NULL;
		int nchain = dwarf_getscopes_die(&scopes[i], &chain);

		for (int j = 0; j < nchain && n < max; j++) {
			tag = dwarf_tag(&chain[j]);
			if (tag == DW_TAG_subprogram)
				break;
			if (tag == DW_TAG_inlined_subroutine)
				snprintf(out + (size_t)n++ * len, len, "%s", inlined_name(&chain[j]));
		}
		free(chain);
		break;
	}
	free(scopes);
	return n;
}

static struct inlined_memo *memo_slot(struct inlined_memo *memo, size_t cap, uint64_t vaddr)
{
	size_t i = (size_t)((vaddr * 0x9e3779b97f4a7c15ull) >> 20) & (cap - 1);

	while (memo[i].vaddr && memo[i].vaddr != vaddr + 1)
		i = (i + 1) & (cap - 1);
	return &memo[i];
}

static int memo_grow(struct debuginfo_lines *l)
{
	size_t cap = l->memo_cap ? l->memo_cap * 2 : 1024;
	struct inlined_memo *memo = calloc(cap, sizeof(*memo));

	if (!memo)
		return -1;
	for (size_t i = 0; i < l->memo_cap; i++)
		if (l->memo[i].vaddr)
			*memo_slot(memo, cap, l->memo[i].vaddr - 1) = l->memo[i];
	free(l->memo);
	l->memo = memo;
	l->memo_cap = cap;
	return 0;
}

int debuginfo_inlined(struct debuginfo_lines *l, uint64_t vaddr, char *out, size_t len, int max)
{
	struct inlined_memo *m;
	size_t at = 0;
	int n;

	if (!l || max <= 0)
		return 0;
	if ((l->memo_used + 1) * 2 > l->memo_cap && memo_grow(l))
		return scopes_inlined(l, vaddr, out, len, max);
	m = memo_slot(l->memo, l->memo_cap, vaddr);
	if (!m->vaddr) {
		n = scopes_inlined(l, vaddr, out, len, max);
		for (int i = 0; i < n; i++)
			at += strlen(out + (size_t)i * len) + 1;
		m->names = n ? malloc(at) : NULL;
		if (n && !m->names)
			return n;
		for (int i = 0, k = 0; i < n; i++)
			k += sprintf(m->names + k, "%s", out + (size_t)i * len) + 1;
		m->vaddr = vaddr + 1;
		m->n = n;
		l->memo_used++;
		return n;
	}
	n = m->n < max ? m->n : max;
	for (int i = 0; i < n; i++) {
		snprintf(out + (size_t)i * len, len, "%s", m->names + at);
		at += strlen(m->names + at) + 1;
	}
	return n;
}

void debuginfo_lines_free(struct debuginfo_lines *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->memo_cap; i++)
		free(l->memo[i].names);
	free(l->memo);
	if (l->dwfl)
		dwfl_end(l->dwfl);
	free(l);
}

void debuginfo_bound_waits(void)
{
	if (!getenv("DEBUGINFOD_URLS"))
		return;
	setenv("DEBUGINFOD_TIMEOUT", "5", 0);
	setenv("DEBUGINFOD_MAXTIME", "60", 0);
}
