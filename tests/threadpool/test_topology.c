/* Worker -> CPU -> node placement on synthetic topologies (pure function). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tp_topology.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); exit(1); } } while (0)

struct synth {
	struct tp_topology topo;
	unsigned char allowed[64];
	int node_of[64];
};

/* ncpus CPUs, all allowed; nodes given as a string, one digit per CPU
 * ('-' = offline), e.g. "0001" = CPUs 0-2 on node 0, CPU 3 on node 1. */
static void synth_init(struct synth *s, const char *nodes)
{
	unsigned n = (unsigned)strlen(nodes);

	memset(s, 0, sizeof(*s));
	for (unsigned c = 0; c < n; c++) {
		s->allowed[c] = 1;
		s->node_of[c] = nodes[c] == '-' ? -1 : nodes[c] - '0';
	}
	s->topo.ncpus = n;
	s->topo.allowed = s->allowed;
	s->topo.node_of = s->node_of;
}

static void plan_ok(const struct synth *s, const int *list, size_t nlist, int numa,
		    unsigned nw, struct tp_placement *out, struct tp_plan *plan)
{
	struct tp_plan_opts o = { .cpus = list, .ncpus = nlist, .numa = numa };

	CHECK(tp_plan_workers(&s->topo, &o, nw, out, plan) == 0);
}

static void expect_cpus(const struct tp_placement *p, const int *cpus, const int *nodes, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		if (p[i].cpu != cpus[i] || p[i].node != nodes[i])
			fprintf(stderr, "worker %u: cpu %d node %d, want cpu %d node %d\n",
				i, p[i].cpu, p[i].node, cpus[i], nodes[i]);
		CHECK(p[i].cpu == cpus[i] && p[i].node == nodes[i]);
	}
}

static void test_one_node(void)
{
	struct synth s;
	struct tp_placement p[6];
	struct tp_plan plan;

	synth_init(&s, "0000");
	plan_ok(&s, NULL, 0, 0, 6, p, &plan);
	expect_cpus(p, (int[]){ 0, 1, 2, 3, 0, 1 }, (int[]){ 0, 0, 0, 0, 0, 0 }, 6);
	CHECK(!plan.numa && plan.nodes == 1);
	/* NUMA on a one-node machine: same placement, NUMA off */
	plan_ok(&s, NULL, 0, 1, 6, p, &plan);
	expect_cpus(p, (int[]){ 0, 1, 2, 3, 0, 1 }, (int[]){ 0, 0, 0, 0, 0, 0 }, 6);
	CHECK(!plan.numa);
}

static void test_two_nodes(void)
{
	struct synth s;
	struct tp_placement p[4];
	struct tp_plan plan;
	struct tp_plan_opts o = { .numa = 1 };
	int bind[8];

	synth_init(&s, "00001111");
	/* without NUMA, round robin fills node 0 first */
	plan_ok(&s, NULL, 0, 0, 4, p, &plan);
	expect_cpus(p, (int[]){ 0, 1, 2, 3 }, (int[]){ 0, 0, 0, 0 }, 4);
	CHECK(plan.nodes == 1);
	/* with NUMA, workers alternate nodes and bind to the whole node */
	plan_ok(&s, NULL, 0, 1, 4, p, &plan);
	expect_cpus(p, (int[]){ 0, 4, 1, 5 }, (int[]){ 0, 1, 0, 1 }, 4);
	CHECK(plan.numa && plan.nodes == 2);
	CHECK(tp_plan_binding(&s.topo, &o, &plan, &p[1], bind, 8) == 4);
	CHECK(bind[0] == 4 && bind[1] == 5 && bind[2] == 6 && bind[3] == 7);
	/* an explicit list restricts the nodes' CPUs */
	o.cpus = (int[]){ 0, 1, 4 };
	o.ncpus = 3;
	plan_ok(&s, o.cpus, 3, 1, 4, p, &plan);
	expect_cpus(p, (int[]){ 0, 4, 1, 0 }, (int[]){ 0, 1, 0, 0 }, 4);
	CHECK(tp_plan_binding(&s.topo, &o, &plan, &p[0], bind, 8) == 2 && bind[0] == 0 && bind[1] == 1);
	CHECK(tp_plan_binding(&s.topo, &o, &plan, &p[1], bind, 8) == 1 && bind[0] == 4);
	/* a list within one node: NUMA has nothing to spread, so it is off */
	plan_ok(&s, (int[]){ 2, 3 }, 2, 1, 2, p, &plan);
	CHECK(!plan.numa && p[0].cpu == 2 && p[1].cpu == 3);
}

static void test_four_nodes(void)
{
	struct synth s;
	struct tp_placement p[9];
	struct tp_plan plan;

	synth_init(&s, "00112233");
	plan_ok(&s, NULL, 0, 1, 9, p, &plan);
	expect_cpus(p, (int[]){ 0, 2, 4, 6, 1, 3, 5, 7, 0 },
		    (int[]){ 0, 1, 2, 3, 0, 1, 2, 3, 0 }, 9);
	CHECK(plan.numa && plan.nodes == 4);
}

