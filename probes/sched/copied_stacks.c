// SPDX-License-Identifier: MIT
/* The copied user stacks, unwound (copied_stacks.h). */
#include "sched/copied_stacks.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <grow.h>

#include "sched/sched_stacks.h"
#include "sched/user_stack.h"
#include "symbols/syms.h"
#include "symbols/unwind.h"

_Static_assert((int)UNWIND_NREGS == (int)TT_UREG_NR && (int)UNWIND_IP == (int)TT_UREG_IP &&
		       (int)UNWIND_SP == (int)TT_UREG_SP && (int)UNWIND_BX == (int)TT_UREG_BX &&
		       (int)UNWIND_R15 == (int)TT_UREG_R15,
	       "the copy's registers in the unwinder's order");
_Static_assert(UNWIND_MAX_FRAMES == SCHED_STACK_DEPTH, "frames kept per stack");

#define TOP_OBJECTS 8 /* objects named where unwinds stopped early */

/* One distinct stack: its frames at pool[off .. off + n). */
struct stack_entry {
	uint64_t hash;
	uint32_t off, n;
};

struct id_entry {
	uint32_t id;    /* 0: free (a copy's id has TT_USTACK_ID_BIT) */
	uint32_t stack; /* index into stacks */
	bool used;      /* its stacks.jsonl line written */
};

struct end_object {
	char name[64];
	uint64_t count;
};

struct copied_stacks {
	struct unwinder *unwinder;
	int paths_fd;
	unsigned copy_bytes;
	struct tt_syms_set *syms;
	uint64_t *pool;
	size_t npool, pool_cap;
	struct stack_entry *stacks;
	size_t nstacks, stacks_cap;
	uint32_t *by_hash;   /* open addressing: stack index + 1, 0 free */
	size_t hash_cap;
	struct id_entry *ids;
	size_t nids, ids_cap;
	/* what the unwinds gave */
	uint64_t unwound, frames, bytes, ids_reused, bad;
	uint64_t joined; /* unwinds gone on along the frame-pointer walk */
	uint64_t ends[UNWIND_END_NR];
	struct end_object objects[TOP_OBJECTS];
	int nobjects;
	uint64_t other_objects;
};

static uint64_t frames_hash(const uint64_t *ips, int n)
{
	uint64_t h = TT_USTACK_MIX_SEED;

	for (int i = 0; i < n; i++)
		h = tt_ustack_mix(h, ips[i]);
	return h ^ (uint64_t)n;
}

static int table_grow(uint32_t **tab, size_t *cap, const struct stack_entry *stacks, size_t n)
{
	size_t c = *cap ? *cap * 2 : 1024;
	uint32_t *t = calloc(c, sizeof(*t));

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		size_t j = stacks[i].hash & (c - 1);

		while (t[j])
			j = (j + 1) & (c - 1);
		t[j] = (uint32_t)i + 1;
	}
	free(*tab);
	*tab = t;
	*cap = c;
	return 0;
}

/* The index of the stack ips[0..n) (n may be 0), added if new; -1 on ENOMEM. */
static long stack_intern(struct copied_stacks *cs, const uint64_t *ips, int n)
{
	uint64_t h = frames_hash(ips, n);
	size_t j;

	if ((cs->nstacks + 1) * 2 > cs->hash_cap &&
	    table_grow(&cs->by_hash, &cs->hash_cap, cs->stacks, cs->nstacks))
		return -1;
	for (j = h & (cs->hash_cap - 1); cs->by_hash[j]; j = (j + 1) & (cs->hash_cap - 1)) {
		const struct stack_entry *e = &cs->stacks[cs->by_hash[j] - 1];

		if (e->hash == h && e->n == (uint32_t)n &&
		    (!n || !memcmp(cs->pool + e->off, ips, (size_t)n * sizeof(*ips))))
			return cs->by_hash[j] - 1;
	}
	if (TT_GROW(cs->stacks, cs->nstacks, cs->stacks_cap, 256))
		return -1;
	while (cs->npool + (size_t)n > cs->pool_cap)
		if (TT_GROW(cs->pool, cs->pool_cap, cs->pool_cap, 4096))
			return -1;
	if (n) /* an empty stack (an unwind that found no frame) has no frames to copy: the
		* pool may not exist yet, and memcpy's pointers must not be NULL */
		memcpy(cs->pool + cs->npool, ips, (size_t)n * sizeof(*ips));
	cs->stacks[cs->nstacks] = (struct stack_entry){ h, (uint32_t)cs->npool, (uint32_t)n };
	cs->npool += (size_t)n;
	cs->by_hash[j] = (uint32_t)++cs->nstacks;
	return (long)cs->nstacks - 1;
}

