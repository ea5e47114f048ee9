// SPDX-License-Identifier: MIT
/* occupancy_out: occupancy.bin, occupants.bin and the cgroup names (occupancy_out.h). */
#include "occupancy_out.h"

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <bpf/libbpf.h>
#include <grow.h>
#include <json_out.h>
#include <recfile.h>
#include "features.h"
#include "occupancy.h"
#include "probe.h"
#include "registry.h"
#include "target.h"

struct cgroup_name {
	uint64_t id;
	char *path; /* NULL: not found (the cgroup is gone) */
};

struct occ_out {
	struct recfile *out;
	int write_err;
	struct tt_occupant *tasks;   /* one row per tid seen */
	size_t ntasks, cap;
	int32_t *slot;               /* open addressing: tid -> index + 1 into tasks */
	size_t nslots;
	uint64_t reused;             /* tids seen for more than one task */
	struct cgroup_name *cgs;
	size_t ncgs, capcgs;
};

bool occ_wanted(const struct tt_opts *o)
{
	return (o->events & TT_EV_CPU) && !o->aggregate && features_hook() != TT_HOOK_TRACEPOINT;
}

int occ_configure(struct bpf_object *obj, const struct tt_opts *o)
{
	struct bpf_map *ring = bpf_object__find_map_by_name(obj, "occ_ring");
	struct bpf_map *rb = bpf_object__find_map_by_name(obj, "occ_rb");
	int ncpu = libbpf_num_possible_cpus();
	bool on = occ_wanted(o);

	if (!ring || !rb || ncpu <= 0)
		return -EINVAL;
	return bpf_map__set_max_entries(ring, on ? (__u32)ncpu * OCC_RING : 1) ?:
	       (on ? probe_size_ringbuf(rb, o) : bpf_map__set_max_entries(rb, 4096));
}

struct occ_out *occ_out_open(const char *dir)
{
	struct occ_out *o = calloc(1, sizeof(*o));

	if (!o)
		return NULL;
	o->out = recfile_open_kind(dir, TT_REC_OCC);
	if (!o->out) {
		free(o);
		return NULL;
	}
	return o;
}

static size_t slot_of(const struct occ_out *o, uint32_t tid)
{
	size_t i = (tid * 2654435761u) & (o->nslots - 1);

	while (o->slot[i] && o->tasks[o->slot[i] - 1].tid != tid)
		i = (i + 1) & (o->nslots - 1);
	return i;
}

static int slots_grow(struct occ_out *o)
{
	size_t n = o->nslots ? o->nslots * 2 : 1024;
	int32_t *s = calloc(n, sizeof(*s)), *old = o->slot;

	if (!s)
		return -ENOMEM;
	o->slot = s;
	o->nslots = n;
	for (size_t i = 0; i < o->ntasks; i++)
		o->slot[slot_of(o, o->tasks[i].tid)] = (int32_t)(i + 1);
	free(old);
	return 0;
}

static bool same_task(const struct tt_occupant *t, const struct occ_slot *s)
{
	return t->pid == s->pid && t->cgroup_id == s->cgid && !memcmp(t->comm, s->comm, 16);
}

/* The occupants row of s's task: new, or the tid's row (updated if the tid
 * now names another task). */
static int task_note(struct occ_out *o, const struct occ_slot *s)
{
	struct tt_occupant *t;
	size_t i;

	if ((o->ntasks + 1) * 2 > o->nslots && slots_grow(o))
		return -ENOMEM;
	i = slot_of(o, s->tid);
	if (o->slot[i]) {
		t = &o->tasks[o->slot[i] - 1];
		if (s->tid == 0 || same_task(t, s))
			return 0;
		if (t->pid != s->pid) { /* the tid names a task of another process now */
			t->reused = 1;
			o->reused++;
		} /* else renamed (exec, prctl) or moved to another cgroup: the latest wins */
	} else {
		if (TT_GROW(o->tasks, o->ntasks, o->cap, 256))
			return -ENOMEM;
		t = &o->tasks[o->ntasks++];
		memset(t, 0, sizeof(*t));
		o->slot[i] = (int32_t)o->ntasks;
	}
	t->tid = s->tid;
	t->pid = s->pid;
	t->cgroup_id = s->cgid;
	t->flags = s->flags & (TT_OCC_KTHREAD | TT_OCC_TRACED);
	memcpy(t->comm, s->tid ? s->comm : "idle", s->tid ? sizeof(t->comm) : 5);
	return 0;
}

