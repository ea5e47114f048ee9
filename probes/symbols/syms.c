// SPDX-License-Identifier: MIT
/*
 * Symbols from /proc/PID/maps, ELF files on disk (libelf) and /proc/kallsyms.
 *
 * User addresses: addr -> mapping (sorted snapshot, newest wins on overlap)
 * -> file offset (addr - start + pgoff) -> ELF vaddr through the PT_LOAD
 * program header containing that offset -> symbol (binary search). That
 * chain is right for PIE executables, shared libraries and ET_EXEC alike,
 * because it never assumes a load bias. ELF files are read lazily, once per
 * path, .symtab if present else .dynsym (stripped libraries).
 */
#include "symbols/syms.h"
#include "symbols/debuginfo.h"
#include "symbols/perfmap.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <grow.h>

struct sym {
	uint64_t addr;
	uint64_t size;
	const char *name; /* into elf_file.strs */
	char *shown;      /* demangled (syms_demangle), made when first resolved */
	bool tried;       /* shown made, or the name is not mangled */
	uint8_t rank;     /* among aliases, lower is shown: global before local, then
			   * fewer leading underscores (pthread_mutex_lock, not its
			   * ___pthread_mutex_lock of libc's debug symbols) */
};

struct seg {
	uint64_t vaddr, off, filesz, memsz;
};

struct elf_file {
	char *path;      /* as the process names it */
	int fd;          /* -1, or the file opened while the process lived: a container's
			  * (through /proc/PID/root) or one deleted or replaced since it was
			  * mapped (/proc/PID/map_files); read as /proc/self/fd/FD */
	uint64_t ino;    /* the inode mapped, when read by its path: replaced later, the
			  * mapped one is read through map_files (pid, one mapping's range) */
	int pid;
	uint64_t map_start, map_end;
	bool loaded;     /* tried (even if it failed) */
	struct sym *syms;
	size_t nsyms;
	char *strs;      /* concatenated names */
	bool objs_loaded; /* its data objects read (syms_resolve_data asked) */
	struct sym *objs; /* data objects (global variables), sorted like syms */
	size_t nobjs;
	char *obj_strs;
	struct seg *segs;
	size_t nsegs;
	bool lines_tried;              /* its DWARF looked for */
	struct debuginfo_lines *lines; /* NULL: none (no inline frames); lines_shared's */
};

struct mapping {
	uint64_t start, end, pgoff;
	struct elf_file *file;
};

struct tt_syms {
	int pid;
	bool own_root;        /* the process sees the same / as tailtrace */
	struct perfmap *jit;  /* its runtime's perf map: code no file mapping covers */
	uint64_t uprobes_start, uprobes_end; /* the kernel's [uprobes] page: the uretprobe
					      * trampoline a pending probe returns through */
	struct mapping *maps; /* sorted by start, non-overlapping */
	size_t nmaps, cap;
	struct elf_file **files;
	size_t nfiles;
};

/* ---- ELF reading -------------------------------------------------------- */

static int elf_open_path(const char *path, int *fd, Elf **elf)
{
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	*fd = open(path, O_RDONLY | O_CLOEXEC);
	if (*fd < 0)
		return -errno;
	*elf = elf_begin(*fd, ELF_C_READ, NULL);
	if (!*elf || elf_kind(*elf) != ELF_K_ELF) {
		if (*elf)
			elf_end(*elf);
		close(*fd);
		return -ENOEXEC;
	}
	return 0;
}

static void elf_close_path(int fd, Elf *elf)
{
	elf_end(elf);
	close(fd);
}

static Elf_Scn *elf_find_symtab(Elf *elf, Elf64_Word type, GElf_Shdr *sh)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(elf, scn))) {
		if (gelf_getshdr(scn, sh) && sh->sh_type == type && sh->sh_entsize)
			return scn;
	}
	return NULL;
}

/* Iterate the function symbols of .symtab, else .dynsym. hidden: a
 * non-default symbol version (pthread_cond_wait@GLIBC_2.2.5, the compat
 * one, next to the default pthread_cond_wait@@GLIBC_2.3.2).
 * fn returns non-zero to stop; that value is returned. */
typedef int (*sym_fn)(const char *name, const GElf_Sym *sym, bool hidden, void *arg);

static Elf_Data *elf_versym(Elf *elf)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while ((scn = elf_nextscn(elf, scn)))
		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_GNU_versym)
			return elf_getdata(scn, NULL);
	return NULL;
}

