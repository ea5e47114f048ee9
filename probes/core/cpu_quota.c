// SPDX-License-Identifier: MIT
/* The CPU quotas over the traced processes, and the kernel's throttle counts (cpu_quota.h). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu_quota.h"
#include "json_out.h"
#include "tt_clock.h"

/* The mount point of the v1 hierarchy with the cpu controller (version 1) or of
 * the v2 hierarchy (version 2), from /proc/self/mountinfo; false if none. */
static bool hierarchy_mount(int version, char *dir, size_t len)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char line[1024], mnt[512], fstype[64], opts[512];
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		char *sep = strstr(line, " - ");

		if (!sep || sscanf(line, "%*s %*s %*s %*s %511s", mnt) != 1 ||
		    sscanf(sep + 3, "%63s %*s %511s", fstype, opts) != 2)
			continue;
		if (version == 2 && !strcmp(fstype, "cgroup2"))
			found = true;
		if (version == 1 && !strcmp(fstype, "cgroup")) {
			for (char *o = strtok(opts, ","); o && !found; o = strtok(NULL, ","))
				found = !strcmp(o, "cpu");
		}
	}
	fclose(f);
	if (found)
		snprintf(dir, len, "%s", mnt);
	return found;
}

/* pid's cgroup path in the v1 cpu hierarchy (version 1) or in v2 (2). */
static bool process_cgroup(int pid, int version, char *path, size_t len)
{
	char file[64], line[1024];
	bool found = false;
	FILE *f;

	snprintf(file, sizeof(file), "/proc/%d/cgroup", pid);
	if (!(f = fopen(file, "r")))
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		char *ctl = strchr(line, ':'), *p = ctl ? strchr(ctl + 1, ':') : NULL;

		if (!p)
			continue;
		*ctl++ = '\0'; /* "ID:controllers:path" */
		*p++ = '\0';
		p[strcspn(p, "\n")] = '\0';
		if (version == 2)
			found = !strcmp(line, "0") && !*ctl;
		for (char *c = strtok(ctl, ","); version == 1 && c && !found; c = strtok(NULL, ","))
			found = !strcmp(c, "cpu");
		if (found)
			snprintf(path, len, "%s", p);
	}
	fclose(f);
	return found;
}

bool cpu_cgroup_path(int pid, char *path, size_t len)
{
	char mnt[512];

	/* a controller is bound to one hierarchy: where a v1 one has cpu, v2 has not */
	if (hierarchy_mount(1, mnt, sizeof(mnt)) && process_cgroup(pid, 1, path, len))
		return true;
	return hierarchy_mount(2, mnt, sizeof(mnt)) && process_cgroup(pid, 2, path, len);
}

/* The quota of directory dir: false if it has none (unlimited, or no cpu controller). */
static bool read_quota(const char *dir, int version, int64_t *quota_us, int64_t *period_us)
{
	char file[1200], word[32];
	long long q = -1, p = 0;
	FILE *f;

	if (version == 1) {
		snprintf(file, sizeof(file), "%s/cpu.cfs_quota_us", dir);
		if ((f = fopen(file, "r"))) {
			if (fscanf(f, "%lld", &q) != 1)
				q = -1;
			fclose(f);
		}
		snprintf(file, sizeof(file), "%s/cpu.cfs_period_us", dir);
		if ((f = fopen(file, "r"))) {
			if (fscanf(f, "%lld", &p) != 1)
				p = 0;
			fclose(f);
		}
	} else {
		snprintf(file, sizeof(file), "%s/cpu.max", dir);
		if ((f = fopen(file, "r"))) {
			if (fscanf(f, "%31s %lld", word, &p) == 2 && strcmp(word, "max"))
				q = atoll(word);
			fclose(f);
		}
	}
	*quota_us = q;
	*period_us = p;
	return q > 0 && p > 0;
}

/* cpu.stat of dir into q's counters at `at`. */
static void read_stat(const char *dir, struct cpu_quota *q, int at)
{
	char file[1200], key[64];
	unsigned long long v;
	FILE *f;

	snprintf(file, sizeof(file), "%s/cpu.stat", dir);
	if (!(f = fopen(file, "r")))
		return;
	q->read_ns[at] = tt_now_ns();
	while (fscanf(f, "%63s %llu", key, &v) == 2) {
		if (!strcmp(key, "throttled_time")) /* v1: ns */
			q->throttled_ns[at] = v;
		else if (!strcmp(key, "throttled_usec")) /* v2 */
			q->throttled_ns[at] = v * 1000;
		else if (!strcmp(key, "nr_throttled"))
			q->nr_throttled[at] = v;
		else if (!strcmp(key, "nr_periods"))
			q->nr_periods[at] = v;
	}
	fclose(f);
}