static struct id_entry *id_slot(struct id_entry *ids, size_t cap, uint32_t id)
{
	size_t j = (id * 0x9e3779b1u) & (cap - 1);

	while (ids[j].id && ids[j].id != id)
		j = (j + 1) & (cap - 1);
	return &ids[j];
}

static int ids_grow(struct copied_stacks *cs)
{
	size_t cap = cs->ids_cap ? cs->ids_cap * 2 : 1024;
	struct id_entry *ids = calloc(cap, sizeof(*ids));

	if (!ids)
		return -ENOMEM;
	for (size_t i = 0; i < cs->ids_cap; i++)
		if (cs->ids[i].id)
			*id_slot(ids, cap, cs->ids[i].id) = cs->ids[i];
	free(cs->ids);
	cs->ids = ids;
	cs->ids_cap = cap;
	return 0;
}

/* A word the unwind read as a return address: one of its frames, or the
 * uretprobe trampoline it read in place of one. */
static bool is_return_address(const struct unwind_stack *u, const struct tt_ustack_copy *c,
			      uint64_t word)
{
	if (c->nreturns && word == c->trampoline)
		return true;
	for (int i = 1; i < u->n; i++)
		if (u->ips[i] == word)
			return true;
	return false;
}

/* The return addresses the unwind read within TT_USTACK_PATH_SPAN of SP (the
 * words that make the call path: the callee-saved registers it also read,
 * a caller's loop counter, change from call to call), for the program's check
 * of a later hit (user_stack.bpf.h). */
static void path_write(struct copied_stacks *cs, const struct tt_ustack_copy *c,
		       const struct unwind_stack *u)
{
	struct tt_ustack_path p = { .hash = TT_USTACK_MIX_SEED };
	uint64_t word;

	for (int i = 0; i < u->nreads && p.n < TT_USTACK_PATH_WORDS; i++) {
		uint16_t off = u->reads[i];

		if (off % 8 || off + 8 > TT_USTACK_PATH_SPAN || (uint32_t)off + 8 > c->size)
			continue;
		memcpy(&word, c->stack + off, sizeof(word));
		if (!is_return_address(u, c, word))
			continue;
		p.off[p.n++] = off;
		p.hash = tt_ustack_mix(p.hash, word);
		if (off + 8 > p.span)
			p.span = off + 8;
	}
	bpf_map_update_elem(cs->paths_fd, &c->id, &p, BPF_ANY);
}

static void note_object(struct copied_stacks *cs, const char *name)
{
	int i;

	if (!name[0])
		return;
	for (i = 0; i < cs->nobjects; i++)
		if (!strcmp(cs->objects[i].name, name))
			break;
	if (i == cs->nobjects) {
		if (i == TOP_OBJECTS) {
			cs->other_objects++;
			return;
		}
		snprintf(cs->objects[i].name, sizeof(cs->objects[i].name), "%s", name);
		cs->nobjects++;
	}
	cs->objects[i].count++;
}

/* How many of the copy's pending uretprobes it carries (at most TT_USTACK_RETURNS). */
static int copy_nreturns(const struct tt_ustack_copy *c)
{
	return c->nreturns < TT_USTACK_RETURNS ? (int)c->nreturns : TT_USTACK_RETURNS;
}

