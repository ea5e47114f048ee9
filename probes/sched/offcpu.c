// SPDX-License-Identifier: MIT
#include "sched/offcpu.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>

#include "sched/copied_stacks.h"
#include "sched/user_stack.h"
#include "symbols/stacks_out.h"
#include "symbols/syms.h"


struct acc_entry {
	uint32_t pid, tid;
	int32_t kid, uid;
	uint64_t sum_ns;
};

struct offcpu_acc {
	struct acc_entry *tab; /* open addressing; tid == 0 marks a free slot */
	size_t cap, used;
};

struct offcpu_acc *offcpu_new(void)
{
	struct offcpu_acc *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	a->cap = 1024;
	a->tab = calloc(a->cap, sizeof(*a->tab));
	if (!a->tab) {
		free(a);
		return NULL;
	}
	return a;
}

void offcpu_free(struct offcpu_acc *a)
{
	if (!a)
		return;
	free(a->tab);
	free(a);
}

static size_t acc_hash(uint32_t tid, int32_t kid, int32_t uid)
{
	uint64_t h = tid * 0x9e3779b97f4a7c15ull;

	h ^= (uint64_t)(uint32_t)kid * 0xc2b2ae3d27d4eb4full;
	h ^= (uint64_t)(uint32_t)uid * 0x165667b19e3779f9ull;
	return (size_t)(h ^ (h >> 29));
}

static struct acc_entry *acc_slot(struct acc_entry *tab, size_t cap, uint32_t tid,
				  int32_t kid, int32_t uid)
{
	size_t i = acc_hash(tid, kid, uid) & (cap - 1);

	while (tab[i].tid && !(tab[i].tid == tid && tab[i].kid == kid && tab[i].uid == uid))
		i = (i + 1) & (cap - 1);
	return &tab[i];
}

static int acc_grow(struct offcpu_acc *a)
{
	size_t cap = a->cap * 2;
	struct acc_entry *tab = calloc(cap, sizeof(*tab));

	if (!tab)
		return -ENOMEM;
	for (size_t i = 0; i < a->cap; i++)
		if (a->tab[i].tid)
			*acc_slot(tab, cap, a->tab[i].tid, a->tab[i].kid, a->tab[i].uid) = a->tab[i];
	free(a->tab);
	a->tab = tab;
	a->cap = cap;
	return 0;
}

int offcpu_add(struct offcpu_acc *a, const struct tt_switch *r)
{
	struct acc_entry *e;

	if (r->kstack_id < 0 && r->ustack_id < 0)
		return 0;
	if (a->used * 2 >= a->cap && acc_grow(a))
		return -ENOMEM;
	e = acc_slot(a->tab, a->cap, r->tid, r->kstack_id, r->ustack_id);
	if (!e->tid) {
		*e = (struct acc_entry){ r->pid, r->tid, r->kstack_id, r->ustack_id, 0 };
		a->used++;
	}
	e->sum_ns += r->t_on_ns - r->t_off_ns;
	return 0;
}

/* ---- symbolization --------------------------------------------------------- */

struct symctx {
	struct offcpu_stacks *sm;
	struct tt_ksyms *ksyms;
	struct tt_syms_set *syms;    /* the loader's, one per process (syms_set.c) */
};

/* Where a stack id's stack is (stack_epochs_slot), -1: none. */
static int stack_slot(struct symctx *c, int32_t id)
{
	return (int)stack_epochs_slot(c->sm->epochs, c->sm->epoch, id);
}

/* Frames of one stack (slot: stack_slot), leaf first; returns the count (0 if unreadable). */
static int stack_frames(struct symctx *c, int slot, bool user, int pid,
			char frames[][STACKS_FRAME_LEN], const char **mangled)
{
	__u64 ips[SCHED_STACK_DEPTH];
	int32_t key = slot % SCHED_STACK_ENTRIES;

	if (slot < 0 || bpf_map_lookup_elem(c->sm->fds[slot / SCHED_STACK_ENTRIES], &key, ips))
		return 0;
	return stacks_resolve(ips, SCHED_STACK_DEPTH, user,
			      user ? syms_set_get(c->syms, pid, true) : NULL, c->ksyms, frames,
			      mangled);
}

/* Frames of a copied user stack (copied_stacks.h), leaf first; the count. */
static int copied_frames(struct symctx *c, int32_t id, int pid, char frames[][STACKS_FRAME_LEN],
			 const char **mangled)
{
	const uint64_t *ips;
	int n = copied_stacks_get(c->sm->copies, id, &ips);

	return n ? stacks_resolve((const __u64 *)ips, n, true, syms_set_get(c->syms, pid, true), c->ksyms, frames,
				  mangled)
		 : 0;
}

