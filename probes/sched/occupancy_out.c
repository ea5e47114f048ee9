// SPDX-License-Identifier: MIT
/* occupancy_out: occupancy.bin, occupants.bin and the cgroup names (occupancy_out.h). */
#include "sched/occupancy_out.h"

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
#include "core/features.h"
#include "sched/occupancy.h"
#include "core/probe.h"
#include "core/registry.h"
#include "core/target.h"

struct cgroup_name {
	uint64_t id;
	char *path; /* NULL: not found (the cgroup is gone) */
};

struct occ_out {
	struct recfile *out;
	int write_err;
	uint64_t reused;             /* tids seen for more than one process */
	struct cgroup_name *cgs;
	size_t ncgs, capcgs;
	bool irqs;                   /* the irq event: name the irq numbers in meta.json */
	uint64_t *pending_seq;       /* per CPU: slots before it written by occ_out_pending */
};

bool occ_wanted(const struct tt_opts *o)
{
	return (o->events & TT_EV_CPU) && (!o->aggregate || o->listen) &&
	       features_hook() != TT_HOOK_TRACEPOINT;
}

bool occ_records_wanted(const struct tt_opts *o)
{
	return occ_wanted(o) && !o->aggregate;
}

bool occ_irq_wanted(const struct tt_opts *o)
{
	return occ_wanted(o) && (o->events & TT_EV_IRQ);
}

int occ_configure(struct bpf_object *obj, const struct tt_opts *o)
{
	struct bpf_map *names = bpf_object__find_map_by_name(obj, "occ_names");
	struct bpf_map *blame = bpf_object__find_map_by_name(obj, "occ_blame");
	bool on = occ_wanted(o), records = occ_records_wanted(o);
	struct bpf_program *p;
	int err;

	if (!names || !blame)
		return -EINVAL;
	err = bpf_map__set_max_entries(blame, on && !records ? OCC_BLAME_ENTRIES : 1);
	if (err)
		return err;
	bpf_object__for_each_program(p, obj)
		if (!strncmp(bpf_program__name(p), "occ_", 4) && !occ_irq_wanted(o))
			bpf_program__set_autoload(p, false);
	return records ? 0 : bpf_map__set_max_entries(names, 1);
}

struct occ_out *occ_out_open(const struct tt_ctx *ctx)
{
	struct occ_out *o = calloc(1, sizeof(*o));

	if (!o)
		return NULL;
	o->out = probe_open_kind(ctx, TT_REC_OCC);
	if (!o->out) {
		free(o);
		return NULL;
	}
	o->irqs = occ_irq_wanted(ctx->opts);
	return o;
}

void occ_out_write(struct occ_out *o, uint32_t cpu, const struct occ_rec *recs, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		struct tt_occ r = { .t_ns = recs[i].t_ns, .cpu = cpu, .tid = recs[i].tid,
				    .pid = recs[i].pid, .flags = recs[i].flags };

		probe_write(o->out, &r, &o->write_err);
	}
}