static void test_uneven_nodes(void)
{
	struct synth s;
	struct tp_placement p[8];
	struct tp_plan plan;
	unsigned per_node[2] = { 0, 0 };

	synth_init(&s, "0001"); /* node 0: CPUs 0-2, node 1: CPU 3 */
	plan_ok(&s, NULL, 0, 1, 8, p, &plan);
	expect_cpus(p, (int[]){ 0, 3, 1, 2, 0, 3, 1, 2 }, (int[]){ 0, 1, 0, 0, 0, 1, 0, 0 }, 8);
	for (unsigned i = 0; i < 8; i++)
		per_node[p[i].node]++;
	CHECK(per_node[0] == 6 && per_node[1] == 2); /* proportional to CPUs, 3:1 */
}

static void test_offline_forbidden(void)
{
	struct synth s;
	struct tp_placement p[6];
	struct tp_plan plan;
	struct tp_plan_opts o = { .numa = 1 };
	int bind[8];

	synth_init(&s, "00001-11"); /* CPU 5 offline */
	s.allowed[1] = 0;           /* CPUs 1 and 6 outside our cpuset */
	s.allowed[6] = 0;
	plan_ok(&s, NULL, 0, 0, 6, p, &plan);
	expect_cpus(p, (int[]){ 0, 2, 3, 4, 7, 0 }, (int[]){ 0, 0, 0, 1, 1, 0 }, 6);
	plan_ok(&s, NULL, 0, 1, 4, p, &plan);
	expect_cpus(p, (int[]){ 0, 4, 2, 7 }, (int[]){ 0, 1, 0, 1 }, 4);
	CHECK(tp_plan_binding(&s.topo, &o, &plan, &p[1], bind, 8) == 2 && bind[0] == 4 && bind[1] == 7);
	CHECK(tp_plan_binding(&s.topo, &o, &plan, &p[0], bind, 8) == 3);
	/* listing an offline, a forbidden or a non-existent CPU is refused */
	o.numa = 0;
	o.ncpus = 2;
	o.cpus = (int[]){ 0, 5 };
	CHECK(tp_plan_workers(&s.topo, &o, 2, p, &plan) == -EINVAL && plan.bad_cpu == 5);
	o.cpus = (int[]){ 6, 0 };
	CHECK(tp_plan_workers(&s.topo, &o, 2, p, &plan) == -EINVAL && plan.bad_cpu == 6);
	o.cpus = (int[]){ 0, 40 };
	CHECK(tp_plan_workers(&s.topo, &o, 2, p, &plan) == -EINVAL && plan.bad_cpu == 40);
	/* nothing usable at all */
	memset(s.allowed, 0, sizeof(s.allowed));
	o.cpus = NULL;
	o.ncpus = 0;
	CHECK(tp_plan_workers(&s.topo, &o, 2, p, &plan) == -ENODEV);
}

static void test_more_workers_than_cpus(void)
{
	struct synth s;
	struct tp_placement p[10];
	struct tp_plan plan;
	unsigned per_cpu[3] = { 0, 0, 0 };

	synth_init(&s, "000");
	plan_ok(&s, NULL, 0, 0, 10, p, &plan);
	for (unsigned i = 0; i < 10; i++)
		per_cpu[p[i].cpu]++;
	CHECK(per_cpu[0] == 4 && per_cpu[1] == 3 && per_cpu[2] == 3);
	/* an explicit list keeps its order */
	plan_ok(&s, (int[]){ 2, 0 }, 2, 0, 3, p, &plan);
	expect_cpus(p, (int[]){ 2, 0, 2 }, (int[]){ 0, 0, 0 }, 3);
}

static void test_cpulist(void)
{
	int c[16];

	CHECK(tp_cpulist_parse("0-3,6,8-9", c, 16) == 7);
	CHECK(c[0] == 0 && c[3] == 3 && c[4] == 6 && c[5] == 8 && c[6] == 9);
	CHECK(tp_cpulist_parse("5", c, 16) == 1 && c[0] == 5);
	CHECK(tp_cpulist_parse("", c, 16) == -EINVAL);
	CHECK(tp_cpulist_parse("3-1", c, 16) == -EINVAL);
	CHECK(tp_cpulist_parse("a", c, 16) == -EINVAL);
	CHECK(tp_cpulist_parse("1,", c, 16) == -EINVAL);
	CHECK(tp_cpulist_parse("1,,2", c, 16) == -EINVAL);
	CHECK(tp_cpulist_parse("-1", c, 16) == -EINVAL);
	CHECK(tp_cpulist_parse("99999", c, 16) == -EINVAL);
	CHECK(tp_cpulist_parse("0-20", c, 16) == -E2BIG);
}

int main(void)
{
	test_one_node();
	test_two_nodes();
	test_four_nodes();
	test_uneven_nodes();
	test_offline_forbidden();
	test_more_workers_than_cpus();
	test_cpulist();
	printf("test_topology: ok\n");
	return 0;
}
