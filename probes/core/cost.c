// SPDX-License-Identifier: MIT
#include "core/cost.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <json_out.h>
#include <tt_clock.h>

static const char *const mode_names[] = {
	[TT_BPF_STATS_SAMPLED] = "sampled",
	[TT_BPF_STATS_ALWAYS] = "always",
	[TT_BPF_STATS_OFF] = "off",
};

const char *cost_mode_name(enum tt_bpf_stats mode)
{
	return mode_names[mode];
}

int cost_mode_parse(const char *s)
{
	for (int i = 0; i < (int)(sizeof(mode_names) / sizeof(mode_names[0])); i++)
		if (!strcmp(s, mode_names[i]))
			return i;
	return -1;
}

void cost_enable(struct tt_cost *c, enum tt_bpf_stats mode, bool service)
{
	c->mode = mode;
	c->dense_ns = service ? 0 : COST_SAMPLE_DENSE_S * 1000000000ull;
	c->stats_fd = -1;
	c->stats_errno = 0;
	if (mode == TT_BPF_STATS_OFF)
		return;
	c->stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	c->stats_errno = c->stats_fd < 0 ? (errno ? errno : EINVAL) : 0;
}

/* The kernel's switch (kernel.bpf_stats_enabled) reads 1 while anyone holds
 * the statistics on: after closing our fd, 1 means another holder. */