int occ_out_pending(struct occ_out *o, const struct bpf_map *cpus)
{
	int ncpu = libbpf_num_possible_cpus();
	size_t size = (sizeof(struct occ_cpu) + 7) & ~(size_t)7; /* a per-CPU value's stride */
	char *buf;
	__u32 zero = 0;
	int err = 0;

	if (ncpu <= 0)
		return ncpu < 0 ? ncpu : -EINVAL;
	if (!o->pending_seq && !(o->pending_seq = calloc((size_t)ncpu, sizeof(uint64_t))))
		return -ENOMEM;
	buf = calloc((size_t)ncpu, size);
	if (!buf)
		return -ENOMEM;
	if (bpf_map__lookup_elem(cpus, &zero, sizeof(zero), buf, (size_t)ncpu * size, 0))
		err = -errno;
	for (int cpu = 0; !err && cpu < ncpu; cpu++) {
		const struct occ_cpu *c = (const void *)(buf + (size_t)cpu * size);
		__u64 w = c->want - 1, from = w * OCC_BATCH, to = from + OCC_BATCH;

		/* the last batch a wait wanted: still filling, or filled and sent since the
		 * ring buffer was last read (the programs run on till they are destroyed) */
		if (o->pending_seq[cpu] > from)
			from = o->pending_seq[cpu];
		if (to > c->seq)
			to = c->seq;
		if (c->want && w + OCC_BATCHES > c->seq / OCC_BATCH && to > from)
			occ_out_write(o, (uint32_t)cpu, &c->batch[w % OCC_BATCHES].occ[from % OCC_BATCH],
				      (uint32_t)(to - from));
		o->pending_seq[cpu] = c->seq;
	}
	free(buf);
	return err;
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

static void cgroup_add(struct occ_out *o, uint64_t id)
{
	for (size_t k = 0; k < o->ncgs; k++)
		if (o->cgs[k].id == id)
			return;
	if (id && !TT_GROW(o->cgs, o->ncgs, o->capcgs, 16))
		o->cgs[o->ncgs++] = (struct cgroup_name){ .id = id };
}

static void cgroups_name(struct occ_out *o)
{
	char mnt[PATH_MAX];

	if (!o->ncgs || target_cgroup2_mount(mnt, sizeof(mnt)))
		return;
	walk_for = o;
	walk_prefix = strlen(mnt);
	nftw(mnt, cg_visit, 16, FTW_PHYS);
	walk_for = NULL;
}

/* occupants.bin: one row per task in the names map, the idle task first. */
static int write_occupants(struct occ_out *o, const char *dir, const struct bpf_map *names)
{
	struct recfile *f = recfile_open_kind(dir, TT_REC_OCCUPANT);
	struct tt_occupant row = { .flags = TT_OCC_KTHREAD, .comm = "idle" };
	__u32 key, *prev = NULL;
	struct occ_name v;
	int err;

	if (!f)
		return -errno;
	err = recfile_write(f, &row, 1);
	while (!err && !bpf_map__get_next_key(names, prev, &key, sizeof(key))) {
		prev = &key;
		if (bpf_map__lookup_elem(names, &key, sizeof(key), &v, sizeof(v), 0))
			continue;
		row = (struct tt_occupant){ .cgroup_id = v.cgid, .pid = v.pid, .tid = key,
					    .flags = v.flags, .reused = v.reused };
		memcpy(row.comm, v.comm, sizeof(row.comm));
		o->reused += v.reused;
		cgroup_add(o, v.cgid);
		err = recfile_write(f, &row, 1);
	}
	err = err ?: recfile_flush(f);
	recfile_close(f);
	return err;
}

int occ_out_finish(struct occ_out *o, const char *dir, const struct bpf_map *names)
{
	int err = probe_flush(o->out, &o->write_err);

	err = err ?: write_occupants(o, dir, names);
	if (!err)
		cgroups_name(o);
	return err;
}

int occ_out_occupants(struct occ_out *o, const char *dir, const struct bpf_map *names)
{
	int err;

	o->reused = 0; /* counted again for this directory */
	err = write_occupants(o, dir, names);

	if (!err)
		cgroups_name(o);
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

/* "irqs": {"41": "virtio3-rx", ...}: /proc/interrupts' numbered lines, by the
 * name of their last handler (the line's last word). */
static void irqs_meta(FILE *f)
{
	FILE *in = fopen("/proc/interrupts", "r");
	char line[1024];
	int n = 0;

	fprintf(f, "  \"irqs\": {");
	while (in && fgets(line, sizeof(line), in)) {
		char *end = line + strcspn(line, "\n"), *name;
		unsigned irq;

		if (sscanf(line, " %u:", &irq) != 1)
			continue;
		*end = '\0';
		while (end > line && end[-1] == ' ')
			*--end = '\0';
		name = strrchr(line, ' ');
		fprintf(f, "%s\"%u\": ", n++ ? ", " : "", irq);
		json_write_string(f, name ? name + 1 : "");
	}
	fprintf(f, "},\n");
	if (in)
		fclose(in);
}

void occ_out_meta(const struct occ_out *o, FILE *f)
{
	if (o && o->irqs)
		irqs_meta(f);
	fprintf(f, "  \"cgroups\": {");
	for (size_t i = 0; o && i < o->ncgs; i++) {
		fprintf(f, "%s\"%llu\": ", i ? ", " : "", (unsigned long long)o->cgs[i].id);
		if (o->cgs[i].path)
			json_write_string(f, o->cgs[i].path);
		else
			fputs("null", f);
	}
	fprintf(f, "},\n  \"occupant_tids_reused\": %llu,\n",
		(unsigned long long)(o ? o->reused : 0));
}

void occ_out_free(struct occ_out *o)
{
	if (!o)
		return;
	recfile_close(o->out);
	for (size_t i = 0; i < o->ncgs; i++)
		free(o->cgs[i].path);
	free(o->cgs);
	free(o->pending_seq);
	free(o);
}