int occ_out_sample(void *state, void *data, size_t size)
{
	struct occ_out *o = state;
	const struct occ_slot *s = data;
	struct tt_occ r;

	if (size < sizeof(*s))
		return 0;
	r = (struct tt_occ){ .t_ns = s->t_ns, .cpu = s->cpu, .tid = s->tid, .pid = s->pid,
			     .flags = s->flags };
	probe_write(o->out, &r, &o->write_err);
	if (task_note(o, s) && !o->write_err)
		o->write_err = -ENOMEM;
	return 0;
}

/* ---- cgroup ids -> paths -------------------------------------------------- */

static struct occ_out *walk_for;   /* nftw has no argument pointer */
static size_t walk_prefix;

static int cg_visit(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)ftw;
	if (type != FTW_D)
		return 0;
	for (size_t i = 0; i < walk_for->ncgs; i++) {
		struct cgroup_name *c = &walk_for->cgs[i];

		if (!c->path && c->id == (uint64_t)st->st_ino)
			c->path = strdup(path[walk_prefix] ? path + walk_prefix : "/");
	}
	return 0;
}

static void cgroups_name(struct occ_out *o)
{
	char mnt[PATH_MAX];

	for (size_t i = 0; i < o->ntasks; i++) {
		bool known = false;

		for (size_t k = 0; k < o->ncgs && !known; k++)
			known = o->cgs[k].id == o->tasks[i].cgroup_id;
		if (!known && o->tasks[i].cgroup_id &&
		    !TT_GROW(o->cgs, o->ncgs, o->capcgs, 16))
			o->cgs[o->ncgs++] = (struct cgroup_name){ .id = o->tasks[i].cgroup_id };
	}
	if (!o->ncgs || target_cgroup2_mount(mnt, sizeof(mnt)))
		return;
	walk_for = o;
	walk_prefix = strlen(mnt);
	nftw(mnt, cg_visit, 16, FTW_PHYS);
	walk_for = NULL;
}

int occ_out_finish(struct occ_out *o, const char *dir)
{
	int err = probe_flush(o->out, &o->write_err);
	struct recfile *f;

	if (err)
		return err;
	cgroups_name(o);
	f = recfile_open_kind(dir, TT_REC_OCCUPANT);
	if (!f)
		return -errno;
	err = recfile_write(f, o->tasks, o->ntasks);
	err = err ?: recfile_flush(f);
	recfile_close(f);
	return err;
}

uint64_t occ_out_written(const struct occ_out *o)
{
	return o ? recfile_count(o->out) : 0;
}

uint64_t occ_out_dropped(const struct occ_out *o)
{
	return o ? recfile_dropped(o->out) : 0;
}

uint64_t occ_out_reused(const struct occ_out *o)
{
	return o ? o->reused : 0;
}

void occ_out_meta(const struct occ_out *o, FILE *f)
{
	fprintf(f, "  \"cgroups\": {");
	for (size_t i = 0; o && i < o->ncgs; i++) {
		fprintf(f, "%s\"%llu\": ", i ? ", " : "", (unsigned long long)o->cgs[i].id);
		if (o->cgs[i].path)
			json_write_string(f, o->cgs[i].path);
		else
			fputs("null", f);
	}
	fprintf(f, "},\n  \"occupant_tids_reused\": %llu,\n",
		(unsigned long long)occ_out_reused(o));
}

void occ_out_free(struct occ_out *o)
{
	if (!o)
		return;
	recfile_close(o->out);
	for (size_t i = 0; i < o->ncgs; i++)
		free(o->cgs[i].path);
	free(o->cgs);
	free(o->tasks);
	free(o->slot);
	free(o);
}