static bool stats_held_elsewhere(void)
{
	char v = '0';
	int fd = open("/proc/sys/kernel/bpf_stats_enabled", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	if (read(fd, &v, 1) != 1)
		v = '0';
	close(fd);
	return v == '1';
}

static int cost_read_progs(struct tt_cost_runs *runs, struct tt_cost_prog *out,
			   const struct tt_probe *const *mods, void *const *states, int nmods);

static uint64_t diff(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

/* The programs' counters now, as a window opens. */
static void window_mark(struct tt_cost *c)
{
	c->windows++;
	if (c->pmods)
		cost_read_progs(c->win, NULL, c->pmods, c->pstates, c->pnmods);
}

/* The open window's runs so far into out[] (added), by program. */
static void window_add(const struct tt_cost *c, struct tt_cost_runs *out)
{
	struct tt_cost_runs now[TT_COST_MAX_PROGS];
	int n;

	if (!c->pmods)
		return;
	n = cost_read_progs(now, NULL, c->pmods, c->pstates, c->pnmods);
	for (int i = 0; i < n; i++) {
		out[i].run_cnt += diff(now[i].run_cnt, c->win[i].run_cnt);
		out[i].run_time_ns += diff(now[i].run_time_ns, c->win[i].run_time_ns);
	}
}

static int ms_until(uint64_t now_ns, uint64_t t_ns)
{
	return t_ns > now_ns ? (int)((t_ns - now_ns + 999999) / 1000000) : 0;
}

static void window_close(struct tt_cost *c, uint64_t now_ns)
{
	if (c->stats_fd < 0)
		return;
	window_add(c, c->acc);
	close(c->stats_fd);
	c->stats_fd = -1;
	c->sampled_ns += now_ns > c->on_since_ns ? now_ns - c->on_since_ns : 0;
}

int cost_tick(struct tt_cost *c, uint64_t now_ns)
{
	if (c->mode != TT_BPF_STATS_SAMPLED || c->stats_errno || c->others_on)
		return -1;
	if (c->stats_fd >= 0) {
		uint64_t due = c->on_since_ns + COST_SAMPLE_ON_MS * 1000000ull, period_ms;

		if (now_ns < due)
			return ms_until(now_ns, due);
		window_close(c, now_ns);
		if (stats_held_elsewhere()) {
			/* Counted continuously anyway: keep them on, scale nothing. */
			c->others_on = true;
			c->stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
			window_mark(c);
			c->on_since_ns = now_ns;
			return -1;
		}
		period_ms = now_ns - c->t_start_ns < c->dense_ns ? COST_SAMPLE_PERIOD_MS
								 : COST_SAMPLE_SPARSE_MS;
		c->next_on_ns = c->on_since_ns + period_ms * 1000000ull;
		if (c->next_on_ns <= now_ns)
			c->next_on_ns = now_ns + (period_ms - COST_SAMPLE_ON_MS) * 1000000ull;
		return ms_until(now_ns, c->next_on_ns);
	}
	if (now_ns < c->next_on_ns)
		return ms_until(now_ns, c->next_on_ns);
	c->stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (c->stats_fd < 0) /* worked before: keep the windows measured so far */
		return -1;
	window_mark(c);
	c->on_since_ns = now_ns;
	return COST_SAMPLE_ON_MS;
}

void cost_stats_stop(struct tt_cost *c, uint64_t now_ns)
{
	window_close(c, now_ns);
}

static uint64_t loader_cpu_ns(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru))
		return 0;
	return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ull +
	       (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ull;
}

void cost_start_clock(struct tt_cost *c, uint64_t now_ns, const struct tt_probe *const *mods,
		      void *const *states, int nmods)
{
	c->cpu_start_ns = c->cpu_loop_ns = c->cpu_end_ns = loader_cpu_ns();
	c->on_since_ns = c->t_start_ns = now_ns;
	c->sampled_ns = 0;
	c->pmods = mods;
	c->pstates = states;
	c->pnmods = nmods;
	memset(c->acc, 0, sizeof(c->acc));
	c->windows = 0;
	if (c->stats_fd >= 0) /* the first window starts here, not at cost_enable */
		window_mark(c);
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

/* The entry of out[0..*n) named name, made if missing (NULL: out is full). */
static struct tt_cost_mod *cost_entry(struct tt_cost_mod *out, int *n, const char *name)
{
	for (int i = 0; i < *n; i++)
		if (!strcmp(out[i].name, name))
			return &out[i];
	if (*n == TT_COST_MAX_MODS)
		return NULL;
	memset(&out[*n], 0, sizeof(out[*n]));
	out[*n].name = name;
	return &out[(*n)++];
}

/* Whose cost a program is: the part its name starts with, else the module's. */
static const char *cost_owner(const struct tt_probe *mod, const char *prog)
{
	for (const struct tt_cost_part *p = mod->cost_parts; p && p->prefix; p++)
		if (!strncmp(prog, p->prefix, strlen(p->prefix)))
			return p->name;
	return mod->name;
}

/* One module's loaded programs appended at index *n (up to TT_COST_MAX_PROGS):
 * their runs into runs[], and with out (not NULL) their names, parts and
 * misses too (a window needs the runs only). */
static void cost_read_object(struct tt_cost_runs *runs, struct tt_cost_prog *out, int *n,
			     const struct tt_probe *mod, struct bpf_object *obj)
{
	struct bpf_program *prog;

	bpf_object__for_each_program(prog, obj) {
		struct bpf_prog_info info;
		__u32 len = sizeof(info);
		int fd = bpf_program__fd(prog);

		if (fd < 0) /* not loaded (autoload off: another hook variant, an event off) */
			continue;
		memset(&info, 0, sizeof(info));
		if (*n == TT_COST_MAX_PROGS || bpf_obj_get_info_by_fd(fd, &info, &len))
			continue;
		runs[*n] = (struct tt_cost_runs){ info.run_cnt, info.run_time_ns };
		if (out) {
			struct tt_cost_prog *p = &out[*n];

			snprintf(p->name, sizeof(p->name), "%s", bpf_program__name(prog));
			snprintf(p->section, sizeof(p->section), "%s",
				 bpf_program__section_name(prog));
			p->part = cost_owner(mod, p->name);
			p->misses = info.recursion_misses;
		}
		(*n)++;
	}
}

/* Every module's loaded programs read (cost_read_object) in module order, the
 * same order each time: a window's counters are matched by index. Returns how
 * many. */
static int cost_read_progs(struct tt_cost_runs *runs, struct tt_cost_prog *out,
			   const struct tt_probe *const *mods, void *const *states, int nmods)
{
	int n = 0;

	for (int i = 0; i < nmods; i++) {
		struct bpf_object *obj = mods[i]->object ? mods[i]->object(states[i]) : NULL;

		if (obj)
			cost_read_object(runs, out, &n, mods[i], obj);
	}
	return n;
}

/* c->progs summed into c->mods by part; each module with an object has an
 * entry, even with no program loaded. */
static void cost_sum_parts(struct tt_cost *c, const struct tt_probe *const *mods,
			   void *const *states, int nmods)
{
	c->nmods = 0;
	for (int i = 0; i < nmods; i++)
		if (mods[i]->object && mods[i]->object(states[i]))
			cost_entry(c->mods, &c->nmods, mods[i]->name);
	for (int i = 0; i < c->nprogs; i++) {
		const struct tt_cost_prog *p = &c->progs[i];
		struct tt_cost_mod *m = cost_entry(c->mods, &c->nmods, p->part);

		if (!m)
			continue;
		m->run_cnt += p->run_cnt;
		m->run_time_ns += p->run_time_ns;
		m->misses += p->misses;
		m->nprogs++;
	}
}

void cost_collect(struct tt_cost *c, const struct tt_probe *const *mods, void *const *states,
		  int nmods, uint64_t traced_wall_ns)
{
	uint64_t now_cpu = loader_cpu_ns();
	struct tt_cost_runs runs[TT_COST_MAX_PROGS];

	c->startup_cpu_ns = diff(c->cpu_loop_ns, c->cpu_start_ns);
	c->loader_cpu_ns = diff(c->cpu_end_ns, c->cpu_loop_ns);
	c->finish_cpu_ns = diff(now_cpu, c->cpu_end_ns);
	c->traced_wall_ns = traced_wall_ns;
	c->ncpus = sysconf(_SC_NPROCESSORS_ONLN);
	c->bpf_measured_ns = c->bpf_total_runs = 0;
	c->bpf_sampled_ns = c->sampled_ns;
	if (c->stats_fd >= 0 && c->t_end_ns > c->on_since_ns) /* a window still open */
		c->bpf_sampled_ns += c->t_end_ns - c->on_since_ns;
	c->nprogs = cost_read_progs(runs, c->progs, mods, states, nmods); /* names, misses */
	if (c->pmods) { /* inside the windows only */
		memcpy(runs, c->acc, sizeof(runs));
		if (c->stats_fd >= 0)
			window_add(c, runs);
	}
	for (int i = 0; i < c->nprogs; i++) {
		c->progs[i].run_cnt = runs[i].run_cnt;
		c->progs[i].run_time_ns = runs[i].run_time_ns;
	}
	cost_sum_parts(c, mods, states, nmods);
	for (int i = 0; i < c->nmods; i++) {
		struct tt_cost_mod *m = &c->mods[i];

		c->bpf_measured_ns += m->run_time_ns;
		c->bpf_total_runs += m->run_cnt;
	}
	c->bpf_total_ns = c->bpf_measured_ns;
	if (cost_scaled(c))
		c->bpf_total_ns = (uint64_t)((double)c->bpf_measured_ns * (double)traced_wall_ns /
					     (double)c->bpf_sampled_ns);
}

bool cost_scaled(const struct tt_cost *c)
{
	return c->mode == TT_BPF_STATS_SAMPLED && !c->others_on && c->bpf_sampled_ns &&
	       c->bpf_sampled_ns < c->traced_wall_ns;
}

void cost_disable(struct tt_cost *c)
{
	if (c->stats_fd >= 0)
		close(c->stats_fd);
	c->stats_fd = -1;
}

double cost_cpu_share(const struct tt_cost *c)
{
	if (c->stats_errno || c->mode == TT_BPF_STATS_OFF || !c->traced_wall_ns || c->ncpus <= 0)
		return -1;
	return (double)(c->bpf_total_ns + c->loader_cpu_ns) /
	       ((double)c->traced_wall_ns * (double)c->ncpus);
}

/* "run_cnt": .., "run_time_ns": .., "missed": .., "ns_per_run": ..} */
static void write_runs(FILE *f, uint64_t run_cnt, uint64_t run_time_ns, uint64_t misses)
{
	fprintf(f, "\"run_cnt\": %llu, \"run_time_ns\": %llu, \"missed\": %llu, \"ns_per_run\": ",
		(unsigned long long)run_cnt, (unsigned long long)run_time_ns,
		(unsigned long long)misses);
	if (run_cnt)
		fprintf(f, "%.1f}", (double)run_time_ns / (double)run_cnt);
	else
		fputs("null}", f);
}

static void write_bpf(FILE *f, const struct tt_cost *c)
{
	fputs("{", f);
	for (int i = 0; i < c->nmods; i++) {
		const struct tt_cost_mod *m = &c->mods[i];

		fputs(i ? ", " : "", f);
		json_write_string(f, m->name);
		fputs(": {", f);
		write_runs(f, m->run_cnt, m->run_time_ns, m->misses);
	}
	fputs("}", f);
}

static void write_programs(FILE *f, const struct tt_cost *c)
{
	fputs("[", f);
	for (int i = 0; i < c->nprogs; i++) {
		const struct tt_cost_prog *p = &c->progs[i];

		fputs(i ? ", {\"name\": " : "{\"name\": ", f);
		json_write_string(f, p->name);
		fputs(", \"section\": ", f);
		json_write_string(f, p->section);
		fputs(", \"part\": ", f);
		json_write_string(f, p->part);
		fputs(", ", f);
		write_runs(f, p->run_cnt, p->run_time_ns, p->misses);
	}
	fputs("]", f);
}

/* The loader's peak resident memory (getrusage), KiB; -1 if unknown. */
static long loader_max_rss_kb(void)
{
	struct rusage ru;

	return getrusage(RUSAGE_SELF, &ru) ? -1 : ru.ru_maxrss;
}

void cost_write_json(FILE *f, const struct tt_cost *c)
{
	double share = cost_cpu_share(c);

	fputs("{\"bpf_stats\": ", f);
	json_write_string(f, cost_mode_name(c->mode));
	fputs(", \"bpf\": ", f);
	if (c->stats_errno) {
		fputs("null, \"bpf_total_ns\": null, \"bpf_stats_error\": ", f);
		json_write_string(f, strerror(c->stats_errno));
	} else if (c->mode == TT_BPF_STATS_OFF) {
		fputs("null, \"bpf_total_ns\": null", f);
	} else {
		write_bpf(f, c);
		fputs(", \"programs\": ", f);
		write_programs(f, c);
		fprintf(f, ", \"bpf_total_ns\": %llu, \"bpf_measured_ns\": %llu, "
			"\"bpf_sampled_ns\": %llu, \"bpf_windows\": %u, \"bpf_stats_shared\": %s",
			(unsigned long long)c->bpf_total_ns, (unsigned long long)c->bpf_measured_ns,
			(unsigned long long)c->bpf_sampled_ns, c->windows,
			c->others_on ? "true" : "false");
	}
	fprintf(f, ", \"loader_cpu_ns\": %llu, \"startup_cpu_ns\": %llu, \"finish_cpu_ns\": %llu, "
		"\"loader_max_rss_kb\": %ld, \"traced_wall_ns\": %llu, \"ncpus\": %ld, "
		"\"cpu_share_of_machine\": ",
		(unsigned long long)c->loader_cpu_ns, (unsigned long long)c->startup_cpu_ns,
		(unsigned long long)c->finish_cpu_ns, loader_max_rss_kb(),
		(unsigned long long)c->traced_wall_ns, c->ncpus);
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
	else if (c->mode == TT_BPF_STATS_OFF)
		fputs("BPF unknown (--bpf-stats off)", f);
	else if (c->bpf_total_runs && cost_scaled(c))
		fprintf(f, "BPF %.1f ms (%.2f us/event; sampled %.0f%% of the time)",
			c->bpf_total_ns / 1e6, c->bpf_measured_ns / 1e3 / (double)c->bpf_total_runs,
			100.0 * (double)c->bpf_sampled_ns / (double)c->traced_wall_ns);
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