static int elf_for_each_sym(Elf *elf, bool objects, sym_fn fn, void *arg)
{
	static const Elf64_Word types[] = { SHT_SYMTAB, SHT_DYNSYM };
	size_t shstrndx;

	if (elf_getshdrstrndx(elf, &shstrndx))
		return -EINVAL;
	for (int t = 0; t < 2; t++) {
		GElf_Shdr sh;
		Elf_Scn *scn = elf_find_symtab(elf, types[t], &sh);
		Elf_Data *data = scn ? elf_getdata(scn, NULL) : NULL;
		Elf_Data *ver = types[t] == SHT_DYNSYM ? elf_versym(elf) : NULL;
		size_t n = data ? sh.sh_size / sh.sh_entsize : 0;

		for (size_t i = 0; i < n; i++) {
			GElf_Sym s;
			const char *name;

			if (!gelf_getsym(data, (int)i, &s))
				continue;
			if (!debuginfo_sym_wanted(&s, objects))
				continue;
			name = elf_strptr(elf, sh.sh_link, s.st_name);
			if (!name || !*name)
				continue;
			GElf_Versym vs = 0;

			if (ver)
				gelf_getversym(ver, (int)i, &vs);
			int r = fn(name, &s, (vs & 0x8000) != 0, arg);
			if (r)
				return r;
		}
		if (n)
			return 0; /* .symtab found: .dynsym is a subset */
	}
	return 0;
}

static int elf_for_each_func(Elf *elf, sym_fn fn, void *arg)
{
	return elf_for_each_sym(elf, false, fn, arg);
}

static int elf_read_segs(Elf *elf, struct seg **out, size_t *nout)
{
	size_t phnum;

	if (elf_getphdrnum(elf, &phnum))
		return -EINVAL;
	*out = calloc(phnum ? phnum : 1, sizeof(**out));
	if (!*out)
		return -ENOMEM;
	*nout = 0;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		(*out)[(*nout)++] = (struct seg){ ph.p_vaddr, ph.p_offset, ph.p_filesz, ph.p_memsz };
	}
	return 0;
}

struct collect {
	struct sym *syms;
	size_t n, cap;
	char *strs;
	size_t slen, scap;
};

static uint8_t alias_rank(const char *name, const GElf_Sym *s)
{
	uint8_t underscores = 0;

	while (name[underscores] == '_' && underscores < 3)
		underscores++;
	return (uint8_t)((GELF_ST_BIND(s->st_info) == STB_LOCAL) * 4 + underscores);
}

static int collect_sym(const char *name, const GElf_Sym *s, bool hidden, void *arg)
{
	struct collect *c = arg;
	long at;

	if (TT_GROW(c->syms, c->n, c->cap, 1024))
		return -ENOMEM;
	at = tt_pool_add(&c->strs, &c->slen, &c->scap, name, strlen(name) + 1);
	if (at < 0)
		return (int)at;
	/* name stored as an offset until strs stops moving */
	c->syms[c->n++] = (struct sym){ s->st_value, s->st_size, (const char *)(uintptr_t)at,
					NULL, false, alias_rank(name, s) };
	return 0;
}

static int sym_cmp(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (!x->size != !y->size)
		return x->size ? -1 : 1; /* sized first */
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return x->size > y->size ? -1 : x->size < y->size;
}

/* A debug file's .symtab spells versions into names: "pthread_mutex_lock@@GLIBC_2.2.5"
 * (the default), "__pthread_mutex_lock@GLIBC_2.2.5" (an old one, shown last). */
static int collect_debug_sym(const char *name, uint64_t vaddr, uint64_t size, bool global,
			     void *arg)
{
	GElf_Sym s = { .st_value = vaddr, .st_size = size,
		       .st_info = GELF_ST_INFO(global ? STB_GLOBAL : STB_LOCAL, STT_FUNC) };
	const char *at = strchr(name, '@');
	char bare[512];

	if (!at)
		return collect_sym(name, &s, false, arg);
	if (at[1] != '@')
		s.st_info = GELF_ST_INFO(STB_LOCAL, STT_FUNC); /* after the default's aliases */
	snprintf(bare, sizeof(bare), "%.*s", (int)(at - name), name);
	return collect_sym(bare, &s, at[1] != '@', arg);
}

/* Where the file is read from: its path, or the descriptor kept for it. */
static const char *file_open_path(const struct elf_file *f, char *buf, size_t len)
{
	if (f->fd == -2)
		return "/nonexistent"; /* replaced, its process gone (file_still_mapped_one) */
	if (f->fd < 0)
		return f->path;
	snprintf(buf, len, "/proc/self/fd/%d", f->fd);
	return buf;
}

/* Is the file at its path still the one the process mapped? If it was replaced
 * since (an upgrade while traced), the mapped one is read through map_files
 * while the process lives; once it has exited, false (with a note): its frames
 * stay unnamed rather than named from another build. */
static bool file_still_mapped_one(struct elf_file *f)
{
	char via[96];
	struct stat st;

	if (f->fd >= 0 || !f->ino || (!stat(f->path, &st) && st.st_ino == f->ino))
		return true;
	snprintf(via, sizeof(via), "/proc/%d/map_files/%llx-%llx", f->pid,
		 (unsigned long long)f->map_start, (unsigned long long)f->map_end);
	f->fd = open(via, O_RDONLY | O_CLOEXEC);
	if (f->fd >= 0)
		return true;
	fprintf(stderr, "tailtrace: %s was replaced while traced and pid %d has exited: its "
		"frames are left unnamed (not named from the new file)\n", f->path, f->pid);
	f->ino = 0; /* said once */
	f->fd = -2;
	return false;
}

