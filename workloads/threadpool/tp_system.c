/* SPDX-License-Identifier: MIT */
/* The machine's topology (sched_getaffinity + libnuma) and node-local memory. */
#include "tp_system.h"

#include <errno.h>
#include <numa.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Online CPUs from /sys (offline CPUs keep node_of = -1). */
static void read_online(unsigned char *online)
{
	int cpus[TP_MAX_CPUS];
	char buf[4096];
	FILE *f = fopen("/sys/devices/system/cpu/online", "re");
	int n = -1;

	if (f) {
		if (fgets(buf, sizeof(buf), f)) {
			buf[strcspn(buf, "\n")] = '\0';
			n = tp_cpulist_parse(buf, cpus, TP_MAX_CPUS);
		}
		fclose(f);
	}
	if (n < 0) { /* no sysfs: trust sched_getaffinity alone */
		memset(online, 1, TP_MAX_CPUS);
		return;
	}
	memset(online, 0, TP_MAX_CPUS);
	for (int i = 0; i < n; i++)
		online[cpus[i]] = 1;
}

int tp_topology_read(struct tp_system_topology *sys)
{
	unsigned char online[TP_MAX_CPUS];
	cpu_set_t set;

	memset(sys, 0, sizeof(*sys));
	CPU_ZERO(&set);
	if (sched_getaffinity(0, sizeof(set), &set))
		return -errno;
	read_online(online);
	sys->numa_ok = numa_available() >= 0;
	sys->topo.ncpus = CPU_SETSIZE < TP_MAX_CPUS ? CPU_SETSIZE : TP_MAX_CPUS;
	for (unsigned c = 0; c < sys->topo.ncpus; c++) {
		int node = online[c] ? 0 : -1;

		if (online[c] && sys->numa_ok) {
			node = numa_node_of_cpu((int)c);
			if (node < 0) /* libnuma does not know it: not usable */
				node = -1;
		}
		sys->allowed[c] = CPU_ISSET(c, &set) ? 1 : 0;
		sys->node_of[c] = node;
	}
	sys->topo.allowed = sys->allowed;
	sys->topo.node_of = sys->node_of;
	return 0;
}

void *tp_mem_alloc(size_t bytes, int node, bool numa)
{
	void *p = NULL;

	if (bytes == 0)
		return NULL;
	if (numa) {
		p = numa_alloc_onnode(bytes, node);
		if (p)
			memset(p, 0, bytes); /* fault the pages in on that node now */
		return p;
	}
	if (posix_memalign(&p, 64, bytes))
		return NULL;
	memset(p, 0, bytes);
	return p;
}

void tp_mem_free(void *p, size_t bytes, bool numa)
{
	if (!p)
		return;
	if (numa)
		numa_free(p, bytes);
	else
		free(p);
}