/* The slot of path, made if new (*made then). */
static struct cpu_quota *quota_slot(struct cpu_quotas *qs, const char *dir, const char *path,
				    int version, bool *made)
{
	struct cpu_quota *q;

	*made = false;
	for (int i = 0; i < qs->n; i++)
		if (qs->q[i].version == version && !strcmp(qs->q[i].path, path))
			return &qs->q[i];
	*made = true;
	if (qs->n == CPU_QUOTAS_MAX)
		return NULL;
	q = &qs->q[qs->n++];
	memset(q, 0, sizeof(*q));
	snprintf(q->path, sizeof(q->path), "%s", path);
	snprintf(q->dir, sizeof(q->dir), "%s", dir);
	q->version = version;
	for (int at = 0; at < 2; at++)
		q->throttled_ns[at] = q->nr_throttled[at] = q->nr_periods[at] = q->read_ns[at] =
			CPU_QUOTA_UNKNOWN;
	return q;
}

void cpu_quotas_note(struct cpu_quotas *qs, int pid, int at)
{
	char mnt[512], path[512], dir[1100];

	/* v1's cpu controller where it is mounted (then v2 has none), else v2 */
	for (int version = 1; version <= 2; version++) {
		size_t root;

		if (!hierarchy_mount(version, mnt, sizeof(mnt)) ||
		    !process_cgroup(pid, version, path, sizeof(path)))
			continue;
		root = strlen(mnt);
		snprintf(dir, sizeof(dir), "%s%s", mnt, strcmp(path, "/") ? path : "");
		for (;;) { /* the cgroup, then each ancestor up to the root */
			int64_t quota, period;
			struct cpu_quota *q;
			bool made;
			char *slash;

			if (read_quota(dir, version, &quota, &period) &&
			    (q = quota_slot(qs, dir, dir[root] ? dir + root : "/", version, &made))) {
				q->quota_us = quota;
				q->period_us = period;
				if (made || at == 0) /* an end count comes from cpu_quotas_end */
					read_stat(dir, q, at);
			}
			slash = strrchr(dir, '/');
			if (strlen(dir) <= root || !slash || slash < dir + root)
				break;
			*slash = '\0';
		}
		return;
	}
}

bool cpu_quota_over(int pid)
{
	static struct cpu_quotas qs; /* 27 KB: not on the stack */

	qs.n = 0;
	cpu_quotas_note(&qs, pid, 0);
	return qs.n > 0;
}

void cpu_quotas_end(struct cpu_quotas *qs)
{
	for (int i = 0; i < qs->n; i++)
		read_stat(qs->q[i].dir, &qs->q[i], 1);
}

static void write_count(FILE *f, const char *key, const uint64_t v[2])
{
	fprintf(f, ", \"%s\": [", key);
	for (int at = 0; at < 2; at++) {
		fputs(at ? ", " : "", f);
		if (v[at] == CPU_QUOTA_UNKNOWN)
			fputs("null", f);
		else
			fprintf(f, "%llu", (unsigned long long)v[at]);
	}
	fputc(']', f);
}

void cpu_quotas_write_json(FILE *f, const struct cpu_quotas *qs)
{
	fputs("  \"cpu_quotas\": [", f);
	for (int i = 0; i < qs->n; i++) {
		const struct cpu_quota *q = &qs->q[i];

		fprintf(f, "%s{\"path\": ", i ? ", " : "");
		json_write_string(f, q->path);
		fprintf(f, ", \"cgroup_version\": %d, \"quota_us\": %lld, \"period_us\": %lld",
			q->version, (long long)q->quota_us, (long long)q->period_us);
		write_count(f, "throttled_ns", q->throttled_ns);
		write_count(f, "nr_throttled", q->nr_throttled);
		write_count(f, "nr_periods", q->nr_periods);
		write_count(f, "read_ns", q->read_ns);
		fputc('}', f);
	}
	fputs("],\n", f);
}
