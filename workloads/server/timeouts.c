/* SPDX-License-Identifier: MIT */
/* Per-phase timeout lists. See timeouts.h. */
#include "timeouts.h"

#include <stddef.h>

void tmo_init(struct tmo_lists *l, const uint32_t timeout_ms[TMO_PHASES])
{
	unsigned p;

	for (p = 0; p < TMO_PHASES; p++) {
		l->list[p].newest = l->list[p].oldest = NULL;
		l->timeout_ns[p] = timeout_ms[p] ? timeout_ms[p] * 1000000ull : UINT64_MAX;
	}
}

void tmo_insert(struct tmo_lists *l, struct tmo_node *n, unsigned phase, uint64_t now_ns)
{
	struct tmo_list *list = &l->list[phase];

	n->phase = phase;
	n->t_mark_ns = now_ns;
	n->newer = NULL;
	n->older = list->newest;
	if (list->newest)
		list->newest->newer = n;
	else
		list->oldest = n;
	list->newest = n;
}

void tmo_remove(struct tmo_lists *l, struct tmo_node *n)
{
	struct tmo_list *list = &l->list[n->phase];

	if (n->newer)
		n->newer->older = n->older;
	else
		list->newest = n->older;
	if (n->older)
		n->older->newer = n->newer;
	else
		list->oldest = n->newer;
	n->newer = n->older = NULL;
}

void tmo_mark(struct tmo_lists *l, struct tmo_node *n, unsigned phase, uint64_t now_ns)
{
	if (n->phase == phase && l->list[phase].newest == n) {
		n->t_mark_ns = now_ns; /* already the newest: stays sorted */
		return;
	}
	tmo_remove(l, n);
	tmo_insert(l, n, phase, now_ns);
}

struct tmo_node *tmo_expired(const struct tmo_lists *l, uint64_t now_ns)
{
	const struct tmo_node *n;
	unsigned p;

	for (p = 0; p < TMO_PHASES; p++) {
		n = l->list[p].oldest;
		if (n && l->timeout_ns[p] != UINT64_MAX && now_ns >= n->t_mark_ns &&
		    now_ns - n->t_mark_ns >= l->timeout_ns[p])
			return (struct tmo_node *)n;
	}
	return NULL;
}

struct tmo_node *tmo_any(const struct tmo_lists *l)
{
	unsigned p;

	for (p = 0; p < TMO_PHASES; p++)
		if (l->list[p].newest)
			return l->list[p].newest;
	return NULL;
}

int tmo_armed(const struct tmo_lists *l)
{
	unsigned p;

	for (p = 0; p < TMO_PHASES; p++)
		if (l->list[p].newest && l->timeout_ns[p] != UINT64_MAX)
			return 1;
	return 0;
}