/* The copy's frame-pointer walk into ips, each uretprobe trampoline in it (a
 * kernel before 6.13 leaves them there) replaced by the return address it stands
 * for, the newest first as the walk meets them: the frame count. */
static int fp_restore(const struct tt_ustack_copy *c, uint64_t *ips)
{
	int n = c->fp_n < TT_USTACK_FP_FRAMES ? (int)c->fp_n : TT_USTACK_FP_FRAMES;
	int r = 0, nreturns = copy_nreturns(c);

	for (int j = 0; j < n; j++) {
		ips[j] = c->fp_ips[j];
		if (r < nreturns && ips[j] == c->trampoline)
			ips[j] = c->returns[r++].ip;
	}
	return n;
}

/* An unwind that stopped early (a stack deeper than the copy, code without
 * call-frame information) goes on along the frame-pointer walk from the deepest
 * of its frames that walk reached too: 1 if joined. */
static int join_frame_pointers(struct unwind_stack *u, const struct tt_ustack_copy *c)
{
	uint64_t fp_ips[TT_USTACK_FP_FRAMES];
	int fp_n;

	if (u->end == UNWIND_END_OUTERMOST || u->end == UNWIND_END_DEPTH)
		return 0;
	fp_n = fp_restore(c, fp_ips);
	if (u->end == UNWIND_END_GONE) { /* nothing to unwind by: the walk the copy carries */
		for (int j = 0; j < fp_n && u->n < UNWIND_MAX_FRAMES && fp_ips[j]; j++)
			u->ips[u->n++] = fp_ips[j];
		return u->n > 0;
	}
	for (int i = u->n - 1; i >= 1; i--)
		for (int j = 1; j < fp_n - 1; j++) {
			if (fp_ips[j] != u->ips[i])
				continue;
			u->n = i + 1;
			for (j++; j < fp_n && u->n < UNWIND_MAX_FRAMES && fp_ips[j]; j++)
				u->ips[u->n++] = fp_ips[j];
			return 1;
		}
	return 0;
}

int copied_stacks_add(void *ctx, void *data, size_t size)
{
	struct copied_stacks *cs = ctx;
	const struct tt_ustack_copy *c = data;
	struct unwind_return returns[TT_USTACK_RETURNS];
	struct unwind_stack u;
	struct id_entry *e;
	int nreturns;
	long stack;

	if (size < offsetof(struct tt_ustack_copy, stack) ||
	    c->size > size - offsetof(struct tt_ustack_copy, stack) || !(c->id & TT_USTACK_ID_BIT)) {
		cs->bad++;
		return 0;
	}
	nreturns = copy_nreturns(c);
	for (int i = 0; i < nreturns; i++)
		returns[i] = (struct unwind_return){ c->returns[i].slot, c->returns[i].ip };
	unwinder_unwind(cs->unwinder,
			&(struct unwind_copy){ .pid = (int)c->pid, .tid = (int)c->tid,
					       .regs = (const uint64_t *)c->regs, .stack = c->stack,
					       .size = c->size, .returns = returns,
					       .nreturns = nreturns },
			&u);
	path_write(cs, c, &u);
	if (u.end != UNWIND_END_GONE)
		syms_set_get(cs->syms, (int)c->pid, true);
	cs->joined += join_frame_pointers(&u, c);
	cs->unwound++;
	cs->frames += (uint64_t)u.n;
	cs->bytes += c->size;
	cs->ends[u.end]++;
	if (u.end == UNWIND_END_NO_CFI || u.end == UNWIND_END_NO_OBJECT)
		note_object(cs, u.end_object[0] ? u.end_object : "[no file: JIT code?]");
	stack = stack_intern(cs, u.ips, u.n);
	if (stack < 0 || ((cs->nids + 1) * 2 > cs->ids_cap && ids_grow(cs)))
		return -ENOMEM;
	e = id_slot(cs->ids, cs->ids_cap, c->id);
	if (e->id)
		cs->ids_reused++; /* the CPU's sequence wrapped: the id's newest copy */
	else
		cs->nids++;
	*e = (struct id_entry){ .id = c->id, .stack = (uint32_t)stack };
	return 0;
}