/* The file's function symbols (objects false) or data objects, sorted, into
 * *out (n, strs): from its .symtab, else its debug file (debuginfo.h), else its
 * .dynsym. segs: its PT_LOAD segments too, when not NULL. */
static void file_read_syms(struct elf_file *f, bool objects, struct sym **out, size_t *n,
			   char **strs, struct seg **segs, size_t *nsegs)
{
	struct collect c = { 0 };
	char fdpath[64];
	const char *path;
	GElf_Shdr sh;
	Elf *elf;
	int fd, err;

	if (!file_still_mapped_one(f))
		return;
	path = file_open_path(f, fdpath, sizeof(fdpath));
	if (elf_open_path(path, &fd, &elf))
		return;
	/* a stripped file: the symbols of its debug file, where the distribution
	 * keeps them (debuginfo.h), else its .dynsym */
	err = elf_find_symtab(elf, SHT_SYMTAB, &sh)
		      ? -ENOENT
		      : debuginfo_each_sym(path, objects, collect_debug_sym, &c);
	if (err && c.n) { /* failed part way: start over from the file alone */
		free(c.syms);
		free(c.strs);
		c = (struct collect){ 0 };
	}
	if ((!segs || elf_read_segs(elf, segs, nsegs) == 0) &&
	    (!err || elf_for_each_sym(elf, objects, collect_sym, &c) == 0)) {
		for (size_t i = 0; i < c.n; i++)
			c.syms[i].name = c.strs + (uintptr_t)c.syms[i].name;
		if (c.n) /* a stripped file may hold no function at all */
			qsort(c.syms, c.n, sizeof(*c.syms), sym_cmp);
		*out = c.syms, *n = c.n, *strs = c.strs;
	} else {
		free(c.syms);
		free(c.strs);
	}
	elf_close_path(fd, elf);
}

static void file_load(struct elf_file *f)
{
	f->loaded = true;
	file_read_syms(f, false, &f->syms, &f->nsyms, &f->strs, &f->segs, &f->nsegs);
}

/* File offset -> ELF vaddr through the PT_LOAD segment holding it. */
static bool file_off_to_vaddr(const struct elf_file *f, uint64_t off, uint64_t *vaddr)
{
	for (size_t i = 0; i < f->nsegs; i++) {
		const struct seg *s = &f->segs[i];

		if (off >= s->off && off < s->off + s->filesz) {
			*vaddr = off - s->off + s->vaddr;
			return true;
		}
	}
	return false;
}

