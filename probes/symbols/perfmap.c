// SPDX-License-Identifier: MIT
/*
 * perfmap: names for JIT code from the runtime's perf map, /tmp/perf-PID.map,
 * the file perf, bcc and bpftrace read: one "START SIZE name" line (hex) per
 * compiled function, appended as the JIT compiles them (node --perf-basic-prof,
 * java's jcmd PID Compiler.perfmap or -XX:+DumpPerfMapAtExit, python -X perf).
 *
 * Also the runtime's jit-PID.dump (perf's jitdump format: node --perf-prof,
 * the JVMTI agent of perf, .NET), found where perf finds it: the runtime maps
 * the file into itself as a marker, so it is in /proc/PID/maps. Its code-load
 * records name code, its code-move records move it.
 *
 * Both files are read incrementally, what was appended since the last read
 * (complete lines and records only): when the symbolizer refreshes
 * (syms_refresh, as the loader does every few seconds) and when a lookup
 * misses. Code can be moved or freed and its range reused: among the entries
 * covering an address the last written wins, as in perf.
 */
#include "symbols/perfmap.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <grow.h>
#include <tt_clock.h>
#include "symbols/jitdump.h"

/* Where an entry was read. */
enum jit_src { SRC_MAP = 0, SRC_DUMP, SRC_N };

struct jit_sym {
	uint64_t start, end;
	uint64_t seq;   /* entries read before it: later wins */
	size_t name;    /* offset into strs */
	uint64_t index; /* jitdump: the code's index (a move names it); perf map: 0 */
	int src;        /* enum jit_src */
};

#define JITDUMP_MAX_RECORD (1u << 24) /* a record larger is not one: stop reading */
#define DUMP_LOOK_NS 1000000000ull    /* /proc/PID/maps scanned for the dump at most this often */