int copied_stacks_get(const struct copied_stacks *cs, int32_t id, const uint64_t **ips)
{
	const struct id_entry *e;

	if (!cs || !cs->ids_cap || id < 0 || !((uint32_t)id & TT_USTACK_ID_BIT))
		return 0;
	e = id_slot(cs->ids, cs->ids_cap, (uint32_t)id);
	if (!e->id)
		return 0;
	*ips = cs->pool + cs->stacks[e->stack].off;
	return (int)cs->stacks[e->stack].n;
}

bool copied_stacks_first_use(struct copied_stacks *cs, int32_t id)
{
	struct id_entry *e;

	if (!cs || !cs->ids_cap || id < 0)
		return false;
	e = id_slot(cs->ids, cs->ids_cap, (uint32_t)id);
	if (!e->id || e->used)
		return false;
	e->used = true;
	return true;
}

void copied_stacks_meta(const struct copied_stacks *cs, const struct copied_stacks_bpf *b, FILE *f)
{
	if (!cs)
		return;
	fprintf(f, "  \"user_stacks\": {\"unwind\": \"dwarf\", \"copy_bytes\": %u, \"copies\": %llu, "
		"\"copies_lost\": %llu, \"unwound\": %llu, \"distinct\": %zu, \"frames_mean\": %.1f, "
		"\"bytes_mean\": %.0f, \"cache_hits_unchecked\": %llu, "
		"\"key_collisions\": %llu, \"ids_reused\": %llu, \"malformed\": %llu, "
		"\"joined_frame_pointers\": %llu, \"ended\": {",
		cs->copy_bytes, (unsigned long long)b->copies, (unsigned long long)b->lost,
		(unsigned long long)cs->unwound, cs->nstacks,
		cs->unwound ? (double)cs->frames / (double)cs->unwound : 0.0,
		cs->unwound ? (double)cs->bytes / (double)cs->unwound : 0.0,
		(unsigned long long)b->unchecked, (unsigned long long)b->collisions,
		(unsigned long long)cs->ids_reused, (unsigned long long)cs->bad,
		(unsigned long long)cs->joined);
	for (int i = 0; i < UNWIND_END_NR; i++)
		fprintf(f, "%s\"%s\": %llu", i ? ", " : "", unwind_end_names[i],
			(unsigned long long)cs->ends[i]);
	fputs("}, \"stopped_in\": {", f);
	for (int i = 0; i < cs->nobjects; i++)
		fprintf(f, "%s\"%s\": %llu", i ? ", " : "", cs->objects[i].name,
			(unsigned long long)cs->objects[i].count);
	if (cs->other_objects)
		fprintf(f, "%s\"(others)\": %llu", cs->nobjects ? ", " : "",
			(unsigned long long)cs->other_objects);
	const struct unwinder_counts *n = unwinder_counts(cs->unwinder);

	fprintf(f, "}, \"processes\": {\"seen\": %llu, \"peak\": %zu, \"forgotten\": %llu}},\n",
		n->processes, n->peak, n->forgotten);
}

struct copied_stacks *copied_stacks_new(int paths_fd, unsigned copy_bytes,
					struct tt_syms_set *syms)
{
	struct copied_stacks *cs = calloc(1, sizeof(*cs));

	if (!cs || !(cs->unwinder = unwinder_new())) {
		free(cs);
		return NULL;
	}
	cs->paths_fd = paths_fd;
	cs->copy_bytes = copy_bytes;
	cs->syms = syms;
	return cs;
}

void copied_stacks_watch(struct copied_stacks *cs, int pid)
{
	unwinder_watch(cs->unwinder, pid);
}

void copied_stacks_free(struct copied_stacks *cs)
{
	if (!cs)
		return;
	unwinder_free(cs->unwinder);
	free(cs->pool);
	free(cs->stacks);
	free(cs->by_hash);
	free(cs->ids);
	free(cs);
}
