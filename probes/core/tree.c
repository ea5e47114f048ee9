// SPDX-License-Identifier: MIT
/* The targets' process trees, from /proc (tree.h). */
#include "core/tree.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/filter.h"
#include "core/target.h"

static int tree_find(const struct tt_tree *t, int pid, uint64_t started)
{
	for (int i = 0; i < t->n; i++)
		if (t->pids[i] == pid && t->started[i] == started)
			return i;
	return -1;
}

static int tree_add(struct tt_tree *t, int pid, uint64_t started)
{
	if (t->n == t->cap) {
		int cap = t->cap ? t->cap * 2 : 16;
		int *p = realloc(t->pids, (size_t)cap * sizeof(*p));
		uint64_t *s;

		if (!p)
			return -ENOMEM;
		t->pids = p;
		s = realloc(t->started, (size_t)cap * sizeof(*s));
		if (!s)
			return -ENOMEM;
		t->started = s;
		t->cap = cap;
	}
	t->pids[t->n] = pid;
	t->started[t->n] = started;
	return t->n++;
}

int tree_init(struct tt_tree *t, const int *targets, int ntargets)
{
	memset(t, 0, sizeof(*t));
	for (int i = 0; i < ntargets; i++)
		if (tree_add(t, targets[i], target_start_time(targets[i])) < 0)
			return -ENOMEM;
	t->ntargets = ntargets;
	return 0;
}

/* A growable list of pids: one level of the tree. */
struct pid_list {
	int *pids;
	int n, cap;
};

static int list_push(struct pid_list *l, int pid)
{
	if (l->n == l->cap) {
		int cap = l->cap ? l->cap * 2 : 16, *p = realloc(l->pids, (size_t)cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		l->pids = p;
		l->cap = cap;
	}
	l->pids[l->n++] = pid;
	return 0;
}

/* The children of every thread of pid, appended to kids (a gone process has none). */
static int children_of(int pid, struct pid_list *kids)
{
	char path[64];
	struct dirent *d;
	int err = 0;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	dir = opendir(path);
	if (!dir)
		return 0;
	while (!err && (d = readdir(dir))) {
		char file[320];
		FILE *f;
		int kid;

		if (d->d_name[0] < '0' || d->d_name[0] > '9')
			continue;
		snprintf(file, sizeof(file), "/proc/%d/task/%s/children", pid, d->d_name);
		f = fopen(file, "re");
		if (!f)
			continue;
		while (!err && fscanf(f, "%d", &kid) == 1)
			err = list_push(kids, kid);
		fclose(f);
	}
	closedir(dir);
	return err;
}

int tree_scan(struct tt_tree *t, void (*fresh)(void *arg, int pid), void *arg)
{
	struct pid_list level = { 0 }, next = { 0 }, swap;
	int found = 0, err = 0;

	for (int i = 0; !err && i < t->ntargets; i++)
		err = children_of(t->pids[i], &level);
	for (int depth = 1; !err && level.n && depth <= TT_TREE_DEPTH; depth++) {
		next.n = 0;
		for (int i = 0; !err && i < level.n; i++) {
			int pid = level.pids[i];
			uint64_t started = target_start_time(pid);

			if (!started)
				continue; /* gone already */
			if (tree_find(t, pid, started) < 0) {
				if (tree_add(t, pid, started) < 0) {
					err = -ENOMEM;
					break;
				}
				found++;
				fresh(arg, pid);
			}
			err = children_of(pid, &next);
		}
		swap = level;
		level = next;
		next = swap;
	}
	free(level.pids);
	free(next.pids);
	return err ? err : found;
}

void tree_free(struct tt_tree *t)
{
	free(t->pids);
	free(t->started);
	memset(t, 0, sizeof(*t));
}
