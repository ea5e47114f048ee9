/* SPDX-License-Identifier: MIT */
/*
 * The CPU quotas over the traced processes (CFS bandwidth control: cgroup v1's
 * cpu.cfs_quota_us, v2's cpu.max), of their own cgroup and its ancestors, with
 * the kernel's count of the time each was throttled (cpu.stat) at the run's
 * start and end: meta.json "cpu_quotas" (docs/containers.md). The report names
 * the quota that throttled a request; the count is the oracle its throttled
 * parts are checked against.
 */
#ifndef TT_CPU_QUOTA_H
#define TT_CPU_QUOTA_H
#include <stdint.h>
#include <stdio.h>

#define CPU_QUOTAS_MAX 16
#define CPU_QUOTA_UNKNOWN UINT64_MAX

struct cpu_quota {
	char path[512];               /* in its hierarchy, "/" its root */
	char dir[1100];               /* where it is mounted here */
	int version;                  /* cgroup v1 or v2 */
	int64_t quota_us, period_us;  /* per period_us, the group may run quota_us */
	uint64_t throttled_ns[2];     /* cpu.stat at the start [0] and end [1]; */
	uint64_t nr_throttled[2];     /* CPU_QUOTA_UNKNOWN: not read then */
	uint64_t nr_periods[2];
	uint64_t read_ns[2];          /* CLOCK_MONOTONIC when they were read: a run-queue
				       * record switched in between the two was counted
				       * by the kernel between them (its unthrottle came
				       * just before) */
};

struct cpu_quotas {
	struct cpu_quota q[CPU_QUOTAS_MAX];
	int n;
};

/* Note the quotas over pid's cgroup at the run's start (at = 0), or at its end (1): the
 * quotas not noted yet, with their counts now (their start unknown). */
void cpu_quotas_note(struct cpu_quotas *qs, int pid, int at);
/* Is pid's cgroup, or an ancestor, under a CPU quota now? */
bool cpu_quota_over(int pid);
/* pid's cgroup as its CPU controller sees it: its path in the v1 hierarchy with the cpu
 * controller where one is mounted (a hybrid host's v2 hierarchy has no cpu then), else its
 * v2 path; false if neither. */
bool cpu_cgroup_path(int pid, char *path, size_t len);
/* Read every noted quota's cpu.stat again as the run's end (also of groups
 * whose processes are gone): when the records stop being read. */
void cpu_quotas_end(struct cpu_quotas *qs);
/* meta.json's "cpu_quotas": [...], with its trailing ",\n". */
void cpu_quotas_write_json(FILE *f, const struct cpu_quotas *qs);

#endif
