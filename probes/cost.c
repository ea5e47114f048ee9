// SPDX-License-Identifier: MIT
#include "cost.h"

#include <errno.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <json_out.h>
#include <tt_clock.h>

void cost_enable(struct tt_cost *c)
{
	c->stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	c->stats_errno = c->stats_fd < 0 ? (errno ? errno : EINVAL) : 0;
}

static uint64_t loader_cpu_ns(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru))
		return 0;
	return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ull +
	       (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ull;
}

void cost_start_clock(struct tt_cost *c)
{
	c->cpu_start_ns = c->cpu_loop_ns = c->cpu_end_ns = loader_cpu_ns();
}

void cost_loop_start(struct tt_cost *c)
{
	c->cpu_loop_ns = c->cpu_end_ns = loader_cpu_ns();
}

void cost_loop_end(struct tt_cost *c)
{
	c->cpu_end_ns = loader_cpu_ns();
	c->t_end_ns = tt_now_ns();
}

static uint64_t diff(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

/* Sum run_cnt / run_time_ns over the loaded programs of one object. */
static void cost_read_object(struct tt_cost_mod *m, struct bpf_object *obj)
{
	struct bpf_program *prog;

	bpf_object__for_each_program(prog, obj) {
		struct bpf_prog_info info;
		__u32 len = sizeof(info);
		int fd = bpf_program__fd(prog);

		if (fd < 0) /* not loaded (autoload off: another hook variant) */
			continue;
		memset(&info, 0, sizeof(info));
		if (bpf_obj_get_info_by_fd(fd, &info, &len))
			continue;
		m->run_cnt += info.run_cnt;
		m->run_time_ns += info.run_time_ns;
		m->misses += info.recursion_misses;
		m->nprogs++;
	}
}

void cost_collect(struct tt_cost *c, const struct tt_probe *const *mods, void *const *states,
		  int nmods, uint64_t traced_wall_ns)
{
	uint64_t now_cpu = loader_cpu_ns();

	c->startup_cpu_ns = diff(c->cpu_loop_ns, c->cpu_start_ns);
	c->loader_cpu_ns = diff(c->cpu_end_ns, c->cpu_loop_ns);
	c->finish_cpu_ns = diff(now_cpu, c->cpu_end_ns);
	c->traced_wall_ns = traced_wall_ns;
	c->ncpus = sysconf(_SC_NPROCESSORS_ONLN);
	c->nmods = 0;
	c->bpf_total_ns = c->bpf_total_runs = 0;
	for (int i = 0; i < nmods && c->nmods < TT_COST_MAX_MODS; i++) {
		struct bpf_object *obj = mods[i]->object ? mods[i]->object(states[i]) : NULL;
		struct tt_cost_mod *m = &c->mods[c->nmods];

		if (!obj)
			continue;
		memset(m, 0, sizeof(*m));
		m->name = mods[i]->name;
		cost_read_object(m, obj);
		c->bpf_total_ns += m->run_time_ns;
		c->bpf_total_runs += m->run_cnt;
		c->nmods++;
	}
}

void cost_disable(struct tt_cost *c)
{
	if (c->stats_fd >= 0)
		close(c->stats_fd);
	c->stats_fd = -1;
}

double cost_cpu_share(const struct tt_cost *c)
{
	if (c->stats_errno || !c->traced_wall_ns || c->ncpus <= 0)
		return -1;
	return (double)(c->bpf_total_ns + c->loader_cpu_ns) /
	       ((double)c->traced_wall_ns * (double)c->ncpus);
}

static void write_bpf(FILE *f, const struct tt_cost *c)
{
	fputs("{", f);
	for (int i = 0; i < c->nmods; i++) {
		const struct tt_cost_mod *m = &c->mods[i];

		fputs(i ? ", " : "", f);
		json_write_string(f, m->name);
		fprintf(f, ": {\"run_cnt\": %llu, \"run_time_ns\": %llu, \"missed\": %llu, "
			"\"ns_per_run\": ", (unsigned long long)m->run_cnt,
			(unsigned long long)m->run_time_ns, (unsigned long long)m->misses);
		if (m->run_cnt)
			fprintf(f, "%.1f}", (double)m->run_time_ns / (double)m->run_cnt);
		else
			fputs("null}", f);
	}
	fputs("}", f);
}

void cost_write_json(FILE *f, const struct tt_cost *c)
{
	double share = cost_cpu_share(c);

	fputs("{\"bpf\": ", f);
	if (c->stats_errno) {
		fputs("null, \"bpf_total_ns\": null, \"bpf_stats_error\": ", f);
		json_write_string(f, strerror(c->stats_errno));
	} else {
		write_bpf(f, c);
		fprintf(f, ", \"bpf_total_ns\": %llu", (unsigned long long)c->bpf_total_ns);
	}
	fprintf(f, ", \"loader_cpu_ns\": %llu, \"startup_cpu_ns\": %llu, \"finish_cpu_ns\": %llu, "
		"\"traced_wall_ns\": %llu, \"ncpus\": %ld, \"cpu_share_of_machine\": ",
		(unsigned long long)c->loader_cpu_ns, (unsigned long long)c->startup_cpu_ns,
		(unsigned long long)c->finish_cpu_ns, (unsigned long long)c->traced_wall_ns, c->ncpus);
	if (share >= 0)
		fprintf(f, "%.6f}", share);
	else
		fputs("null}", f);
}

void cost_print(FILE *f, const struct tt_cost *c)
{
	double share = cost_cpu_share(c);

	fputs("tailtrace: cost: ", f);
	if (c->stats_errno)
		fprintf(f, "BPF unknown (run-time stats unavailable: %s)", strerror(c->stats_errno));
	else if (c->bpf_total_runs)
		fprintf(f, "BPF %.1f ms (%.2f us/event)", c->bpf_total_ns / 1e6,
			c->bpf_total_ns / 1e3 / (double)c->bpf_total_runs);
	else
		fprintf(f, "BPF %.1f ms (no events)", c->bpf_total_ns / 1e6);
	fprintf(f, ", loader %.1f ms CPU over %.1f s traced on %ld CPU%s", c->loader_cpu_ns / 1e6,
		c->traced_wall_ns / 1e9, c->ncpus, c->ncpus == 1 ? "" : "s");
	if (share >= 0)
		fprintf(f, " = %.1f%% of the machine", share * 100);
	fprintf(f, " (not counted: start-up %.1f ms, finish %.1f ms CPU)", c->startup_cpu_ns / 1e6,
		c->finish_cpu_ns / 1e6);
	for (int i = 0; i < c->nmods; i++) /* runs the kernel skipped: events lost */
		if (c->mods[i].misses)
			fprintf(f, "; %s programs skipped %llu times (recursion)", c->mods[i].name,
				(unsigned long long)c->mods[i].misses);
	fputs("\n", f);
}