/* Folded frame: the function name only ("foo+0x1a (lib)" -> "foo"); a frame
 * without a name, its file, as stackcollapse-perf.pl folds it
 * ("[unknown] (libcurl.so.4.8.0+0x575e0)" -> "[libcurl.so.4.8.0]"), so that a
 * flame graph does not merge unnamed code of different files. */
static void folded_frame(FILE *f, const char *frame, bool kernel)
{
	static const char unnamed[] = "[unknown] (";
	const char *name = frame, *plus;
	size_t n = stacks_frame_func_len(frame);

	fputc(';', f);
	/* "[unknown] (0xADDR)", in no file, has no "+0x": it stays "[unknown]" */
	if (!kernel && !strncmp(frame, unnamed, sizeof(unnamed) - 1) &&
	    (plus = strstr(frame + sizeof(unnamed) - 1, "+0x"))) {
		name = frame + sizeof(unnamed) - 1;
		n = (size_t)(plus - name);
		fputc('[', f);
	}
	for (size_t i = 0; i < n; i++)
		fputc(name[i] == ';' ? ':' : name[i], f);
	if (name != frame)
		fputc(']', f);
	if (kernel)
		fputs("_[k]", f);
}

static const char *comm_of(const struct tt_task *tasks, size_t n, uint32_t tid)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (tasks[mid].tid == tid)
			return tasks[mid].comm[0] ? tasks[mid].comm : "?";
		if (tasks[mid].tid < tid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return "?";
}

struct seen {
	uint8_t k[SCHED_STACK_GENS * SCHED_STACK_IDS], u[SCHED_STACK_GENS * SCHED_STACK_IDS];
};

static void write_entry(struct symctx *c, struct seen *seen, FILE *js, FILE *fold,
			const struct acc_entry *e, const char *comm)
{
	static char kf[STACKS_MAX_FRAMES][STACKS_FRAME_LEN], uf[STACKS_MAX_FRAMES][STACKS_FRAME_LEN];
	static const char *um[STACKS_MAX_FRAMES];
	bool copied = e->uid >= 0 && ((uint32_t)e->uid & TT_USTACK_ID_BIT);
	int ks = stack_slot(c, e->kid), us = copied ? -1 : stack_slot(c, e->uid);
	int nk = stack_frames(c, ks, false, (int)e->pid, kf, NULL);
	int nu = copied ? copied_frames(c, e->uid, (int)e->pid, uf, um)
			: stack_frames(c, us, true, (int)e->pid, uf, um);

	if (ks >= 0 && !seen->k[ks]) {
		seen->k[ks] = 1;
		stacks_json_write(js, "offcpu", e->kid, false, kf, NULL, nk);
	}
	if ((us >= 0 && !seen->u[us]) || (copied && copied_stacks_first_use(c->sm->copies, e->uid))) {
		if (us >= 0)
			seen->u[us] = 1;
		stacks_json_write(js, "offcpu", e->uid, true, uf, um, nu);
	}
	if (e->sum_ns < 1000)
		return;
	for (const char *p = comm; *p; p++)
		fputc(*p == ';' || *p == ' ' ? '_' : *p, fold);
	for (int i = nu - 1; i >= 0; i--)
		folded_frame(fold, uf[i], false);
	for (int i = nk - 1; i >= 0; i--)
		folded_frame(fold, kf[i], true);
	fprintf(fold, " %llu\n", (unsigned long long)(e->sum_ns / 1000));
}

static FILE *open_in(const char *dir, const char *name, const char *mode)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return fopen(path, mode);
}

int offcpu_write(struct offcpu_acc *a, const char *dir, struct offcpu_stacks *sm,
		 const struct tt_task *tasks, size_t ntasks,
		 struct tt_syms_set *syms, struct tt_ksyms *ksyms)
{
	struct symctx c = { .sm = sm, .syms = syms };
	struct seen *seen = calloc(1, sizeof(*seen));
	FILE *js = stacks_json_open(dir), *fold = open_in(dir, "offcpu.folded", "w");
	int err = 0;

	if (!seen || !js || !fold) {
		err = seen ? -errno : -ENOMEM;
		goto out;
	}
	c.ksyms = ksyms ? ksyms : ksyms_load();
	for (size_t i = 0; i < a->cap; i++)
		if (a->tab[i].tid)
			write_entry(&c, seen, js, fold, &a->tab[i],
				    comm_of(tasks, ntasks, a->tab[i].tid));
	if (ferror(js) || ferror(fold))
		err = -EIO;
	if (!ksyms)
		ksyms_free(c.ksyms);
out:
	if (js && fclose(js) && !err)
		err = -errno;
	if (fold && fclose(fold) && !err)
		err = -errno;
	free(seen);
	return err;
}
