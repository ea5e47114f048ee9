// SPDX-License-Identifier: MIT
#include "spans/disasm.h"
#include "core/meta.h"
#include "core/cpu_quota.h"
#include "flight/flight.h"
#include "core/target.h"
#include "core/features.h"
#include "core/probe.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include <bpf/libbpf.h>

#include <json_out.h>
#include <tt_clock.h>

#ifndef TT_VERSION
#define TT_VERSION "dev"
#endif

/* Write the Unix time ts into wall_start as ISO-8601 UTC to the microsecond. */
static void meta_format_wall(struct tt_meta *m, const struct timespec *ts)
{
	struct tm tm;

	gmtime_r(&ts->tv_sec, &tm);
	strftime(m->wall_start, sizeof(m->wall_start), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(m->wall_start + strlen(m->wall_start), 16, ".%06dZ", (int)(ts->tv_nsec / 1000));
}

void meta_start(struct tt_meta *m)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	meta_format_wall(m, &ts);
	m->mono_start_ns = tt_now_ns();
}

void meta_start_at(struct tt_meta *m, uint64_t mono_ns)
{
	struct timespec ts;
	uint64_t now_ns = tt_now_ns(), wall_ns;

	clock_gettime(CLOCK_REALTIME, &ts);
	wall_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	wall_ns -= now_ns > mono_ns ? now_ns - mono_ns : 0;
	ts.tv_sec = (time_t)(wall_ns / 1000000000ull);
	ts.tv_nsec = (long)(wall_ns % 1000000000ull);
	meta_format_wall(m, &ts);
	m->mono_start_ns = mono_ns;
}

static int numa_nodes(void)
{
	DIR *d = opendir("/sys/devices/system/node");
	struct dirent *e;
	int n = 0;
	unsigned idx;
	char c;

	if (!d)
		return 1;
	while ((e = readdir(d)))
		if (sscanf(e->d_name, "node%u%c", &idx, &c) == 1)
			n++;
	closedir(d);
	return n ? n : 1;
}

/* The process's name now (/proc/PID/comm), "" when it is gone: its main thread may
 * never have switched while traced, so tasks.bin need not have it. */
static const char *process_comm(int pid, char *buf, size_t len)
{
	target_proc_line(pid, "comm", "", buf, len);
	return buf;
}

static void write_target(FILE *f, const struct tt_meta *m)
{
	fprintf(f, "  \"target\": {\"mode\": ");
	json_write_string(f, m->target_mode);
	fprintf(f, ", \"pid\": %d, \"pids\": [", m->target_pid);
	for (int i = 0; i < m->ntargets; i++)
		fprintf(f, "%s%d", i ? ", " : "", m->target_pids[i]);
	/* followed through their ancestry by the filter (filter.bpf.h); those found in
	 * /proc got the uprobes too */
	fprintf(f, "], \"descendants\": %s, \"descendants_found\": [",
		m->ntargets ? "true" : "false");
	for (int i = m->ntargets; m->tree_pids && i < m->ntree; i++)
		fprintf(f, "%s%d", i > m->ntargets ? ", " : "", m->tree_pids[i]);
	fprintf(f, "], \"comm\": ");
	json_write_string(f, m->opts->comm);
	fprintf(f, ", \"cgroup\": ");
	json_write_string(f, m->opts->cgroup);
	fprintf(f, ", \"cgroup_id\": %llu, \"also_pids\": [", (unsigned long long)m->cgroup_id);
	for (int i = 0; i < m->opts->nalso; i++)
		fprintf(f, "%s%d", i ? ", " : "", m->opts->also_pids[i]);
	fprintf(f, "], \"also_comms\": [");
	for (int i = 0; i < m->opts->nalso; i++) {
		char comm[32];

		fputs(i ? ", " : "", f);
		json_write_string(f, process_comm(m->opts->also_pids[i], comm, sizeof(comm)));
	}
	fprintf(f, "]},\n");
}

