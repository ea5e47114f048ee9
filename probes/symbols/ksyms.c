// SPDX-License-Identifier: MIT
/* Kernel symbols from /proc/kallsyms (text symbols), sorted, binary search. */
#include "symbols/syms.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grow.h>

struct ksym {
	uint64_t addr;
	char *name; /* "func" or "func [module]" */
};

struct tt_ksyms {
	struct ksym *syms;
	size_t n, cap;
};

static int ksym_cmp(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int ksyms_add(struct tt_ksyms *k, uint64_t addr, const char *name, const char *mod)
{
	char buf[512];

	if (TT_GROW(k->syms, k->n, k->cap, 65536))
		return -1;
	if (mod[0])
		snprintf(buf, sizeof(buf), "%s %s", name, mod);
	else
		snprintf(buf, sizeof(buf), "%s", name);
	k->syms[k->n].addr = addr;
	k->syms[k->n].name = strdup(buf);
	if (!k->syms[k->n].name)
		return -1;
	k->n++;
	return 0;
}

struct tt_ksyms *ksyms_load(void)
{
	struct tt_ksyms *k = calloc(1, sizeof(*k));
	char line[512], name[256], mod[128];
	unsigned long long addr;
	char type;
	FILE *f;

	if (!k)
		return NULL;
	f = fopen("/proc/kallsyms", "re");
	if (!f) {
		free(k);
		return NULL;
	}
	while (fgets(line, sizeof(line), f)) {
		mod[0] = 0;
		if (sscanf(line, "%llx %c %255s %127[^\n]", &addr, &type, name, mod) < 3)
			continue;
		if (!addr || (type != 't' && type != 'T' && type != 'w' && type != 'W'))
			continue;
		if (ksyms_add(k, addr, name, mod)) {
			fclose(f);
			ksyms_free(k);
			return NULL;
		}
	}
	fclose(f);
	if (k->n) /* kptr_restrict hides every address */
		qsort(k->syms, k->n, sizeof(*k->syms), ksym_cmp);
	return k;
}

const char *ksyms_resolve(struct tt_ksyms *k, uint64_t addr, char *buf, size_t len)
{
	size_t lo = 0, hi = k ? k->n : 0;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (k->syms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo) {
		snprintf(buf, len, "[unknown] (0x%llx)", (unsigned long long)addr);
		return buf;
	}
	const struct ksym *s = &k->syms[lo - 1];
	const char *mod = strchr(s->name, ' ');
	int nlen = mod ? (int)(mod - s->name) : (int)strlen(s->name);

	snprintf(buf, len, "%.*s+0x%llx%s", nlen, s->name,
		 (unsigned long long)(addr - s->addr), mod ? mod : "");
	return buf;
}

void ksyms_free(struct tt_ksyms *k)
{
	if (!k)
		return;
	for (size_t i = 0; i < k->n; i++)
		free(k->syms[i].name);
	free(k->syms);
	free(k);
}