static const struct sym *file_lookup_in(const struct sym *syms, size_t n, uint64_t vaddr)
{
	size_t lo = 0, hi = n;

	while (lo < hi) { /* first symbol with addr > vaddr */
		size_t mid = lo + (hi - lo) / 2;

		if (syms[mid].addr <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	/* among aliases at the same address the sized one sorts first */
	const struct sym *s = &syms[lo - 1];

	while (s > syms && s[-1].addr == s->addr)
		s--;
	if (s->size && vaddr >= s->addr + s->size)
		return NULL;
	return s;
}

static const struct sym *file_lookup(const struct elf_file *f, uint64_t vaddr)
{
	return file_lookup_in(f->syms, f->nsyms, vaddr);
}

/* ---- maps snapshots ----------------------------------------------------- */

static struct elf_file *syms_file(struct tt_syms *s, const char *path)
{
	struct elf_file **p, *f;

	for (size_t i = 0; i < s->nfiles; i++)
		if (!strcmp(s->files[i]->path, path))
			return s->files[i];
	p = realloc(s->files, (s->nfiles + 1) * sizeof(*p));
	if (!p)
		return NULL;
	s->files = p;
	f = calloc(1, sizeof(*f));
	if (!f || !(f->path = strdup(path))) {
		free(f);
		return NULL;
	}
	f->fd = -1;
	s->files[s->nfiles++] = f;
	return f;
}

/* Insert m, dropping older mappings it overlaps (an exec or re-mmap). */
static int maps_insert(struct tt_syms *s, const struct mapping *m)
{
	size_t i = 0, j;

	while (i < s->nmaps && s->maps[i].end <= m->start)
		i++;
	if (i < s->nmaps && s->maps[i].start == m->start && s->maps[i].end == m->end &&
	    s->maps[i].pgoff == m->pgoff && s->maps[i].file == m->file)
		return 0; /* unchanged */
	for (j = i; j < s->nmaps && s->maps[j].start < m->end; j++)
		;
	if (j == i && TT_GROW(s->maps, s->nmaps, s->cap, 64)) /* pure insertion needs room */
		return -ENOMEM;
	/* replace [i, j) by m */
	memmove(&s->maps[i + 1], &s->maps[j], (s->nmaps - j) * sizeof(*m));
	s->maps[i] = *m;
	s->nmaps = s->nmaps - (j - i) + 1;
	return 0;
}

/* One executable file mapping of the maps: m, its path (without the maps'
 * " (deleted)", which sets *deleted) and inode. */
static int maps_parse_line(const char *line, struct mapping *m, char *path, size_t len,
			   unsigned long long *inode, bool *deleted)
{
	char perms[8];
	unsigned long long start, end, pgoff;
	size_t n;
	int pos = 0;

	if (sscanf(line, "%llx-%llx %7s %llx %*x:%*x %llu %n", &start, &end, perms,
		   &pgoff, inode, &pos) < 5 || !pos)
		return -EINVAL;
	if (perms[2] != 'x' || line[pos] != '/')
		return -ENOENT;
	snprintf(path, len, "%s", line + pos);
	path[strcspn(path, "\n")] = 0;
	n = strlen(path);
	*deleted = n > 10 && !strcmp(path + n - 10, " (deleted)");
	if (*deleted)
		path[n - 10] = 0;
	*m = (struct mapping){ start, end, pgoff, NULL };
	return 0;
}

/* The [uprobes] page, where a function with a uretprobe pending (a --span
 * probe's, or another tool's) returns first: a kernel before 6.13 leaves its
 * address in frame-pointer stacks. */
static void maps_note_uprobes(struct tt_syms *s, const char *line)
{
	unsigned long long start, end;
	int pos = 0;

	if (sscanf(line, "%llx-%llx %*s %*x %*x:%*x %*u %n", &start, &end, &pos) == 2 && pos &&
	    !strncmp(line + pos, "[uprobes]", 9)) {
		s->uprobes_start = start;
		s->uprobes_end = end;
	}
}

/* A file first mapped: if the process does not see it at its path as
 * tailtrace would (another root, or deleted or replaced since), keep it open
 * through the process's own view while it lives. */
static void file_pin(const struct tt_syms *s, struct elf_file *f, const struct mapping *m,
		     unsigned long long inode, bool deleted)
{
	char via[4096 + 64];
	struct stat st;

	if (!deleted && s->own_root && !stat(f->path, &st) && st.st_ino == inode) {
		*f = (struct elf_file){ .path = f->path, .fd = -1, .ino = inode, .pid = s->pid,
					.map_start = m->start, .map_end = m->end };
		return;
	}
	if (!deleted && !s->own_root) {
		snprintf(via, sizeof(via), "/proc/%d/root%s", s->pid, f->path);
		if (!stat(via, &st) && st.st_ino == inode) {
			f->fd = open(via, O_RDONLY | O_CLOEXEC);
			return;
		}
	}
	snprintf(via, sizeof(via), "/proc/%d/map_files/%llx-%llx", s->pid,
		 (unsigned long long)m->start, (unsigned long long)m->end);
	f->fd = open(via, O_RDONLY | O_CLOEXEC);
}

bool syms_shares_root(int pid)
{
	char path[64];
	struct stat a, b;

	snprintf(path, sizeof(path), "/proc/%d/root/", pid);
	return stat(path, &a) || stat("/", &b) || (a.st_dev == b.st_dev && a.st_ino == b.st_ino);
}

int syms_refresh(struct tt_syms *s)
{
	char fn[64], line[4096 + 128], path[4096];
	FILE *f;
	int err = 0;

	if (s->pid <= 0)
		return 0;
	if (s->jit)
		perfmap_refresh(s->jit); /* code the JIT compiled since */
	snprintf(fn, sizeof(fn), "/proc/%d/maps", s->pid);
	f = fopen(fn, "re");
	if (!f)
		return -errno; /* exited: earlier snapshots stay */
	while (!err && fgets(line, sizeof(line), f)) {
		unsigned long long inode;
		struct mapping m;
		size_t known = s->nfiles;
		bool deleted;

		if (maps_parse_line(line, &m, path, sizeof(path), &inode, &deleted)) {
			maps_note_uprobes(s, line);
			continue;
		}
		m.file = syms_file(s, path);
		if (m.file && s->nfiles > known)
			file_pin(s, m.file, &m, inode, deleted);
		err = m.file ? maps_insert(s, &m) : -ENOMEM;
	}
	fclose(f);
	return err;
}

struct tt_syms *syms_new(int pid)
{
	struct tt_syms *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->pid = pid;
	s->own_root = pid <= 0 || syms_shares_root(pid);
	if (pid > 0)
		s->jit = perfmap_new(pid);
	syms_refresh(s);
	return s;
}

static const struct mapping *maps_find(const struct tt_syms *s, uint64_t addr)
{
	size_t lo = 0, hi = s->nmaps;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->maps[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < s->nmaps && s->maps[lo].start <= addr ? &s->maps[lo] : NULL;
}

static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');

	return b ? b + 1 : path;
}

/* The symbol's name as people read it: demangled once, kept. */
static const char *sym_shown(struct sym *sym)
{
	if (!sym->tried) {
		sym->shown = syms_demangle(sym->name);
		sym->tried = true;
	}
	return sym->shown ? sym->shown : sym->name;
}

const char *syms_resolve_mangled(struct tt_syms *s, uint64_t addr, char *buf, size_t len,
				 const char **mangled)
{
	const struct mapping *m = s ? maps_find(s, addr) : NULL;
	struct sym *sym = NULL;
	uint64_t off, vaddr = 0;

	if (mangled)
		*mangled = NULL;
	if (!m && s && addr >= s->uprobes_start && addr < s->uprobes_end) {
		snprintf(buf, len, "[uretprobe trampoline] ([uprobes])");
		return buf;
	}
	if (!m) {
		if (!s || !s->jit || perfmap_lookup(s->jit, addr, buf, len))
			snprintf(buf, len, "[unknown] (0x%llx)", (unsigned long long)addr);
		return buf;
	}
	if (!m->file->loaded)
		file_load(m->file);
	off = addr - m->start + m->pgoff;
	if (file_off_to_vaddr(m->file, off, &vaddr))
		sym = (struct sym *)file_lookup(m->file, vaddr);
	if (sym) {
		snprintf(buf, len, "%s+0x%llx (%s)", sym_shown(sym),
			 (unsigned long long)(vaddr - sym->addr), base_name(m->file->path));
		if (mangled && sym->shown)
			*mangled = sym->name;
	} else
		snprintf(buf, len, "[unknown] (%s+0x%llx)", base_name(m->file->path),
			 (unsigned long long)off);
	return buf;
}

/* The file whose loaded image holds addr (its text, data or bss: the bias of
 * any of its mappings places all its segments), and addr as its vaddr. */
static struct elf_file *data_file(struct tt_syms *s, uint64_t addr, uint64_t *vaddr)
{
	for (size_t i = 0; i < s->nmaps; i++) {
		const struct mapping *m = &s->maps[i];
		uint64_t v0;

		if (!m->file->loaded)
			file_load(m->file);
		if (!file_off_to_vaddr(m->file, m->pgoff, &v0))
			continue;
		*vaddr = addr - (m->start - v0);
		for (size_t k = 0; k < m->file->nsegs; k++) {
			const struct seg *g = &m->file->segs[k];

			if (*vaddr >= g->vaddr && *vaddr < g->vaddr + g->memsz)
				return m->file;
		}
	}
	return NULL;
}

int syms_resolve_data(struct tt_syms *s, uint64_t addr, struct syms_data *out)
{
	struct elf_file *f = s ? data_file(s, addr, &out->offset) : NULL;
	const struct sym *sym;

	if (!f)
		return -ENOENT;
	if (!f->objs_loaded) {
		f->objs_loaded = true;
		file_read_syms(f, true, &f->objs, &f->nobjs, &f->obj_strs, NULL, NULL);
	}
	out->object = base_name(f->path);
	sym = file_lookup_in(f->objs, f->nobjs, out->offset);
	if (!sym || !sym->size)
		return -ENOENT;
	out->name = sym->name;
	out->offset -= sym->addr;
	out->size = sym->size;
	return 0;
}

/* Each file's DWARF, opened once for every process that maps it (by device and
 * inode): a prefork server's workers and a shell's children share their libc's
 * debug file. Kept for the loader's life. */
#define LINES_SHARED_MAX 512
static struct {
	dev_t dev;
	ino_t ino;
	struct debuginfo_lines *lines;  /* NULL: the file has none */
} lines_shared[LINES_SHARED_MAX];
static int nlines_shared;

static struct debuginfo_lines *lines_of(const char *path)
{
	struct stat st;

	if (stat(path, &st))
		return NULL;
	for (int i = 0; i < nlines_shared; i++)
		if (lines_shared[i].dev == st.st_dev && lines_shared[i].ino == st.st_ino)
			return lines_shared[i].lines;
	if (nlines_shared == LINES_SHARED_MAX)
		return NULL; /* that many files with DWARF: the rest without inline frames */
	lines_shared[nlines_shared].dev = st.st_dev;
	lines_shared[nlines_shared].ino = st.st_ino;
	lines_shared[nlines_shared].lines = debuginfo_lines_open(path);
	return lines_shared[nlines_shared++].lines;
}

int syms_inlined(struct tt_syms *s, uint64_t addr, char *out, size_t len, int max)
{
	const struct mapping *m = s ? maps_find(s, addr) : NULL;
	struct elf_file *f = m ? m->file : NULL;
	char fdpath[64], name[512];
	uint64_t vaddr = 0;
	int n;

	if (!f || max <= 0)
		return 0;
	if (!f->loaded)
		file_load(f);
	if (!f->lines_tried) {
		f->lines_tried = true;
		if (f->nsyms) /* a file read at all (not replaced, its process gone) */
			f->lines = lines_of(file_open_path(f, fdpath, sizeof(fdpath)));
	}
	if (!f->lines || !file_off_to_vaddr(f, addr - m->start + m->pgoff, &vaddr))
		return 0;
	n = debuginfo_inlined(f->lines, vaddr, out, len, max);
	for (int i = 0; i < n; i++) {
		char *row = out + (size_t)i * len, *shown = syms_demangle(row);

		/* C++ and Rust names as c++filt and rustfilt print them */
		snprintf(name, sizeof(name), "%s", shown ? shown : row);
		free(shown);
		snprintf(row, len, "%s (inlined) (%s)", name, base_name(f->path));
	}
	return n;
}

const char *syms_resolve(struct tt_syms *s, uint64_t addr, char *buf, size_t len)
{
	return syms_resolve_mangled(s, addr, buf, len, NULL);
}

void syms_free(struct tt_syms *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nfiles; i++) {
		for (size_t k = 0; k < s->files[i]->nsyms; k++)
			free(s->files[i]->syms[k].shown);
		if (s->files[i]->fd >= 0)
			close(s->files[i]->fd);
		free(s->files[i]->path);
		free(s->files[i]->syms);
		free(s->files[i]->strs);
		free(s->files[i]->objs);
		free(s->files[i]->obj_strs);
		free(s->files[i]->segs);
		free(s->files[i]);
	}
	free(s->files);
	free(s->maps);
	perfmap_free(s->jit);
	free(s);
}

/* ---- uprobe offsets and suggestions -------------------------------------- */

struct find_arg {
	const char *name;
	uint64_t vaddr, size;
	bool found;
};

/* The default version wins; a compat-only symbol is used if nothing else. */
static int find_sym(const char *name, const GElf_Sym *s, bool hidden, void *arg)
{
	struct find_arg *a = arg;

	if (strcmp(name, a->name) || (hidden && a->found))
		return 0;
	a->vaddr = s->st_value;
	a->size = s->st_size;
	a->found = true;
	return hidden ? 0 : 1;
}

/* Functions whose demangled name is the one wanted (syms_elf_demangled). */
struct demangled_arg {
	const char *want;
	char first[512];     /* the first match's mangled name */
	uint64_t first_vaddr;
	int n;               /* matches at distinct addresses */
	char cands[400];     /* their demangled names, for the error */
};

static int demangled_sym(const char *name, const GElf_Sym *s, bool hidden, void *arg)
{
	struct demangled_arg *a = arg;
	char *d = syms_demangle(name);
	size_t o = strlen(a->cands);

	(void)hidden;
	if (!d || !syms_demangled_matches(d, a->want) || (a->n && s->st_value == a->first_vaddr)) {
		free(d); /* not it, or an alias of the first (a C1/C2 constructor pair) */
		return 0;
	}
	if (!a->n++) {
		snprintf(a->first, sizeof(a->first), "%s", name);
		a->first_vaddr = s->st_value;
	}
	if (o + strlen(d) + 8 < sizeof(a->cands))
		snprintf(a->cands + o, sizeof(a->cands) - o, "%s%s", o ? "; " : "", d);
	free(d);
	return 0;
}

int syms_elf_demangled(const char *path, const char *want, char *mangled, size_t len,
		       char *cands, size_t clen)
{
	struct demangled_arg *a = calloc(1, sizeof(*a));
	Elf *elf;
	int fd, err;

	if (!a)
		return -ENOMEM;
	a->want = want;
	err = elf_open_path(path, &fd, &elf);
	if (!err) {
		err = elf_for_each_func(elf, demangled_sym, a);
		elf_close_path(fd, elf);
	}
	if (!err)
		err = !a->n ? -ENOENT : a->n > 1 ? -EEXIST : 0;
	if (!err)
		snprintf(mangled, len, "%s", a->first);
	if (cands && clen)
		snprintf(cands, clen, "%s", a->cands);
	free(a);
	return err;
}

/* ELF vaddr -> file offset through the PT_LOAD segment holding it. */
static int segs_vaddr_to_off(const struct seg *segs, size_t n, uint64_t vaddr, uint64_t *off)
{
	for (size_t i = 0; i < n; i++) {
		if (vaddr >= segs[i].vaddr && vaddr < segs[i].vaddr + segs[i].filesz) {
			*off = vaddr - segs[i].vaddr + segs[i].off;
			return 0;
		}
	}
	return -ENOENT;
}

int syms_elf_func(const char *path, const char *symbol, struct syms_func *f)
{
	struct find_arg a = { symbol, 0, 0, false };
	struct seg *segs = NULL;
	size_t nsegs = 0;
	Elf *elf;
	int fd, err;

	err = elf_open_path(path, &fd, &elf);
	if (err)
		return err;
	err = elf_for_each_func(elf, find_sym, &a);
	err = err < 0 ? err : a.found ? 0 : -ENOENT;
	if (!err)
		err = elf_read_segs(elf, &segs, &nsegs);
	if (!err) {
		f->vaddr = a.vaddr;
		f->size = a.size;
		err = segs_vaddr_to_off(segs, nsegs, a.vaddr, &f->offset);
	}
	free(segs);
	elf_close_path(fd, elf);
	return err;
}

int syms_elf_offset(const char *path, const char *symbol, uint64_t *offset)
{
	struct syms_func f;
	int err = syms_elf_func(path, symbol, &f);

	if (!err)
		*offset = f.offset;
	return err;
}

int syms_elf_func_at(const char *path, uint64_t vaddr, struct syms_func *f, char *name, size_t len)
{
	struct elf_file file = { .path = (char *)path };
	const struct sym *s;
	int err = -ENOENT;

	file_load(&file);
	s = file_lookup(&file, vaddr);
	if (s && s->size) {
		f->vaddr = s->addr;
		f->size = s->size;
		err = segs_vaddr_to_off(file.segs, file.nsegs, s->addr, &f->offset);
		if (!err && name)
			snprintf(name, len, "%s", s->name);
	}
	free(file.syms);
	free(file.strs);
	free(file.segs);
	return err;
}

int syms_elf_needed(const char *path, int (*fn)(const char *lib, void *arg), void *arg)
{
	Elf_Scn *scn = NULL;
	Elf *elf;
	int fd, r = 0, err = elf_open_path(path, &fd, &elf);

	if (err)
		return err;
	while (!r && (scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC || !sh.sh_entsize ||
		    !(d = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 0; !r && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Dyn dyn;
			const char *lib;

			if (gelf_getdyn(d, (int)i, &dyn) && dyn.d_tag == DT_NEEDED &&
			    (lib = elf_strptr(elf, sh.sh_link, dyn.d_un.d_val)))
				r = fn(lib, arg);
		}
	}
	elf_close_path(fd, elf);
	return r;
}

int syms_elf_has_symbol(const char *path, const char *name)
{
	static const Elf64_Word types[] = { SHT_SYMTAB, SHT_DYNSYM };
	Elf *elf;
	int fd, found = 0, err = elf_open_path(path, &fd, &elf);

	if (err)
		return err;
	for (int t = 0; !found && t < 2; t++) {
		GElf_Shdr sh;
		Elf_Scn *scn = elf_find_symtab(elf, types[t], &sh);
		Elf_Data *data = scn ? elf_getdata(scn, NULL) : NULL;
		size_t n = data ? sh.sh_size / sh.sh_entsize : 0;

		for (size_t i = 0; !found && i < n; i++) {
			GElf_Sym s;
			const char *sn;

			if (gelf_getsym(data, (int)i, &s) && (sn = elf_strptr(elf, sh.sh_link, s.st_name)))
				found = !strcmp(sn, name);
		}
	}
	elf_close_path(fd, elf);
	return found;
}

int syms_elf_has_section(const char *path, const char *name)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	Elf *elf;
	int fd, found = 0, err = elf_open_path(path, &fd, &elf);

	if (err)
		return err;
	if (elf_getshdrstrndx(elf, &shstrndx)) {
		elf_close_path(fd, elf);
		return -EINVAL;
	}
	while (!found && (scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *n;

		if (gelf_getshdr(scn, &sh) && (n = elf_strptr(elf, shstrndx, sh.sh_name)))
			found = !strcmp(n, name);
	}
	elf_close_path(fd, elf);
	return found;
}

/* ---- USDT notes ---------------------------------------------------------- */

#define STAPSDT_NOTE_TYPE 3

/* The vaddr of the named section, or 0. */
static uint64_t elf_section_addr(Elf *elf, const char *want, GElf_Shdr *out)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (elf_getshdrstrndx(elf, &shstrndx))
		return 0;
	while ((scn = elf_nextscn(elf, scn))) {
		const char *n;

		if (gelf_getshdr(scn, out) && (n = elf_strptr(elf, shstrndx, out->sh_name)) &&
		    !strcmp(n, want))
			return out->sh_addr;
	}
	return 0;
}

static int count_args(const char *a)
{
	int n = 0;

	for (bool in = false; *a; a++) {
		if (!isspace((unsigned char)*a) && !in)
			n++;
		in = !isspace((unsigned char)*a);
	}
	return n;
}

/* One note's descriptor: pc, base, semaphore (8 bytes each), then provider,
 * name and argument strings. The pc moves with the .stapsdt.base section
 * (prelink); a semaphore lives in .probes. */
static int usdt_note(const char *desc, size_t len, uint64_t base, const GElf_Shdr *probes,
		     const struct seg *segs, size_t nsegs, struct syms_usdt *u)
{
	uint64_t pc, note_base, sema;
	const char *end = desc + len, *p = desc + 24;

	if (len < 27)
		return -EINVAL;
	memcpy(&pc, desc, 8);
	memcpy(&note_base, desc + 8, 8);
	memcpy(&sema, desc + 16, 8);
	u->provider = p;
	p = memchr(p, '\0', (size_t)(end - p));
	u->name = p ? p + 1 : NULL;
	p = p ? memchr(p + 1, '\0', (size_t)(end - p - 1)) : NULL;
	u->args = p && p + 1 < end ? p + 1 : "";
	if (!u->name || !p || !memchr(u->args, '\0', (size_t)(end - u->args)))
		return -EINVAL;
	u->vaddr = base && note_base ? pc + base - note_base : pc;
	u->nargs = count_args(u->args);
	u->sema = 0;
	if (sema && probes->sh_addr && sema >= probes->sh_addr &&
	    sema < probes->sh_addr + probes->sh_size)
		u->sema = sema - probes->sh_addr + probes->sh_offset;
	return segs_vaddr_to_off(segs, nsegs, u->vaddr, &u->offset);
}

int syms_elf_usdt(const char *path, int (*fn)(const struct syms_usdt *u, void *arg), void *arg)
{
	GElf_Shdr base_sh, probes = { 0 };
	struct seg *segs = NULL;
	Elf_Scn *scn = NULL;
	uint64_t base;
	size_t nsegs = 0;
	Elf *elf;
	int fd, r, err = elf_open_path(path, &fd, &elf);

	if (err)
		return err;
	base = elf_section_addr(elf, ".stapsdt.base", &base_sh);
	if (!elf_section_addr(elf, ".probes", &probes))
		memset(&probes, 0, sizeof(probes));
	r = elf_read_segs(elf, &segs, &nsegs);
	while (!r && (scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		GElf_Nhdr nh;
		Elf_Data *d;
		size_t off = 0, name_off, desc_off;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE || !(d = elf_getdata(scn, NULL)))
			continue;
		while (!r && (off = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
			struct syms_usdt u;

			if (nh.n_type != STAPSDT_NOTE_TYPE || nh.n_namesz != 8 ||
			    memcmp((char *)d->d_buf + name_off, "stapsdt", 8))
				continue;
			if (!usdt_note((char *)d->d_buf + desc_off, nh.n_descsz, base, &probes, segs,
				       nsegs, &u))
				r = fn(&u, arg);
		}
	}
	free(segs);
	elf_close_path(fd, elf);
	return r;
}

/* Edit distance, case-insensitive, capped (names are short). */
static int edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	int row[128], prev;

	if (la > 120 || lb > 120)
		return 1000;
	for (size_t j = 0; j <= lb; j++)
		row[j] = (int)j;
	for (size_t i = 1; i <= la; i++) {
		prev = row[0];
		row[0] = (int)i;
		for (size_t j = 1; j <= lb; j++) {
			int cur = row[j];
			int sub = prev + (tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]));
			int del = row[j] + 1, ins = row[j - 1] + 1;

			row[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
			prev = cur;
		}
	}
	return row[lb];
}