/* "key": {stream: value, ...} from the stream stats. */
static void write_streams(FILE *f, const struct tt_meta *m, const char *key, int what)
{
	fprintf(f, "  \"%s\": {", key);
	for (int i = 0; i < m->nstats; i++) {
		const struct tt_stream_stats *s = &m->stats[i];

		fprintf(f, "%s", i ? ", " : "");
		json_write_string(f, s->stream);
		if (what == 0) {
			fputs(": ", f);
			json_write_string(f, s->hook);
		} else {
			fprintf(f, ": %llu", (unsigned long long)(what == 1 ? s->written :
								  what == 2 ? s->lost : s->unmatched));
		}
	}
	fprintf(f, "},\n");
}

/* "map_full": {map: {"refused": N, "entries": SIZE}, ...}: every BPF map that can
 * fill, with the updates it refused for want of room ({} before the end). */
static void write_map_full(FILE *f, const struct tt_meta *m)
{
	struct tt_map_full v[TT_MAX_MAP_FULL];
	int n = m->mods ? probe_map_full_collect(m->mods, m->states, m->nmods, v,
						 TT_MAX_MAP_FULL) : 0;

	fprintf(f, "  \"map_full\": {");
	for (int i = 0; i < n; i++) {
		fprintf(f, "%s", i ? ", " : "");
		json_write_string(f, v[i].map);
		fprintf(f, ": {\"refused\": %llu, \"entries\": %u}", (unsigned long long)v[i].refused,
			v[i].entries);
	}
	fprintf(f, "},\n");
}

/* The time the stream counters were counted over, ns. */
static double counted_ns(const struct tt_meta *m)
{
	if (m->counted_to_ns > m->counted_from_ns)
		return (double)(m->counted_to_ns - m->counted_from_ns);
	return (double)(m->mono_end_ns - m->mono_start_ns);
}

double meta_uprobe_rate(const struct tt_meta *m, const struct tt_stream_stats *s)
{
	double dur_s = counted_ns(m) / 1e9;

	if (!s->hook || strcmp(s->hook, "uprobe") || dur_s <= 0)
		return 0;
	return (double)s->uprobe_hits / dur_s;
}

double meta_uprobe_share(const struct tt_meta *m, const struct tt_stream_stats *s)
{
	double dur_ns = counted_ns(m);

	if (!s->hook || strcmp(s->hook, "uprobe") || dur_ns <= 0)
		return 0;
	return (double)s->uprobe_cost_ns / dur_ns;
}

/* "uprobe_cost": {stream: {ns, share_of_cpu}}, and the per-hit costs by class. */
static void write_uprobe_cost(FILE *f, const struct tt_meta *m)
{
	int n = 0;

	fprintf(f, "  \"uprobe_costs_ns\": {\"emulated\": %u, \"nop5\": %u, "
		"\"single-stepped\": %u, \"uretprobe\": %u, \"measured\": %s},\n",
		usite_cost_ns(USITE_EMULATED), usite_cost_ns(USITE_NOP5),
		usite_cost_ns(USITE_SSTEP), usite_uretprobe_ns(),
		usite_costs_measured() ? "true" : "false");
	fprintf(f, "  \"uprobe_cost\": {");
	for (int i = 0; i < m->nstats; i++) {
		const struct tt_stream_stats *s = &m->stats[i];

		if (!s->hook || strcmp(s->hook, "uprobe"))
			continue;
		fprintf(f, "%s\"%s\": {\"ns\": %llu, \"share_of_cpu\": %.6f}", n++ ? ", " : "",
			s->stream, (unsigned long long)s->uprobe_cost_ns, meta_uprobe_share(m, s));
	}
	fprintf(f, "},\n");
}

/* "uprobe_hits": {stream: n} and "uprobe_hits_per_s": {stream: rate}, uprobe streams only. */
static void write_uprobe_hits(FILE *f, const struct tt_meta *m)
{
	for (int per_s = 0; per_s <= 1; per_s++) {
		int n = 0;

		fprintf(f, "  \"%s\": {", per_s ? "uprobe_hits_per_s" : "uprobe_hits");
		for (int i = 0; i < m->nstats; i++) {
			const struct tt_stream_stats *s = &m->stats[i];

			if (!s->hook || strcmp(s->hook, "uprobe"))
				continue;
			fprintf(f, "%s", n++ ? ", " : "");
			json_write_string(f, s->stream);
			if (per_s)
				fprintf(f, ": %.1f", meta_uprobe_rate(m, s));
			else
				fprintf(f, ": %llu", (unsigned long long)s->uprobe_hits);
		}
		fprintf(f, "},\n");
	}
	if (m->counted_to_ns > m->counted_from_ns)
		fprintf(f, "  \"uprobe_counted_s\": %.3f,\n", counted_ns(m) / 1e9);
}

