/* SPDX-License-Identifier: MIT */
/*
 * Worker placement: which CPU (and NUMA node) each pool worker runs on.
 *
 * tp_plan_workers() is a pure function over a struct tp_topology, so it is
 * unit-tested on synthetic machines (tests/threadpool/test_topology.c);
 * tp_topology_read() fills the topology from this process and machine.
 *
 * A CPU is usable when the process may run on it (sched_getaffinity: its
 * cpuset) and it is online (node_of[cpu] >= 0).
 *
 * Placement rules:
 *  - explicit list (cpus != NULL): worker i -> cpus[i % ncpus], in the given
 *    order; every listed CPU must be usable (else -EINVAL, *bad_cpu set).
 *  - round robin (cpus == NULL): worker i -> the i-th usable CPU (ascending),
 *    wrapping around when there are more workers than CPUs.
 *  - NUMA (numa = true, and at least two nodes have usable CPUs): the
 *    candidate CPUs (the list, or all usable) are interleaved across nodes --
 *    round r takes the r-th CPU of every node that still has one -- so
 *    workers spread over nodes first, and a node with more CPUs gets more
 *    workers. Worker i gets the i-th CPU of that order (wrapping) and is bound
 *    to *all* candidate CPUs of its node (its node's CPUs), not just that one.
 *    With one usable node, NUMA is off: plan->numa = false.
 */
#ifndef TP_TOPOLOGY_H
#define TP_TOPOLOGY_H
#include <stdbool.h>
#include <stddef.h>

#define TP_MAX_CPUS 1024

struct tp_topology {
	unsigned ncpus;              /* entries in allowed[] and node_of[] */
	const unsigned char *allowed; /* allowed[cpu]: in the process's cpuset */
	const int *node_of;          /* node_of[cpu]: NUMA node, < 0 if offline */
};

struct tp_placement {
	int cpu;  /* this worker's home CPU */
	int node; /* node_of[cpu] */
};

struct tp_plan_opts {
	const int *cpus; /* explicit list, or NULL for round robin */
	size_t ncpus;
	bool numa;       /* spread over nodes, bind to the node's CPUs */
};

struct tp_plan {
	bool numa;         /* NUMA placement in effect (>= 2 usable nodes) */
	unsigned nodes;    /* distinct nodes that got workers */
	int bad_cpu;       /* on -EINVAL: the listed CPU that is not usable */
};

/* Place nworkers workers; out[] has nworkers entries. 0, -EINVAL (a listed
 * CPU is not usable, or empty list), -ENODEV (no usable CPU at all). */
int tp_plan_workers(const struct tp_topology *topo, const struct tp_plan_opts *opts,
		    unsigned nworkers, struct tp_placement *out, struct tp_plan *plan);

/* Is cpu usable in topo? */
bool tp_topology_usable(const struct tp_topology *topo, int cpu);

/* CPUs a worker placed at p may run on: {p->cpu}, or with plan->numa every
 * candidate CPU of p->node. Writes up to max ids to cpus[]; returns the count. */
size_t tp_plan_binding(const struct tp_topology *topo, const struct tp_plan_opts *opts,
		       const struct tp_plan *plan, const struct tp_placement *p,
		       int *cpus, size_t max);

/* The machine as this process sees it. numa_ok is false when libnuma says
 * NUMA is unavailable (numa_available() < 0): every online CPU is node 0. */
struct tp_system_topology {
	struct tp_topology topo;
	bool numa_ok;
	unsigned char allowed[TP_MAX_CPUS];
	int node_of[TP_MAX_CPUS];
};
int tp_topology_read(struct tp_system_topology *sys);

/* Parse a CPU list such as "0-3,6,8-9" into cpus[] (max entries).
 * Returns the count, or -EINVAL on a malformed list / -E2BIG if too long. */
int tp_cpulist_parse(const char *s, int *cpus, size_t max);

#endif