struct perfmap {
	int pid;              /* as we see it */
	int ns_pid;           /* as it sees itself */
	char root[64];        /* "/proc/PID/root" when it has another root, else "" */
	char path[4096];
	char module[SRC_N][64]; /* "perf-PID.map", "jit-PID.dump": as frames name them */
	off_t parsed;         /* bytes read so far (complete lines) */
	char dump[4096];      /* its jitdump, once found ("" before) */
	off_t dump_parsed;    /* bytes of it read (header, complete records) */
	bool dump_bad;        /* not a jitdump we read: left alone */
	uint64_t dump_look_ns; /* when /proc/PID/maps was last scanned for it */
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

/* Its files as the process sees them: through /proc/PID/root when it has
 * another root (a container), else ours; its /tmp/perf-NSPID.map. */
static void map_path(struct perfmap *m)
{
	struct stat a, b;

	snprintf(m->root, sizeof(m->root), "/proc/%d/root", m->pid);
	if (stat(m->root, &a) || stat("/", &b) || (a.st_dev == b.st_dev && a.st_ino == b.st_ino))
		m->root[0] = '\0';
	snprintf(m->path, sizeof(m->path), "%s/tmp/perf-%d.map", m->root, m->ns_pid);
}

struct perfmap *perfmap_new(int pid)
{
	struct perfmap *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->pid = pid;
	m->ns_pid = ns_pid(pid);
	map_path(m);
	snprintf(m->module[SRC_MAP], sizeof(m->module[0]), "perf-%d.map", pid);
	snprintf(m->module[SRC_DUMP], sizeof(m->module[0]), "jit-%d.dump", pid);
	return m;
}

static int add_sym(struct perfmap *m, int src, uint64_t start, uint64_t size, const char *name,
		   size_t nlen, uint64_t index)
{
	long at;

	if (TT_GROW(m->syms, m->n, m->cap, 1024))
		return -ENOMEM;
	at = tt_pool_add(&m->strs, &m->slen, &m->scap, name, nlen);
	if (at < 0 || tt_pool_add(&m->strs, &m->slen, &m->scap, "", 1) < 0)
		return -ENOMEM;
	m->syms[m->n] = (struct jit_sym){ start, start + (size ? size : 1), m->n, (size_t)at,
					  index, src };
	m->n++;
	m->sorted = false;
	return 0;
}

static int add_line(struct perfmap *m, const char *line)
{
	unsigned long long start, size;
	int pos = 0;

	if (sscanf(line, "%llx %llx %n", &start, &size, &pos) < 2 || !pos || !line[pos])
		return 0; /* not an entry: skipped */
	return add_sym(m, SRC_MAP, start, size, line + pos, strcspn(line + pos, "\n"), 0);
}

/* ---- jit-PID.dump ---------------------------------------------------------- */

/* The jitdump the process maps (the marker perf looks for), into m->dump. */
static void dump_find(struct perfmap *m)
{
	char fn[64], line[4352], want[32];
	FILE *f;

	snprintf(fn, sizeof(fn), "/proc/%d/maps", m->pid);
	snprintf(want, sizeof(want), "/jit-%d.dump", m->ns_pid);
	f = fopen(fn, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *path = strchr(line, '/');
		size_t n;

		if (!path)
			continue;
		path[strcspn(path, "\n")] = '\0';
		n = strlen(path);
		if (n > strlen(want) && !strcmp(path + n - strlen(want), want)) {
			snprintf(m->dump, sizeof(m->dump), "%s%s", m->root, path);
			break;
		}
	}
	fclose(f);
}

/* The entry that last named the code of this index, or NULL. */
static const struct jit_sym *by_index(const struct perfmap *m, uint64_t index)
{
	for (size_t i = m->n; i-- > 0;)
		if (m->syms[i].src == SRC_DUMP && m->syms[i].index == index)
			return &m->syms[i];
	return NULL;
}

/* One record of the dump (rec: its total_size bytes). */
static int dump_record(struct perfmap *m, const uint8_t *rec, uint32_t size)
{
	const struct jitdump_prefix *p = (const void *)rec;

	if (p->id == JIT_CODE_LOAD && size > sizeof(struct jitdump_load)) {
		struct jitdump_load l;
		const char *name = (const char *)rec + sizeof(l);

		memcpy(&l, rec, sizeof(l));
		return add_sym(m, SRC_DUMP, l.code_addr, l.code_size, name,
			       strnlen(name, size - sizeof(l)), l.code_index);
	}
	if (p->id == JIT_CODE_MOVE && size >= sizeof(struct jitdump_move)) {
		struct jitdump_move mv;
		const struct jit_sym *s;
		char name[512];

		memcpy(&mv, rec, sizeof(mv));
		if (!(s = by_index(m, mv.code_index)))
			return 0;
		snprintf(name, sizeof(name), "%s", m->strs + s->name);
		return add_sym(m, SRC_DUMP, mv.new_code_addr, mv.code_size, name, strlen(name),
			       mv.code_index);
	}
	return 0; /* debug and unwinding info, close: not names */
}

/* Read the dump's records appended since the last read; complete ones only.
 * Until the dump is found, /proc/PID/maps is scanned for it: at each refresh
 * (look), on a lookup's miss at most once a DUMP_LOOK_NS. */
static int dump_refresh(struct perfmap *m, bool look)
{
	struct jitdump_header h;
	struct jitdump_prefix p;
	uint8_t *rec = NULL;
	int err = 0;
	FILE *f;

	if (!m->dump[0] && !m->dump_bad && (look || tt_now_ns() - m->dump_look_ns >= DUMP_LOOK_NS)) {
		m->dump_look_ns = tt_now_ns();
		dump_find(m);
	}
	if (!m->dump[0] || m->dump_bad || !(f = fopen(m->dump, "re")))
		return 0;
	if (!m->dump_parsed) {
		if (fread(&h, sizeof(h), 1, f) != 1)
			goto out; /* not written yet */
		if (h.magic != JITDUMP_MAGIC || h.total_size < sizeof(h)) {
			m->dump_bad = true; /* another byte order, or not a jitdump */
			goto out;
		}
		m->dump_parsed = h.total_size;
	}
	while (!err && fseeko(f, m->dump_parsed, SEEK_SET) == 0 && fread(&p, sizeof(p), 1, f) == 1) {
		uint8_t *grown;

		if (p.total_size < sizeof(p) || p.total_size > JITDUMP_MAX_RECORD) {
			m->dump_bad = true;
			break;
		}
		grown = realloc(rec, p.total_size);
		if (!grown) {
			err = -ENOMEM;
			break;
		}
		rec = grown;
		memcpy(rec, &p, sizeof(p));
		if (fread(rec + sizeof(p), p.total_size - sizeof(p), 1, f) != 1)
			break; /* still being written: next time */
		m->dump_parsed += p.total_size;
		err = dump_record(m, rec, p.total_size);
	}
out:
	free(rec);
	fclose(f);
	return err;
}

/* The perf map's lines appended since the last read; complete lines only. */
static int map_refresh(struct perfmap *m)
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

static int refresh(struct perfmap *m, bool look)
{
	int err = map_refresh(m);

	return dump_refresh(m, look) ?: err;
}

int perfmap_refresh(struct perfmap *m)
{
	return refresh(m, true);
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
		if (refresh(m, false) || !(s = find(m, addr)))
			return -ENOENT;
	}
	snprintf(buf, len, "%s+0x%" PRIx64 " (%s)", m->strs + s->name, addr - s->start,
		 m->module[s->src]);
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
