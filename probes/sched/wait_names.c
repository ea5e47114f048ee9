// SPDX-License-Identifier: MIT
/* The futex words waited on, named (wait_names.h). */
#include "sched/wait_names.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <json_out.h>

#include "symbols/syms.h"

#define WAIT_NAMES_MAX 65536 /* distinct words kept; more are not named */

struct word {
	uint64_t addr; /* 0: free */
	uint32_t pid;
};

struct wait_names {
	struct word *tab;
	size_t cap, used;
};

static size_t word_hash(uint32_t pid, uint64_t addr)
{
	uint64_t h = (addr ^ (uint64_t)pid << 40) * 0x9e3779b97f4a7c15ull;

	return (size_t)(h ^ (h >> 31));
}

static struct word *word_slot(struct word *tab, size_t cap, uint32_t pid, uint64_t addr)
{
	size_t i = word_hash(pid, addr) & (cap - 1);

	while (tab[i].addr && !(tab[i].addr == addr && tab[i].pid == pid))
		i = (i + 1) & (cap - 1);
	return &tab[i];
}

static int words_grow(struct wait_names *w)
{
	size_t cap = w->cap ? w->cap * 2 : 256;
	struct word *tab = calloc(cap, sizeof(*tab));

	if (!tab)
		return -ENOMEM;
	for (size_t i = 0; i < w->cap; i++)
		if (w->tab[i].addr)
			*word_slot(tab, cap, w->tab[i].pid, w->tab[i].addr) = w->tab[i];
	free(w->tab);
	w->tab = tab;
	w->cap = cap;
	return 0;
}

void wait_names_note(struct wait_names *w, uint32_t pid, uint64_t addr)
{
	struct word *s;

	if (!w || !addr || w->used >= WAIT_NAMES_MAX)
		return;
	if ((w->used + 1) * 2 > w->cap && words_grow(w))
		return;
	s = word_slot(w->tab, w->cap, pid, addr);
	if (!s->addr) {
		*s = (struct word){ addr, pid };
		w->used++;
	}
}

int wait_names_write(struct wait_names *w, const char *dir, struct tt_syms_set *syms)
{
	char path[PATH_MAX];
	FILE *f;
	int err = 0;

	if (!w || !w->used)
		return 0;
	snprintf(path, sizeof(path), "%s/wait_names.jsonl", dir);
	f = fopen(path, "we");
	if (!f)
		return -errno;
	for (size_t i = 0; i < w->cap; i++) {
		const struct word *s = &w->tab[i];
		struct syms_data d;

		if (!s->addr ||
		    syms_resolve_data(syms_set_get(syms, (int)s->pid, false), s->addr, &d))
			continue;
		fprintf(f, "{\"pid\":%u,\"addr\":%llu,\"symbol\":", s->pid,
			(unsigned long long)s->addr);
		json_write_string(f, d.name);
		fprintf(f, ",\"offset\":%llu,\"size\":%llu,\"object\":", (unsigned long long)d.offset,
			(unsigned long long)d.size);
		json_write_string(f, d.object);
		fputs("}\n", f);
	}
	if (ferror(f))
		err = -EIO;
	if (fclose(f) && !err)
		err = -errno;
	return err;
}

struct wait_names *wait_names_new(void)
{
	return calloc(1, sizeof(struct wait_names));
}

void wait_names_free(struct wait_names *w)
{
	if (!w)
		return;
	free(w->tab);
	free(w);
}
