// SPDX-License-Identifier: MIT
/* The traced threads that exited, kept by the loader (retired_tasks.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sched/retired_tasks.h"

struct retired_task {
	struct tt_task task;
	uint64_t exit_ns;
};

/* Oldest first; [first, n) are kept, the slots before first forgotten. */
struct retired_tasks {
	struct retired_task *v;
	size_t first, n, cap;
	uint64_t added;
};

struct retired_tasks *retired_tasks_new(void)
{
	return calloc(1, sizeof(struct retired_tasks));
}

void retired_tasks_free(struct retired_tasks *r)
{
	if (!r)
		return;
	free(r->v);
	free(r);
}

/* Room for one more: the forgotten slots reused first, else a larger array. */
static int retired_tasks_grow(struct retired_tasks *r)
{
	if (r->first && r->first >= r->n / 2) {
		memmove(r->v, r->v + r->first, (r->n - r->first) * sizeof(*r->v));
		r->n -= r->first;
		r->first = 0;
	}
	if (r->n < r->cap)
		return 0;
	size_t cap = r->cap ? 2 * r->cap : 1024;
	struct retired_task *v = realloc(r->v, cap * sizeof(*v));

	if (!v)
		return -ENOMEM;
	r->v = v;
	r->cap = cap;
	return 0;
}

int retired_tasks_add(struct retired_tasks *r, const struct tt_task *t, uint64_t exit_ns)
{
	int err = retired_tasks_grow(r);

	if (err)
		return err;
	r->v[r->n++] = (struct retired_task){ .task = *t, .exit_ns = exit_ns };
	r->added++;
	return 0;
}

void retired_tasks_forget_before(struct retired_tasks *r, uint64_t t_ns)
{
	while (r->first < r->n && r->v[r->first].exit_ns < t_ns)
		r->first++;
}

uint64_t retired_tasks_added(const struct retired_tasks *r)
{
	return r->added;
}

size_t retired_tasks_count(const struct retired_tasks *r)
{
	return r->n - r->first;
}

size_t retired_tasks_copy(const struct retired_tasks *r, uint64_t since_ns, struct tt_task *out,
			  size_t max)
{
	size_t k = 0;

	for (size_t i = r->first; i < r->n && k < max; i++)
		if (r->v[i].exit_ns >= since_ns)
			out[k++] = r->v[i].task;
	return k;
}

struct task_at {
	struct tt_task task;
	size_t at; /* its place in the array given */
};

static int cmp_task_at(const void *a, const void *b)
{
	const struct task_at *x = a, *y = b;

	if (x->task.tid != y->task.tid)
		return x->task.tid < y->task.tid ? -1 : 1;
	return x->at < y->at ? -1 : x->at > y->at;
}

static int cmp_task(const void *a, const void *b)
{
	const struct tt_task *x = a, *y = b;

	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

size_t tasks_sort_unique(struct tt_task *v, size_t n)
{
	struct task_at *w = n ? malloc(n * sizeof(*w)) : NULL;
	size_t k = 0;

	if (!w) { /* nothing to sort, or no memory to keep the order: by tid alone */
		qsort(v, n, sizeof(*v), cmp_task);
		for (size_t i = 0; i < n; i++)
			if (i + 1 == n || v[i + 1].tid != v[i].tid)
				v[k++] = v[i];
		return k;
	}
	for (size_t i = 0; i < n; i++)
		w[i] = (struct task_at){ .task = v[i], .at = i };
	qsort(w, n, sizeof(*w), cmp_task_at);
	for (size_t i = 0; i < n; i++)
		if (i + 1 == n || w[i + 1].task.tid != w[i].task.tid)
			v[k++] = w[i].task;
	free(w);
	return k;
}