static void write_options(FILE *f, const struct tt_meta *m)
{
	const struct tt_opts *o = m->opts;

	fprintf(f, "  \"options\": {\"events\": ");
	json_write_string(f, m->events_str);
	fprintf(f, ", \"duration_s\": %g, \"ringbuf_mb\": %u, \"min_offcpu_us\": %llu, "
		"\"aggregate\": %s, \"toggle_ms\": %u, \"out\": ", o->duration_s, o->ringbuf_mb,
		(unsigned long long)o->min_offcpu_us, o->aggregate ? "true" : "false", o->toggle_ms);
	json_write_string(f, o->out_dir);
	fprintf(f, ", \"spans\": [");
	for (int i = 0; i < o->nspans; i++) {
		fprintf(f, "%s{\"binary\": ", i ? ", " : "");
		json_write_string(f, o->spans[i].binary);
		fprintf(f, ", \"symbol\": ");
		json_write_string(f, o->spans[i].symbol);
		if (o->spans[i].provider) {
			fprintf(f, ", \"usdt_provider\": ");
			json_write_string(f, o->spans[i].provider);
		}
		if (o->spans[i].tcp)
			fprintf(f, ", \"tcp_port\": %u", o->spans[i].tcp_port);
		fputc('}', f);
	}
	fprintf(f, "]},\n");
}

/* How wait reasons, run-queue waits and waker contexts were read
 * (docs/probes/sched.md, "Wait reasons"; docs/probes/export.md, "Run-queue waits under
 * --aggregate"). */
static void write_evidence(FILE *f, const struct tt_meta *m)
{
	static const char *const regs[] = { "none", "task_pt_regs", "task_stack" };
	bool kacct = probe_runq_kacct(m->opts);
	unsigned thread_size;
	long rq, pc, co;

	fprintf(f, "  \"evidence\": {\"wait_reason\": \"%s\", \"runq_wait\": \"%s\", "
		"\"waker\": \"%s\", \"waker_ctx\": \"%s\", \"throttle\": \"%s\"},\n",
		regs[features_user_regs(&thread_size)],
		kacct ? "sched_info" : "sched_waking", kacct ? "none" : "sched_waking",
		features_typed_task() && !features_percpu_layout(&rq, &pc, &co) ? "preempt_count"
									   : "idle_task_only",
		features_throttle_clock_name(probe_throttle_clock(m->opts)));
}

/* "kernel_fallbacks": what the running kernel lacks and what was done instead, or
 * refused (features.h; docs/kernels.md). */
static void write_fallbacks(FILE *f)
{
	int n;
	const struct features_note *v = features_notes(&n);

	fprintf(f, "  \"kernel_fallbacks\": [");
	for (int i = 0; i < n; i++) {
		fprintf(f, "%s{\"what\": ", i ? ", " : "");
		json_write_string(f, v[i].what);
		fprintf(f, ", \"needs\": ");
		json_write_string(f, v[i].needs);
		fprintf(f, ", \"since\": ");
		json_write_string(f, v[i].since);
		fprintf(f, ", \"refused\": %s, \"instead\": ", v[i].refused ? "true" : "false");
		if (v[i].instead)
			json_write_string(f, v[i].instead);
		else
			fputs("null", f);
		fprintf(f, ", \"loses\": ");
		if (v[i].loses)
			json_write_string(f, v[i].loses);
		else
			fputs("null", f);
		fputc('}', f);
	}
	fprintf(f, "],\n");
}

