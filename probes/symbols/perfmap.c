// SPDX-License-Identifier: MIT
/*
 * perfmap: names for JIT code from the runtime's perf map, /tmp/perf-PID.map,
 * the file perf, bcc and bpftrace read: one "START SIZE name" line (hex) per
 * compiled function, appended as the JIT compiles them (node --perf-basic-prof,
 * java's jcmd PID Compiler.perfmap or -XX:+DumpPerfMapAtExit, python -X perf).
 *
 * The file is read incrementally, what was appended since the last read
 * (complete lines only): when the symbolizer refreshes (syms_refresh, as the
 * loader does every few seconds) and when a lookup misses. Code can be moved
 * or freed and its range reused: among the entries covering an address the
 * last written wins, as in perf.
 */
#include "symbols/perfmap.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <grow.h>

struct jit_sym {
	uint64_t start, end;
	uint64_t seq;   /* entries read before it: later wins */
	size_t name;    /* offset into strs */
};

struct perfmap {
	char path[4096];
	char module[64];      /* "perf-PID.map", as frames name it */
	off_t parsed;         /* bytes read so far (complete lines) */
	struct jit_sym *syms;
	size_t n, cap;
	bool sorted;
	char *strs;
	size_t slen, scap;
};

#define BACK_SCAN 64 /* entries before an address looked at for a later overlap */

/* The pid as the process itself sees it (its namespace's: the last NSpid). */
static int ns_pid(int pid)
{
	char fn[64], line[256];
	int ns = pid;
	FILE *f;

	snprintf(fn, sizeof(fn), "/proc/%d/status", pid);
	f = fopen(fn, "re");
	if (!f)
		return pid;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "NSpid:", 6))
			continue;
		for (char *tok = strtok(line + 6, " \t\n"); tok; tok = strtok(NULL, " \t\n"))
			ns = atoi(tok);
		break;
	}
	fclose(f);
	return ns;
}

/* Its /tmp as the process sees it: ours when it shares our root, else through
 * /proc/PID/root (a container). */
static void map_path(int pid, char *path, size_t len)
{
	char root[64];
	struct stat a, b;
	int ns = ns_pid(pid);

	snprintf(root, sizeof(root), "/proc/%d/root", pid);
	if (stat(root, &a) || stat("/", &b) || (a.st_dev == b.st_dev && a.st_ino == b.st_ino))
		snprintf(path, len, "/tmp/perf-%d.map", ns);
	else
		snprintf(path, len, "%s/tmp/perf-%d.map", root, ns);
}

struct perfmap *perfmap_new(int pid)
{
	struct perfmap *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	map_path(pid, m->path, sizeof(m->path));
	snprintf(m->module, sizeof(m->module), "perf-%d.map", pid);
	return m;
}

static int add_line(struct perfmap *m, const char *line)
{
	unsigned long long start, size;
	int pos = 0;
	long at;

	if (sscanf(line, "%llx %llx %n", &start, &size, &pos) < 2 || !pos || !line[pos])
		return 0; /* not an entry: skipped */
	if (TT_GROW(m->syms, m->n, m->cap, 1024))
		return -ENOMEM;
	at = tt_pool_add(&m->strs, &m->slen, &m->scap, line + pos, strcspn(line + pos, "\n"));
	if (at < 0 || tt_pool_add(&m->strs, &m->slen, &m->scap, "", 1) < 0)
		return -ENOMEM;
	m->syms[m->n] = (struct jit_sym){ start, start + (size ? size : 1), m->n, (size_t)at };
	m->n++;
	m->sorted = false;
	return 0;
}

/* Read what was appended since the last read; complete lines only. */
int perfmap_refresh(struct perfmap *m)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	struct stat st;
	FILE *f;
	int err = 0;

	if (stat(m->path, &st) || st.st_size <= m->parsed)
		return 0;
	f = fopen(m->path, "re");
	if (!f)
		return -errno;
	if (fseeko(f, m->parsed, SEEK_SET) == 0) {
		while (!err && (n = getline(&line, &cap, f)) > 0) {
			if (line[n - 1] != '\n')
				break; /* still being written: next time */
			m->parsed += (off_t)n;
			err = add_line(m, line);
		}
	}
	free(line);
	fclose(f);
	return err;
}

static int by_start(const void *a, const void *b)
{
	const struct jit_sym *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start ? 1 : (x->seq > y->seq) - (x->seq < y->seq);
}

/* The latest-written entry covering addr, or NULL. */
static const struct jit_sym *find(struct perfmap *m, uint64_t addr)
{
	const struct jit_sym *best = NULL;
	size_t lo = 0, hi = m->n;

	if (!m->n)
		return NULL; /* no map, or nothing in it yet */
	if (!m->sorted) {
		qsort(m->syms, m->n, sizeof(*m->syms), by_start);
		m->sorted = true;
	}
	while (lo < hi) { /* first entry starting after addr */
		size_t mid = lo + (hi - lo) / 2;

		if (m->syms[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo, k = 0; i-- > 0 && k < BACK_SCAN; k++)
		if (addr < m->syms[i].end && (!best || m->syms[i].seq > best->seq))
			best = &m->syms[i];
	return best;
}

int perfmap_lookup(struct perfmap *m, uint64_t addr, char *buf, size_t len)
{
	const struct jit_sym *s = find(m, addr);

	if (!s) { /* compiled since the last read? */
		if (perfmap_refresh(m) || !(s = find(m, addr)))
			return -ENOENT;
	}
	snprintf(buf, len, "%s+0x%" PRIx64 " (%s)", m->strs + s->name, addr - s->start, m->module);
	return 0;
}

void perfmap_free(struct perfmap *m)
{
	if (!m)
		return;
	free(m->syms);
	free(m->strs);
	free(m);
}
