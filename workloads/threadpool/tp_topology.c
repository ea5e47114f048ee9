/* SPDX-License-Identifier: MIT */
/* Worker -> CPU -> node placement: pure functions (see tp_topology.h). */
#include "tp_topology.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

bool tp_topology_usable(const struct tp_topology *topo, int cpu)
{
	return cpu >= 0 && (unsigned)cpu < topo->ncpus && topo->allowed[cpu] &&
	       topo->node_of[cpu] >= 0;
}

/* The candidate CPUs: the explicit list (validated), or every usable CPU. */
static int plan_candidates(const struct tp_topology *topo, const struct tp_plan_opts *opts,
			   int *cand, size_t *n, int *bad_cpu)
{
	*n = 0;
	if (opts->cpus) {
		if (opts->ncpus == 0 || opts->ncpus > TP_MAX_CPUS)
			return -EINVAL;
		for (size_t i = 0; i < opts->ncpus; i++) {
			if (!tp_topology_usable(topo, opts->cpus[i])) {
				*bad_cpu = opts->cpus[i];
				return -EINVAL;
			}
			cand[(*n)++] = opts->cpus[i];
		}
		return 0;
	}
	for (unsigned c = 0; c < topo->ncpus && c < TP_MAX_CPUS; c++)
		if (tp_topology_usable(topo, (int)c))
			cand[(*n)++] = (int)c;
	return *n ? 0 : -ENODEV;
}

static bool seen_before(const int *v, size_t n, int x)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == x)
			return true;
	return false;
}

/* Distinct nodes of the candidates, ascending. Returns how many. */
static size_t plan_nodes(const struct tp_topology *topo, const int *cand, size_t n, int *nodes)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		int node = topo->node_of[cand[i]];
		size_t j;

		if (seen_before(nodes, k, node))
			continue;
		for (j = k; j > 0 && nodes[j - 1] > node; j--)
			nodes[j] = nodes[j - 1];
		nodes[j] = node;
		k++;
	}
	return k;
}

/* The r-th distinct candidate CPU of node, or -1. */
static int node_nth_cpu(const struct tp_topology *topo, const int *cand, size_t n,
			int node, size_t r)
{
	size_t seen = 0;

	for (size_t i = 0; i < n; i++) {
		if (topo->node_of[cand[i]] != node || seen_before(cand, i, cand[i]))
			continue;
		if (seen++ == r)
			return cand[i];
	}
	return -1;
}

/* Interleave the candidates across nodes: round r takes each node's r-th CPU. */
static size_t plan_interleave(const struct tp_topology *topo, const int *cand, size_t n,
			      const int *nodes, size_t nnodes, int *order)
{
	size_t k = 0;

	for (size_t r = 0; k < n; r++) {
		size_t took = 0;

		for (size_t j = 0; j < nnodes; j++) {
			int cpu = node_nth_cpu(topo, cand, n, nodes[j], r);

			if (cpu >= 0) {
				order[k++] = cpu;
				took++;
			}
		}
		if (!took)
			break;
	}
	return k;
}

int tp_plan_workers(const struct tp_topology *topo, const struct tp_plan_opts *opts,
		    unsigned nworkers, struct tp_placement *out, struct tp_plan *plan)
{
	int cand[TP_MAX_CPUS], nodes[TP_MAX_CPUS], order[TP_MAX_CPUS];
	const int *seq = cand;
	size_t n, nnodes, nseq;
	unsigned char used[TP_MAX_CPUS];
	int err;

	memset(plan, 0, sizeof(*plan));
	plan->bad_cpu = -1;
	err = plan_candidates(topo, opts, cand, &n, &plan->bad_cpu);
	if (err)
		return err;
	nnodes = plan_nodes(topo, cand, n, nodes);
	nseq = n;
	if (opts->numa && nnodes >= 2) {
		plan->numa = true;
		nseq = plan_interleave(topo, cand, n, nodes, nnodes, order);
		seq = order;
	}
	memset(used, 0, sizeof(used));
	for (unsigned i = 0; i < nworkers; i++) {
		out[i].cpu = seq[i % nseq];
		out[i].node = topo->node_of[out[i].cpu];
		if (!used[out[i].node % TP_MAX_CPUS]++)
			plan->nodes++;
	}
	return 0;
}

size_t tp_plan_binding(const struct tp_topology *topo, const struct tp_plan_opts *opts,
		       const struct tp_plan *plan, const struct tp_placement *p,
		       int *cpus, size_t max)
{
	size_t k = 0;

	if (!plan->numa) {
		if (max)
			cpus[k++] = p->cpu;
		return k;
	}
	if (opts->cpus) {
		for (size_t i = 0; i < opts->ncpus && k < max; i++)
			if (topo->node_of[opts->cpus[i]] == p->node &&
			    !seen_before(cpus, k, opts->cpus[i]))
				cpus[k++] = opts->cpus[i];
		return k;
	}
	for (unsigned c = 0; c < topo->ncpus && k < max; c++)
		if (tp_topology_usable(topo, (int)c) && topo->node_of[c] == p->node)
			cpus[k++] = (int)c;
	return k;
}

static int parse_uint(const char **s, long *v)
{
	char *end;

	if (**s < '0' || **s > '9')
		return -EINVAL;
	errno = 0;
	*v = strtol(*s, &end, 10);
	if (errno || *v >= TP_MAX_CPUS)
		return -EINVAL;
	*s = end;
	return 0;
}

int tp_cpulist_parse(const char *s, int *cpus, size_t max)
{
	size_t n = 0;

	if (!s || !*s)
		return -EINVAL;
	for (;;) {
		long lo, hi;

		if (parse_uint(&s, &lo))
			return -EINVAL;
		hi = lo;
		if (*s == '-') {
			s++;
			if (parse_uint(&s, &hi) || hi < lo)
				return -EINVAL;
		}
		for (long c = lo; c <= hi; c++) {
			if (n == max)
				return -E2BIG;
			cpus[n++] = (int)c;
		}
		if (*s == '\0')
			return (int)n;
		if (*s++ != ',')
			return -EINVAL;
	}
}