static void write_body(FILE *f, const struct tt_meta *m)
{
	struct utsname u;

	uname(&u);
	fprintf(f, "{\n  \"command\": [");
	for (int i = 0; i < m->argc; i++) {
		fputs(i ? ", " : "", f);
		json_write_string(f, m->argv[i]);
	}
	fprintf(f, "],\n");
	write_target(f, m);
	fprintf(f, "  \"kernel\": ");
	json_write_string(f, u.release);
	fprintf(f, ",\n  \"ncpus\": %ld,\n  \"numa_nodes\": %d,\n",
		sysconf(_SC_NPROCESSORS_ONLN), numa_nodes());
	write_streams(f, m, "hooks", 0);
	write_streams(f, m, "events", 1);
	write_streams(f, m, "lost_events", 2);
	write_streams(f, m, "unmatched_events", 3);
	write_map_full(f, m);
	write_uprobe_hits(f, m);
	write_uprobe_cost(f, m);
	write_evidence(f, m);
	if (m->quotas)
		cpu_quotas_write_json(f, m->quotas);
	write_fallbacks(f);
	fprintf(f, "  \"tool_versions\": {\"tailtrace\": \"%s\", \"libbpf\": \"%s\"},\n",
		TT_VERSION, libbpf_version_string());
	fprintf(f, "  \"wall_start\": \"%s\",\n  \"mono_start_ns\": %llu,\n  \"mono_end_ns\": %llu,\n",
		m->wall_start, (unsigned long long)m->mono_start_ns,
		(unsigned long long)m->mono_end_ns);
	fprintf(f, "  \"duration_s\": %.6f,\n", (m->mono_end_ns - m->mono_start_ns) / 1e9);
	write_options(f, m);
	if (m->flight)
		flight_meta(m->flight, f);
	if (m->capture_json)
		fprintf(f, "  \"capture\": %s,\n", m->capture_json);
	for (int i = 0; i < m->nmods; i++)
		if (m->mods[i]->meta && m->states[i])
			m->mods[i]->meta(m->states[i], f);
	if (m->cost) {
		fputs("  \"cost\": ", f);
		cost_write_json(f, m->cost);
		fputs(",\n", f);
	}
	fputs("  \"write_error\": ", f);
	if (m->write_err)
		json_write_string(f, strerror(-m->write_err));
	else
		fputs("null", f);
	fprintf(f, ",\n  \"incomplete\": %s,\n  \"finished\": %s,\n  \"exit_status\": ",
		m->incomplete ? "true" : "false", m->finished ? "true" : "false");
	if (m->exit_status >= 0)
		fprintf(f, "%d\n}\n", m->exit_status);
	else
		fprintf(f, "null\n}\n");
}

static int meta_body(FILE *f, const void *arg)
{
	write_body(f, arg);
	return 0;
}

int meta_write(const char *dir, const struct tt_meta *m)
{
	return json_write_file(dir, "meta.json", meta_body, m);
}

static int reserve_path(const char *dir, char *path, size_t len)
{
	return snprintf(path, len, "%s/%s", dir, META_RESERVE_FILE) < (int)len ? 0 : -ENAMETOOLONG;
}

int meta_reserve(const char *dir)
{
	static const char zeros[4096];
	char path[4096];
	int fd, err = reserve_path(dir, path, sizeof(path));

	if (err)
		return err;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	/* real blocks (not a sparse file), so deleting it gives space back */
	for (size_t done = 0; !err && done < META_RESERVE_BYTES; done += sizeof(zeros))
		if (write(fd, zeros, sizeof(zeros)) != (ssize_t)sizeof(zeros))
			err = -errno;
	if (close(fd) && !err)
		err = -errno;
	if (err)
		unlink(path);
	return err;
}

int meta_write_reserved(const char *dir, const struct tt_meta *m)
{
	char path[4096];
	int err = meta_write(dir, m);
	bool reserved = reserve_path(dir, path, sizeof(path)) == 0 && unlink(path) == 0;

	/* a full disk shows as ENOSPC, EDQUOT or (stdio) EIO: retry in the reserve's space */
	if (err && reserved)
		err = meta_write(dir, m);
	return err;
}