struct suggest_arg {
	const char *want;
	int max, n;
	struct { int score; char name[96]; } best[16];
};

/* Edit distance to want (lower is closer), or -1: not a close match. Close:
 * contains want, is a large part of it, or is within a third of its length. */
static int suggest_score(const char *want, const char *name)
{
	size_t lw = strlen(want), ln = strlen(name);
	int d = edit_distance(want, name);

	if (strcasestr(name, want) || (strcasestr(want, name) && 2 * ln >= lw))
		return d;
	return d <= (int)lw / 3 + 1 ? d : -1;
}

static int suggest_sym(const char *mangled, const GElf_Sym *s, bool hidden, void *arg)
{
	struct suggest_arg *a = arg;
	char *d = syms_demangle(mangled); /* a C++ or Rust name is suggested as people read it */
	const char *name = d ? d : mangled;
	int score = suggest_score(a->want, name), i;

	(void)s, (void)hidden;
	if (score < 0 || strlen(name) >= sizeof(a->best[0].name))
		goto out;
	for (i = 0; i < a->n; i++)
		if (!strcmp(a->best[i].name, name))
			goto out; /* alias / versioned duplicate */
	if (a->n == a->max && score >= a->best[a->n - 1].score)
		goto out;
	i = a->n < a->max ? a->n++ : a->n - 1;
	while (i > 0 && a->best[i - 1].score > score) {
		a->best[i] = a->best[i - 1];
		i--;
	}
	a->best[i].score = score;
	snprintf(a->best[i].name, sizeof(a->best[i].name), "%s", name);
out:
	free(d);
	return 0;
}

int syms_suggest(const char *path, const char *symbol, char *buf, size_t len, int max)
{
	struct suggest_arg a = { .want = symbol };
	size_t used = 0;
	Elf *elf;
	int fd;

	if (len)
		buf[0] = 0;
	a.max = max < 1 ? 1 : max > 16 ? 16 : max;
	if (elf_open_path(path, &fd, &elf))
		return 0;
	elf_for_each_func(elf, suggest_sym, &a);
	elf_close_path(fd, elf);
	for (int i = 0; i < a.n && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "", a.best[i].name);
	return a.n;
}
